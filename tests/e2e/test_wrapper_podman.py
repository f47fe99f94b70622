"""End to end: podman 4.3 with the runtime `xpu-cdi runtime configure
--runtime podman` registered in its containers.conf (`podman run --runtime
xpu -e CXPU_VISIBLE_DEVICES=2`), and the wrapper in front of crun.

podman does not pass its environment on to the OCI runtime, so the spec
dir reaches the wrapper through a two-line shim registered as the wrapper
path (`--wrapper-path`), never through /etc/cdi.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from support.runtimes import ENXIO, Bundle, Podman, require, run_runc

from support import fakehost

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
BIN = Path(sys.executable).parent
WRAPPER = str(BIN / "xpu-container-runtime")


@pytest.fixture
def spec_dir(tmp_path: Path) -> Iterator[Path]:
    host = fakehost.kunlunxin(tmp_path / "host", cards=8)
    d = tmp_path / "cdi"
    subprocess.run([str(BIN / "xpu-cdi"), "generate", *host.cli_roots, "--spec-dir", str(d), "--ld-library-path-env"],
                   check=True, capture_output=True)
    yield d
    fakehost.remove_tree(host.root)


def test_podman_runtime_xpu(podman: Podman, spec_dir: Path, tmp_path: Path) -> None:
    """The configured `xpu` runtime gives card 2 with its env; a bad index is refused with our message."""
    shim = tmp_path / "xpu-runtime-shim"
    shim.write_text(f'#!/bin/sh\nXPU_CDI_SPEC_DIRS={spec_dir} exec {WRAPPER} "$@"\n')
    shim.chmod(0o755)
    conf = podman.base / "containers.conf"
    r = subprocess.run([str(BIN / "xpu-cdi"), "runtime", "configure", "--runtime", "podman", "--config", str(conf),
                        "--wrapper-path", str(shim), "--no-oci-hook"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = podman.run(["--runtime", "xpu", "-e", "CXPU_VISIBLE_DEVICES=2"],
                     ["sh", "-c", "ls -l /dev; (echo x > /dev/xpu2) 2>&1; echo LD=$LD_LIBRARY_PATH"])
    assert out.returncode == 0, out.stderr
    assert re.search(r" 240, +2 .*xpu2$", out.stdout, re.M) and ENXIO in out.stdout, out.stdout
    assert "LD=/usr/local/xpu/lib64" in out.stdout
    bad = podman.run(["--runtime", "xpu", "-e", "CXPU_VISIBLE_DEVICES=9"], ["true"])
    assert bad.returncode != 0 and "xpu-container-runtime: CXPU_VISIBLE_DEVICES='9': no card 9" in bad.stderr
    assert str(spec_dir) in bad.stderr


def test_crun_behind_the_wrapper(tmp_path: Path, spec_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """XPU_CDI_RUNTIME=crun: the wrapper edits config.json and crun (private mount namespace) runs it."""
    require("crun")
    record = tmp_path / "crun-calls"
    crun = tmp_path / "crun-recorder"  # proves the wrapper execs what XPU_CDI_RUNTIME names
    crun.write_text(f'#!/bin/sh\necho "$1" >> {record}\nexec crun "$@"\n')
    crun.chmod(0o755)
    monkeypatch.setenv("XPU_CDI_SPEC_DIRS", str(spec_dir))
    monkeypatch.setenv("XPU_CDI_RUNTIME", str(crun))
    b = Bundle(tmp_path)
    b.set_process(["sh", "-c", "ls -l /dev; (echo x > /dev/xpu2) 2>&1; echo LD=$LD_LIBRARY_PATH"],
                  env=["CXPU_VISIBLE_DEVICES=2"])
    r = run_runc(b, runtime=WRAPPER, private_ns=True)
    assert r.returncode == 0, r.stderr
    assert re.search(r" 240, +2 .*xpu2$", r.stdout, re.M) and ENXIO in r.stdout, r.stdout
    assert "LD=/usr/local/xpu/lib64" in r.stdout
    assert record.read_text().split()[0] == "run"
