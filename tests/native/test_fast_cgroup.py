"""fast/cgroup.c, the C twin of xpu_cdi.hook.cgroup: `locate` compared with
the Python on fixture and generated texts (the C must give the same answer
or decline), and `allow` on real cgroups: v1 (a devices cgroup that denies
everything, a process in it) and v2 (runc's own device program, cgroup2
mounted on /sys/fs/cgroup in a private mount namespace, as in tests/e2e)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Sequence, Tuple, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtimes
from xpu_cdi.errors import HookError
from xpu_cdi.hook import cgroup

Result = Union[Tuple[int, str], str]  # (version, dir) or "DEFER <reason>"

# this machine's layout: v1 controllers plus cgroup2 on /sys/fs/cgroup/unified
HYBRID = """\
23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
PROC_HYBRID = ("9:name=systemd:/\n5:devices:/kubepods/pod1/c1\n4:memory:/process_api/566a\n"
               "1:cpu:/\n0::/kubepods/pod1/c1\n")
UNIFIED = ("24 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
           "27 24 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n")
PROC_V2 = "0::/system.slice/containerd.service/c1\n"
ELSEWHERE_V2 = "27 24 0:24 / /run/cg2 rw shared:4 - cgroup2 cgroup2 rw\n" \
               "28 24 0:25 / /sys/fs/cgroup/unified rw - cgroup2 none rw\n"
# inside a container with its own cgroup namespace: the mount shows the hierarchy from a sub-tree
NESTED_V1 = "30 26 0:27 /kubepods/pod1 /sys/fs/cgroup/devices ro,nosuid - cgroup cgroup rw,devices\n"
NESTED_V2 = "30 26 0:27 /kubepods/pod1/ /sys/fs/cgroup ro master:9 - cgroup2 cgroup2 rw\n"
ESCAPED = ("30 26 0:27 / /mnt/cg\\040devices\\011x rw - cgroup cgroup rw,devices\n"
           "31 26 0:28 /a\\134b /mnt/cg\\0402 rw - cgroup2 cgroup2 rw\n")

FIXTURES = {
    "hybrid": (HYBRID, PROC_HYBRID),
    "hybrid-root-cgroup": (HYBRID, "5:devices:/\n0::/\n"),
    "hybrid-no-devices-member": (HYBRID, "0::/x\n4:memory:/y\n"),
    "hybrid-devices-comma": (HYBRID, "5:devices,:/a\n0::/b\n"),
    "hybrid-later-line-wins": (HYBRID, "5:devices:/a\n6:devices:/b\n"),
    "unified": (UNIFIED, PROC_V2),
    "unified-root": (UNIFIED, "0::/\n"),
    "unified-not-member": (UNIFIED, "5:devices:/x\n"),
    "unified-plus-v1-devices": (UNIFIED + HYBRID.splitlines(True)[5], PROC_HYBRID),
    "v2-elsewhere": (ELSEWHERE_V2, PROC_V2),
    "v2-elsewhere-with-v1": (ELSEWHERE_V2 + HYBRID, PROC_HYBRID),
    "nested-v1": (NESTED_V1, "5:devices:/kubepods/pod1/c1\n"),
    "nested-v1-at-root": (NESTED_V1, "5:devices:/kubepods/pod1\n"),
    "nested-v1-outside": (NESTED_V1, "5:devices:/kubepods/pod10/c1\n"),
    "nested-v1-ns-relative": (NESTED_V1, "5:devices:/../pod2/c1\n"),
    "nested-v2": (NESTED_V2, "0::/kubepods/pod1/c1\n"),
    "nested-v2-slash-root": (NESTED_V2, "0::/kubepods/pod1/\n"),
    "escaped": (ESCAPED, "5:devices:/a b\n0::/a\\b/c\n"),
    "escaped-v2": (ESCAPED.splitlines(True)[1], "0::/a\\b/c\n"),
    "no-devices-controller": (HYBRID.replace(",devices", ",blkio").replace("cgroup2", "tmpfs"), PROC_HYBRID),
    "nothing-mounted": ("", PROC_HYBRID),
    "only-cgroupfoo": ("1 2 0:1 / /sys/fs/cgroup rw - cgroupfoo x rw,devices\n", PROC_HYBRID),
    "devices-not-exact-option": ("1 2 0:1 / /c rw - cgroup x rw,devicesx,xdevices\n", PROC_HYBRID),
    "short-lines": ("1 2 0:1 / - cgroup x rw,devices\n1 2 0:1 / /c rw - cgroup x\n", PROC_HYBRID),
    "empty-cgroup-file": (HYBRID, ""),
}


