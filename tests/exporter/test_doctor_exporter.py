"""doctor's ``exporter`` and ``exporter-source`` checks, against a real exporter's status file."""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.exporternode import ExporterProcess, Node
from xpu_cdi.doctor.context import Context, Options
from xpu_cdi.doctor.exporter import check_exporter


def run_check(status: Path) -> list:
    return check_exporter(Context(opts=Options(exporter_status_file=str(status)), states=[], candidates=[]))


def test_running_exporter_and_its_sources(node: Node, tmp_path: Path) -> None:
    node.set_tool("npu-smi", mode="crash")
    p = ExporterProcess(node.args("--interval", "1"), tmp_path / "exporter.log")
    try:
        deadline = time.monotonic() + 60
        while not node.status.exists():
            assert time.monotonic() < deadline and p.proc.poll() is None, p.log.read_text()
            time.sleep(0.05)
        results = {(r["check"], r["found"].split(":")[0]): r for r in run_check(node.status)}
        head = results[("exporter", "xpu-cdi exporter runs (listens on 127.0.0.1")]
        assert head["status"] == "ok" and "16 card(s)" in head["found"]
        assert results[("exporter-source", "kunlunxin/xpu-smi")]["status"] == "ok"
        npu = results[("exporter-source", "ascend/npu-smi")]
        assert npu["status"] == "warn" and "exit status 3" in npu["found"] and "override profile" in npu["fix"]
        pod = results[("exporter-source", "pod-resources")]
        assert pod["status"] == "warn" and "--pod-resources-socket" in pod["fix"]
    finally:
        assert p.stop() == 0


def test_absent_stale_and_dead(tmp_path: Path) -> None:
    status = tmp_path / "exporter.json"
    (r,) = run_check(status)
    assert r["status"] == "ok" and "not running here" in r["found"]
    doc = {"pid": 2 ** 22 + 7, "pid_namespace": "", "listen": ":28470", "interval": 10, "updated": time.time(),
           "cards": 1, "sources": {}}
    status.write_text(json.dumps(doc))
    (r,) = run_check(status)
    assert r["status"] == "warn" and "which is not running" in r["found"]
    doc.update(pid_namespace="pid:[1]", updated=time.time() - 3600)  # another namespace: the age decides
    status.write_text(json.dumps(doc))
    (r,) = run_check(status)
    assert r["status"] == "warn" and "has not updated its status for" in r["found"]
    status.write_text("{not json")
    (r,) = run_check(status)
    assert r["status"] == "warn" and "unreadable" in r["found"]
