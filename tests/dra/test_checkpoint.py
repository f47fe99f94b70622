"""The checkpoint: atomic round trip, the boot key, and a damaged file never stopping the driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpu_cdi.node import checkpoint as cp
from xpu_cdi.node.prepared import PreparedClaim, PreparedClaims, PreparedDevice, VNpu

DEVICES = [{"requests": ["xpus"], "pool": "n1", "device": "3", "cdi": ["kunlunxin.com/xpu=3"]}]


def saved(tmp_path: Path, boot: str = "boot-1") -> Path:
    path = tmp_path / cp.NAME
    cp.save(str(path), PreparedClaims(boot, {"uid-1": PreparedClaim("ns", "c", [PreparedDevice.from_json(d)
                                                                             for d in DEVICES])}))
    return path


def test_round_trip(tmp_path: Path) -> None:
    path = saved(tmp_path)
    got, note, corrupt = cp.load(str(path), "boot-1")
    assert (note, corrupt) == (None, False)
    assert got.claims["uid-1"].devices == [PreparedDevice(["xpus"], "n1", "3", ["kunlunxin.com/xpu=3"])]
    assert got.devices_in_use() == {("n1", "3"): "uid-1"}
    assert got.devices_in_use(exclude="uid-1") == {}
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_absent_is_empty_and_quiet(tmp_path: Path) -> None:
    got, note, corrupt = cp.load(str(tmp_path / cp.NAME), "b")
    assert (got.claims, note, corrupt) == ({}, None, False)


def test_earlier_boot_is_discarded(tmp_path: Path) -> None:
    got, note, corrupt = cp.load(str(saved(tmp_path, "old-boot")), "new-boot")
    assert got.claims == {} and not corrupt
    assert "earlier boot" in note and "old-boot" in note and "1 claim" in note


@pytest.mark.parametrize("damage", [
    lambda raw: raw[: len(raw) // 2],  # torn
    lambda raw: raw.replace(b'"3"', b'"4"'),  # edited: checksum
    lambda raw: b"\x00\xff" * 10,  # garbage
    lambda raw: json.dumps({"version": 99}).encode(),
])
def test_corrupt_is_one_note_never_an_exception(tmp_path: Path, damage) -> None:
    path = saved(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    got, note, corrupt = cp.load(str(path), "boot-1")
    assert got.claims == {} and corrupt and "corrupt" in note and "\n" not in note


def test_stale_temp_of_a_killed_writer_removed(tmp_path: Path) -> None:
    import subprocess

    from xpu_cdi import atomic

    path = saved(tmp_path)
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()  # exited
    temp = Path(atomic.temp_name(str(path)).replace(f".{__import__('os').getpid()}.", f".{dead}."))
    temp.write_text("half")
    cp.load(str(path), "boot-1")
    assert not temp.exists()


def test_boot_id_reads_the_kernel_file(tmp_path: Path) -> None:
    f = tmp_path / "boot_id"
    f.write_text("abc-123\n")
    assert cp.boot_id(str(f)) == "abc-123" and cp.boot_id(str(tmp_path / "none")) == ""
    assert len(cp.boot_id()) == 36  # this kernel's


def with_checksum(claims: dict) -> bytes:
    """A checkpoint whose checksum matches *claims* (anyone who can write the file can compute it)."""
    return json.dumps({"version": cp.VERSION, "bootId": "boot-1", "claims": claims,
                       "sha256": cp._digest(claims)}).encode()


@pytest.mark.parametrize("raw,why", [
    (b'{"claims": ' + b"[" * 1000 + b"]" * 1000 + b"}", "nested deeper than 100 levels"),  # 2 KB: a RecursionError
    (with_checksum({"u": {"devices": [{"pool": ["n1"], "device": "3", "cdi": []}]}}), "claim 'u' is malformed"),
    (with_checksum({"u": {"devices": [{"pool": "n1", "device": "3", "cdi": ["x"], "vnpu": {"id": "7"}}]}}),
     "claim 'u' is malformed"),
])
def test_deep_or_mistyped_is_corrupt_never_a_traceback(tmp_path: Path, raw: bytes, why: str) -> None:
    path = tmp_path / cp.NAME
    path.write_bytes(raw)
    got, note, corrupt = cp.load(str(path), "boot-1")
    assert got.claims == {} and corrupt and why in note and "\n" not in note, note


def test_a_fifo_at_the_path_is_corrupt_not_a_hang(tmp_path: Path) -> None:
    """A FIFO with no writer blocked the loader's open() for ever; now it is refused at once."""
    import os

    os.mkfifo(tmp_path / cp.NAME)
    got, note, corrupt = cp.load(str(tmp_path / cp.NAME), "boot-1")
    assert got.claims == {} and corrupt and "a FIFO, not a regular file" in note, note


def test_the_file_keeps_its_format(tmp_path: Path) -> None:
    """The records are written as the dicts of before: a checkpoint of an older driver reads, and one
    of this driver reads in an older one (a rolling update has both on one node)."""
    share = {"requests": ["xpus"], "pool": "n1", "device": "0", "cdi": ["kunlunxin.com/xpu=0", "k8s.x/claim=u-0-a"],
             "shareID": "aaaaaaaa-1", "memory": 1 << 30, "total": 96 << 30}
    vnpu = {"requests": ["npu"], "pool": "n1", "device": "0-vir02-0", "cdi": [],
            "vnpu": {"card": 1, "chip": 0, "template": "vir02", "id": 116}}
    claims = {"u": {"namespace": "ns", "name": "c", "devices": [DEVICES[0], share, vnpu], "pending": True}}
    path = tmp_path / cp.NAME
    path.write_text(json.dumps({"version": cp.VERSION, "bootId": "b", "claims": claims,
                                "sha256": cp._digest(claims)}))
    got, note, _corrupt = cp.load(str(path), "b")
    assert note is None and got.claims["u"].pending and got.claims["u"].vnpus() == [VNpu(1, 0, "vir02", 116)]
    assert got.claims["u"].devices[1] == PreparedDevice(share["requests"], "n1", "0", share["cdi"], "aaaaaaaa-1",
                                                        1 << 30, 96 << 30)
    again = json.loads(cp.dumps(got))
    assert again["claims"] == claims and again["sha256"] == cp._digest(claims)


@pytest.mark.parametrize("field, value", [("pool", 3), ("cdi", "kunlunxin.com/xpu=3"), ("cdi", [3]),
                                          ("requests", "xpus"), ("shareID", 1), ("memory", "1Gi"),
                                          ("memory", True), ("vnpu", {"id": 100}), ("vnpu", [])])
def test_a_mistyped_field_is_a_malformed_claim(tmp_path: Path, field: str, value: object) -> None:
    claims = {"u": {"namespace": "ns", "name": "c", "devices": [dict(DEVICES[0], **{field: value})]}}
    path = tmp_path / cp.NAME
    path.write_text(json.dumps({"version": cp.VERSION, "bootId": "b", "claims": claims,
                                "sha256": cp._digest(claims)}))
    got, note, corrupt = cp.load(str(path), "b")
    assert corrupt and got.claims == {} and "claim 'u' is malformed" in (note or "")
