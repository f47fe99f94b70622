"""The other Debian release's container runtimes, in a tree the tests build themselves.

On a Debian 12 (bookworm) host the tree is Debian 13 (trixie) and the other way round, so
that every `make test` runs both release lines: containerd 1.6 / 1.7, Docker 20.10 / 26,
podman 4.3 / 5.4, crun 1.8 / 1.21.  The tree is a `debootstrap --variant=minbase` of the
release plus its runtime packages, from the host's own Debian mirror, cached between runs
under the test cache (keyed by release and package list), rebuilt when absent, built once
per machine even under pytest-xdist (a file lock).  A `policy-rc.d` in it refuses every
service start, so nothing installed there ever starts by itself.

Commands run in the tree inside a private mount namespace entered with **pivot_root**,
not chroot: the hook `setns`es into the container's mount namespace and back, and after
a chroot the way back lands on the host's root.  What the tests need from the host is
bind-mounted at the same paths: the project checkout (its venv and binaries), the host's
Python (the venv's interpreter and stdlib, which the `xpu-cdi` CLI and the binaries'
Python half run on) and each test's own directories.  Nothing the tree runs may write
into the tree itself: it is shared by every test and run; each entry gets its own /run,
/tmp and /root (tmpfs).  The only paths the entries add to the tree are the empty mount
points of the binds.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

from . import cisafe
from .devdirs import allows_device_nodes
from .runtimes import CACHE

REPO = Path(__file__).resolve().parents[2]

#: What building the binaries takes (tests/c/test_build_other_release.py: the C must build
#: with either release's compiler and headers, whichever the host runs).
BUILD = ["gcc", "libc6-dev", "libyajl-dev", "libyaml-dev"]
#: Each release line's runtimes (recommends off: trixie's docker.io needs docker-cli named) and
#: the libraries the host's Python and our binaries, bound in, link with.
PACKAGES: Dict[str, List[str]] = {
    "bookworm": ["runc", "crun", "podman", "containerd", "docker.io", "busybox-static",
                 "iptables", "uidmap", "libffi8", "libexpat1", "zlib1g", "libyajl2", "libyaml-0-2", "procps", *BUILD],
    "trixie": ["runc", "crun", "podman", "containerd", "docker.io", "docker-cli", "busybox-static",
               "iptables", "uidmap", "libffi8", "libexpat1", "zlib1g", "libyajl2", "libyaml-0-2", "procps", *BUILD],
    # older than either line (glibc 2.31): the statically linked hook the DaemonSet installs
    # on hosts of any distribution runs there under its runc; the dynamic build, its libraries
    # present, does not (tests/c/test_static_build.py)
    "bullseye": ["runc", "busybox-static", "libyajl2", "libyaml-0-2"],
}
OTHER = {"bookworm": "trixie", "trixie": "bookworm"}
VERSION_OF = {"bookworm": "12", "trixie": "13"}
POLICY_RC_D = "#!/bin/sh\n# xpu-cdi test tree: no service starts by itself\nexit 101\n"


def host_release() -> str:
    """The host's Debian codename (VERSION_CODENAME of /etc/os-release)."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", text, re.M)
    return m.group(1) if m else ""


def other_release() -> Optional[str]:
    return OTHER.get(host_release())


def host_mirror() -> str:
    """The Debian archive the host's apt uses (`make image`'s base comes from it too)."""
    from .imagebuild import builder

    return builder().host_mirror()


def tree_key(release: str) -> str:
    return hashlib.sha256(" ".join([release, *PACKAGES[release]]).encode()).hexdigest()[:12]


def tree_path(release: str) -> Path:
    return CACHE / f"tree-{release}-{tree_key(release)}"


def log(msg: str) -> None:
    sys.stderr.write(f"releasetree: {msg}\n")


