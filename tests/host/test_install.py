"""`xpu-cdi host install-binaries`, the DaemonSet's install of the hook and the wrapper
into a host directory: created root-owned 0755, each binary replaced atomically and only
when it changed, a start running the old binary undisturbed, every directory on the way
checked (root's, writable by no one else), and a binary that cannot run never installed.

The directory above the install dir must be root's all the way up, which a test's tmp dir
(under the world-writable /tmp) is not: the installer runs in a private mount namespace
where the test's "host root" is bound over a root-owned directory (HOSTROOT_AT), as a
hostPath volume appears in the init container.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List

import pytest

from support.hookkit import hook_binary

pytestmark = [pytest.mark.privileged]

XPU_CDI = str(Path(sys.executable).parent / "xpu-cdi")
NAMES = ("xpu-cdi-hook", "xpu-container-runtime")


def mount_point() -> str:
    for cand in ("/srv", "/mnt", "/media", "/opt"):
        st = os.lstat(cand) if os.path.lexists(cand) else None
        if st and stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022:
            return cand
    pytest.fail("no root-owned, not group/world-writable directory to bind the test's host root over")


HOSTROOT_AT = mount_point()
BIN_DIR = f"{HOSTROOT_AT}/usr/local/xpu-cdi/bin"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    d = tmp_path / "image-bin"
    d.mkdir()
    for n in NAMES:
        shutil.copy(hook_binary(n), d / n)
    return d


@pytest.fixture
def hostroot(tmp_path: Path) -> Path:
    root = tmp_path / "hostroot"
    (root / "usr" / "local").mkdir(parents=True)
    for d in (root, root / "usr", root / "usr" / "local"):
        d.chmod(0o755)
    return root


def install(hostroot: Path, source: Path, *extra: str, to: str = BIN_DIR) -> subprocess.CompletedProcess:
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(hostroot),
                           HOSTROOT_AT, XPU_CDI, "host", "install-binaries", "--from", str(source), "--to", to,
                           *extra], capture_output=True, text=True, timeout=60)


def on_host(hostroot: Path, path: str) -> Path:
    return hostroot / os.path.relpath(path, HOSTROOT_AT)


def test_fresh_install(hostroot: Path, source: Path) -> None:
    r = install(hostroot, source)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"installed {BIN_DIR}/{n}" for n in NAMES]
    bindir = on_host(hostroot, BIN_DIR)
    st = bindir.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    assert sorted(p.name for p in bindir.parent.iterdir()) == ["bin"]
    assert sorted(p.name for p in bindir.iterdir()) == sorted(NAMES)  # no temp file left
    for n in NAMES:
        st = (bindir / n).stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o755)
        assert (bindir / n).read_bytes() == (source / n).read_bytes()


def test_unchanged_binaries_are_not_rewritten(hostroot: Path, source: Path) -> None:
    assert install(hostroot, source).returncode == 0
    bindir = on_host(hostroot, BIN_DIR)
    inodes = {n: (bindir / n).stat().st_ino for n in NAMES}
    r = install(hostroot, source)
    assert r.returncode == 0 and r.stdout.splitlines() == [f"up to date {BIN_DIR}/{n}" for n in NAMES]
    assert {n: (bindir / n).stat().st_ino for n in NAMES} == inodes
    (bindir / "xpu-cdi-hook").chmod(0o775)  # a mode changed by hand is put back
    r = install(hostroot, source)
    assert r.stdout.splitlines()[0] == f"installed {BIN_DIR}/xpu-cdi-hook", r.stdout
    assert stat.S_IMODE((bindir / "xpu-cdi-hook").stat().st_mode) == 0o755


def test_upgrade_leaves_a_running_old_binary_alone(hostroot: Path, source: Path) -> None:
    """The old hook, started from the path and blocked reading its OCI state, is replaced under it:
    it keeps running its own (now unlinked) file and finishes as it would have; the path is the new file."""
    assert install(hostroot, source).returncode == 0
    hook = on_host(hostroot, BIN_DIR) / "xpu-cdi-hook"
    old_ino = hook.stat().st_ino
    proc = subprocess.Popen([str(hook), "prestart"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while os.stat(f"/proc/{proc.pid}/exe").st_ino != old_ino:  # exec'd the hook (not still the fork)
            assert time.monotonic() < deadline, "the hook did not start"
            time.sleep(0.01)
        with open(source / "xpu-cdi-hook", "ab") as f:
            f.write(b"\0version 2")  # other bytes, the same program
        r = install(hostroot, source)
        assert r.stdout.splitlines() == [f"installed {BIN_DIR}/xpu-cdi-hook",
                                         f"up to date {BIN_DIR}/xpu-container-runtime"], r
        assert hook.stat().st_ino != old_ino and hook.read_bytes().endswith(b"\0version 2")
        assert os.readlink(f"/proc/{proc.pid}/exe").endswith("xpu-cdi-hook (deleted)")
        out, err = proc.communicate(b"", timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, err.decode()) == (1, "xpu-cdi-hook: no OCI state on stdin: the hook must be run by a "
                                                  "container runtime (as an OCI hook), not by hand\n")


def test_starts_during_upgrades_all_succeed(hostroot: Path, source: Path) -> None:
    """Container starts exec the path while it is replaced 20 times: every exec finds a whole binary
    (no ENOENT between unlink and create, no ETXTBSY, no truncated file)."""
    assert install(hostroot, source).returncode == 0
    hook = on_host(hostroot, BIN_DIR) / "xpu-cdi-hook"
    failures: List[str] = []
    runs = [0]
    stop = threading.Event()

    def starts() -> None:
        while not stop.is_set():
            r = subprocess.run([str(hook), "--help"], capture_output=True)
            runs[0] += 1
            if r.returncode != 0 or not r.stdout.startswith(b"usage: xpu-cdi-hook"):
                failures.append(f"exit {r.returncode}: {r.stderr[-200:]!r}")

    t = threading.Thread(target=starts)
    t.start()
    try:
        for i in range(20):
            with open(source / "xpu-cdi-hook", "ab") as f:
                f.write(b"\0%d" % i)
            r = install(hostroot, source)
            assert r.returncode == 0, r.stderr
    finally:
        stop.set()
        t.join()
    assert failures == [] and runs[0] > 20, (runs, failures[:3])


@pytest.mark.parametrize("where", ["bin", "parent", "grandparent"])
@pytest.mark.parametrize("problem", ["group-writable", "world-writable", "not-root", "symlink"])
def test_unsafe_directories_are_refused(hostroot: Path, source: Path, tmp_path: Path, where: str,
                                        problem: str) -> None:
    """Any directory on the way that another user could write (or a link elsewhere) is refused with the
    fix, and nothing is written."""
    bindir = on_host(hostroot, BIN_DIR)
    bindir.mkdir(parents=True)
    bindir.parent.chmod(0o755)
    bindir.chmod(0o755)
    target = {"bin": bindir, "parent": bindir.parent, "grandparent": bindir.parent.parent}[where]
    shown = f"{HOSTROOT_AT}/{target.relative_to(hostroot)}"
    if problem == "symlink":
        real = tmp_path / "elsewhere"
        shutil.move(str(target), real)
        target.symlink_to(real)
        message = f"xpu-cdi: {shown!r} is a symbolic link: the install directory and its parents must be real " \
                  f"directories (remove it, or choose another --to)"
    elif problem == "not-root":
        os.chown(target, 1000, 1000)
        message = f"xpu-cdi: {shown!r} is owned by uid 1000: a binary every container start runs as root must " \
                  f"not sit where another user can replace it (chown root {shown})"
    else:
        mode = 0o775 if problem == "group-writable" else 0o1777
        target.chmod(mode)
        message = f"xpu-cdi: {shown!r} is writable by its group or by everyone (mode {mode:04o}): anyone could " \
                  f"replace the binaries in it (chmod go-w {shown})"
    before = sorted(str(p.relative_to(hostroot)) for p in hostroot.rglob("*"))
    r = install(hostroot, source)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", message + "\n")
    assert sorted(str(p.relative_to(hostroot)) for p in hostroot.rglob("*")) == before


def test_a_binary_that_cannot_run_is_not_installed(hostroot: Path, source: Path) -> None:
    """A broken new binary (here: not an executable at all) is run under its temp name first, refused,
    removed, and the working old one stays."""
    assert install(hostroot, source).returncode == 0
    hook = on_host(hostroot, BIN_DIR) / "xpu-cdi-hook"
    good = hook.read_bytes()
    (source / "xpu-cdi-hook").write_bytes(b"\x7fELF truncated")
    r = install(hostroot, source)
    assert r.returncode == 1 and r.stderr.startswith("xpu-cdi: the new xpu-cdi-hook does not run on this host: "), \
        r.stderr
    assert hook.read_bytes() == good
    assert sorted(p.name for p in hook.parent.iterdir()) == sorted(NAMES)


def test_missing_source_names_the_file(hostroot: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = install(hostroot, empty)
    assert (r.returncode, r.stderr) == (
        1, f"xpu-cdi: cannot read '{empty}/xpu-cdi-hook': No such file or directory (is this the xpu-cdi image?)\n")
