"""A real containerd 1.6 started with the config `runtime configure` wrote:
it must come up, serve `ctr version`, load the CRI plugin and read our
handler from the file (its startup log prints the parsed CRI config)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import HANG
from support.runtimes import Containerd

from xpu_cdi.cli import main

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
WRAPPER = "/opt/xpu-cdi/bin/xpu-container-runtime"
DATA = Path(__file__).resolve().parent.parent / "data" / "runtime-configs"


def cri_config_line(c: Containerd) -> str:
    """The 'Start cri plugin with config {...}' log line, once containerd has written it (the CRI
    plugin may start after the socket serves; HANG bounds a hang)."""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        for line in c.log_path.read_text(errors="replace").splitlines():
            if "Start cri plugin with config" in line:
                return line
        time.sleep(0.05)
    raise AssertionError(f"no CRI config in the log:\n{c.log_path.read_text()[-3000:]}")


def check_serves(c: Containerd) -> None:
    version = c.ctr("version")
    assert version.returncode == 0 and "Server:" in version.stdout, version.stderr
    assert c.plugins().get("io.containerd.grpc.v1.cri") == "ok", c.log_path.read_text()[-3000:]


@pytest.mark.parametrize("source", ["config-default", "containerd-debian.toml"])
def test_in_place_config_serves(tmp_path: Path, source: str) -> None:
    """`containerd config default` (or Debian's shipped file) + configure: containerd 1.6 boots with
    the xpu handler as default and runc still there."""
    cfg = tmp_path / "config.toml"
    if source == "config-default":
        cfg.write_text(subprocess.run(["containerd", "config", "default"], capture_output=True, text=True,
                                      check=True).stdout)
    else:
        cfg.write_text((DATA / source).read_text())
    r = CliRunner().invoke(main, ["runtime", "configure", "--runtime", "containerd", "--config", str(cfg),
                                  "--wrapper-path", WRAPPER, "--enable-cdi", "--set-as-default"])
    assert r.exit_code == 0, r.output
    c = Containerd(tmp_path / "ctrd", config=cfg.read_text())
    try:
        check_serves(c)
        line = cri_config_line(c)
        handler = re.search(r"xpu:\{Type:(\S+) .*?ContainerAnnotations:\[([^\]]*)\].*?BinaryName:([^\s\]]+)", line)
        assert handler, line
        assert handler.groups() == ("io.containerd.runc.v2", "cdi.k8s.io/*", WRAPPER)
        assert "DefaultRuntimeName:xpu" in line and "runc:{Type:io.containerd.runc.v2" in line
    finally:
        c.stop()


def test_drop_in_config_serves(tmp_path: Path) -> None:
    """With --drop-in, containerd 1.6 imports the drop-in and still has the CRI settings of the main file."""
    cfg, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-xpu-cdi.toml"
    cfg.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "example.com/pause:9"\n')
    r = CliRunner().invoke(main, ["runtime", "configure", "--runtime", "containerd", "--config", str(cfg),
                                  "--drop-in", str(drop), "--wrapper-path", WRAPPER])
    assert r.exit_code == 0, r.output
    c = Containerd(tmp_path / "ctrd", config=cfg.read_text())
    try:
        check_serves(c)
        line = cri_config_line(c)
        assert f"BinaryName:{WRAPPER}" in line and "SandboxImage:example.com/pause:9" in line
    finally:
        c.stop()