def _run(cmd: Sequence[str], logf, timeout: float = 900) -> None:
    logf.write(f"$ {' '.join(cmd)}\n".encode())
    logf.flush()
    r = subprocess.run(list(cmd), stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       timeout=timeout, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C"))
    if r.returncode != 0:
        raise RuntimeError(f"building the release tree: {cmd[0]} failed (exit {r.returncode}); "
                           f"its output is in {logf.name}")


def build(release: str, dest: Path) -> Dict[str, float]:
    """debootstrap *release* into *dest* and install its runtimes; returns the timings (s)."""
    tmp = dest.with_name(dest.name + ".building")
    if tmp.exists():  # an interrupted build
        subprocess.run(["rm", "-rf", "--one-file-system", str(tmp)], check=False)
    log_path = dest.with_name(dest.name + ".log")
    times: Dict[str, float] = {}
    with open(log_path, "wb") as logf:
        t0 = time.monotonic()
        _run(["debootstrap", "--variant=minbase", release, str(tmp), host_mirror()], logf)
        times["debootstrap"] = time.monotonic() - t0
        policy = tmp / "usr/sbin/policy-rc.d"
        policy.write_text(POLICY_RC_D)
        policy.chmod(0o755)
        shutil.copy2("/etc/resolv.conf", tmp / "etc/resolv.conf")
        t1 = time.monotonic()
        # apt's maintainer scripts want /proc: a private mount namespace drops it afterwards
        script = ('set -e; T=$1; shift; mount -t proc proc "$T/proc"; chroot "$T" apt-get update -qq; '
                  'chroot "$T" apt-get install -y -qq --no-install-recommends "$@"; chroot "$T" apt-get clean')
        _run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(tmp),
              *PACKAGES[release]], logf)
        times["packages"] = time.monotonic() - t1
        for lists in (tmp / "var/lib/apt/lists").glob("*_Packages*"):
            lists.unlink()
        (tmp / ".oldroot").mkdir(exist_ok=True)
    os.rename(tmp, dest)
    return times


def ensure_tree(release: str) -> Path:
    """The cached tree of *release*, built when absent (once per machine: a file lock)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    dest = tree_path(release)
    if not allows_device_nodes(CACHE):
        pytest.skip(f"the test cache {CACHE} is on a nodev filesystem: debootstrap needs device nodes "
                    "there; set XPU_CDI_TEST_CACHE to a directory on one that allows them")
    with open(CACHE / f".lock-tree-{release}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / ".oldroot").is_dir():
            if shutil.which("debootstrap") is None:
                pytest.fail("debootstrap missing: run `make deps` (scripts/install-runtime-matrix-deps.sh)")
            t0 = time.monotonic()
            times = build(release, dest)
            size = subprocess.run(["du", "-sx", "--block-size=1M", str(dest)], capture_output=True,
                                  text=True).stdout.split()[0]
            (dest.with_name(dest.name + ".built")).write_text(
                f"release={release} seconds={time.monotonic() - t0:.1f} debootstrap={times['debootstrap']:.1f} "
                f"packages={times['packages']:.1f} size_mib={size}\n")
            log(f"built {dest} in {time.monotonic() - t0:.0f} s ({size} MiB)")
    return dest


#: Views of the machine's cgroups for a mount namespace ($T: the root they apply under).
#: "v1-only": the hybrid layout without its cgroup2 mount (crun refuses hybrid layouts);
#: "v2-only": cgroup2 alone on /sys/fs/cgroup (device rules through eBPF, as on a stock
#: Debian 13 host; on a hybrid machine the v1 controllers stay bound to v1 and are absent).
CGROUP_VIEWS = {
    "v1-only": 'umount -l "$T/sys/fs/cgroup/unified" 2>/dev/null || true',
    "v2-only": 'umount -l "$T/sys/fs/cgroup" && mount -t cgroup2 cgroup2 "$T/sys/fs/cgroup"',
}


def host_python_paths() -> List[str]:
    """The venv's interpreter and stdlib, bound into the tree at the same paths."""
    chain, link = [], sys.executable  # .venv/bin/python -> python3 -> /usr/bin/python3 -> python3.11
    for _ in range(10):
        if not link.startswith(str(REPO) + "/"):
            chain.append(link)
        if not os.path.islink(link):
            break
        link = os.path.join(os.path.dirname(link), os.readlink(link))
    return [*chain, sysconfig.get_paths()["stdlib"]]


