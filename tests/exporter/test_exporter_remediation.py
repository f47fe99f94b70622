"""exporter/remediation.py: the node daemons' remediation decisions read from their status files,
summed per kind and reason, anything unreadable or foreign adding nothing."""

from __future__ import annotations

import json
from pathlib import Path

from xpu_cdi.exporter import remediation


def write(path: Path, doc: object) -> None:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)


def test_counts_summed_over_the_daemons_status_files(tmp_path: Path) -> None:
    write(tmp_path / "dra-driver-pod-a.json", {"kinds": {"kunlunxin.com/xpu": {
        "evictions": {"unhealthy": 2}, "restores": {"recovered": 1}}}})
    on = {"evict": True, "grace": 30, "hold_down": 300}  # a policy that evicts: its series from 0
    write(tmp_path / "dra-driver-pod-c.json", {"kinds": {"huawei.com/npu": {"remediation": on, "evictions": {}},
                                                         "mthreads.com/gpu": {"remediation": dict(on, evict=False)}}})
    write(tmp_path / "dra-driver-pod-b.json", {"kinds": {  # the other pod of a rolling update
        "kunlunxin.com/xpu": {"evictions": {"unhealthy": 1}, "restores": {}},
        "huawei.com/npu": {"restores": {"held-down": 4}}}})
    write(tmp_path / "device-plugin.json", {"kinds": {"huawei.com/npu": {"healthy": 4}}})  # no policy
    write(tmp_path / "exporter.json", {"kinds": {"x.com/y": {"evictions": {"unhealthy": 9}}}})  # its own: skipped
    write(tmp_path / "torn.json", '{"kinds": {"a.com/b": {"evictions": {"unhea')
    write(tmp_path / "foreign.json", ["not", "a", "status"])
    write(tmp_path / "odd.json", {"kinds": {"a.com/b": {"evictions": {"x": "3", "y": True, "z": -1, "w": 1.0},
                                                       "restores": ["x"]}, "c.com/d": 5}})
    assert remediation.read(str(tmp_path), str(tmp_path / "exporter.json")) == {
        ("evict", "kunlunxin.com/xpu", "unhealthy"): 3.0,
        ("restore", "kunlunxin.com/xpu", "recovered"): 1.0,
        ("restore", "huawei.com/npu", "held-down"): 4.0,
        ("evict", "huawei.com/npu", "unhealthy"): 0.0,
        ("restore", "huawei.com/npu", "recovered"): 0.0,
        ("evict", "a.com/b", "w"): 1.0}


def test_no_run_dir_is_no_counts(tmp_path: Path) -> None:
    assert remediation.read(str(tmp_path / "absent")) == {}
