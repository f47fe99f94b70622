"""One way per kind: the node config's choice, the lock the first daemon holds, rolling updates."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xpu_cdi import nodeconfig
from xpu_cdi.node import servemode
from xpu_cdi.errors import ConfigError

KIND = "kunlunxin.com/xpu"


def cfg(tmp_path: Path, text: str = "") -> nodeconfig.NodeConfig:
    p = tmp_path / "config.yaml"
    p.write_text(text)
    return nodeconfig.read(str(p))


def holder(run: Path, way: str) -> subprocess.Popen:
    """Another process serving KIND by *way* (holds the lock until killed)."""
    code = textwrap.dedent(f"""
        import sys, time
        from xpu_cdi import nodeconfig
        from xpu_cdi.node import servemode
        c = nodeconfig.NodeConfig("/none", False)
        assert servemode.claim({KIND!r}, {way!r}, c, {str(run)!r}) == ""
        print("held", flush=True)
        time.sleep(3600)  # killed by the test; outlives any slow run
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def test_node_config_choice_is_obeyed(tmp_path: Path) -> None:
    c = cfg(tmp_path, f"kubernetes-allocation: {{{KIND}: device-plugin}}\n")
    why = servemode.claim(KIND, servemode.DRA, c, str(tmp_path / "run"))
    assert "gives it to the device-plugin" in why and "kubernetes-allocation: dra" in why
    assert servemode.claim("huawei.com/npu", servemode.DRA, c, str(tmp_path / "run")) == ""
    assert servemode.claim(KIND, servemode.DEVICE_PLUGIN, c, str(tmp_path / "run")) == ""
    servemode.release(KIND, servemode.DEVICE_PLUGIN, str(tmp_path / "run"))
    servemode.release("huawei.com/npu", servemode.DRA, str(tmp_path / "run"))


def test_one_word_for_every_kind(tmp_path: Path) -> None:
    c = cfg(tmp_path, "kubernetes-allocation: dra\n")
    assert nodeconfig.way_for(c, KIND) == "dra" and nodeconfig.way_for(c, "huawei.com/npu") == "dra"


@pytest.mark.parametrize("text", ["kubernetes-allocation: both\n", "kubernetes-allocation: [dra]\n",
                                  "kubernetes-allocation: {xpu: dra}\n"])
def test_bad_choice_is_one_line(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="kubernetes-allocation must be"):
        cfg(tmp_path, text)


def test_first_daemon_holds_the_kind_until_it_dies(tmp_path: Path) -> None:
    run = tmp_path / "run"
    p = holder(run, servemode.DEVICE_PLUGIN)
    try:
        why = servemode.claim(KIND, servemode.DRA, cfg(tmp_path), str(run))
        assert "the device-plugin on this node serves it already" in why
    finally:
        p.kill()
        p.wait()
    assert servemode.claim(KIND, servemode.DRA, cfg(tmp_path), str(run)) == ""  # a dead holder holds nothing
    servemode.release(KIND, servemode.DRA, str(run))


def test_two_pods_of_one_way_share_and_the_last_withdraws(tmp_path: Path) -> None:
    run = tmp_path / "run"
    p = holder(run, servemode.DRA)  # the other pod of a rolling update
    try:
        assert servemode.claim(KIND, servemode.DRA, cfg(tmp_path), str(run)) == ""
        assert servemode.release_last(KIND, servemode.DRA, str(run)) is False
    finally:
        p.kill()
        p.wait()
    assert servemode.claim(KIND, servemode.DRA, cfg(tmp_path), str(run)) == ""
    assert servemode.release_last(KIND, servemode.DRA, str(run)) is True
