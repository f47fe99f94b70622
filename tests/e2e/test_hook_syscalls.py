"""The hook's system calls, counted by strace inside a real `runc run` (a count, unlike a time, is
the same on every run): the 8-card prestart injection and update-ldcache beside the image's
ldconfig stay within the bounds of issue 30 (docs/hook.md, "Cost")."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Dict, List

import pytest

from support import runtimes
from support.hookkit import BIN, HOOK_ENV, HookHost, container_output

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

#: The 8-card prestart (9 nodes, 2 read-only bind mounts, 9 cgroup rules, reads of the state,
#: config.json, the index and the spec): about 60 calls of work, 14 of a static binary's start,
#: and the in-root resolution and checks that keep it safe.  Was 231 (issue 30).
PRESTART_8_MAX_CALLS = 120
#: update-ldcache's own calls beside the image's ldconfig (the hook process and its child up to
#: the exec of ldconfig): was 219, 67 of them prctl (one per capability of the bounding set).
LDCACHE_MAX_OWN_CALLS = 80

LINE = re.compile(r"^(\d+) +(\w+)\(")


def strace_entry(hook: Path, out: Path, args: List[str], env: List[str], follow: bool = False) -> Dict[str, object]:
    """A hook entry running *hook* *args* under strace, which writes to *out*: the hook process
    alone (-c, a summary), or it and its children (-f, every call, for splitting by process)."""
    return {"path": shutil.which("strace"), "env": env, "timeout": 60,
            "args": ["strace", *(["-f"] if follow else ["-c"]), "-o", str(out), str(hook), *args]}


def summary_total(out: Path) -> Dict[str, int]:
    """`strace -c`'s table: calls by system call, and "total"."""
    calls = {}
    for line in out.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[3].isdigit():  # % time, seconds, usecs/call, calls, [errors], syscall
            calls[f[-1]] = int(f[3])
    return calls


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
    b.config["hooks"] = {"prestart": [strace_entry(xpu.hook, out, ["prestart"],
                                                   [*HOOK_ENV, f"XPU_CDI_SPEC_DIRS={spec_dir}"])]}
    r = runtimes.run_runc(b)
    assert r.returncode == 0 and "/dev/xpu7" in r.stdout, container_output(r)
    calls = summary_total(out)
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
    b.config["hooks"] = {"createContainer": [strace_entry(installed_hook, out, ["update-ldcache", "--folder",
                                                                               "/usr/local/xpu/lib64"],
                                                          list(HOOK_ENV), follow=True)]}
    r = runtimes.run_runc(b)
    assert r.returncode == 0 and "/usr/local/xpu/lib64" in r.stdout, container_output(r)
    own, ldconfig, ldconfig_pids = Counter(), Counter(), set()
    for line in out.read_text().splitlines():
        m = LINE.match(line)
        if not m:  # "<... x resumed>" halves of calls counted at their start, exit lines
            continue
        pid, call = m.groups()
        if call == "execve" and "ldconfig" in line:
            ldconfig_pids.add(pid)
        (ldconfig if pid in ldconfig_pids else own)[call] += 1
    assert ldconfig_pids and sum(ldconfig.values()) > 0, out.read_text()[-2000:]  # it ran the image's ldconfig
    assert sum(own.values()) <= LDCACHE_MAX_OWN_CALLS, own
