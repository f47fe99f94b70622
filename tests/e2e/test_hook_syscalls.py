"""The hook's system calls, counted by strace inside a real `runc run` (a count, unlike a time, is
the same on every run): the 8-card prestart injection and update-ldcache beside the image's
ldconfig stay within the bounds of issue 30 (docs/hook.md, "Cost")."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from support import runtimes
from support.hookkit import BIN, HOOK_ENV, HookHost, container_output
from support.stracekit import LDCACHE_MAX_OWN_CALLS, PRESTART_8_MAX_CALLS, entry, own_and_ldconfig, summary

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]


@pytest.fixture
def strace() -> None:
    runtimes.require("runc")
    if shutil.which("strace") is None:
        pytest.fail("strace is needed: scripts/install-deps.sh strace")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_prestart_8_cards_within_the_bound(xpu: HookHost, strace: None, tmp_path: Path, fmt: str) -> None:
    """All 8 cards injected (the container sees /dev/xpu7) in at most PRESTART_8_MAX_CALLS calls of
    the hook process, from a JSON spec and from a YAML one."""
    spec_dir = xpu.spec_dir
    if fmt == "yaml":
        spec_dir = tmp_path / "cdi-yaml"
        subprocess.run([str(BIN / "xpu-cdi"), "generate", *xpu.host.cli_roots, "--spec-dir", str(spec_dir),
                        "--format", "yaml", "--hook-path", str(xpu.hook)], check=True, capture_output=True)
        assert any(p.suffix == ".yaml" for p in spec_dir.iterdir())
    out = tmp_path / "strace.out"
    b = runtimes.Bundle(tmp_path)
    b.set_process(["sh", "-c", "ls /dev/xpu7 /dev/xpuctrl"], env=["CXPU_VISIBLE_DEVICES=0-7"])
    b.config["hooks"] = {"prestart": [entry(xpu.hook, out, ["prestart"],
                                            [*HOOK_ENV, f"XPU_CDI_SPEC_DIRS={spec_dir}"])]}
    r = runtimes.run_runc(b)
    assert r.returncode == 0 and "/dev/xpu7" in r.stdout, container_output(r)
    calls = summary(out)
    assert calls["mknodat"] == 9 and calls["mount"] == 4, calls
    assert calls["total"] <= PRESTART_8_MAX_CALLS, calls


def test_update_ldcache_own_calls_within_the_bound(strace: None, installed_hook: Path, tmp_path: Path) -> None:
    """update-ldcache as a createContainer hook on an image with ldconfig: the cache gets the
    folder, and the hook's own calls (its process and its child before the exec of ldconfig)
    are at most LDCACHE_MAX_OWN_CALLS."""
    out = tmp_path / "strace.out"
    b = runtimes.Bundle(tmp_path)
    b.set_process(["cat", "/etc/ld.so.conf.d/00-xpu-cdi.conf"])
    (b.rootfs / "usr/local/xpu/lib64").mkdir(parents=True)
    shutil.copy2("/sbin/ldconfig", b.rootfs / "sbin" / "ldconfig")
    b.config["hooks"] = {"createContainer": [entry(installed_hook, out, ["update-ldcache", "--folder",
                                                                        "/usr/local/xpu/lib64"],
                                                   list(HOOK_ENV), follow=True)]}
    r = runtimes.run_runc(b)
    assert r.returncode == 0 and "/usr/local/xpu/lib64" in r.stdout, container_output(r)
    own, ldconfig = own_and_ldconfig(out)
    assert sum(ldconfig.values()) > 0, out.read_text()[-2000:]  # it ran the image's ldconfig
    assert sum(own.values()) <= LDCACHE_MAX_OWN_CALLS, own
