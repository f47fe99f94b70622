"""The .deb and the .rpm, built from this checkout and checked the way an
admin meets them.

Debian: build (debhelper + pybuild, lintian without errors), `apt-get
install ./xpu-cdi_*.deb` with the system Python (no venv), `xpu-cdi
--version`, `generate` against a fake host, the installed hook under runc,
the units through `systemd-analyze verify`, postinst generating into
/etc/cdi once cards are present, then purge and nothing left behind.
RPM: rpmbuild (Debian's rpm), rpmlint without errors, `rpm -qpl`, `rpm -qp
--scripts`, `rpm -qp --requires`.

The tests install system-wide and build on both cores, so each takes one
file lock: under `pytest -n 2` they never run dpkg or two builds at once.
Everything installed or created is removed again, also on failure.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Set

import pytest

from support import DEPS_CHECK, fakehost

REPO = Path(__file__).resolve().parents[2]
DEB_OUT = REPO / "packaging/deb/out"
RPM_OUT = REPO / "packaging/rpm/out"
LOCK = Path("/var/lock/xpu-cdi-packaging.lock")
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive",
             **DEPS_CHECK}
APT = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300"]
VERSION = "0.1.0"
MANIFEST = "/var/lib/xpu-cdi/generated"

# What both packages must install besides the Python package, by path
# relative to the prefix the distribution uses for it.
COMMANDS = {"xpu-cdi", "xpu-cdi-hook", "xpu-container-runtime"}
# the compiled binaries, the real executables in /usr/bin: nothing beside them, no _native/bin/ left
BINARIES = ("xpu-cdi-hook", "xpu-container-runtime")
UNITS = {"xpu-cdi-refresh.service", "xpu-cdi-refresh.path"}
MANPAGES = {"xpu-cdi.1.gz", "xpu-cdi-hook.1.gz", "xpu-container-runtime.1.gz"}
UDEV_RULE = "70-xpu-cdi.rules"
HOOKS_D = "/usr/share/containers/oci/hooks.d"
HOOK_CONFIGS = {"xpu-cdi.json"}  # oci-hooks.d, rendered at build time for the packaged hook

# Where the package (or its scripts) may leave traces; listed before and
# after, they must be the same.
WATCHED_DIRS = ["/usr/bin", "/usr/libexec", "/usr/lib/systemd/system", "/usr/lib/udev/rules.d",
                "/usr/lib/python3/dist-packages",
                "/usr/share/containers/oci/hooks.d", "/usr/share/doc", "/usr/share/man/man1", "/etc/cdi",
                "/etc/systemd/system", "/var/lib/systemd", "/var/lib/xpu-cdi", "/etc/xpu-cdi"]

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]


@pytest.fixture
def serial() -> Iterator[None]:
    """One packaging test at a time on this machine (dpkg, and two cores)."""
    LOCK.parent.resolve().mkdir(parents=True, exist_ok=True)  # /var/lock: a link to /run/lock, maybe not made yet
    with open(LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def run(cmd: List[str], timeout: float = 120, check: bool = True, **kw: object) -> subprocess.CompletedProcess:
    """Run with a clean environment (no venv on PATH: the package uses the system Python)."""
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=CLEAN_ENV, **kw)  # type: ignore
    if check and res.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def our_spec_names() -> tuple:
    """File-name prefixes of the specs the package can generate (built-in kinds)."""
    from xpu_cdi.generate import profile

    return tuple(p.kind.replace("/", "-") + "." for p in profile.select(None, ()))


def snapshot() -> Set[str]:
    """Every path under WATCHED_DIRS; in /etc/cdi only specs of our kinds, because
    other tests running in parallel put (and remove) specs of their own there."""
    ours = our_spec_names()
    out: Set[str] = set()
    for d in WATCHED_DIRS:
        for dirpath, dirnames, files in os.walk(d):
            names = dirnames + files
            if dirpath == "/etc/cdi":
                names = [n for n in names if n.lstrip(".").startswith(ours)]
            out.update(os.path.join(dirpath, n) for n in names)
        if os.path.lexists(d):
            out.add(d)
    return out


def owned_by_a_package(path: str) -> bool:
    return subprocess.run(["dpkg", "-S", path], capture_output=True).returncode == 0


def installed() -> bool:
    res = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "xpu-cdi"], capture_output=True, text=True)
    return "install ok installed" in res.stdout or "config-files" in res.stdout


def purge() -> None:
    if installed():
        run(APT + ["purge", "xpu-cdi"], timeout=300, check=False)


class FakeCards:
    """Card nodes in the real /dev (unused major 240), for postinst to find; removed afterwards."""

    NODES = {"/dev/xpu0": 0, "/dev/xpu1": 1, "/dev/xpuctrl": fakehost.CTRL_MINOR}

    def __init__(self) -> None:
        self.made: List[str] = []

    def make(self) -> None:
        for path, minor in self.NODES.items():
            if not os.path.lexists(path):
                fakehost.mknod(Path(path), fakehost.XPU_MAJOR, minor)
                self.made.append(path)

    def remove(self) -> None:
        for path in self.made:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def build_deb() -> Path:
    res = run(["sh", str(REPO / "packaging/deb/build.sh")], timeout=900)
    assert " E: " not in res.stdout + res.stderr, res.stdout
    debs = sorted(DEB_OUT.glob(f"xpu-cdi_{VERSION}_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def deb_paths(deb: Path) -> Dict[str, str]:
    """Path -> symlink target ("" for other entries)."""
    out: Dict[str, str] = {}
    for line in run(["dpkg-deb", "-c", str(deb)]).stdout.splitlines():
        if line:
            path, _, target = line.split(None, 5)[-1].partition(" -> ")
            out[path.lstrip(".")] = target
    return out


def check_binaries(paths: Dict[str, str], site: str) -> None:
    """Each binary a regular file in /usr/bin (no link, no .py, no launcher), no _native/bin/, no test binary."""
    for name in BINARIES:
        assert paths.get(f"/usr/bin/{name}") == "", name
        assert not [p for p in paths if p.endswith(f"/{name}.py")], name
    assert not [p for p in paths if "libexec" in p or f"{site}/xpu_cdi/_native/bin" in p]


def check_deb_contents(deb: Path) -> None:
    links = deb_paths(deb)
    check_binaries(links, "/usr/lib/python3/dist-packages")
    paths = set(links)
    names = {p.rsplit("/", 1)[-1] for p in paths}
    assert {f"/usr/bin/{c}" for c in COMMANDS} <= paths
    # under /usr/lib on every release: /lib is an alias of it on merged-/usr systems, and
    # Debian 13's lintian refuses files shipped in an aliased location (aliased-location)
    assert {f"/usr/lib/systemd/system/{u}" for u in UNITS} <= paths
    assert f"/usr/lib/udev/rules.d/{UDEV_RULE}" in paths
    assert not [p for p in paths if re.match(r"/(lib|lib64|bin|sbin)/", p)], "files in an aliased location"
    assert {f"/usr/share/man/man1/{m}" for m in MANPAGES} <= paths
    assert {f"{HOOKS_D}/{h}" for h in HOOK_CONFIGS} <= paths
    hookd = run(["sh", "-c", f"dpkg-deb --fsys-tarfile {deb} | tar -xO .{HOOKS_D}/xpu-cdi.json"])
    hook = json.loads(hookd.stdout)
    assert hook["hook"]["path"] == "/usr/bin/xpu-cdi-hook" and hook["hook"]["args"][:2] == ["xpu-cdi-hook", "prestart"]
    assert "_hoststat.abi3.so" in names or any(n.startswith("_hoststat.cpython") for n in names)
    depends = run(["dpkg-deb", "-f", str(deb), "Depends"]).stdout
    for dep in ("python3-click", "python3-yaml", "python3-jsonschema", "python3-pyudev", "python3-cffi-backend",
                "python3-tomlkit"):
        assert dep in depends, depends
    assert "python3-cffi," not in depends + "," and "python3-cffi " not in depends  # the backend is enough


def check_hook_under_runc(base: Path) -> None:
    """The installed hook, registered as a prestart hook, injects cards 1 and 3 of a fake host."""
    from support import runtimes

    host = fakehost.kunlunxin(base / "host", cards=8)
    try:
        cdi = base / "cdi"
        run(["/usr/bin/xpu-cdi", "generate", *host.cli_roots, "--spec-dir", str(cdi)])
        assert '"path": "/usr/bin/xpu-cdi-hook"' in (cdi / "kunlunxin.com-xpu.json").read_text()
        run(["/usr/bin/xpu-cdi", "validate", str(cdi / "kunlunxin.com-xpu.json")])
        bundle = runtimes.Bundle(base)
        bundle.set_process(["sh", "-c", "ls /dev; echo x > /dev/xpu1; grep ' /usr/local/xpu ' /proc/mounts"],
                           env=["CXPU_VISIBLE_DEVICES=1,3"])
        bundle.add_hook("prestart", "/usr/bin/xpu-cdi-hook",
                        ["xpu-cdi-hook", "prestart", "--spec-dir", str(cdi)], env=["PATH=/usr/bin:/bin"])
        out = runtimes.run_runc(bundle)
        assert "error running hook" not in out.stderr, out.stderr
        devs = out.stdout.split()
        assert {"xpu1", "xpu3", "xpuctrl"} <= set(devs) and "xpu0" not in devs, out.stdout
        assert "No such device or address" in out.stderr, out.stderr  # ENXIO: the cgroup allows it
        assert " ro," in out.stdout, out.stdout  # the driver dir is mounted read-only
    finally:
        fakehost.remove_tree(base / "host")


def test_deb_install_use_purge(serial: None, tmp_path: Path) -> None:
    """Build, lintian, apt-get install, use, reconfigure with cards, purge: nothing left behind."""
    deb = build_deb()
    check_deb_contents(deb)
    purge()  # a run killed half-way may have left it installed
    before = snapshot()
    had_etc_cdi = os.path.isdir("/etc/cdi")
    cards = FakeCards()
    try:
        start = time.monotonic()
        run(APT + ["install", f"./{deb.name}"], timeout=600, cwd=str(deb.parent))
        assert installed()
        assert run(["/usr/bin/xpu-cdi", "--version"]).stdout.strip().endswith(VERSION)
        # dh-python writes "#!/usr/bin/python3" (Debian 12) or "#! /usr/bin/python3" (13)
        assert re.fullmatch(r"#! ?/usr/bin/python3", run(["head", "-n1", "/usr/bin/xpu-cdi"]).stdout.strip())
        for name in BINARIES:  # compiled, the real executables
            assert not os.path.islink(f"/usr/bin/{name}")
            assert Path(f"/usr/bin/{name}").read_bytes()[:4] == b"\x7fELF"
        # the wrapper passes what it does not edit straight to runc
        assert "runc" in run(["/usr/bin/xpu-container-runtime", "--version"]).stdout.lower()
        # the hook binary answers --help itself, and `xpu-cdi hook` is that binary
        assert "usage: xpu-cdi-hook" in run(["/usr/bin/xpu-cdi-hook", "--help"]).stdout
        assert run(["/usr/bin/xpu-cdi", "hook", "--help"]).stdout == run(["/usr/bin/xpu-cdi-hook", "--help"]).stdout
        # no cards here: postinst generated nothing and did not fail
        assert Path(MANIFEST).read_text() == ""
        check_hook_under_runc(tmp_path)
        units = [f"/usr/lib/systemd/system/{u}" for u in sorted(UNITS)]
        verify = run(["systemd-analyze", "verify", *units])
        assert verify.stdout + verify.stderr == ""
        # cards appear: configuring again (what a reinstall or upgrade runs) writes the spec
        cards.make()
        run(["dpkg-reconfigure", "-f", "noninteractive", "xpu-cdi"])
        spec = Path("/etc/cdi/kunlunxin.com-xpu.json")
        assert spec.is_file()
        assert str(spec) in Path(MANIFEST).read_text().splitlines()
        assert run(["/usr/bin/xpu-cdi", "generate", "--check", "--profile", "kunlunxin"]).returncode == 0
        foreign = Path("/etc/cdi/huawei.com-npu.json")  # not generated by us: must survive the purge
        foreign_made = not foreign.exists()
        if foreign_made:
            foreign.write_text("{}")
        run(APT + ["purge", "xpu-cdi"], timeout=300)
        assert not installed()
        assert not spec.exists()
        if foreign_made:
            assert foreign.exists()
            foreign.unlink()
            if not had_etc_cdi:
                os.rmdir("/etc/cdi")
        print(f"deb install..purge: {time.monotonic() - start:.1f}s", file=sys.stderr)
    finally:
        cards.remove()
        purge()
    after = snapshot()
    left = {p for p in after - before if not owned_by_a_package(p)}  # e.g. a dependency apt pulled in
    assert left == set(), f"left behind: {sorted(left)}"
    assert before - after == set(), f"removed what was not ours: {sorted(before - after)}"


def rpm_query(rpm: Path, *args: str) -> str:
    return run(["rpm", "-qp", *args, str(rpm)]).stdout


def test_rpm_build_lint_contents(serial: None) -> None:
    """rpmbuild + rpmlint without errors; the file list and scriptlets match the Debian package's."""
    res = run(["sh", str(REPO / "packaging/rpm/build.sh")], timeout=900)
    assert " 0 errors" in res.stdout, res.stdout[-3000:]
    rpms = sorted(p for p in RPM_OUT.glob(f"xpu-cdi-{VERSION}-*.rpm") if not p.name.endswith(".src.rpm"))
    assert len(rpms) == 1, rpms
    rpm = rpms[0]
    files = set(rpm_query(rpm, "-l").split())
    assert {f"/usr/bin/{c}" for c in COMMANDS} <= files
    dump = {line.split()[0]: line.split()[-1] for line in rpm_query(rpm, "--dump").splitlines()}  # path .. linkto
    site = next(f.rsplit("/xpu_cdi/", 1)[0] for f in files if f.endswith("/xpu_cdi/cli.py"))
    check_binaries({f: (dump[f] if dump[f] != "X" else "") for f in files if not f.startswith("/usr/lib/.build-id/")},
                   site)
    assert {f"/usr/lib/systemd/system/{u}" for u in UNITS} <= files
    assert f"/usr/lib/udev/rules.d/{UDEV_RULE}" in files
    assert "/usr/lib/systemd/system-preset/90-xpu-cdi.preset" in files
    assert {f"/usr/share/man/man1/{m}" for m in MANPAGES} <= files
    assert {f"{HOOKS_D}/{h}" for h in HOOK_CONFIGS} <= files
    assert any(f.endswith("/xpu_cdi/cli.py") for f in files) and any("/xpu_cdi/_native/_hoststat" in f for f in files)
    scripts = rpm_query(rpm, "--scripts")
    sections = parse_scriptlets(scripts)
    assert "xpu-cdi watch --once --spec-dir /etc/cdi --manifest /var/lib/xpu-cdi/generated" in sections["postinstall"]
    assert "|| echo" in sections["postinstall"]  # never fails the install
    assert f"done < {MANIFEST}" in sections["preuninstall"] and "$1 -eq 0" in sections["preuninstall"]
    assert "rm -rf /var/lib/xpu-cdi" in sections["postuninstall"]
    for body in sections.values():
        run(["sh", "-n", "-c", body])
    requires = rpm_query(rpm, "--requires")
    for dep in ("python3-click", "python3-pyyaml", "python3-jsonschema", "python3-pyudev", "python3-cffi",
                "python3-tomlkit"):
        assert dep in requires.split(), requires
    hookd = run(["sh", "-c", f"rpm2cpio {rpm} | cpio -i --quiet --to-stdout .{HOOKS_D}/xpu-cdi.json"])
    assert json.loads(hookd.stdout)["hook"]["path"] == "/usr/bin/xpu-cdi-hook"
    for name in BINARIES:
        head = run(["sh", "-c", f"rpm2cpio {rpm} | cpio -i --quiet --to-stdout ./usr/bin/{name} | head -c 4"]).stdout
        assert head == "\x7fELF", name


def parse_scriptlets(text: str) -> Dict[str, str]:
    """`rpm -qp --scripts` output -> {"postinstall": body, ...}."""
    out: Dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.endswith("scriptlet (using /bin/sh):"):
            current = line.split()[0]
            out[current] = ""
        elif current:
            out[current] += line + "\n"
    return out
