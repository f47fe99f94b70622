"""The suite writes only into its own directories: a run of every hypothesis test (the
ones that build random trees, links included) leaves the machine's /, /etc and /tmp
exactly as they were.  Each check looks only at what the run itself did, so that what
other processes of the machine do meanwhile (another checkout's suite, an admin's apt)
cannot blur the picture: the run gets a fresh tmpfs on /tmp and sees /etc through an
overlay in a private mount namespace, and /etc's check is that overlay's upper layer,
which holds every file the run created, changed or removed there and nothing else.
/'s top level is listed before and after: on a Debian machine only a package install
adds or removes a name there, and the suite never installs one (support.DEPS_CHECK).

The one-node Kubernetes cluster (tests/k8s) is checked the same way, started and stopped
by a run of its own tests with a fresh /run too: nothing is left in /, /etc, /tmp, /run
(/run/containerd, /run/nri), the paths kubelet, containerd and CNI write when not told
otherwise (/var/lib/kubelet, /etc/kubernetes, /var/log/containers, /var/lib/cni, ...), and
no process, mount, cgroup, iptables rule or kernel tunable of it remains."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.privileged]

RUN = r"""
set -e
# the old /tmp stays reachable at /mnt, and what the run needs from it (the test's own
# dir, the checkout and its venv when they live under /tmp, as a CI clone may) is bound
# back at its path on the new /tmp
mount --bind /tmp /mnt
mount -t tmpfs -o mode=1777 tmpfs /tmp
for p in $KEEP; do
  case "$p" in /tmp/*) mkdir -p "$p"; mount --bind "/mnt${p#/tmp}" "$p" ;; esac
done
[ -z "$FRESH_RUN" ] || mount -t tmpfs -o mode=0755 tmpfs /run
# what the run does to /etc lands in etc-upper, and only that
mkdir "$OUT/etc-upper" "$OUT/etc-work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$OUT/etc-upper,workdir=$OUT/etc-work" /etc
ls -A / > "$OUT/root.before"; ls -A /tmp > "$OUT/tmp.before"
ls -A /run > "$OUT/run.before"
set +e
"$@" > "$OUT/pytest.log" 2>&1
echo $? > "$OUT/rc"
ls -A / > "$OUT/root.after"; ls -A /tmp > "$OUT/tmp.after"
ls -A /run > "$OUT/run.after"
find "$OUT/etc-upper" -mindepth 1 -printf '%P\n' > "$OUT/etc.written"
cat /proc/self/mounts > "$OUT/mounts.after"
"""


def hypothesis_tests() -> list:
    out = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        if path.name != Path(__file__).name and re.search(r"^from hypothesis|^import hypothesis",
                                                          path.read_text(), re.M):
            out.append(str(path))
    return out


def inner_run(tmp_path: Path, tests: list, fresh_run: bool = False, **env: str) -> Path:
    """*tests* run by a pytest of their own in RUN's namespace; the dir of the listings it wrote."""
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
           "--basetemp", str(tmp_path / "inner"), *tests]
    keep = " ".join(sorted({str(tmp_path), str(REPO), sys.prefix}, key=len))  # parents bound first
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", RUN, "run", *cmd],
                       cwd=REPO, env=dict(os.environ, OUT=str(out), KEEP=keep, FRESH_RUN="1" if fresh_run else "",
                                          **env),
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr
    log = (out / "pytest.log").read_text()
    assert (out / "rc").read_text().strip() == "0", log[-3000:]
    return out


def assert_same_listings(out: Path, names: tuple = ("root", "tmp")) -> None:
    """The listings RUN made before and after agree, and the run wrote nothing in /etc."""
    written = (out / "etc.written").read_text().split()
    assert not written, f"/etc: the run created, changed or removed {sorted(written)}"
    for name in names:
        before = set((out / f"{name}.before").read_text().split())
        after = set((out / f"{name}.after").read_text().split())
        assert after == before, f"/{'' if name == 'root' else name}: new {sorted(after - before)}, " \
                                f"gone {sorted(before - after)}"


def test_hypothesis_tests_leave_no_traces(tmp_path: Path) -> None:
    tests = hypothesis_tests()
    assert len(tests) >= 5, tests
    assert_same_listings(inner_run(tmp_path, tests))


def firewall() -> list:
    rules = []
    for table in ("filter", "nat", "mangle"):
        r = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True, text=True)
        rules += [f"{table}: {line}" for line in r.stdout.splitlines()]
    return rules


@pytest.mark.runtime
def test_cluster_leaves_no_traces(tmp_path: Path) -> None:
    """A cluster started, used (tests/k8s/test_cluster.py) and stopped by a run of its own.

    The machine-wide paths, firewall rules and tunables compared here are written by no other
    test of a suite: every cluster keeps kubelet's and containerd's paths in its own mount
    namespace's overlays and its rules in its own network namespace, and the runtimes run
    containers without networking (--network none; dockerd --iptables=false)."""
    from support.k8s import builds
    from support.k8s import cluster

    for c in ("kubernetes", "containerd", "etcd"):
        builds.ensure_or_skip(c)
    tunables = {p: Path("/proc/sys", p).read_text() for p in cluster.KUBELET_TUNABLES}
    paths, rules = cluster.host_paths_snapshot(), firewall()
    record = tmp_path / "clusters.jsonl"
    out = inner_run(tmp_path, [str(REPO / "tests/k8s/test_cluster.py")], fresh_run=True,
                    XPU_CDI_K8S_RECORD=str(record))
    assert_same_listings(out, ("root", "tmp", "run"))
    (started,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert not Path(started["base"]).exists(), started
    assert not [m for m in (out / "mounts.after").read_text().splitlines() if started["base"] in m]
    with open("/proc/self/mounts") as f:
        assert not [m for m in f if started["base"] in m]
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{started['cgroup']}")), started
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        assert started["base"].encode() not in cmdline, (pid, cmdline)
    assert cluster.host_paths_snapshot() == paths
    assert firewall() == rules
    assert {p: Path("/proc/sys", p).read_text() for p in cluster.KUBELET_TUNABLES} == tunables