class Tree:
    """Entering a release tree: ``argv(cmd)`` is *cmd* run in a fresh private mount
    namespace whose root (pivot_root) is the tree, with *binds* (host paths) at the
    same paths inside."""

    def __init__(self, release: str, root: Path, binds: Sequence[Path] = ()) -> None:
        self.release, self.root = release, root
        self.binds = [str(REPO), *host_python_paths(), *(str(b) for b in binds)]

    ENTER = r"""
set -e
T=$1; shift
nb=$1; shift
mount --bind "$T" "$T"        # pivot_root wants the new root to be a mount point
mount -t proc proc "$T/proc"
mount --rbind /sys "$T/sys"
mount --rbind /dev "$T/dev"
mount -t tmpfs -o mode=755 tmpfs "$T/run"
mount -t tmpfs -o mode=1777 tmpfs "$T/tmp"
mount -t tmpfs -o mode=700 tmpfs "$T/root"   # HOME: podman 5 makes dirs there on every run
i=0
while [ "$i" -lt "$nb" ]; do
  p=$1; shift; i=$((i + 1))
  if [ -d "$p" ]; then mkdir -p "$T$p"; else mkdir -p "$T$(dirname "$p")"; [ -e "$T$p" ] || : > "$T$p"; fi
  mount --rbind "$p" "$T$p"
done
cd "$T"
pivot_root . .oldroot
umount -l /.oldroot
cd /
exec "$@"
"""

    def argv(self, cmd: Sequence[str], cgroups: str = "") -> List[str]:
        enter = self.ENTER
        if cgroups:
            enter = enter.replace('cd "$T"\n', CGROUP_VIEWS[cgroups] + '\ncd "$T"\n', 1)
        binds = [b for b in dict.fromkeys(self.binds) if os.path.exists(b)]
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", enter, "enter",
                str(self.root), str(len(binds)), *binds, "env", "-i",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                *cmd]

    def run(self, cmd: Sequence[str], timeout: float = 120, env: Sequence[str] = (),
            cgroups: str = "", check: bool = False, input: Optional[str] = None) -> subprocess.CompletedProcess:
        full = self.argv(["env", *env, *cmd] if env else cmd, cgroups=cgroups)
        r = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=input,
                           stdin=None if input is not None else subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise RuntimeError(f"in the {self.release} tree, {' '.join(cmd)} failed ({r.returncode}):\n"
                               f"{r.stdout}\n{r.stderr}")
        return r

    def popen(self, cmd: Sequence[str], log_path: Path, env: Sequence[str] = (),
              cgroups: str = "") -> subprocess.Popen:
        with open(log_path, "ab") as logf:
            return subprocess.Popen(self.argv(["env", *env, *cmd] if env else cmd, cgroups=cgroups),
                                    stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def version(self, cmd: Sequence[str]) -> str:
        r = self.run(cmd)
        return (r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr).strip() else ""


def other_tree() -> Path:
    """The cached tree of the other release, or a skip saying why there is none."""
    release = other_release()
    if release is None:
        cisafe.not_here(f"host release {host_release() or 'unknown'!r} is not Debian 12 or 13: "
                        "no other release line to build a tree of")
    if os.geteuid() != 0:
        pytest.skip("building and entering a release tree needs root (debootstrap, mount namespaces)")
    root = ensure_tree(release)
    reason = _host_binaries_fail(release, root)
    if reason:
        cisafe.not_here(reason)
    return root


_PROBED: Dict[str, str] = {}


def _host_binaries_fail(release: str, root: Path) -> str:
    """Why the project's binaries and the venv's Python (built on the host) cannot run in
    the tree, or "" when they can: built against a newer glibc than the tree's (a Debian
    13 host, a Debian 12 tree) they cannot, and the tree's line is then skipped."""
    if release not in _PROBED:
        bindir = Path(sys.executable).parent
        tree = Tree(release, root)
        failed = []
        for cmd in ([str(bindir / "xpu-cdi-hook"), "--help"], [sys.executable, "-c", "import xpu_cdi.cli"]):
            r = tree.run(cmd)
            if r.returncode != 0:
                failed.append(f"{' '.join(cmd)}: {(r.stderr.strip().splitlines() or ['exit %d' % r.returncode])[-1]}")
        _PROBED[release] = "" if not failed else (
            f"the project's binaries, built on this {host_release()} host, do not run in the {release} tree "
            f"(a host glibc newer than the tree's?): {'; '.join(failed)}")
    return _PROBED[release]
