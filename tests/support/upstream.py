"""Upstream Go modules the contract tests read (kubelet's and CRI's protos, the CDI JSON schema),
fetched with ``go mod download`` at the versions ``gomod/go.mod`` pins and checked against
``gomod/go.sum``, into the test cache's module cache (shared with the other Go users of the
suite).  Nothing of them is copied into the project.

Which ``go`` runs is decided here, for every Go user of the suite (:func:`go_for`): the
machine's when it is new enough for the work, else the Go toolchain ``gotoolchain/go.sum``
pins, fetched from the module proxy as the module ``golang.org/toolchain`` with the
machine's Go (docs/testing-go.md).

Where they cannot be had (no Go toolchain, no proxy) the calling test skips through
:func:`unavailable`, saying why; under ``CI=true`` this module's report hook (it is one of
tests/conftest.py's plugins) turns those skips into failures.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, NoReturn, Optional, Tuple

import pytest

from .runtimes import CACHE

GOMOD = Path(__file__).resolve().parent / "gomod"
#: the module whose go.sum pins golang.org/toolchain, one version per architecture
TOOLCHAIN_MOD = Path(__file__).resolve().parent / "gotoolchain"
TOOLCHAIN = "golang.org/toolchain"
GOMODCACHE = CACHE / "go" / "mod"
GOCACHE = CACHE / "go" / "build"
#: where Go's own tarball and Debian's golang-go put the go command when it is not on PATH
GO_PLACES = ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")
UNAVAILABLE = "upstream reference unavailable"  # the mark of these skips in a report
_DIRS: Dict[str, Path] = {}
_VERSIONS: Dict[str, Tuple[int, ...]] = {}


class GoUnavailable(Exception):
    """No Go to run, or the proxy cannot give what was asked: the message says why and what to do."""


def unavailable(why: str) -> NoReturn:
    pytest.skip(f"{UNAVAILABLE}: {why}")


def go_binary() -> Optional[str]:
    """The machine's go command: on PATH, else where Go's tarball or Debian installs it; None without one."""
    return shutil.which("go") or next((p for p in GO_PLACES if os.access(p, os.X_OK)), None)


def parse_go(text: str) -> Tuple[int, ...]:
    """``go1.26.8`` or ``1.26.0`` -> (1, 26, 8)."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(x or 0) for x in m.groups()) if m else (0,)