def run_batch(fast_bin: Path, cases: Sequence[Tuple[str, str]]) -> List[Result]:
    """The C locate of every (mountinfo, cgroup) case, in one process."""
    frames = b""
    for mi, cg in cases:
        for text in (mi.encode("utf-8", "surrogateescape"), cg.encode("utf-8", "surrogateescape")):
            frames += b"%d\n" % len(text) + text
    r = subprocess.run([str(fast_bin / "xpu-cdi-fast-test"), "cgroup", "locate-batch"], input=frames,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out: List[Result] = []
    for line in r.stdout.decode().splitlines():
        if line.startswith("DEFER "):
            out.append(line)
        else:
            version, hexpath = line.split(" ", 1)
            out.append((int(version), bytes.fromhex(hexpath).decode()))
    assert len(out) == len(cases), r.stdout
    return out


def python(mi: str, cg: str) -> Union[Tuple[int, str], Exception]:
    try:
        return cgroup.locate(mi, cg)
    except (HookError, ValueError) as err:  # ValueError: a bad octal escape (\8)
        return err


def declined_by_design(mi: str, cg: str, path: str) -> bool:
    """Texts the C does not parse (module comment of cgroup.c) and results it will not open."""
    text = mi + cg
    return ("\0" in path or any(ord(c) >= 0x80 for c in path + text)
            or any(ord(c) < 0x20 and c not in "\t\n" for c in text))


def check_same(cases: Sequence[Tuple[str, str]], results: Sequence[Result]) -> None:
    for (mi, cg), c in zip(cases, results):
        want = python(mi, cg)
        if isinstance(want, Exception):
            assert isinstance(c, str) and c.startswith("DEFER"), (mi, cg, want, c)
        elif isinstance(c, str):
            assert declined_by_design(mi, cg, want[1]), (mi, cg, want, c)
        else:
            assert c == want, (mi, cg)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_locate_fixture(fast_bin: Path, tmp_path: Path, name: str) -> None:
    """Each fixture through the file interface: the same (version, dir) as the Python, or both refuse."""
    mi, cg = FIXTURES[name]
    (tmp_path / "mountinfo").write_text(mi)
    (tmp_path / "cgroup").write_text(cg)
    r = subprocess.run([str(fast_bin / "xpu-cdi-fast-test"), "cgroup", "locate", str(tmp_path / "mountinfo"),
                        str(tmp_path / "cgroup")], capture_output=True, text=True, timeout=10)
    want = python(mi, cg)
    if isinstance(want, Exception):
        assert r.returncode == 1 and r.stdout.startswith("DEFER "), (r.stdout, want)
    else:
        assert r.returncode == 0, r.stdout
        assert r.stdout == f"{want[0]} {want[1]}\n"


def test_locate_fixture_values(fast_bin: Path) -> None:
    """The decisions themselves (not only agreement): runc's version choice and the path arithmetic."""
    names = sorted(FIXTURES)
    got = dict(zip(names, run_batch(fast_bin, [FIXTURES[n] for n in names])))
    assert got["hybrid"] == (1, "/sys/fs/cgroup/devices/kubepods/pod1/c1")
    assert got["hybrid-root-cgroup"] == (1, "/sys/fs/cgroup/devices/")
    assert got["hybrid-devices-comma"] == (1, "/sys/fs/cgroup/devices/a")
    assert got["hybrid-later-line-wins"] == (1, "/sys/fs/cgroup/devices/b")
    assert got["unified"] == (2, "/sys/fs/cgroup/system.slice/containerd.service/c1")
    assert got["unified-plus-v1-devices"] == (2, "/sys/fs/cgroup/kubepods/pod1/c1")
    assert got["v2-elsewhere"] == (2, "/run/cg2/system.slice/containerd.service/c1")
    assert got["v2-elsewhere-with-v1"] == (1, "/sys/fs/cgroup/devices/kubepods/pod1/c1")
    assert got["nested-v1"] == (1, "/sys/fs/cgroup/devices/c1")
    assert got["nested-v1-at-root"] == (1, "/sys/fs/cgroup/devices/")
    assert got["nested-v1-outside"] == (1, "/sys/fs/cgroup/devices/kubepods/pod10/c1")
    assert got["nested-v2"] == (2, "/sys/fs/cgroup/c1")
    assert got["escaped"] == (1, "/mnt/cg devices\tx/a b")
    assert got["escaped-v2"] == (2, "/mnt/cg 2/c")
    for refused in ("hybrid-no-devices-member", "unified-not-member", "no-devices-controller", "nothing-mounted",
                    "only-cgroupfoo", "devices-not-exact-option", "short-lines", "empty-cgroup-file"):
        assert isinstance(got[refused], str) and got[refused].startswith("DEFER"), refused
    check_same([FIXTURES[n] for n in names], [got[n] for n in names])


def test_locate_this_machine(fast_bin: Path) -> None:
    """This process's real cgroups and mount table: the same answer as the Python."""
    mi = Path("/proc/self/mountinfo").read_text()
    cg = Path("/proc/self/cgroup").read_text()
    [got] = run_batch(fast_bin, [(mi, cg)])
    assert got == cgroup.locate(mi, cg)


@pytest.mark.parametrize("mi, cg", [
    (HYBRID.replace("/sys/fs/cgroup/devices", "/sys/fs/cgroup/d\u00e9vices"), PROC_HYBRID),
    (HYBRID.replace("\n", "\r\n"), PROC_HYBRID),
    (HYBRID, PROC_HYBRID.replace("c1", "c\u20281")),
    (HYBRID, PROC_HYBRID.replace("\n", "\x1c")),
    (ESCAPED.replace("\\011", "\\000"), PROC_HYBRID),
    (ESCAPED.replace("\\011", "\\200"), PROC_HYBRID),
    (ESCAPED.replace("\\011", "\\019"), PROC_HYBRID),
    (HYBRID + "1 2 0:1 /\\8 /x rw - cgroup2 c rw\n", PROC_HYBRID),
], ids=["non-ascii", "crlf", "unicode-line-separator", "file-separator", "escaped-nul", "escaped-non-ascii",
        "escape-9", "escape-8-elsewhere"])
def test_declines_what_it_does_not_parse_like_python(fast_bin: Path, mi: str, cg: str) -> None:
    """Text Python would split or decode differently (Unicode line breaks, \\r, non-ASCII) or fail on (\\8):
    the C declines rather than guess."""
    [got] = run_batch(fast_bin, [(mi, cg)])
    assert isinstance(got, str) and got.startswith("DEFER"), got


# -- generated texts -------------------------------------------------------

PATH_PARTS = ["", "/", "a", "b", "kubepods", "pod1", "..", "c\\040d", "x\\134y", "t\\011", "n\\012", "e\\1",
              "q\\", "w\\x", "\\04", "/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/devices"]
path_st = st.lists(st.sampled_from(PATH_PARTS), max_size=4).map(lambda p: "/".join(p) or "/")
opts_st = st.lists(st.sampled_from(["rw", "devices", "devices", "memory", "", "name=systemd", "devicesx"]),
                   min_size=1, max_size=3).map(",".join)
mountpoint_st = st.one_of(st.sampled_from(["/sys/fs/cgroup", "/sys/fs/cgroup/devices", "/sys/fs/cgroup/unified"]),
                          path_st)
mount_line = st.builds(
    lambda mid, root, mp, optional, fstype, opts, sp: (
        f"{mid} 1 0:{mid}{sp}{root} {mp} rw{optional} - {fstype} src {opts}"),
    st.integers(1, 99), path_st, mountpoint_st, st.sampled_from(["", " shared:4", " master:1 shared:2", " -x"]),
    st.sampled_from(["cgroup", "cgroup", "cgroup2", "cgroup2", "cgroupx", "tmpfs", "cgroup2 "]), opts_st,
    st.sampled_from([" ", "  ", "\t"]))
junk_line = st.text(alphabet=" -:\\/,0123456789abcdegrouptv\t", max_size=40)
mountinfo_st = st.lists(st.one_of(mount_line, mount_line, mount_line, junk_line), min_size=1, max_size=6).map(
    lambda ls: "".join(line + "\n" for line in ls))
cg_line = st.builds(lambda n, ctrls, p: f"{n}:{ctrls}:{p}", st.integers(0, 9),
                    st.sampled_from(["", "", "devices", "devices", "devices,", "memory,devices", "name=systemd", ",", "cpu"]),
                    st.one_of(path_st, st.just("/a:b")))
cgroups_st = st.tuples(st.lists(st.one_of(cg_line, cg_line, junk_line), max_size=5), st.booleans()).map(
    lambda t: "\n".join(t[0]) + ("\n" if t[1] else ""))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases=st.lists(st.tuples(mountinfo_st, cgroups_st), min_size=1, max_size=40))
