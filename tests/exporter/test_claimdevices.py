"""The exporter's series of claim-scoped devices (shares of a card, vNPUs): read from the DRA
driver's checkpoint, each with the container kubelet lists for its claim-scoped CDI name, in the
scrape as prometheus_client's own parser reads it."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from xpu_cdi.node import checkpoint, claimspec
from xpu_cdi.node.prepared import PreparedClaim, PreparedClaims, PreparedDevice, VNpu
from prometheus_client import generate_latest

from xpu_cdi.exporter import claimdevices, metrics
from xpu_cdi.node.podresources import Holder, Listing

DRIVER = "kunlunxin.com"
OWN = claimspec.kind(DRIVER)
GI = 1 << 30


def write(plugins: Path, boot: str, claims: dict) -> None:
    d = plugins / DRIVER
    d.mkdir(parents=True, exist_ok=True)
    checkpoint.save(checkpoint.path_in(str(d)), PreparedClaims(boot, claims))


def share(device: str, uid: str, sid: str, memory: int) -> PreparedDevice:
    return PreparedDevice(["xpu"], "n1", device, [f"kunlunxin.com/xpu={device}", f"{OWN}={uid}-{device}-{sid[:8]}"],
                          sid, memory, 96 * GI)


def scrape(devices: list) -> dict:
    c = metrics.SnapshotCollector()
    c.snapshot = metrics.Snapshot(claim_devices=devices)
    body = generate_latest(c)  # type: ignore[arg-type]
    out: dict = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            if s.name.startswith("xpu_cdi_claim_device"):
                out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_shares_with_their_pods(tmp_path: Path) -> None:
    write(tmp_path, "b1", {
        "u1": PreparedClaim("ns", "c1", [share("0", "u1", "aaaaaaaa-1", 32 * GI)]),
        "u2": PreparedClaim("ns", "c2", [share("0", "u2", "bbbbbbbb-2", 64 * GI)]),
        "u3": PreparedClaim("ns", "whole", [PreparedDevice(["x"], "n1", "1", ["kunlunxin.com/xpu=1"])])})
    found = claimdevices.read(str(tmp_path), "b1")
    assert [(d.claim, d.card, d.memory) for d in found] == [("c1", "kunlunxin.com/xpu=0", 32 * GI),
                                                           ("c2", "kunlunxin.com/xpu=0", 64 * GI)]
    holder = Holder("ns", "p1", "c")
    listing = Listing([], [(Holder("ns", "p1", "c"), "kunlunxin.com/xpu=0"), (holder, found[0].cdi)], [])
    got = scrape(claimdevices.with_holders(found, listing))
    info = {s["claim"]: (s, v) for s, v in got["xpu_cdi_claim_device"]}
    assert info["c1"][0]["pod"] == "p1" and info["c1"][0]["share_id"] == "aaaaaaaa-1" and info["c1"][1] == 1
    assert info["c1"][0]["kind"] == "kunlunxin.com/xpu" and info["c1"][0]["card"] == "0"
    assert info["c2"][0]["pod"] == ""  # prepared, no container started yet
    assert sorted(v for _s, v in got["xpu_cdi_claim_device_memory_bytes"]) == [32 * GI, 64 * GI]


def test_stale_or_corrupt_checkpoints_give_nothing(tmp_path: Path) -> None:
    write(tmp_path, "b1", {"u1": PreparedClaim("ns", "c1", [share("0", "u1", "aaaaaaaa-1", GI)])})
    assert claimdevices.read(str(tmp_path), "b2") == []
    (tmp_path / "other.com").mkdir()
    (tmp_path / "other.com" / checkpoint.NAME).write_text("{")
    assert len(claimdevices.read(str(tmp_path), "b1")) == 1
    assert claimdevices.read(os.path.join(str(tmp_path), "absent"), "b1") == []


def test_a_vnpu_is_a_series_without_card_or_memory(tmp_path: Path) -> None:
    """The vNPU side's checkpoint entry (its claim-scoped name only, a "vnpu" record): one series,
    no card (it is not a whole card's share), no memory series (the driver records none)."""
    own = claimspec.kind("huawei.com")
    d = tmp_path / "huawei.com"
    d.mkdir()
    entry = PreparedDevice(["npu"], "n1", "0-vir02-0", [f"{own}=u1-vnpu-100"], vnpu=VNpu(0, 0, "vir02", 100))
    claims = {"u1": PreparedClaim("ns", "v", [entry])}
    checkpoint.save(checkpoint.path_in(str(d)), PreparedClaims("b1", claims))
    (found,) = claimdevices.read(str(tmp_path), "b1")
    assert (found.driver, found.device, found.card, found.memory) == ("huawei.com", "0-vir02-0", "", None)
    got = scrape([found])
    ((labels, value),) = got["xpu_cdi_claim_device"]
    assert labels["cdi_device"] == f"{own}=u1-vnpu-100" and labels["claim"] == "v" and value == 1
    assert "xpu_cdi_claim_device_memory_bytes" not in got


def test_a_deep_or_fifo_checkpoint_beside_a_good_one(tmp_path: Path) -> None:
    """A 2 KB checkpoint.json nested 1,000 levels deep under the plugins dir made every exporter pass
    exit (a RecursionError); a FIFO hung it.  Both are skipped now, the good driver's devices read."""
    write(tmp_path, "b1", {"u1": PreparedClaim("ns", "c1", [share("0", "u1", "aaaaaaaa-1", GI)])})
    (tmp_path / "deep.com").mkdir()
    (tmp_path / "deep.com" / checkpoint.NAME).write_bytes(b"[" * 1000 + b"]" * 1000)
    (tmp_path / "fifo.com").mkdir()
    os.mkfifo(tmp_path / "fifo.com" / checkpoint.NAME)
    assert [d.claim for d in claimdevices.read(str(tmp_path), "b1")] == ["c1"]
