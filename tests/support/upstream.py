"""Upstream Go modules the contract tests read (kubelet's and CRI's protos, the CDI JSON schema),
fetched with ``go mod download`` at the versions ``gomod/go.mod`` pins and checked against
``gomod/go.sum``, into the test cache's module cache (shared with the other Go users of the
suite).  Nothing of them is copied into the project.

Where they cannot be had (no Go toolchain, no proxy) the calling test skips through
:func:`unavailable`, saying why; under ``CI=true`` this module's report hook (it is one of
tests/conftest.py's plugins) turns those skips into failures.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterator, NoReturn, Optional

import pytest

from .runtimes import CACHE

GOMOD = Path(__file__).resolve().parent / "gomod"
GOMODCACHE = CACHE / "go" / "mod"
GOCACHE = CACHE / "go" / "build"
#: where Go's own tarball and Debian's golang-go put the go command when it is not on PATH
GO_PLACES = ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")
UNAVAILABLE = "upstream reference unavailable"  # the mark of these skips in a report
_DIRS: Dict[str, Path] = {}


def unavailable(why: str) -> NoReturn:
    pytest.skip(f"{UNAVAILABLE}: {why}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Under CI=true no test skips for a missing reference: CI has Go and the proxy, so
    such a skip would hide a broken fetch behind a green run."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if (os.environ.get("CI") == "true" and report.skipped and isinstance(report.longrepr, tuple)
            and UNAVAILABLE in report.longrepr[2]):
        report.outcome = "failed"
        reason = str(report.longrepr[2]).replace("Skipped: ", "", 1)
        report.longrepr = f"CI=true, so this fails instead of skipping: {reason}"


def go_binary() -> Optional[str]:
    """The go command: on PATH, else where Go's tarball or Debian installs it; None without one."""
    return shutil.which("go") or next((p for p in GO_PLACES if os.access(p, os.X_OK)), None)


def go() -> str:
    """The go command, or a skip saying what to install."""
    found = go_binary()
    if found is None:
        unavailable("no Go toolchain to fetch it with (apt install golang-go)")
    return found


def go_env() -> Dict[str, str]:
    """The environment of every go command of the suite: the test cache's module and build
    caches (-modcacherw: the module cache can be deleted like any directory), go.mod and go.sum
    never rewritten, the local toolchain only, no workspace of the user's."""
    return dict(os.environ, GOMODCACHE=str(GOMODCACHE), GOCACHE=str(GOCACHE),
                GOFLAGS="-modcacherw -mod=readonly", GOTOOLCHAIN="local", GOWORK="off")


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
    if key in _DIRS:
        return _DIRS[key]
    if version and not pinned(module, version):
        raise AssertionError(f"{key} is not pinned in {GOMOD / 'go.sum'}: add its two lines")
    cmd = [go(), "mod", "download", "-json", key]
    GOMODCACHE.mkdir(parents=True, exist_ok=True)
    with open(GOMODCACHE.parent / ".lock-mod", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run(cmd, cwd=GOMOD, env=go_env(), capture_output=True, text=True, timeout=600)
    try:
        info = json.loads(r.stdout)
    except ValueError:
        info = {"Error": r.stderr.strip() or f"exit {r.returncode}"}
    if r.returncode != 0 or info.get("Error") or not info.get("Dir"):
        error = str(info.get("Error") or r.stderr).strip().splitlines()
        if any("SECURITY ERROR" in line or "checksum mismatch" in line for line in error + r.stderr.splitlines()):
            raise AssertionError(f"go mod download {key}: the module does not match go.sum: {r.stderr.strip()}")
        unavailable(f"go mod download {key} failed: {error[0] if error else r.returncode}")
    _DIRS[key] = Path(info["Dir"])
    return _DIRS[key]
