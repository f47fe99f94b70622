"""The hook's system calls counted by strace inside a real `runc run` (issue 30): the hook entry
that wraps it, and the readers of strace's output.  tests/e2e/test_hook_syscalls.py holds the
bounds; `make bench` (scripts/bench_syscalls.py) prints the same counts beside them."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

#: The 8-card prestart (9 nodes, 2 read-only bind mounts, 9 cgroup rules, reads of the state,
#: config.json, the index and the spec): about 60 calls of work, 14 of a static binary's start,
#: and the in-root resolution and checks that keep it safe.  Was 231 (issue 30).
PRESTART_8_MAX_CALLS = 120
#: update-ldcache's own calls beside the image's ldconfig (the hook process and its child up to
#: the exec of ldconfig): was 219, 67 of them prctl (one per capability of the bounding set).
LDCACHE_MAX_OWN_CALLS = 80

LINE = re.compile(r"^(\d+) +(\w+)\(")


def entry(hook: Path, out: Path, args: List[str], env: List[str], follow: bool = False) -> Dict[str, object]:
    """A hook entry running *hook* *args* under strace, which writes to *out*: the hook process
    alone (-c, a summary), or it and its children (-f, every call, for splitting by process)."""
    return {"path": shutil.which("strace"), "env": env, "timeout": 60,
            "args": ["strace", *(["-f"] if follow else ["-c"]), "-o", str(out), str(hook), *args]}


def summary(out: Path) -> Dict[str, int]:
    """`strace -c`'s table: calls by system call, and "total"."""
    calls = {}
    for line in out.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[3].isdigit():  # % time, seconds, usecs/call, calls, [errors], syscall
            calls[f[-1]] = int(f[3])
    return calls


def own_and_ldconfig(out: Path) -> Tuple[Counter, Counter]:
    """From `strace -f` of update-ldcache: (the hook's own calls, its process and its child up to
    the exec of ldconfig; ldconfig's), by system call."""
    own: Counter = Counter()
    ldconfig: Counter = Counter()
    ldconfig_pids = set()
    for line in out.read_text().splitlines():
        m = LINE.match(line)
        if not m:  # "<... x resumed>" halves of calls counted at their start, exit lines
            continue
        pid, call = m.groups()
        if call == "execve" and "ldconfig" in line:
            ldconfig_pids.add(pid)
        (ldconfig if pid in ldconfig_pids else own)[call] += 1
    return own, ldconfig
