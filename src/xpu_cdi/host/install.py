"""Install the compiled hook and wrapper into a host directory: what the
DaemonSet's ``install-binaries`` init container does on hosts without the
package (docs/operations.md, "Kubernetes-only nodes").

The binaries run as root on every container start, so the directory they
land in, and every directory above it, must be root's and writable by no
one else (a user who can write any of them can swap the binary).  Each
binary replaces the old one atomically (temp file in the same directory,
rename): a container start already running the old binary keeps its inode,
and a start that execs the path sees the old file or the new one, never a
partial one.  The new file is run once before it replaces the old one, so
a binary that cannot run on this host never does.
"""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import time
from dataclasses import dataclass
from typing import List, Sequence

from .. import atomic
from ..errors import InstallError

NAMES = ("xpu-cdi-hook", "xpu-container-runtime")
#: where the image keeps its statically linked copies (the Containerfile puts them there)
IMAGE_DIR = "/usr/lib/xpu-cdi/host"
DEFAULT_DIR = "/usr/local/xpu-cdi/bin"
MODE = 0o755


@dataclass(frozen=True)
class Result:
    path: str
    changed: bool


def check_dir(path: str) -> None:
    """*path* and each directory above it are real directories owned by root and
    writable by no group or other user.

    Raises:
        InstallError: one of them is not, naming it and the fix.
    """
    current = os.path.abspath(path)
    while True:
        try:
            st = os.lstat(current)
        except OSError as err:
            raise InstallError(f"cannot check {current!r}: {err.strerror}") from None
        if not stat.S_ISDIR(st.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
            raise InstallError(f"{current!r} is {what}: the install directory and its parents must be real "
                               f"directories (remove it, or choose another --to)")
        if st.st_uid != 0:
            raise InstallError(f"{current!r} is owned by uid {st.st_uid}: a binary every container start runs as "
                               f"root must not sit where another user can replace it (chown root {current})")
        if st.st_mode & 0o022:
            raise InstallError(f"{current!r} is writable by its group or by everyone (mode "
                               f"{stat.S_IMODE(st.st_mode):04o}): anyone could replace the binaries in it "
                               f"(chmod go-w {current})")
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def make_dirs(path: str) -> None:
    """Create *path* and any missing parents (0755), after checking the deepest
    existing one with :func:`check_dir`; then check *path* itself.

    Raises:
        InstallError: see :func:`check_dir`, or a directory cannot be created.
    """
    missing = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        current = os.path.dirname(current)
    check_dir(current)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o755)
            os.chmod(d, 0o755)  # mkdir's mode is filtered by the umask
        except FileExistsError:
            pass
        except OSError as err:
            raise InstallError(f"cannot create {d!r}: {err.strerror}") from None
    check_dir(path)


def _smoke(path: str, name: str) -> None:
    """Run the new file once, so that a binary that cannot run here never replaces one that can."""
    args = {"xpu-cdi-hook": [path, "--help"], "xpu-container-runtime": [path, "--version"]}[name]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "XPU_CDI_RUNTIME": "/bin/true"}
    try:
        r = subprocess.run(args, capture_output=True, timeout=30, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InstallError(f"the new {name} does not run on this host: {err}") from None
    if r.returncode != 0:
        last = (r.stderr.decode(errors="replace").strip().splitlines() or [f"exit {r.returncode}"])[-1]
        raise InstallError(f"the new {name} does not run on this host ({last}): the old one, if any, is kept")


def _same(path: str, data: bytes) -> bool:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or stat.S_IMODE(st.st_mode) != MODE:
            return False
        if st.st_size != len(data):
            return False
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False


def install(source_dir: str, dest_dir: str, names: Sequence[str] = NAMES) -> List[Result]:
    """Copy *names* from *source_dir* into *dest_dir* (created 0755 with its missing parents),
    each replaced atomically and only when its bytes or mode differ.

    Raises:
        InstallError: a source is missing, the directory fails :func:`check_dir`,
            a new binary does not run, or a write fails.
    """
    dest_dir = os.path.abspath(dest_dir)
    make_dirs(dest_dir)
    results = []
    for name in names:
        src = os.path.join(source_dir, name)
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError as err:
            raise InstallError(f"cannot read {src!r}: {err.strerror} (is this the xpu-cdi image?)") from None
        dest = os.path.join(dest_dir, name)
        if _same(dest, data):
            results.append(Result(dest, False))
            continue
        results.append(Result(dest, True))
        _replace(dest, data, name)
    remove_stale_temps(dest_dir, names)
    return results


def _replace(dest: str, data: bytes, name: str) -> None:
    d = os.path.dirname(dest)
    # a name of its own (two installers may overlap during a rolling update; each is pid 1 of its container)
    tmp = os.path.join(d, f".{name}.{os.getpid()}-{secrets.token_hex(4)}{atomic.TMP_MARK}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o700)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, MODE)
            os.fsync(fd)
        finally:
            os.close(fd)
        _smoke(tmp, name)
        os.rename(tmp, dest)
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as err:
        raise InstallError(f"cannot install {dest!r}: {err.strerror or err}") from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


STALE_SECONDS = 600


def remove_stale_temps(dest_dir: str, names: Sequence[str] = NAMES) -> None:
    """Remove the temp files of installers killed mid-copy (older than :data:`STALE_SECONDS`)."""
    try:
        entries = list(os.scandir(dest_dir))
    except OSError:
        return
    now = time.time()
    for e in entries:
        if e.name.endswith(atomic.TMP_MARK) and any(e.name.startswith(f".{n}.") for n in names):
            try:
                if now - e.stat(follow_symlinks=False).st_mtime > STALE_SECONDS:
                    os.unlink(e.path)
            except OSError:
                pass