def test_locate_agrees_with_python(fast_bin: Path, cases: List[Tuple[str, str]]) -> None:
    """Generated mount tables and cgroup files (escapes, nested roots, odd options, junk lines), a batch per
    example: the C gives the Python's (version, dir), or declines when the Python refuses."""
    check_same(cases, run_batch(fast_bin, cases))


# -- real cgroups ----------------------------------------------------------

V1_DEVICES = Path("/sys/fs/cgroup/devices")
UNIFIED_DIR = Path("/sys/fs/cgroup/unified")
MAJOR = 240  # unused on this kind of machine (local/experimental range); the tests check


def fast_test(fast_bin: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(fast_bin / "xpu-cdi-fast-test"), "cgroup", *args], capture_output=True, text=True,
                          timeout=30)


def unused_major() -> int:
    used = {int(line.split()[0]) for line in Path("/proc/devices").read_text().splitlines()
            if line[:1] == " " or line[:1].isdigit()}
    assert MAJOR not in used, f"major {MAJOR} is in use here: pick another"
    return MAJOR


def start_in(cgroup_dir: Path, argv: Sequence[str]) -> subprocess.Popen:
    """A process that moves itself into cgroup_dir, then execs argv."""
    return subprocess.Popen(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup_dir), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_member(cgroup_dir: Path, pid: int) -> None:
    for _ in range(200):
        if str(pid) in (cgroup_dir / "cgroup.procs").read_text().split():
            return
        time.sleep(0.01)
    pytest.fail(f"process {pid} did not join {cgroup_dir}")


