"""Selection of devices from a container's env and annotations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from xpu_cdi.errors import SelectionError
from xpu_cdi.hook import select

XPU: Dict[str, Any] = {"xpuCdiIndex": 1, "kind": "kunlunxin.com/xpu",
                       "selection": {"env": ["CXPU_VISIBLE_DEVICES", "CXPU_VISIBLE_DEVICES"], "aliases": None,
                                     "none": ["", "void", "none"]},
                       "indices": {str(i): str(i) for i in range(8)}, "all": "all"}
NPU: Dict[str, Any] = {"xpuCdiIndex": 1, "kind": "huawei.com/npu",
                       "selection": {"env": ["ASCEND_VISIBLE_DEVICES"],
                                     "aliases": ["Ascend910-", "Ascend310B-", "Ascend310P-", "Ascend310-", "npu-"],
                                     "none": ["", "void"]},
                       "indices": {str(i): str(i) for i in range(4)}, "all": "all"}
INDEXES = {"kunlunxin.com/xpu": XPU, "huawei.com/npu": NPU}


class TestParseValue:
    @pytest.mark.parametrize("value, want", [
        ("1,3", ["1", "3"]),
        ("3,1,3", ["1", "3"]),
        (" 2 ", ["2"]),
        ("0-2", ["0", "1", "2"]),
        ("all", ["all"]),
        ("void", []),
        ("", []),
        ("none", []),
    ])
    def test_kunlunxin(self, value: str, want: list) -> None:
        """Index lists, ranges, all and the none values."""
        assert select.parse_value("CXPU_VISIBLE_DEVICES", value, XPU) == want

    @pytest.mark.parametrize("value, want", [
        ("0,2", ["0", "2"]),
        ("0-3", ["0", "1", "2", "3"]),
        ("Ascend910-0", ["0"]),
        ("npu-3,Ascend310P-1", ["1", "3"]),
        ("void", []),
    ])
    def test_ascend(self, value: str, want: list) -> None:
        """The vendor runtime's syntax: lists, ranges, chip names; sorted, de-duplicated."""
        assert select.parse_value("ASCEND_VISIBLE_DEVICES", value, NPU) == want

    @pytest.mark.parametrize("index, value, why", [
        (XPU, "1,x", "'x' is not a card index"),
        (XPU, "3-1", "range '3-1'"),
        (XPU, "0-99999", "at most 4096"),
        (XPU, "9", "no card 9 in the kunlunxin.com/xpu spec"),
        (XPU, "Ascend910-0", "not a card index"),
        (NPU, "Ascend999-0", "a name like Ascend910-0"),
        (NPU, "none", "'none' is not"),  # not a none value for Ascend
        (XPU, "1,,2", "'' is not a card index"),
    ])
    def test_errors_name_the_variable(self, index: Dict[str, Any], value: str, why: str) -> None:
        """Bad syntax or unknown cards are one clear line naming variable and value."""
        with pytest.raises(SelectionError, match=why) as err:
            select.parse_value("V", value, index)
        assert f"V={value!r}" in str(err.value)

    def test_all_without_all_device(self) -> None:
        """'all' still works when the spec has no 'all' device: every card by index."""
        idx = dict(XPU, all=None, indices={"0": "0", "1": "1"})
        assert select.parse_value("CXPU_VISIBLE_DEVICES", "all", idx) == ["0", "1"]

    def test_pci_named_devices(self) -> None:
        """Indices map to whatever names the spec uses (pci strategy)."""
        idx = dict(XPU, indices={"0": "0000:03:00.0"})
        assert select.parse_value("CXPU_VISIBLE_DEVICES", "0", idx) == ["0000:03:00.0"]


class TestRequested:
    def test_env_and_annotations(self) -> None:
        """Both vendors' variables and annotations combine, without duplicates."""
        env = ["PATH=/bin", "CXPU_VISIBLE_DEVICES=1,3", "ASCEND_VISIBLE_DEVICES=0"]
        ann = {"cdi.k8s.io/p_1": "kunlunxin.com/xpu=3,kunlunxin.com/xpu=5"}
        assert select.requested(env, ann, INDEXES) == [
            "huawei.com/npu=0", "kunlunxin.com/xpu=1", "kunlunxin.com/xpu=3", "kunlunxin.com/xpu=5"]

    def test_last_env_entry_wins(self) -> None:
        """A variable repeated in process.env takes its last value."""
        assert select.requested(["CXPU_VISIBLE_DEVICES=1", "CXPU_VISIBLE_DEVICES=2"], {}, INDEXES) == [
            "kunlunxin.com/xpu=2"]

    def test_first_variable_of_a_kind_decides(self) -> None:
        """CXPU_VISIBLE_DEVICES is preferred over the legacy CXPU_VISIBLE_DEVICES."""
        env = ["CXPU_VISIBLE_DEVICES=4", "CXPU_VISIBLE_DEVICES=void"]
        assert select.requested(env, {}, INDEXES) == []

    def test_nothing_requested(self) -> None:
        """No variable and no annotation: nothing."""
        assert select.requested(["PATH=/bin", "HOME=/"], {"other": "x"}, INDEXES) == []

    def test_non_string_env_entries_ignored(self) -> None:
        """Garbage in process.env is data, not a crash."""
        assert select.requested([1, None, "NOEQUALS", "CXPU_VISIBLE_DEVICES=0"], {}, INDEXES) == [
            "kunlunxin.com/xpu=0"]


class TestLoadIndexes:
    def test_later_dir_wins_and_broken_ignored(self, tmp_path: Path) -> None:
        """Indexes load per kind, the later dir winning; broken ones are skipped."""
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        (tmp_path / "a" / "k.json.xpu-cdi").write_text(json.dumps(dict(XPU, all="from-a")))
        (tmp_path / "b" / "k.json.xpu-cdi").write_text(json.dumps(dict(XPU, all="from-b")))
        (tmp_path / "b" / "broken.json.xpu-cdi").write_text("{")
        (tmp_path / "b" / "other.json.xpu-cdi").write_text(json.dumps({"xpuCdiIndex": 99, "kind": "x/y"}))
        got = select.load_indexes([str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "missing")])
        assert list(got) == ["kunlunxin.com/xpu"] and got["kunlunxin.com/xpu"]["all"] == "from-b"
