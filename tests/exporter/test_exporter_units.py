"""The exporter's pieces on their own: running a tool, cutting its output, units, who holds a card,
and the profile's metrics: section refusing what cannot work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xpu_cdi.node.inventory import SpecCard
from xpu_cdi.errors import ProfileError
from xpu_cdi.exporter import holders, parse, tool
from xpu_cdi.node.podresources import Holder, Listing
from xpu_cdi.generate import profile
from xpu_cdi.model import MetricSource


def script(tmp_path: Path, body: str) -> str:
    p = tmp_path / "tool"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def test_the_tool_gets_no_environment_of_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only PATH, LC_ALL=C and what the profile names; stdin is /dev/null, cwd is /."""
    monkeypatch.setenv("LD_PRELOAD", "/evil.so")
    monkeypatch.setenv("CXPU_VISIBLE_DEVICES", "all")
    out = tool.run([script(tmp_path, "env | sort; pwd; cat; echo end\n")], env=["ASCEND_HOME=/opt/a"])
    lines = out.splitlines()
    env = {line.partition("=")[0] for line in lines if "=" in line}
    assert env <= {"PATH", "LC_ALL", "ASCEND_HOME", "PWD", "SHLVL", "_"}  # the last three: sh's own
    assert "LC_ALL=C" in lines and "ASCEND_HOME=/opt/a" in lines and lines[-2:] == ["/", "end"]


def test_tool_failures_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(tool.ToolError, match=r"failed \(exit status 2\): bad thing"):
        tool.run([script(tmp_path, "echo 'bad thing' >&2; echo more >&2; exit 2\n")])
    with pytest.raises(tool.ToolError, match=r"killed by signal 9"):
        tool.run([script(tmp_path, "kill -9 $$\n")])
    with pytest.raises(tool.ToolError, match=r"cannot run /nonexistent/x"):
        tool.run(["/nonexistent/x"])
    with pytest.raises(tool.ToolError, match=r"wrote more than 2048 bytes: killed"):
        tool.run([script(tmp_path, "exec yes\n")], max_output=2048)
    with pytest.raises(tool.ToolError, match=r"did not finish within 0.3s: killed"):
        tool.run([script(tmp_path, "exec sleep 30\n")], timeout=0.3)


def test_undecodable_output_is_replaced_not_fatal(tmp_path: Path) -> None:
    assert tool.run([script(tmp_path, "printf 'a\\377b'\n")]) == "a\ufffdb"


def test_numbers_and_units() -> None:
    assert parse.number("memory_used", "957", "MiB") == 957 * 1048576
    assert parse.number("utilization", "45%", "percent") == pytest.approx(0.45)
    assert parse.number("temperature", "48250", "millicelsius") == pytest.approx(48.25)
    assert parse.number("power", "81000000", "microwatts") == pytest.approx(81.0)
    for raw in ("NA", "N/A", "-", "", None, "nan", "inf", "1e999", "0x10"):
        assert parse.number("power", raw, "watts") is None, raw


def test_pci_addresses_as_sysfs_writes_them() -> None:
    assert parse.pci_address("0000:C1:00.0") == "0000:c1:00.0"
    assert parse.pci_address("00000000:3b:00.0") == "0000:3b:00.0"
    assert parse.pci_address("3b:00.1") == "0000:3b:00.1"
    for bad in ("NA", "3b:00", "0000:3b:00.8", ""):
        assert parse.pci_address(bad) is None


def test_columns_with_a_separator() -> None:
    src = MetricSource("t", argv=("/x",), columns=(("index", 0), ("temperature", 2)), line=r"^\d", separator=r"\s*,\s*")
    assert parse.records(src, "idx, name, temp\n0, a b, 40\n1, c, NA\n") == [
        {"index": "0", "temperature": "40"}, {"index": "1", "temperature": "NA"}]


def _cards(kind: str, n: int) -> dict:
    return {str(i): SpecCard(str(i), kind, (), index=i) for i in range(n)}


