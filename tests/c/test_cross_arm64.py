"""The arm64 build of the two binaries (build_bin.py --static --cross aarch64-linux-gnu, `make
cross`), for Ascend's Kunpeng servers: Debian's aarch64 cross compiler against the arm64 -dev
packages (multiarch).  The binaries are aarch64 ELF (the header's machine field), static (no
interpreter, no shared library), and under qemu-user the hook injects the cards of a fake host
into a real `runc run` container, as the amd64 build does (tests/hook/test_prestart_binary.py),
and the wrapper applies them as the runtime in front of runc."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from support import elf, fakehost, runtimes
from support.hookkit import HookHost, container_output

pytestmark = [pytest.mark.privileged]

REPO = Path(__file__).resolve().parents[2]
TRIPLET = "aarch64-linux-gnu"
QEMU = "/usr/bin/qemu-aarch64-static"
CROSS_DEPS = ["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross", "libyajl-dev:arm64", "libyaml-dev:arm64",
              "qemu-user-static"]


@pytest.fixture(scope="module")
def arm64(build_bin: Any, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """Both binaries cross-built into a dir of their own (the deps installed as `make deps` does)."""
    if os.geteuid() != 0 and not shutil.which(f"{TRIPLET}-gcc"):
        pytest.fail(f"no {TRIPLET}-gcc: run `make deps` as root (scripts/install-deps.sh {' '.join(CROSS_DEPS)})")
    r = subprocess.run(["sh", str(REPO / "scripts" / "install-deps.sh"), *CROSS_DEPS], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = tmp_path_factory.mktemp("arm64")
    out.chmod(0o755)
    made = build_bin.build(str(out), static=True, cross=TRIPLET)
    return {Path(p).name: Path(p) for p in made}


def test_aarch64_static_elf(arm64: Dict[str, Path], build_bin: Any) -> None:
    """Both are aarch64 position-independent executables with no interpreter: the host's own
    build of the same sources is x86-64 (the control)."""
    assert sorted(arm64) == sorted(build_bin.TARGETS)
    for path in arm64.values():
        h = elf.header(path)
        assert (h["machine"], h["type"], h["interp"]) == (elf.EM_AARCH64, elf.ET_DYN, False), (path, h)
    host = elf.header(Path(shutil.which("sh") or "/bin/sh"))
    assert host["machine"] == elf.EM_X86_64


def test_runs_under_qemu(arm64: Dict[str, Path]) -> None:
    r = subprocess.run([QEMU, str(arm64["xpu-cdi-hook"]), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: xpu-cdi-hook"), r
    # it really is not an x86 program: the host runs it only where the system registered qemu for
    # aarch64 (binfmt-support, systemd-binfmt: docs/operations.md), and then through qemu
    handler = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    if handler.is_file() and handler.read_text().startswith("enabled"):
        r = subprocess.run([str(arm64["xpu-cdi-hook"]), "--help"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("usage: xpu-cdi-hook"), r
    else:
        with pytest.raises(OSError):
            subprocess.run([str(arm64["xpu-cdi-hook"]), "--help"], capture_output=True, timeout=60)


# The hook through qemu-user where runc execs it.  Two things this machine lacks are done by the
# shims, nothing of the hook's own work: the binfmt registration a real arm64 host does not need
# (the spec's createContainer hook, update-ldcache, runs as "qemu <hook>"), and the join of the
# container's mount namespace, which the kernel refuses to qemu-user (a threaded process may not
# setns to a mount namespace): nsenter joins it, and the hook finds itself in the container's
# namespace (its "same mount namespace" path) and injects from there.
LDCACHE_SHIM = '#!/bin/sh\nexec {qemu} {hook} "$@"\n'
PRESTART_SHIM = """#!/bin/sh
state=$(/bin/cat)
pid=$(printf '%s' "$state" | /bin/sed -n 's/.*"pid": *\\([0-9]*\\).*/\\1/p')
printf '%s' "$state" | exec /usr/bin/nsenter -t "$pid" -m -- {qemu} {hook} "$@"
"""


def shim(path: Path, text: str, hook: Path) -> Path:
    path.write_text(text.format(qemu=QEMU, hook=hook))
    path.chmod(0o755)
    return path


@pytest.fixture
def host(arm64: Dict[str, Path], tmp_path: Path) -> Iterator[HookHost]:
    base = tmp_path / "xpu"
    base.mkdir()
    h = HookHost(base, shim(tmp_path / "xpu-cdi-hook", LDCACHE_SHIM, arm64["xpu-cdi-hook"]), "kunlunxin", 8)
    yield h
    fakehost.remove_tree(h.base)


PROBE = ["sh", "-c", "stat -c '%n %t:%T' /dev/xpu1 /dev/xpu3; ls /dev | grep -c '^xpu[0-9]'"]


def test_hook_injects_into_a_container_under_qemu(host: HookHost, arm64: Dict[str, Path], tmp_path: Path) -> None:
    """The arm64 hook as runc's prestart hook (through qemu-user and the shim above) gives the
    container exactly the two cards it asks for, as device nodes with the host's numbers, and says
    so in its log."""
    runtimes.require("runc")
    b = runtimes.Bundle(tmp_path)
    b.set_process(PROBE, env=["CXPU_VISIBLE_DEVICES=1,3"])
    prestart = shim(tmp_path / "prestart", PRESTART_SHIM, arm64["xpu-cdi-hook"])
    b.add_hook("prestart", str(prestart), ["prestart", "prestart", "--log", str(host.log)],
               env=["PATH=", f"XPU_CDI_SPEC_DIRS={host.spec_dir}"], timeout=60)
    b.write()
    r = runtimes.run_runc(b)
    assert r.returncode == 0, container_output(r) + host.log_text()
    assert "/dev/xpu1 f0:1\n/dev/xpu3 f0:3\n2\n" in r.stdout, container_output(r)
    assert "injected kunlunxin.com/xpu=1, kunlunxin.com/xpu=3" in host.log_text(), host.log_text()


def test_wrapper_applies_the_spec_under_qemu(host: HookHost, arm64: Dict[str, Path], tmp_path: Path) -> None:
    """The arm64 wrapper as the runtime (through qemu-user), runc behind it: the same two cards."""
    runtimes.require("runc")
    runc = shutil.which("runc")
    b = runtimes.Bundle(tmp_path)
    b.set_process(PROBE, env=["CXPU_VISIBLE_DEVICES=3,1"])
    b.write()
    cid = runtimes.unique("arm")
    try:
        r = subprocess.run([QEMU, str(arm64["xpu-container-runtime"]), "run", "--bundle", str(b.dir), cid],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                           env={"PATH": "", "XPU_CDI_RUNTIME": str(runc), "XPU_CDI_SPEC_DIRS": str(host.spec_dir)})
    finally:
        subprocess.run([str(runc), "delete", "--force", cid], capture_output=True)
    assert r.returncode == 0, container_output(r)
    assert "/dev/xpu1 f0:1\n/dev/xpu3 f0:3\n2\n" in r.stdout, container_output(r)
