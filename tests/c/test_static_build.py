"""The statically linked build of the two binaries (build_bin.py --static), which the
DaemonSet installs on hosts of any distribution (Kylin V10, openEuler, UOS, Ubuntu,
CentOS/RHEL 7+): no program interpreter, no shared library, no glibc symbol version
needed; it runs in a root that holds nothing but itself and, under an older
distribution's runc (Debian 11, glibc 2.31), injects cards as the host build does.
The dynamically linked build is the control: each check fails on it.  The default build
links the hook so as well (build_bin.STATIC_BY_DEFAULT), the wrapper dynamically."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Set

import pytest

from support import releasetree, runtimes
from support.hookkit import HookHost, container_output, hook_binary, node_line, probe

pytestmark = [pytest.mark.privileged]

OLD_RELEASE, OLD_GLIBC = "bullseye", (2, 31)


@pytest.fixture(scope="module")
def static(build_bin: Any, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    out = tmp_path_factory.mktemp("static")
    out.chmod(0o755)
    return {Path(p).name: Path(p) for p in build_bin.build(str(out), static=True)}


@pytest.fixture(scope="module")
def dynamic_build(build_bin: Any, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """The control: both binaries linked dynamically (the hook's default build is static where it can be)."""
    out = tmp_path_factory.mktemp("dynamic")
    out.chmod(0o755)
    return {Path(p).name: Path(p) for p in build_bin.build(str(out), static=False)}


def glibc_versions(path: Path) -> Set[str]:
    """The GLIBC_x.y versions *path* needs (its version-needs section, as the loader checks them)."""
    out = subprocess.run(["readelf", "--version-info", "--wide", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return set(re.findall(r"Name: (GLIBC_[0-9.]+)", out))


def newest(versions: Set[str]) -> tuple:
    return max(tuple(int(x) for x in v[len("GLIBC_"):].split(".")) for v in versions)


def elf_facts(path: Path) -> Dict[str, Any]:
    headers = subprocess.run(["readelf", "--program-headers", "--dynamic", "--wide", str(path)],
                             capture_output=True, text=True, check=True).stdout
    ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
    return {"interp": "INTERP" in headers, "needed": re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", headers),
            "ldd": (ldd.stdout + ldd.stderr).strip(), "glibc": glibc_versions(path)}


@pytest.mark.parametrize("name", ["xpu-cdi-hook", "xpu-container-runtime"])
def test_needs_no_library_and_no_glibc_version(static: Dict[str, Path], dynamic_build: Dict[str, Path],
                                                name: str) -> None:
    """ldd: statically linked; no PT_INTERP, no DT_NEEDED, no GLIBC_ version; the dynamic build needs
    libc, libyajl and libyaml and a GLIBC_ version (shown in the message)."""
    facts = elf_facts(static[name])
    assert facts == {"interp": False, "needed": [], "ldd": "statically linked", "glibc": set()}, facts
    dyn = elf_facts(dynamic_build[name])
    assert dyn["interp"] and {"libc.so.6", "libyajl.so.2"} <= set(dyn["needed"]), dyn
    assert newest(dyn["glibc"]) > OLD_GLIBC, (f"the dynamic {name} needs at most "
                                             f"GLIBC_{'.'.join(map(str, newest(dyn['glibc'])))}")


def test_default_build_links_the_hook_statically() -> None:
    """The build setup.py makes (the venv's, the packages'): the hook static (no loader work on each
    container start), the wrapper dynamic, as build_bin.STATIC_BY_DEFAULT says."""
    hook, wrapper = elf_facts(Path(hook_binary("xpu-cdi-hook"))), elf_facts(Path(hook_binary("xpu-container-runtime")))
    assert (hook["interp"], hook["needed"]) == (False, []), hook
    assert wrapper["interp"] and "libc.so.6" in wrapper["needed"], wrapper


def test_the_packages_build_links_the_hook_dynamically(build_bin: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """XPU_CDI_HOOK_LINK=dynamic, as debian/rules and the rpm spec set it: the hook links the
    distribution's shared yajl (its security fixes apply without a rebuild)."""
    monkeypatch.setenv(build_bin.LINK_ENV, "dynamic")
    (hook,) = build_bin.build(str(tmp_path), ["xpu-cdi-hook"])
    facts = elf_facts(Path(hook))
    assert facts["interp"] and "libyajl.so.2" in facts["needed"], facts
    for f in ("packaging/deb/debian/rules", "packaging/rpm/xpu-cdi.spec"):
        text = (Path(__file__).resolve().parents[2] / f).read_text()
        assert re.search(rf"^(export )?{build_bin.LINK_ENV} ?= ?dynamic\b", text, re.M), f


def test_runs_in_a_root_holding_only_itself(static: Dict[str, Path], dynamic_build: Dict[str, Path],
                                            tmp_path: Path) -> None:
    """In a root with no libc, no loader, nothing but the binaries and the inputs: both parsers
    (yajl for the OCI state, libyaml for the node config) answer with their exact messages; the
    dynamic build cannot even start there."""
    root = tmp_path / "root"
    root.mkdir()
    for name, path in static.items():
        shutil.copy(path, root / name)
    shutil.copy(dynamic_build["xpu-cdi-hook"], root / "dynamic-hook")
    (root / "config.yaml").write_text("accept-env-selection-when-unprivileged: maybe\n")
    assert sorted(p.name for p in root.iterdir()) == ["config.yaml", "dynamic-hook", "xpu-cdi-hook",
                                                      "xpu-container-runtime"]  # no lib, no lib64

    def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run(["chroot", str(root), *args], input=stdin, capture_output=True, timeout=30)

    r = run("/xpu-cdi-hook", "prestart", stdin=b'{"id": "c1", "pid": 0, "bund')
    assert (r.returncode, r.stderr.decode()) == (1, "xpu-cdi-hook: OCI state on stdin is not valid JSON (premature "
                                                    "EOF at line 1, column 29 (byte 28)): is the runtime OCI "
                                                    "compliant?\n")
    r = run("/xpu-cdi-hook", "--config", "/config.yaml", "prestart", stdin=b'{"id": "c1", "pid": 1, "bundle": "/b"}')
    assert (r.returncode, r.stderr.decode()) == (
        1, "xpu-cdi-hook: node config '/config.yaml': accept-env-selection-when-unprivileged must be true or false\n")
    # the wrapper finds its own file through /proc/self/exe: the kernel's /proc, and a static busybox
    # as the "runtime" it execs (its `true` applet, by the file's name)
    (root / "proc").mkdir()
    shutil.copy(runtimes.BUSYBOX, root / "true")
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        'mount -t proc proc "$1/proc" && exec chroot "$1" /xpu-container-runtime --version', "sh",
                        str(root)], capture_output=True, timeout=30, env={"XPU_CDI_RUNTIME": "/true"})
    assert (r.returncode, r.stderr) == (0, b""), r
    r = run("/dynamic-hook", "--help")
    assert r.returncode == 127 and b"No such file or directory" in r.stderr, r  # no /lib64/ld-linux-x86-64.so.2


@pytest.fixture(scope="module")
def old_tree() -> Path:
    if os.geteuid() != 0:
        pytest.skip("building and entering a release tree needs root (debootstrap, mount namespaces)")
    return releasetree.ensure_tree(OLD_RELEASE)


@pytest.mark.runtime
def test_injects_under_an_older_distributions_runc(static: Dict[str, Path], dynamic_build: Dict[str, Path],
                                                    old_tree: Path, tmp_path: Path) -> None:
    """Debian 11's runc (glibc 2.31, older than the build's) runs a container with the static hook as its
    prestart hook: cards 1 and 3 are injected and allowed, the driver is mounted read-only.  The dynamic
    hook, tried the same way, fails on the older glibc."""
    tree = releasetree.Tree(OLD_RELEASE, old_tree, binds=[tmp_path, static["xpu-cdi-hook"].parent,
                                                           dynamic_build["xpu-cdi-hook"].parent])
    r = tree.run(["sh", "-c", "ldd --version | head -n1; runc --version | head -n1"], check=True)
    glibc = tuple(int(x) for x in re.search(r"(\d+)\.(\d+)\s*$", r.stdout.splitlines()[0]).groups())  # type: ignore
    assert glibc == OLD_GLIBC and "runc version 1.0" in r.stdout, r.stdout

    r = tree.run([str(dynamic_build["xpu-cdi-hook"]), "--help"])
    assert r.returncode != 0 and "GLIBC_" in r.stderr and "not found" in r.stderr, r

    host = HookHost(tmp_path / "xpu", static["xpu-cdi-hook"], "kunlunxin", 4)
    try:
        nodes = ["/dev/xpu0", "/dev/xpu1", "/dev/xpu3", "/dev/xpuctrl"]
        b = host.bundle(probe(nodes, "/usr/local/xpu"), env=["CXPU_VISIBLE_DEVICES=1,3"])
        b.write()
        cid = runtimes.unique("old")
        r = tree.run(["sh", "-c", f'runc run --bundle {b.dir} {cid}; rc=$?; runc delete --force {cid} '
                                  '2>/dev/null; exit $rc'], timeout=120)
        out = container_output(r)
        assert r.returncode == 0, out + host.log_text()
        for n in (1, 3):
            assert node_line(f"/dev/xpu{n}", 240, n) in r.stdout, out
            assert f"W sh: can't create /dev/xpu{n}: No such device or address" in r.stdout, out
        assert "/dev/xpu0 absent" in r.stdout and node_line("/dev/xpuctrl", 240, 200) in r.stdout, out
        assert "T touch: /usr/local/xpu/probe: Read-only file system" in r.stdout, out
        assert "injected kunlunxin.com/xpu=1, kunlunxin.com/xpu=3" in host.log_text()
    finally:
        from support import fakehost

        fakehost.remove_tree(host.base)