def open_errno(cgroup_dir: Path, node: Path) -> str:
    """The errno name of opening node for writing from a process inside cgroup_dir ("OK" if it opens)."""
    code = ("import errno, os, sys\n"
            "try:\n os.close(os.open(sys.argv[1], os.O_WRONLY)); print('OK')\n"
            "except OSError as e:\n print(errno.errorcode[e.errno])\n")
    p = start_in(cgroup_dir, [sys.executable, "-S", "-c", code, str(node)])
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, out
    return out.strip()


def remove_cgroup(d: Path) -> None:
    """Kill what is left in d (only processes this test put there), then remove it, children first."""
    if not d.exists():
        return
    for child in [c for c in d.iterdir() if c.is_dir()]:
        remove_cgroup(child)
    for _ in range(100):
        pids = (d / "cgroup.procs").read_text().split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            d.rmdir()
            return
        except OSError:
            time.sleep(0.02)
    d.rmdir()


@pytest.fixture
def v1_cgroup() -> Iterator[Path]:
    """A fresh v1 devices cgroup that denies everything; emptied and removed afterwards."""
    if not (V1_DEVICES / "devices.allow").exists():
        pytest.skip("no cgroup v1 devices controller on this machine")
    d = V1_DEVICES / runtimes.unique("xpu-cdi-fast-test")
    d.mkdir()
    try:
        (d / "devices.deny").write_text("a")
        yield d
    finally:
        remove_cgroup(d)