def test_holders_by_resource_alias_and_dra() -> None:
    kinds = {"k.com/a": _cards("k.com/a", 4), "k.com/b": _cards("k.com/b", 4)}
    h1, h2, h3 = Holder("ns", "p1", "c"), Holder("ns", "p2", "c"), Holder("ns", "p0", "c")
    listing = Listing(devices=[(h1, "k.com/a", ("1",)), (h2, "vendor.com/B", ("B-2",)),
                               (h1, "unknown.com/x", ("3",))],
                      cdi_devices=[(h2, "k.com/a=3"), (h3, "k.com/a=3"), (h1, "not a cdi name")],
                      allocatable=[("vendor.com/B", ("B-0", "B-1", "B-2", "B-3"))])
    got = holders.assign(kinds, {"k.com/b": ("B-",)}, listing)
    assert got == {("k.com/a", "1"): h1, ("k.com/b", "2"): h2, ("k.com/a", "3"): h3}  # shared: the first in order


def test_holders_by_qualified_cdi_names() -> None:
    """A vendor's plugin reporting IDs as CDI names (``k.com/a=2``) under its own resource name: the
    card of that kind, found by the allocatable IDs; another kind's name or a malformed one holds nothing."""
    kinds = {"k.com/a": _cards("k.com/a", 4), "k.com/b": _cards("k.com/b", 4)}
    h1, h2 = Holder("ns", "p1", "c"), Holder("ns", "p2", "c")
    listing = Listing(devices=[(h1, "vendor.com/A", ("k.com/a=2",)), (h2, "k.com/b", ("k.com/b=1", "k.com/a=3")),
                               (h2, "k.com/b", ("k.com/b=bad name",))], cdi_devices=[],
                      allocatable=[("vendor.com/A", tuple(f"k.com/a={i}" for i in range(4)))])
    assert holders.resource_kinds(kinds, {}, listing.allocatable)["vendor.com/A"] == "k.com/a"
    assert holders.assign(kinds, {}, listing) == {("k.com/a", "2"): h1, ("k.com/b", "1"): h2}


def test_an_ambiguous_resource_maps_to_no_kind() -> None:
    """IDs "0".."3" are cards of both kinds: the resource is neither's (no guess)."""
    kinds = {"k.com/a": _cards("k.com/a", 4), "k.com/b": _cards("k.com/b", 4)}
    assert "other.com/x" not in holders.resource_kinds(kinds, {}, [("other.com/x", ("0", "1"))])


BASE = {"vendor": "a.com", "class": "xx", "cards": [{"glob": "/dev/x*", "index": r"(\d+)"}]}


@pytest.mark.parametrize("entry, message", [
    ({"name": "t", "tool": {"argv": ["x"]}, "regex": "(?P<index>1)"}, "does not match"),
    ({"name": "t", "tool": {"argv": ["/x"]}}, "is not valid under any of the given schemas"),
    ({"name": "t", "tool": {"argv": ["/x"]}, "regex": "(?P<temp>1)"}, "unknown group name(s) temp"),
    ({"name": "t", "tool": {"argv": ["/x"]}, "regex": "(?P<power>1)"}, "never say which card they are"),
    ({"name": "t", "tool": {"argv": ["/x"]}, "regex": "("}, "invalid regex"),
    ({"name": "t", "tool": {"argv": ["/x"], "timeout": 600}, "regex": "(?P<index>1)"}, "600"),
    ({"name": "t", "files": {"power": {"path": "/x", "unit": "celsius"}}}, "unit 'celsius' is not one of"),
    ({"name": "t", "files": {"power": {"path": "/x", "unit": "watts"}}, "regex": "x"}, "should not be valid"),
    ({"name": "t", "tool": {"argv": ["/x"]}, "columns": {"index": 0}, "units": {"power": "MiB"}},
     "'MiB' is not one of"),
])
def test_bad_metrics_sections_are_refused(entry: dict, message: str) -> None:
    with pytest.raises(ProfileError) as err:
        profile.parse(dict(BASE, metrics=[entry]), "t")
    assert message in str(err.value)


def test_shipped_sources_parse() -> None:
    ps = profile.load_all(())
    assert [m.name for m in ps["ascend"].metrics] == ["npu-smi"] and ps["ascend"].metrics[0].argv[0].startswith("/")
    assert ps["kunlunxin"].metrics[0].argv == ("/usr/local/bin/xpu-smi", "-m")
    assert {f.reading for f in ps["hygon"].metrics[0].files} == {"temperature", "power"}
    assert os.path.isabs(ps["gaudi"].metrics[0].files[0].path)
