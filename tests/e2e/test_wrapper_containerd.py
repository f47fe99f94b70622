"""End to end: `ctr run` through a private containerd 1.6 (no CDI there)
with `--runc-binary` set to xpu-container-runtime.  containerd's shim runs
the wrapper for create, start, state, kill and delete; the daemon's
environment (XPU_CDI_SPEC_DIRS) reaches the wrapper through the shim."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from support.runtimes import ENXIO, IMAGE, Containerd, unique

from support import fakehost

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
BIN = Path(sys.executable).parent
WRAPPER = str(BIN / "xpu-container-runtime")
CHECK = ("ls -l /dev/; (echo x > /dev/xpu2) 2>&1; (echo x > /dev/xpuctrl) 2>&1; echo LD=$LD_LIBRARY_PATH; "
         "ls /usr/local/xpu/lib64; grep ' /usr/local/xpu ' /proc/mounts; true")


@pytest.fixture
def spec_dir(tmp_path: Path) -> Iterator[Path]:
    """A fake 8-card host's spec (env form of LD_LIBRARY_PATH) in a per-test dir."""
    host = fakehost.kunlunxin(tmp_path / "host", cards=8)
    d = tmp_path / "cdi"
    r = subprocess.run([str(BIN / "xpu-cdi"), "generate", *host.cli_roots, "--spec-dir", str(d),
                        "--ld-library-path-env"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    yield d
    fakehost.remove_tree(host.root)


@pytest.fixture
def ctrd(tmp_path: Path, spec_dir: Path) -> Iterator[Containerd]:
    """containerd 1.6 whose shims (and so the wrapper) see XPU_CDI_SPEC_DIRS; always stopped."""
    c = Containerd(tmp_path / "containerd", env={"XPU_CDI_SPEC_DIRS": str(spec_dir)})
    try:
        c.import_image()
        yield c
    finally:
        c.stop()


def ctr_run(c: Containerd, *args: str) -> subprocess.CompletedProcess:
    return c.ctr("run", "--rm", "--runc-binary", WRAPPER, *args, timeout=120)


def test_env_selection(ctrd: Containerd) -> None:
    """--env CXPU_VISIBLE_DEVICES=2: card 2 and the control node usable, driver mounted, LD_LIBRARY_PATH set."""
    r = ctr_run(ctrd, "--env", "CXPU_VISIBLE_DEVICES=2", IMAGE, unique("c"), "sh", "-c", CHECK)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r" 240, +2 .*xpu2$", out, re.M) and re.search(r" 240, +200 .*xpuctrl$", out, re.M), out
    assert not re.search(r" xpu[013-7]$", out, re.M), out
    assert out.count(ENXIO) == 2, out
    assert "LD=/usr/local/xpu/lib64\n" in out and "libxpuml.so.1" in out
    assert re.search(r" /usr/local/xpu \S+ ro,nosuid,nodev", out), out


def test_annotation_selects_card_1(ctrd: Containerd) -> None:
    """--annotation cdi.k8s.io/test_x=kunlunxin.com/xpu=1 gives card 1."""
    r = ctr_run(ctrd, "--annotation", "cdi.k8s.io/test_x=kunlunxin.com/xpu=1", IMAGE, unique("c"),
                "sh", "-c", "ls -l /dev; (echo x > /dev/xpu1) 2>&1; true")
    assert r.returncode == 0, r.stderr
    assert re.search(r" 240, +1 .*xpu1$", r.stdout, re.M) and ENXIO in r.stdout, r.stdout
    assert not re.search(r" xpu[02-7]$", r.stdout, re.M), r.stdout


@pytest.mark.parametrize("args, words", [
    (["--env", "CXPU_VISIBLE_DEVICES=9"], ["no card 9"]),
    (["--annotation", "cdi.k8s.io/test_x=kunlunxin.com/xpu=x y"], ["'kunlunxin.com/xpu=x y'"]),
    (["--annotation", "cdi.k8s.io/test_x=huawei.com/npu=0"], ["'huawei.com/npu=0'"]),
])
def test_refused(ctrd: Containerd, spec_dir: Path, args: list, words: list) -> None:
    """A bad request: ctr reports the wrapper's message (device + spec dirs) and no task exists."""
    cid = unique("c")
    r = ctrd.ctr("run", "--runc-binary", WRAPPER, *args, IMAGE, cid, "true", timeout=120)
    try:
        assert r.returncode != 0
        assert "OCI runtime create failed: xpu-container-runtime:" in r.stderr, r.stderr
        for w in words + [str(spec_dir)]:
            assert w in r.stderr, r.stderr
        assert cid not in ctrd.ctr("task", "ls", "-q").stdout
    finally:
        ctrd.ctr("containers", "delete", cid)