@pytest.fixture
def sleeper() -> Iterator[List[subprocess.Popen]]:
    """Processes started by a test, killed and reaped afterwards."""
    procs: List[subprocess.Popen] = []
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def char_node(path: Path, minor: int) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(unused_major(), minor))
    return path


@pytest.mark.privileged
def test_allow_v1_from_inside(fast_bin: Path, v1_cgroup: Path, sleeper: List[subprocess.Popen],
                              tmp_path: Path) -> None:
    """A process in a cgroup that denies all: EPERM on the node before, ENXIO (allowed, no driver) after;
    every rule written separately (all listed); v1 journals nothing."""
    node = char_node(tmp_path / "node", 61)
    p = start_in(v1_cgroup, ["sleep", "60"])
    sleeper.append(p)
    wait_member(v1_cgroup, p.pid)
    assert open_errno(v1_cgroup, node) == "EPERM"
    r = fast_test(fast_bin, "allow", "--rollback", str(p.pid), f"c:{MAJOR}:61:rwm", f"c:{MAJOR}:62:rw", "b:7:9:r")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [f"CGROUP 1 {v1_cgroup}", "OK 0", "ROLLBACK 0"]
    assert open_errno(v1_cgroup, node) == "ENXIO"
    listed = set((v1_cgroup / "devices.list").read_text().splitlines())
    assert {f"c {MAJOR}:61 rwm", f"c {MAJOR}:62 rw", "b 7:9 r"} <= listed


@pytest.mark.privileged
def test_allow_v1_parent_denies(fast_bin: Path, v1_cgroup: Path, sleeper: List[subprocess.Popen]) -> None:
    """A rule the parent cgroup denies: the kernel's EPERM becomes a DEFER naming the rule."""
    child = v1_cgroup / "child"
    child.mkdir()
    p = start_in(child, ["sleep", "60"])
    sleeper.append(p)
    wait_member(child, p.pid)
    r = fast_test(fast_bin, "allow", str(p.pid), f"c:{MAJOR}:63:rwm")
    assert r.returncode == 1
    assert f"DEFER cgroup v1: cannot allow 'c {MAJOR}:63 rwm' in '{child}': Operation not permitted" in r.stdout


@pytest.mark.privileged
@pytest.mark.parametrize("rule", ["x:240:1:rwm", "c:-1:1:rwm", "c:240:4294967296:rwm", "c:240:1:rwx", "c:240:1:"])
def test_allow_declines_odd_rules(fast_bin: Path, v1_cgroup: Path, sleeper: List[subprocess.Popen],
                                  rule: str) -> None:
    """Types, numbers and access strings the Python would write or encode differently: declined, nothing
    written."""
    p = start_in(v1_cgroup, ["sleep", "60"])
    sleeper.append(p)
    wait_member(v1_cgroup, p.pid)
    before = (v1_cgroup / "devices.list").read_text()
    r = fast_test(fast_bin, "allow", str(p.pid), f"c:{MAJOR}:64:rwm", rule)
    assert r.returncode == 1 and "DEFER device rule 1" in r.stdout, r.stdout
    assert (v1_cgroup / "devices.list").read_text() == before


