"""doctor on what claims leave beyond whole cards: claim-scoped specs of claims their driver has not
prepared, and a chip offered whole while a vNPU carved from it is offered too."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support import fakehost, npusmi
from support.doctornode import Node, checks, worst
from xpu_cdi.node import checkpoint as _cp
from xpu_cdi.node import claimspec
from xpu_cdi.node.prepared import PreparedClaim, PreparedClaims, PreparedDevice, VNpu
from xpu_cdi.node import status as _status

from test_doctor_dra import status_file

DRIVER = "kunlunxin.com"
HELD, GONE = "0b7c3f1e-2a4d-4e8f-9a61-5d2c7b9e4f10", "1c8d4a2f-3b5e-4f9a-8b72-6e3d8c0f5a21"


def test_claim_specs_of_gone_claims(node: Node, tmp_path: Path) -> None:
    """A spec of a prepared claim is fine; one of a claim the checkpoint does not hold fails, in one
    line naming the file, with the fix."""
    node.kunlunxin()
    node.generate()
    code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    assert worst(results, "dra-claim-specs")["status"] == "ok"
    cp = tmp_path / "cp.json"
    _cp.save(str(cp), PreparedClaims("b1", {HELD: PreparedClaim("ns", "held", [])}))
    for uid in (HELD, GONE):
        claimspec.write(str(node.spec_dir), DRIVER, uid, [("0-aaaaaaaa", {"env": ["XPU_CDI_MEMORY_LIMIT_0=1"]})], {})
    status_file(tmp_path / "run", cp, pid=2 ** 22 + 7)  # not running
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    assert {r["status"] for r in checks(results, "dra-claim-specs")} == {"warn"}
    status_file(tmp_path / "run", cp, os.getpid())
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    (r,) = checks(results, "dra-claim-specs")
    assert r["status"] == "fail" and GONE in r["found"] and HELD not in r["found"], r
    assert "\n" not in r["found"] and f"delete {claimspec.path(str(node.spec_dir), DRIVER, GONE)}" in r["fix"], r
    claimspec.remove(str(node.spec_dir), DRIVER, GONE)
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    assert worst(results, "dra-claim-specs")["status"] == "ok"


def plugin_status(path: Path, devices: list) -> None:
    path.write_text(json.dumps({"pid": os.getpid(), "pid_namespace": _status.pid_namespace(), "kinds": {
        "huawei.com/npu": {"kind": "huawei.com/npu", "resource": "huawei.com/npu", "devices": devices}}}))


def test_chip_offered_whole_and_partitioned(node: Node, tmp_path: Path) -> None:
    """A 310P host with vNPU 116 carved from chip 1 (ids 100 + 16 * chip): offering chip 1 and
    vNPU 116 fails; offering chip 0 beside it does not."""
    host = node.ascend(cards=2, pci_device="0xd500")
    fakehost.mknod(host.path("/dev/vdavinci116"), fakehost.NPU_MAJOR, 116)
    node.generate()
    st = tmp_path / "plugin.json"
    plugin_status(st, ["0", "116"])
    _code, results = node.doctor("--plugin-status-file", str(st), "--dra-run-dir", str(tmp_path / "run"))
    assert worst(results, "whole-and-partitioned")["status"] == "ok", checks(results, "whole-and-partitioned")
    plugin_status(st, ["0", "1", "116"])
    _code, results = node.doctor("--plugin-status-file", str(st), "--dra-run-dir", str(tmp_path / "run"))
    (r,) = checks(results, "whole-and-partitioned")
    assert r["status"] == "fail" and r["found"].startswith("chip 1 is offered whole (huawei.com/npu=1 by the "
                                                            "device plugin) and partitioned (vNPU 116"), r
    assert "destroy-vnpu" in r["fix"], r


def test_vnpus_no_claim_holds(node: Node, tmp_path: Path) -> None:
    """The stand-in npu-smi lists vNPU 100 (made for a claim) and 116 (no claim, offered by no daemon):
    116 fails with the destroy command; once the checkpoint holds both, none fails."""
    node.ascend(cards=2, pci_device="0xd500")
    node.generate()
    state = tmp_path / "npu-smi.json"
    npusmi.init_state(state, [{"card": i, "chip": 0, "name": "310P3"} for i in range(2)])
    npusmi.install(node.root / "usr/local/bin/npu-smi", state, node.root)
    for card, vnpu in ((0, 100), (1, 116)):
        subprocess.run([str(node.root / "usr/local/bin/npu-smi"), "set", "-t", "create-vnpu", "-i", str(card), "-c",
                        "0", "-f", "vir02", "-v", str(vnpu)], check=True, capture_output=True)
    cp = tmp_path / "cp.json"

    def held(*ids: int) -> None:
        _cp.save(str(cp), PreparedClaims("b1", {f"uid-{i}": PreparedClaim("ns", f"c{i}", [
            PreparedDevice(["npu"], "n1", f"p{i}", [], vnpu=VNpu(0, 0, "vir02", i))]) for i in ids}))

    held(100)
    status_file(tmp_path / "run", cp, os.getpid())
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    (r,) = checks(results, "vnpu-held")
    assert r["status"] == "fail" and r["found"].startswith("vNPU 116 (vir02) on card 1 chip 0 is held by no claim"), r
    assert r["fix"].endswith("npu-smi set -t destroy-vnpu -i 1 -c 0 -v 116"), r
    held(100, 116)
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    assert worst(results, "vnpu-held")["status"] == "ok", checks(results, "vnpu-held")
