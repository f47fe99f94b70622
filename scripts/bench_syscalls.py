"""The hook's system calls for `make bench` (issue 30; scripts/bench.py calls :func:`run`).

A count, unlike a time, is the same at any load: ``strace -c`` of the hook process alone
inside a real `runc run`, for the 8-card prestart from a JSON and from a YAML spec and for
a container asking for nothing; ``strace -f`` of update-ldcache on an image with ldconfig,
split into the hook's own calls and ldconfig's (tests/support/stracekit.py, which
tests/e2e/test_hook_syscalls.py holds to the same bounds).  Each run is checked to have
done its job: the container sees the 8 cards, the loader cache names the folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict, List, Tuple

from support import runtimes
from support.hookkit import HOOK_ENV, container_output
from support.stracekit import LDCACHE_MAX_OWN_CALLS, PRESTART_8_MAX_CALLS, entry, own_and_ldconfig, summary

Rows = List[Tuple[str, str, str]]
LIB_DIR = "/usr/local/xpu/lib64"


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def prestart_calls(work: Path, name: str, specs: Path, hook: Path, cards: bool) -> Dict[str, int]:
    """`strace -c` of one prestart run: calls by system call and "total"."""
    out = work / f"strace-{name}.out"
    b = runtimes.Bundle(work)
    b.set_process(["sh", "-c", "ls /dev/xpu7 /dev/xpuctrl" if cards else "true"],
                  env=["CXPU_VISIBLE_DEVICES=0-7"] if cards else [])
    b.config["hooks"] = {"prestart": [entry(hook, out, ["prestart"], [*HOOK_ENV, f"XPU_CDI_SPEC_DIRS={specs}"])]}
    r = runtimes.run_runc(b)
    if r.returncode != 0 or (cards and "/dev/xpu7" not in r.stdout):
        raise RuntimeError(f"syscalls/{name}: the container did not get its cards: {container_output(r)}")
    calls = summary(out)
    if cards and (calls.get("mknodat") != 9 or calls.get("mount") != 4):
        raise RuntimeError(f"syscalls/{name}: not the 8-card job (9 mknodat, 4 mounts): {calls}")
    return calls


def ldcache_calls(work: Path, hook: Path) -> Tuple[int, int]:
    """`strace -f` of update-ldcache on an image with ldconfig: (the hook's own calls, ldconfig's)."""
    out = work / "strace-ldcache.out"
    b = runtimes.Bundle(work)
    b.set_process(["cat", "/etc/ld.so.conf.d/00-xpu-cdi.conf"])
    (b.rootfs / LIB_DIR.lstrip("/")).mkdir(parents=True)
    shutil.copy2("/sbin/ldconfig", b.rootfs / "sbin" / "ldconfig")
    b.config["hooks"] = {"createContainer": [entry(hook, out, ["update-ldcache", "--folder", LIB_DIR],
                                                   list(HOOK_ENV), follow=True)]}
    r = runtimes.run_runc(b)
    if r.returncode != 0 or LIB_DIR not in r.stdout:
        raise RuntimeError(f"syscalls/ldcache: the folder is not in the loader's config: {container_output(r)}")
    own, ldconfig = own_and_ldconfig(out)
    if not ldconfig:
        raise RuntimeError("syscalls/ldcache: the image's ldconfig did not run")
    return sum(own.values()), sum(ldconfig.values())


def run(work: Path, json_host: Tuple[Path, Path], yaml_host: Tuple[Path, Path]) -> Tuple[Rows, Dict[str, object]]:
    """Rows and counts; *json_host* and *yaml_host* are (spec dir, hook) of an 8-card host."""
    if shutil.which("strace") is None:
        raise RuntimeError("strace is needed for the system call rows: scripts/install-deps.sh strace")
    work = work / "syscalls"
    work.mkdir()
    specs, hook = json_host
    counts = {"prestart8": prestart_calls(work, "prestart8", specs, hook, True),
              "prestart8-yaml": prestart_calls(work, "prestart8-yaml", *yaml_host, True),
              "noop": prestart_calls(work, "noop", specs, hook, False)}
    own, ldconfig = ldcache_calls(work, hook)
    j, y, n = (counts[k]["total"] for k in ("prestart8", "prestart8-yaml", "noop"))
    top = ", ".join(f"{c} {k}" for k, c in sorted(((k, v) for k, v in counts["prestart8"].items() if k != "total"),
                                                  key=lambda kv: -kv[1])[:5])
    rows: Rows = [
        ("hook's system calls: prestart, 8 cards, JSON / YAML spec", f"{j} / {y}",
         f"strace -c of the hook process inside runc run (the job checked: 9 mknodat, 4 mounts); most: {top}; "
         f"target <= {PRESTART_8_MAX_CALLS}: {_met(max(j, y) <= PRESTART_8_MAX_CALLS)}"),
        ("hook's system calls: prestart, nothing asked", f"{n}", "the same, a container asking for no card"),
        ("update-ldcache's own system calls beside ldconfig", f"{own}",
         f"strace -f, the hook process and its child up to the exec of the image's ldconfig (ldconfig's own "
         f"{ldconfig}); target <= {LDCACHE_MAX_OWN_CALLS}: {_met(own <= LDCACHE_MAX_OWN_CALLS)}"),
    ]
    return rows, {"prestart": counts, "ldcache_own": own, "ldconfig": ldconfig}