@pytest.mark.privileged
def test_allow_unknown_pid(fast_bin: Path) -> None:
    """No such process: declined with the reason."""
    r = fast_test(fast_bin, "allow", "999999999", f"c:{MAJOR}:1:rwm")
    assert r.returncode == 1 and r.stdout.startswith("DEFER cannot read the cgroups of container process"), r.stdout


def in_v2_namespace(argv: Sequence[str]) -> List[str]:
    """argv in a private mount namespace with cgroup2 on /sys/fs/cgroup (tests/runtimes.run_runc's trick)."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'umount -l /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"', "v2", *argv]


@pytest.mark.privileged
def test_allow_v2_without_program(fast_bin: Path, sleeper: List[subprocess.Popen]) -> None:
    """A cgroup2 group with no device program: v2 chosen (cgroup2 on /sys/fs/cgroup), nothing to replace."""
    if not (UNIFIED_DIR / "cgroup.procs").exists():
        pytest.skip("no cgroup2 hierarchy at /sys/fs/cgroup/unified")
    d = UNIFIED_DIR / runtimes.unique("xpu-cdi-fast-test")
    d.mkdir()
    try:
        p = start_in(d, ["sleep", "60"])
        sleeper.append(p)
        wait_member(d, p.pid)
        r = subprocess.run(in_v2_namespace([str(fast_bin / "xpu-cdi-fast-test"), "cgroup", "allow", "--rollback",
                                            str(p.pid), f"c:{MAJOR}:1:rwm"]),
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.splitlines() == [f"CGROUP 2 /sys/fs/cgroup/{d.name}", "OK 0", "ROLLBACK 0"]
    finally:
        remove_cgroup(d)


@pytest.mark.runtime
@pytest.mark.privileged
@pytest.mark.parametrize("rollback", [False, True], ids=["allow", "allow-then-rollback"])
def test_allow_v2_runc_program(fast_bin: Path, tmp_path: Path, rollback: bool) -> None:
    """runc (cgroup v2) attaches its device program; a prestart hook runs `allow` on the container's pid.
    The container's node runc did not allow then opens to ENXIO; with --rollback runc's program is back and
    it is EPERM again."""
    runtimes.require("runc")
    minor = 70 + rollback
    b = runtimes.Bundle(tmp_path)
    b.set_process(["sh", "-c", "(echo x > /dev/xnode) 2>&1; echo done"])
    b.config["linux"]["devices"] = [{"path": "/dev/xnode", "type": "c", "major": unused_major(), "minor": minor,
                                     "fileMode": 0o666}]
    out = tmp_path / "hook.out"
    script = (r"""pid=$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p'); """
              f'exec "$0" cgroup allow {"--rollback " if rollback else ""}"$pid" c:{MAJOR}:{minor}:rwm > "$1" 2>&1')
    b.add_hook("prestart", "/bin/sh", ["sh", "-c", script, str(fast_bin / "xpu-cdi-fast-test"), str(out)])
    r = runtimes.run_runc(b, cgroup_v2=True)
    hook = out.read_text() if out.exists() else ""
    assert r.returncode == 0, (r.stdout, r.stderr, hook)
    lines = hook.splitlines()
    assert lines[0].startswith("CGROUP 2 /sys/fs/cgroup/") and lines[1] == "OK 1", hook
    if rollback:
        assert lines[2:] == ["ROLLBACK 0"], hook
        assert "can't create /dev/xnode: Operation not permitted" in r.stdout, r.stdout
    else:
        assert lines[2:] == [], hook
        assert "can't create /dev/xnode: No such device or address" in r.stdout, r.stdout
    assert r.stdout.rstrip().endswith("done")
