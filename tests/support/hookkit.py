"""Helpers for the OCI hook's tests (tests/hook, tests/e2e/test_hook_*):
the compiled hook copied alone into a private dir, fake hosts with generated specs in private spec dirs,
bundles with the prestart hook registered, direct hook runs, and host-side
snapshots that prove nothing leaked out of a container's rootfs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from . import fakehost
from . import runtimes

BIN = Path(sys.executable).parent
HOOK_ENV = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]


def hook_binary(name: str) -> str:
    """The compiled binary *name* to test black-box: from $XPU_CDI_FAST_BIN
    (a build dir, for working on the C code without reinstalling), else the
    one built with this checkout (src/xpu_cdi/_native/bin)."""
    d = os.environ.get("XPU_CDI_FAST_BIN")
    if d:
        return os.path.join(d, name)
    from xpu_cdi import _native

    return os.path.join(os.path.dirname(os.path.abspath(_native.__file__)), "bin", name)


def copy_binary(name: str, dest_dir: Path) -> Path:
    """The compiled binary *name* copied alone into *dest_dir*, mode 0755: what
    an installation puts where a runtime execs it, nothing beside it."""
    path = dest_dir / name
    shutil.copy(hook_binary(name), path)
    path.chmod(0o755)
    return path


class HookHost:
    """A fake host, its generated spec in a private spec dir, and the hook."""

    def __init__(self, base: Path, hook: Path, kind: str = "kunlunxin", cards: int = 8) -> None:
        self.base = base
        self.hook = hook
        base.mkdir(parents=True, exist_ok=True)
        maker = fakehost.kunlunxin if kind == "kunlunxin" else fakehost.ascend
        self.host = maker(base / "host", cards)
        self.spec_dir = base / "cdi"
        self.spec_dir.mkdir(exist_ok=True)
        self.log = base / "hook.log"
        r = subprocess.run([str(BIN / "xpu-cdi"), "generate", *self.host.cli_roots, "--spec-dir",
                            str(self.spec_dir), "--hook-path", str(hook)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        self.spec_path = next(p for p in self.spec_dir.iterdir() if p.suffix == ".json")

    @property
    def spec(self) -> Dict[str, Any]:
        return json.loads(self.spec_path.read_text())

    def hook_entry(self, extra_args: Sequence[str] = ()) -> Dict[str, Any]:
        return {"path": str(self.hook), "args": ["xpu-cdi-hook", *extra_args, "prestart", "--log", str(self.log)],
                "env": [*HOOK_ENV, f"XPU_CDI_SPEC_DIRS={self.spec_dir}"], "timeout": 20}

    def bundle(self, args: Sequence[str], env: Sequence[str] = (), annotations: Optional[Dict[str, str]] = None,
               stage: str = "prestart") -> "runtimes.Bundle":
        """A busybox bundle running *args* with the hook registered."""
        b = runtimes.Bundle(self.base)
        b.set_process(args, env=env)
        if annotations:
            b.config["annotations"].update(annotations)
        b.config.setdefault("hooks", {}).setdefault(stage, []).append(self.hook_entry())
        return b

    def run_hook(self, state: Any, args: Sequence[str] = ("prestart",),
                 env: Optional[Dict[str, str]] = None, log: Optional[Path] = None) -> subprocess.CompletedProcess:
        """Run the hook directly with *state* (a dict, or raw bytes) on stdin."""
        data = state if isinstance(state, bytes) else json.dumps(state).encode()
        return subprocess.run([str(self.hook), *args, "--log", str(log or self.log)], input=data,
                              capture_output=True,
                              timeout=30, env=env if env is not None else
                              {"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(self.spec_dir)})

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def tree(root: Path) -> List[str]:
    """Every path under *root* with its type and device numbers (a snapshot)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out.append(f"{os.path.relpath(p, root)} {oct(st.st_mode)} {st.st_rdev}")
    return sorted(out)


def host_mounts(prefix: str = "/") -> List[str]:
    """Mount points of the test's own (host-side) mount namespace under *prefix*."""
    with open("/proc/self/mountinfo") as f:
        return sorted(line.split()[4] for line in f if line.split()[4].startswith(prefix))


def container_output(result: subprocess.CompletedProcess) -> str:
    """stdout+stderr of a runtime run, for assertions and failure messages."""
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


# What the container prints about its devices and mounts, parsed by tests.
PROBE = ("for d in {nodes}; do if [ -e $d ]; then stat -c '%n %F %t:%T %a' $d; "
         "(echo x > $d) 2>&1 | sed 's/^/W /'; else echo \"$d absent\"; fi; done; "
         "grep -F ' {mount} ' /proc/self/mountinfo | sed 's/^/M /'; "
         "touch {mount}/probe 2>&1 | sed 's/^/T /'; echo done")


def probe(nodes: Sequence[str], mount: str) -> List[str]:
    """A container command reporting each node (numbers in hex, write result)
    and whether *mount* is a read-only mount."""
    return ["sh", "-c", PROBE.format(nodes=" ".join(nodes), mount=mount)]


def node_line(path: str, major: int, minor: int) -> str:
    """The line `stat` prints for a character device with these numbers."""
    return f"{path} character special file {major:x}:{minor:x} 666"


# ---------------------------------------------------------------- fixtures (import them into a test module)
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def installed_hook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled hook of this checkout, copied alone into a private temp dir."""
    d = tmp_path_factory.mktemp("installed-hook")
    d.chmod(0o755)
    return copy_binary("xpu-cdi-hook", d)


@pytest.fixture
def xpu(tmp_path: Path, installed_hook: Path) -> "HookHost":
    """A fake 8-card Kunlunxin host with its spec; removed (nodes too) afterwards."""
    h = HookHost(tmp_path / "xpu", installed_hook, "kunlunxin", 8)
    yield h
    fakehost.remove_tree(h.base)


@pytest.fixture(scope="module")
def xpu_shared(tmp_path_factory: pytest.TempPathFactory, installed_hook: Path) -> "HookHost":
    """One fake 8-card host per test module, for tests that only read its spec dir."""
    base = tmp_path_factory.mktemp("xpu-shared")
    h = HookHost(base / "xpu", installed_hook, "kunlunxin", 8)
    yield h
    fakehost.remove_tree(h.base)


@pytest.fixture
def npu(tmp_path: Path, installed_hook: Path) -> "HookHost":
    """A fake 4-NPU Ascend host with its spec; removed afterwards."""
    h = HookHost(tmp_path / "npu", installed_hook, "ascend", 4)
    yield h
    fakehost.remove_tree(h.base)


@pytest.fixture
def ctrd(tmp_path: Path) -> "Iterator[runtimes.Containerd]":
    """A private containerd 1.6 (own root, state, socket); always stopped."""
    c = runtimes.Containerd(tmp_path / "ctrd")
    try:
        yield c
    finally:
        c.stop()
