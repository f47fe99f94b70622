"""What a test run left behind: the daemons it started, the cgroups it made and the mounts
below its temp dir that are still there when the run ends (tests/conftest.py fails the run
naming them).

The machine runs other test sessions meanwhile, so only what is this run's counts:
a process whose environment carries the run's token (:data:`TOKEN`, inherited by
everything the run starts unless it clears the environment) or whose command line
names the run's temp dir; a cgroup named after a pid of the run (``runtimes.unique``
puts the pid of the pytest process that made it in every name) or recorded by the
run's clusters (tests/k8s/conftest.py writes ``XPU_CDI_K8S_RECORD``).  Looked at: the
daemons of the runtimes and Kubernetes (and anything named xpu-cdi), and cgroups named
``xpu-cdi-*`` or ``xk8s-*``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Set

#: The environment variable naming the run's own directory (its pids, its clusters); its
#: value is the token a process of the run carries.
TOKEN = "XPU_CDI_TEST_RUN_DIR"
DAEMONS = re.compile(r"containerd|dockerd|kubelet|kube-apiserver|kube-scheduler|kube-controller|etcd|xpu-cdi|"
                     r"podman|conmon")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_NAMES = ("xpu-cdi-*", "xk8s-*")


def start(run_dir: Path) -> None:
    """The controller's start: the run's directory, named in the environment every test inherits."""
    run_dir.mkdir(parents=True, exist_ok=True)
    os.environ[TOKEN] = str(run_dir)
    os.environ.setdefault("XPU_CDI_K8S_RECORD", str(run_dir / "clusters.jsonl"))
    note_pid()


def note_pid() -> None:
    """This pytest process (the controller or an xdist worker) is one of the run's."""
    run_dir = os.environ.get(TOKEN)
    if run_dir and os.path.isdir(run_dir):
        Path(run_dir, f"pid-{os.getpid()}").touch()


def _subdirs(path: Path) -> List[Path]:
    """The directories in *path*; none when it went away meanwhile (another session's cgroup, removed)."""
    try:
        with os.scandir(path) as it:
            return [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def cgroups() -> Set[Path]:
    """The machine's cgroups a test could have made (at the top of each hierarchy, and one level below)."""
    found: Set[Path] = set()
    level = [CGROUP_ROOT]
    for _depth in range(3):
        level = [d for parent in level for d in _subdirs(parent)]
        found.update(d for d in level if any(fnmatch.fnmatch(d.name, n) for n in CGROUP_NAMES))
    return found


def processes() -> Dict[int, bytes]:
    """pid -> command line of every process whose command line names a daemon of interest."""
    out: Dict[int, bytes] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline and DAEMONS.search(cmdline.decode(errors="replace")):
            out[int(pid)] = cmdline
    return out


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


class Run:
    """The run's view: its pids, its temp dir, its clusters; what of the machine is its own."""

    def __init__(self, run_dir: Path, basetemp: Path) -> None:
        self.dir, self.basetemp = run_dir, basetemp
        self.pids = {int(p.name[4:]) for p in run_dir.glob("pid-*")}
        self.clusters: List[Dict[str, str]] = []
        record = run_dir / "clusters.jsonl"
        if record.exists():
            self.clusters = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]

    def owns_cgroup(self, path: Path) -> bool:
        name = path.name
        return any(f"-{pid}-" in name for pid in self.pids) or any(c.get("cgroup") == name for c in self.clusters)

    @property
    def dirs(self) -> List[str]:
        """The run's own directories: its temp dir and its clusters'."""
        return [str(self.basetemp), *(c["base"] for c in self.clusters if c.get("base"))]

    def owns_process(self, pid: int, cmdline: bytes) -> bool:
        if pid in self.pids or pid == os.getpid():
            return False
        if any(d.encode() in cmdline for d in self.dirs):
            return True
        return f"{TOKEN}={self.dir}\0".encode() in _environ(pid)

    def mounts(self) -> List[str]:
        """Mount points of this mount namespace below one of the run's directories."""
        with open("/proc/self/mounts") as f:
            targets = [line.split()[1] for line in f]
        return [t for t in targets if any((t + "/").startswith(d + "/") for d in self.dirs)]

    def leaks(self, before_cgroups: Set[Path], before_pids: Set[int]) -> "tuple[Dict[int, bytes], List[Path]]":
        """The run's daemons still running and cgroups still there (made since *before_*)."""
        procs = {pid: cmd for pid, cmd in processes().items()
                 if pid not in before_pids and self.owns_process(pid, cmd)}
        groups = sorted(p for p in cgroups() - before_cgroups if self.owns_cgroup(p))
        return procs, groups


def settle(run: Run, before_cgroups: Set[Path], before_pids: Set[int],
           grace: float = 10.0) -> "tuple[Dict[int, bytes], List[Path]]":
    """The leaks that are still there after *grace* seconds (a process killed by the last
    teardown may take a moment to go)."""
    deadline = time.monotonic() + grace
    while True:
        procs, groups = run.leaks(before_cgroups, before_pids)
        if not procs or time.monotonic() > deadline:
            return procs, groups
        time.sleep(0.2)


def remove(procs: Dict[int, bytes], groups: List[Path], mounts: List[str]) -> None:
    """End the leaked daemons (by pid), unmount the leaked mounts and remove the leaked cgroups,
    so that the next run starts clean."""
    for target in reversed(mounts):
        subprocess.run(["umount", "-l", target], capture_output=True)
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    from .runtimes import remove_cgroup_tree  # here: conftest imports this module before pytest loads that plugin

    for top in groups:
        remove_cgroup_tree(top)


def report(procs: Dict[int, bytes], groups: List[Path], mounts: List[str]) -> Optional[str]:
    """The lines naming what leaked, or None."""
    if not procs and not groups and not mounts:
        return None
    lines = ["the run left behind what its tests started (a fixture whose clean-up misses it, or that "
             "starts it before its try/finally):"]
    for pid, cmd in sorted(procs.items()):
        args = cmd.replace(b"\0", b" ").decode(errors="replace")
        lines.append(f"  daemon pid {pid}: {args[:200]}")
    lines += [f"  cgroup {p}" for p in groups]
    lines += [f"  mount {t}" for t in mounts]
    lines.append("  (ended and removed now; find the test that made them)")
    return "\n".join(lines)


def after(basetemp: Path) -> Optional[str]:
    """What a finished run whose pytest base temp dir was *basetemp* still leaves on the machine (its
    daemons, cgroups, mounts), ended and removed now; None when nothing.  The suite's own check,
    made again from outside once pytest has exited (scripts/stress-loop.py): a teardown that
    outlives the session, or a run that was killed, shows here."""
    run_dir = basetemp / "xpu-cdi-run"
    if not run_dir.is_dir():
        return f"no run at {basetemp} (pytest's --basetemp)"
    run = Run(run_dir, basetemp)
    procs, groups = run.leaks(set(), set())
    mounts = run.mounts()
    message = report(procs, groups, mounts)
    if message is not None:
        remove(procs, groups, mounts)
    return message