def dotted(version: Tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def go_line(gomod: Path) -> Tuple[int, ...]:
    """The Go release a go.mod asks for (its ``go`` line; (1, 0) without one)."""
    m = re.search(r"^go\s+(\S+)", gomod.read_text(), re.M)
    return parse_go(m.group(1)) if m else (1, 0)


def go_version(go_cmd: str) -> Tuple[int, ...]:
    """The release of the go command *go_cmd*, (0,) when it does not run."""
    if go_cmd not in _VERSIONS:
        # from /: a go.mod asking for a newer Go than go_cmd would make it refuse to say
        r = subprocess.run([go_cmd, "env", "GOVERSION"], capture_output=True, text=True, env=go_env(), cwd="/")
        _VERSIONS[go_cmd] = parse_go(r.stdout) if r.returncode == 0 else (0,)
    return _VERSIONS[go_cmd]


def go_for(need: Tuple[int, ...]) -> str:
    """The go command for work that needs Go >= *need*: the machine's when it is that new, else the
    pinned toolchain (:func:`toolchain`).  Every go command the suite runs comes from here."""
    machine = go_binary()
    if machine is not None and go_version(machine) >= need:
        return machine
    fetched = toolchain()
    if go_version(fetched) < need:
        raise GoUnavailable(f"Go >= {dotted(need)} is needed, newer than the {TOOLCHAIN} "
                            f"{TOOLCHAIN_MOD / 'go.sum'} pins ({toolchain_version()}): move that pin")
    return fetched


def go() -> str:
    """The go command for the references of ``gomod/``, or a skip saying what to install."""
    try:
        return go_for(go_line(GOMOD / "go.mod"))
    except GoUnavailable as err:
        unavailable(str(err))


def goarch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def toolchain_version() -> str:
    """The golang.org/toolchain version gotoolchain/go.sum pins for this machine's architecture."""
    suffix = f".linux-{goarch()}"
    found = sorted({line.split()[1] for line in (TOOLCHAIN_MOD / "go.sum").read_text().splitlines()
                    if line.startswith(TOOLCHAIN + " ") and line.split()[1].endswith(suffix)})
    if not found:
        raise GoUnavailable(f"{TOOLCHAIN_MOD / 'go.sum'} pins no {TOOLCHAIN} for linux-{goarch()}: "
                            "add its lines (see the go.mod there)")
    return found[-1]


def toolchain() -> str:
    """The go command of the pinned golang.org/toolchain, unpacked in the test cache's module cache.

    Fetched with the machine's Go (any with modules: Debian 12's 1.19 does) under the module
    cache's lock, checked against gotoolchain/go.sum, then made runnable (:func:`make_runnable`).
    """
    version = toolchain_version()
    machine = go_binary()
    key = f"{TOOLCHAIN}@{version}"
    if machine is None:
        raise GoUnavailable(f"no Go toolchain to fetch {key} with (apt install golang-go)")
    fresh = key not in _DIRS and not (GOMODCACHE / key / "src" / "go.mod").is_file()
    t0 = time.monotonic()
    root = download(machine, TOOLCHAIN_MOD, key, setup=make_runnable)
    if fresh:
        print(f"upstream: fetched {key} with {machine} in {time.monotonic() - t0:.0f} s into {root}",
              file=sys.stderr, flush=True)
    return str(root / "bin" / "go")


def make_runnable(root: Path) -> None:
    """What the go command does to a toolchain it unpacked into the module cache (cmd/go's
    toolchain switch): module zips keep no file modes, so the commands get their exec bits
    (the tools before bin/go); a module zip holds no nested go.mod, so the toolchain carries
    them as ``_go.mod``, copied back (src/go.mod last: the sign that it is done)."""
    done = root / "src" / "go.mod"
    if done.is_file():
        return
    tools = [p for p in sorted((root / "pkg" / "tool").rglob("*")) if p.is_file()]
    tools += sorted((root / "lib").rglob("go_?*_?*_exec"))
    tools += sorted(p for p in (root / "bin").iterdir() if p.name != "go") + [root / "bin" / "go"]
    for path in tools:
        path.chmod(path.stat().st_mode & 0o777 | 0o111)
    last = root / "src" / "_go.mod"
    for src in [*(p for p in root.rglob("_go.mod") if p != last), last]:
        tmp = src.with_name(f".go.mod.tmp-{os.getpid()}")
        shutil.copyfile(src, tmp)
        tmp.chmod(0o444)
        os.replace(tmp, src.with_name("go.mod"))


def go_env() -> Dict[str, str]:
    """The environment of every go command of the suite: the test cache's module and build
    caches (-modcacherw: the module cache can be deleted like any directory), go.mod and go.sum
    never rewritten, the local toolchain only (nothing fetched behind the suite's back: the
    toolchain is :func:`go_for`'s choice), no workspace of the user's."""
    env = dict(os.environ, GOMODCACHE=str(GOMODCACHE), GOCACHE=str(GOCACHE),
               GOFLAGS="-modcacherw -mod=readonly", GOTOOLCHAIN="local", GOWORK="off")
    env.pop("GOROOT", None)  # each go finds its own (a caller's may be another release's)
    return env


def pinned(module: str, version: str) -> bool:
    """True when go.sum holds *module* at *version* (its zip and its go.mod)."""
    lines = set((GOMOD / "go.sum").read_text().splitlines())
    return {line.rsplit(" ", 1)[0] for line in lines} >= {f"{module} {version}", f"{module} {version}/go.mod"}


def module_dir(module: str, version: Optional[str] = None) -> Path:
    """The unpacked source of *module* at *version* (default: the one go.mod requires).

    Downloaded once per machine under a file lock (xdist workers, other checkouts), checked
    against go.sum; an explicit *version* must be pinned there too.
    """
    key = f"{module}@{version}" if version else module
    if version and not pinned(module, version):
        raise AssertionError(f"{key} is not pinned in {GOMOD / 'go.sum'}: add its two lines")
    if key in _DIRS:
        return _DIRS[key]
    try:
        return download(go(), GOMOD, key)
    except GoUnavailable as err:
        unavailable(str(err))


def download(go_cmd: str, cwd: Path, key: str, setup: Optional[Callable[[Path], None]] = None,
             goflags: Optional[str] = None) -> Path:
    """The unpacked directory of *key* (module@version, or a module *cwd*'s go.mod requires): ``go mod
    download -json`` in *cwd* (once per process), checked against *cwd*'s go.sum, under the module
    cache's lock, as *setup* (of the directory) is run.  A checksum that differs from go.sum
    fails (AssertionError); anything else the proxy refuses is GoUnavailable with its reason."""
    if key not in _DIRS:
        _DIRS[key] = Path(download_info(go_cmd, cwd, key, setup, goflags)["Dir"])
    return _DIRS[key]


def download_info(go_cmd: str, cwd: Path, key: str, setup: Optional[Callable[[Path], None]] = None,
                  goflags: Optional[str] = None) -> Dict[str, str]:
    """:func:`download`'s JSON (Dir, GoMod, Zip, Sum...).  The reason of a failure is in its
    ``Error`` field (``-json`` puts it there, not on stderr), else on stderr."""
    GOMODCACHE.mkdir(parents=True, exist_ok=True)
    env = go_env() if goflags is None else dict(go_env(), GOFLAGS=goflags)
    with open(GOMODCACHE.parent / ".lock-mod", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run([go_cmd, "mod", "download", "-json", key], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=900)
        try:
            info = json.loads(r.stdout)
        except ValueError:
            info = {}
        ok = r.returncode == 0 and not info.get("Error") and bool(info.get("Dir"))
        if ok and setup is not None:
            setup(Path(info["Dir"]))
    if ok:
        return info
    error = [x.strip() for x in f"{info.get('Error') or ''}\n{r.stderr}".splitlines() if x.strip()]
    if any("SECURITY ERROR" in x or "checksum mismatch" in x for x in error):
        raise AssertionError(f"go mod download {key}: the module does not match {cwd / 'go.sum'} "
                             f"({next(x for x in error if 'mismatch' in x or 'SECURITY' in x)})")
    reason = [x.strip() for x in str(info.get("Error") or r.stderr).splitlines() if x.strip()]
    raise GoUnavailable(f"go mod download {key} failed: {'; '.join(reason) or f'exit {r.returncode}'}")
