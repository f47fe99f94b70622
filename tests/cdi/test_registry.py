"""Spec directories: precedence, conflicts, broken files, the YAML fast path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from xpu_cdi.cdi import registry


def spec(kind: str, devices: List[str], node_prefix: str = "/dev/x", shared: Any = None) -> Dict[str, Any]:
    s: Dict[str, Any] = {"cdiVersion": "0.5.0", "kind": kind, "devices": [
        {"name": d, "containerEdits": {"deviceNodes": [{"path": f"{node_prefix}{d}"}]}} for d in devices]}
    if shared:
        s["containerEdits"] = shared
    return s


def put(d: Path, name: str, content: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


class TestLoad:
    def test_later_dir_wins(self, tmp_path: Path) -> None:
        """/var/run/cdi (later) overrides /etc/cdi (earlier) for the same device."""
        put(tmp_path / "etc", "a.json", spec("ex.com/acc", ["0", "1"], "/dev/etc"))
        put(tmp_path / "run", "a.json", spec("ex.com/acc", ["1"], "/dev/run"))
        reg = registry.load([str(tmp_path / "etc"), str(tmp_path / "run")])
        assert reg.devices["ex.com/acc=0"].edits["deviceNodes"][0]["path"] == "/dev/etc0"
        assert reg.devices["ex.com/acc=1"].edits["deviceNodes"][0]["path"] == "/dev/run1"
        assert reg.problems == []

    def test_conflict_in_one_dir_drops_both(self, tmp_path: Path) -> None:
        """The same device in two files of one dir is dropped, with a warning naming both files."""
        put(tmp_path, "a.json", spec("ex.com/acc", ["0", "1"]))
        put(tmp_path, "b.yaml", yaml.safe_dump(spec("ex.com/acc", ["1"])))
        reg = registry.load([str(tmp_path)])
        assert sorted(reg.devices) == ["ex.com/acc=0"]
        assert len(reg.problems) == 1 and "conflicting device 'ex.com/acc=1'" in reg.problems[0]
        assert "a.json" in reg.problems[0] and "b.yaml" in reg.problems[0]

    @pytest.mark.parametrize("name, content, why", [
        ("bad.json", "{not json", "not valid JSON"),
        ("bad.yaml", "kind: [x", "not valid YAML"),
        ("bad.json", json.dumps({"kind": "ex.com/b", "devices": []}), "missing required field 'cdiVersion'"),
        ("bad.json", json.dumps({"cdiVersion": "0.5.0", "kind": "ex.com/b", "devices": []}), "non-empty list"),
        ("bad.json", json.dumps({"cdiVersion": "0.5.0", "kind": "nokind", "devices": [{}]}), "invalid kind"),
        ("bad.json", json.dumps([1, 2]), "expected an object"),
    ])
    def test_broken_file_does_not_break_others(self, tmp_path: Path, name: str, content: str, why: str) -> None:
        """A broken spec is reported and skipped; the good one beside it still loads."""
        put(tmp_path, "good.json", spec("ex.com/acc", ["0"]))
        put(tmp_path, name, content)
        reg = registry.load([str(tmp_path)])
        assert list(reg.devices) == ["ex.com/acc=0"]
        assert len(reg.problems) == 1 and why in reg.problems[0] and name in reg.problems[0]

    def test_only_json_and_yaml_directly_inside(self, tmp_path: Path) -> None:
        """.yml, temp files and subdirectories are not specs."""
        put(tmp_path, "a.yml", yaml.safe_dump(spec("ex.com/a", ["0"])))
        put(tmp_path, ".a.json.123.xpu-cdi-tmp", "{half")
        put(tmp_path / "sub", "b.json", spec("ex.com/b", ["0"]))
        reg = registry.load([str(tmp_path)])
        assert reg.devices == {} and reg.problems == []

    def test_missing_dir_is_empty(self, tmp_path: Path) -> None:
        """A spec dir that does not exist contributes nothing and no warning."""
        reg = registry.load([str(tmp_path / "nope")])
        assert reg.devices == {} and reg.problems == []

    def test_yaml_read_whatever_its_index_says(self, tmp_path: Path) -> None:
        """A YAML spec is read from the file itself: an index (even one carrying a
        stale "compact" copy, as older versions wrote) never stands in for it."""
        p = put(tmp_path, "a.yaml", yaml.safe_dump(spec("ex.com/acc", ["0"], "/dev/edited")))
        st = p.stat()
        put(tmp_path, "a.yaml.xpu-cdi", {"xpuCdiIndex": 1, "kind": "ex.com/acc",
                                          "compact": spec("ex.com/acc", ["0"], "/dev/from-index"),
                                          "specStat": [st.st_mtime_ns, st.st_size]})
        reg = registry.load([str(tmp_path)])
        assert reg.devices["ex.com/acc=0"].edits["deviceNodes"][0]["path"] == "/dev/edited0"

    def test_oversized_spec_refused(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A spec over the size limit is reported, not read into memory."""
        monkeypatch.setattr(registry, "MAX_SPEC_BYTES", 100)
        put(tmp_path, "big.json", spec("ex.com/acc", [str(i) for i in range(20)]))
        reg = registry.load([str(tmp_path)])
        assert reg.devices == {} and "over the 100-byte limit" in reg.problems[0]
