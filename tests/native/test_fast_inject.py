"""The hook's compiled injection (fast/plan.c, inject.c, rootfs.c, links.c, ldcache.c) against the Python hook's.

Each case is a CDI spec of its own (device nodes with and without numbers,
modes, owners, permissions, block and "u" nodes, bind mounts with every
supported option, mount points the image already shows, create-symlinks,
update-ldcache, a foreign spec hook, env edits, a user namespace) and a
container started by runc twice: once with the compiled front end *alone*
(no Python beside it, so a deferral fails the start and is seen), once with
the Python hook.  What the container sees (nodes, mounts and their
options, links, the ld.so.conf.d entry), what is left in the rootfs on the
host (paths, types, modes, owners), and the hook's log line must be the
same.  Then inputs the hook does not take: each is refused in one line
before anything is touched, and a failure late in the injection is rolled
back completely and reported in one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

import devdirs
import runtimes
from hookkit import install_launcher

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

DEFERRED = "cannot run the Python implementation"
KIND = "example.com/fast"
HOOK_ENV = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
# What the container reports: nodes (type, numbers, mode, owner), the mount
# points under /opt and /dev with their per-mount options, links, our conf.
PROBE = r"""
for d in /dev/t*; do [ -e "$d" ] && stat -c 'N %n %F %t:%T %a %u:%g' "$d"; done
awk '$5 ~ /^\/(opt|dev\/t)/ {print "M", $5, $6}' /proc/self/mountinfo | sort
for l in /opt/links/* /opt/deep/*/link; do [ -L "$l" ] && echo "L $l -> $(readlink $l)"; done
[ -f /etc/ld.so.conf.d/00-xpu-cdi.conf ] && sed 's/^/C /' /etc/ld.so.conf.d/00-xpu-cdi.conf
[ -f /ldconfig.args ] && sed 's/^/A /' /ldconfig.args
echo END
"""


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """World-traversable (the user namespace case's mapped root must reach it)."""
    d = devdirs.device_tmpdir("xpu-cdi-fast-inject-")
    d.chmod(0o755)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-R", "-l", str(d)], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def hooks(base: Path) -> Dict[str, Path]:
    """"c": the compiled front end alone; "py": the Python implementation alone."""
    pair = install_launcher(base)
    alone = base / "front-only" / "xpu-cdi-hook"
    alone.parent.mkdir()
    alone.write_bytes(pair.read_bytes())
    alone.chmod(0o755)
    return {"c": alone, "py": Path(str(pair) + ".py")}


@pytest.fixture(scope="module")
def host(base: Path) -> Path:
    """Host side: device nodes, a library dir, a tool file (root-owned, 0755)."""
    h = base / "host"
    (h / "dev").mkdir(parents=True)
    os.mknod(h / "dev" / "card0", stat.S_IFCHR | 0o640, os.makedev(240, 0))
    os.mknod(h / "dev" / "card1", stat.S_IFCHR | 0o604, os.makedev(240, 1))
    os.mknod(h / "dev" / "blk0", stat.S_IFBLK | 0o660, os.makedev(7, 200))
    os.symlink("card1", h / "dev" / "by-name")
    (h / "lib").mkdir()
    (h / "lib" / "libfast.so").write_text("lib\n")
    (h / "lib" / "sub").mkdir()
    (h / "bin").mkdir()
    (h / "bin" / "tool").write_text("#!/bin/sh\n")
    (h / "bin" / "tool").chmod(0o755)
    for p in [h, *h.rglob("*")]:
        if not p.is_symlink():
            os.chown(p, 0, 0)
    return h


def spec_dir(base: Path, name: str, edits: Dict[str, Any], version: str = "0.7.0") -> Path:
    d = base / "cdi" / name
    d.mkdir(parents=True)
    spec = {"cdiVersion": version, "kind": KIND, "devices": [{"name": "a", "containerEdits": edits}]}
    (d / "example.com-fast.json").write_text(json.dumps(spec, indent=1))
    return d


def bundle(base: Path, hook: Path, specs: Path, log: Path, userns: bool = False,
           ldconfig: bool = False, image: Optional[Any] = None, dev_tmpfs: bool = True) -> "runtimes.Bundle":
    b = runtimes.Bundle(base)
    b.set_process(["sh", "-c", PROBE])
    b.config["annotations"]["cdi.k8s.io/fast"] = f"{KIND}=a"
    b.config.setdefault("hooks", {})["prestart"] = [{
        "path": str(hook), "args": ["xpu-cdi-hook", "prestart", "--log", str(log)],
        "env": [*HOOK_ENV, f"XPU_CDI_SPEC_DIRS={specs}"], "timeout": 20}]
    if ldconfig:
        fake = b.rootfs / "sbin" / "ldconfig"
        fake.write_text('#!/bin/sh\necho "$@" > /ldconfig.args\n')
        fake.chmod(0o755)
    if image is not None:
        image(b.rootfs)
    if not dev_tmpfs:  # the image's own /dev
        b.config["mounts"] = [m for m in b.config["mounts"] if not m["destination"].startswith("/dev")]
    if userns:
        b.config["linux"]["namespaces"].append({"type": "user"})
        for key in ("uidMappings", "gidMappings"):
            b.config["linux"][key] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
        b.config["mounts"] = [m for m in b.config["mounts"] if m["destination"] != "/sys"]
        subprocess.run(["chown", "-R", "100000:100000", str(b.rootfs)], check=True)
    return b


def snapshot(rootfs: Path) -> List[str]:
    """Everything in the rootfs as the host sees it after the container is gone."""
    out = []
    for dirpath, dirnames, filenames in os.walk(rootfs):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out.append(f"{os.path.relpath(p, rootfs)} {oct(st.st_mode)} {st.st_uid}:{st.st_gid} {st.st_rdev}")
    return sorted(out)


def log_lines(log: Path) -> List[str]:
    """The log without time, pid and container id."""
    if not log.exists():
        return []
    return [re.sub(r"^\S+ xpu-cdi-hook\[\d+\] \S+: ", "", line) for line in log.read_text().splitlines()]


def start(base: Path, which: str, hooks: Dict[str, Path], specs: Path, **kw: Any) -> Dict[str, Any]:
    log = base / f"{which}-{os.urandom(4).hex()}.log"
    b = bundle(base, hooks[which], specs, log, **kw)
    r = runtimes.run_runc(b)
    result = {"rc": r.returncode, "out": r.stdout, "err": r.stderr, "log": log_lines(log),
              "tree": snapshot(b.rootfs)}
    shutil.rmtree(b.dir, ignore_errors=True)
    return result


def same_as_python(base: Path, hooks: Dict[str, Path], specs: Path, **kw: Any) -> Dict[str, Any]:
    c = start(base, "c", hooks, specs, **kw)
    py = start(base, "py", hooks, specs, **kw)
    assert DEFERRED not in c["err"], f"the C deferred: {c['log']}"
    assert not any("fast path:" in line for line in c["log"]), c["log"]
    assert c["rc"] == py["rc"] == 0, (c["err"], py["err"])
    assert c["out"] == py["out"]
    assert c["log"] == py["log"]
    assert c["tree"] == py["tree"]
    assert c["out"].rstrip().endswith("END")
    return c


def nodes(h: Path) -> List[Dict[str, Any]]:
    return [
        {"path": "/dev/t0", "type": "c", "major": 240, "minor": 0, "fileMode": 0o640, "uid": 5, "gid": 6,
         "permissions": "rw"},
        {"path": "/dev/t1", "hostPath": str(h / "dev" / "card1")},                # numbers and mode from the host
        {"path": "/dev/t2", "hostPath": str(h / "dev" / "by-name"), "fileMode": 0o600},  # through a link
        {"path": "/dev/t3", "type": "u", "major": 240, "minor": 3, "permissions": "mwr"},
        {"path": "/dev/t4", "type": "b", "major": 7, "minor": 200, "fileMode": 0},
        {"path": "/dev/tsub/t5", "type": "c", "major": 240, "minor": 5, "gid": 7},  # a missing parent dir
    ]


def mounts(h: Path) -> List[Dict[str, Any]]:
    return [
        {"hostPath": str(h / "lib"), "containerPath": "/opt/lib", "options": ["ro", "nosuid", "nodev", "bind"]},
        {"hostPath": str(h / "lib"), "containerPath": "/opt/rlib", "type": "rbind",
         "options": ["rprivate", "noexec"]},
        {"hostPath": str(h / "bin" / "tool"), "containerPath": "/opt/new/dir/tool", "options": ["bind", "rw"]},
        {"hostPath": str(h / "lib"), "containerPath": "/opt/plain", "type": "bind"},
        {"hostPath": str(h / "lib"), "containerPath": "/opt/alias", "options": ["rbind", "ro"]},
    ]


def test_nodes_mounts_links_ldcache(base: Path, hooks: Dict[str, Path], host: Path) -> None:
    edits = {
        "env": ["A=1", "B=2"],
        "deviceNodes": nodes(host),
        "mounts": mounts(host),
        "hooks": [
            {"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
             "args": ["xpu-cdi-hook", "create-symlinks", "--link", "libfast.so::/opt/links/libfast.so.1",
                      "--link=/opt/lib/libfast.so::/opt/deep/er/link"]},
            {"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
             "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/opt/lib", "--folder=/opt/absent",
                      "--folder", "/opt/rlib", "--folder", "/opt/lib"]},
            {"hookName": "createContainer", "path": "/usr/bin/other-hook", "args": ["other", "it's"]},
            {"hookName": "prestart", "path": "/opt/x\"y'z", "args": []},
        ],
    }
    specs = spec_dir(base, "full", edits)

    def image(rootfs: Path) -> None:
        (rootfs / "opt").mkdir()
        os.symlink("/opt/lib", rootfs / "opt" / "alias")  # the second bind of lib lands on the first: present

    c = same_as_python(base, hooks, specs, ldconfig=True, image=image)
    line = c["log"][-1]
    assert "6 node(s) (6 mknod, 0 bind, 0 present), 4 mount(s) (1 present), 2 link(s), cgroup v1" in line, line
    assert "2 env edit(s) not applied" in line and "ld cache updated for /opt/lib, /opt/rlib" in line, line
    assert "spec hook '/usr/bin/other-hook' it's not run" in line and "spec hook '/opt/x\"y\\'z'  not run" in line
    out = c["out"]
    assert "N /dev/t0 character special file f0:0 640 5:6" in out
    assert "N /dev/t1 character special file f0:1 604 0:0" in out
    assert "N /dev/t2 character special file f0:1 600 0:0" in out
    assert "N /dev/t4 block special file 7:c8 666 0:0" in out
    assert re.search(r"M /opt/lib ro,nosuid,nodev", out) and re.search(r"M /opt/rlib rw,noexec", out), out
    assert "L /opt/links/libfast.so.1 -> libfast.so" in out and "A /opt/lib /opt/rlib" in out


def test_user_namespace_binds(base: Path, hooks: Dict[str, Path], host: Path) -> None:
    edits = {"deviceNodes": [n for n in nodes(host) if n["path"] in ("/dev/t1", "/dev/t2")],
             "mounts": mounts(host)[:1],
             "hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                        "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/opt/lib"]}]}
    specs = spec_dir(base, "userns", edits)
    c = same_as_python(base, hooks, specs, userns=True, ldconfig=True)
    assert "2 node(s) (0 mknod, 2 bind, 0 present)" in c["log"][-1], c["log"]
    assert any(" 100000:100000 " in e and e.startswith("opt/lib ") for e in c["tree"]), c["tree"]


def test_present_node(base: Path, hooks: Dict[str, Path], host: Path) -> None:
    """The image's own /dev (no tmpfs) already has the very node: "present", left as it is."""
    specs = spec_dir(base, "present", {"deviceNodes": nodes(host)[:2]})

    def image(rootfs: Path) -> None:
        os.mknod(rootfs / "dev" / "t0", stat.S_IFCHR | 0o600, os.makedev(240, 0))

    c = same_as_python(base, hooks, specs, image=image, dev_tmpfs=False)
    assert "2 node(s) (1 mknod, 0 bind, 1 present)" in c["log"][-1], c["log"]
    assert "N /dev/t0 character special file f0:0 600 0:0" in c["out"]
    assert any(e.startswith("dev/t1 0o20604 ") for e in c["tree"]), c["tree"]


@pytest.fixture(scope="module")
def locked(base: Path) -> Iterator[Path]:
    """A host filesystem mounted nosuid,nodev,noexec (a tmpfs) holding a library
    dir and a device node: a bind remount must not drop those flags (in a user
    namespace the kernel locks them and refuses a remount that would)."""
    d = base / "locked"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "nosuid,nodev,noexec,mode=755", "xpu-cdi-locked", str(d)],
                   check=True)
    try:
        (d / "lib").mkdir(mode=0o755)
        (d / "lib" / "libfast.so").write_text("lib\n")
        os.mknod(d / "card9", stat.S_IFCHR | 0o666, os.makedev(240, 9))
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=True)


def locked_edits(d: Path) -> Dict[str, Any]:
    return {"deviceNodes": [{"path": "/dev/t9", "hostPath": str(d / "card9")}],
            "mounts": [{"hostPath": str(d / "lib"), "containerPath": "/opt/locked",
                        "options": ["ro", "nosuid", "nodev", "bind"]}]}


def test_source_flags_kept(base: Path, hooks: Dict[str, Path], locked: Path) -> None:
    """The spec asks for ro,nosuid,nodev: the source's noexec stays (the remount would clear it)."""
    c = same_as_python(base, hooks, spec_dir(base, "locked", locked_edits(locked)))
    assert re.search(r"^M /opt/locked ro,nosuid,nodev,noexec,", c["out"], re.M), c["out"]
    assert "1 node(s) (1 mknod, 0 bind, 0 present), 1 mount(s) (0 present)" in c["log"][-1], c["log"]


def test_source_flags_kept_user_namespace(base: Path, hooks: Dict[str, Path], locked: Path) -> None:
    """In a user namespace the source's flags are locked: the remounts of the bound mount and of the
    bound host node (MS_NOSUID alone) succeed only by keeping them."""
    c = same_as_python(base, hooks, spec_dir(base, "locked-userns", locked_edits(locked)), userns=True)
    assert re.search(r"^M /opt/locked ro,nosuid,nodev,noexec,", c["out"], re.M), c["out"]
    assert re.search(r"^M /dev/t9 rw,nosuid,nodev,noexec,", c["out"], re.M), c["out"]
    assert "1 node(s) (0 mknod, 1 bind, 0 present), 1 mount(s) (0 present)" in c["log"][-1], c["log"]


# ------------------------------------------------------------------ refusals

def run_direct(hook: Path, specs: Path, rootfs: Path, pid: int, log: Path) -> subprocess.CompletedProcess:
    b = rootfs.parent
    (b / "config.json").write_text(json.dumps({"root": {"path": str(rootfs)},
                                               "annotations": {"cdi.k8s.io/fast": f"{KIND}=a"}}))
    state = {"ociVersion": "1.0.2", "id": "direct", "pid": pid, "bundle": str(b)}
    return subprocess.run([str(hook), "prestart", "--log", str(log)], input=json.dumps(state).encode(),
                          capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(specs)})


@pytest.fixture
def sleeper() -> Iterator[int]:
    p = subprocess.Popen(["sleep", "60"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


REASONS = {  # what plan.c says when it declines: the whole line
    "fifo": "device node '/dev/tp': type p (a fifo) is not made by the hook: use CDI mode (a CDI-enabled runtime) "
            "for it",
    "no host node": "device node '/dev/tx': host node '/nonexistent/node': No such file or directory (is the driver "
                    "loaded? else regenerate the spec)",
    "relative node": "device node path 'dev/tx' must be a plain absolute path",
    "dotdot node": "device node path '/dev/../tx' must be a plain absolute path",
    "bad permissions": "device node '/dev/tx': permissions 'rx' must be made of r, w and m",
    "huge major": "device node '/dev/tx': numbers 5000:3 out of range",
    "tmpfs mount": "mount '/tmp' -> '/opt/t': only bind mounts can be made by the hook; use CDI mode for other mount "
                   "types",
    "unknown option": "mount '/tmp' -> '/opt/t': option 'mode=1' is not supported by the hook",
    "mount on /": "mount '/tmp' -> '/': hostPath and containerPath must be absolute paths",
    "bad link": "create-symlinks: --link 'x:/y' must be TARGET::LINK (LINK an absolute container path)",
    "relative folder": "update-ldcache: --folder 'lib' must be an absolute container path",
    "extra argument": "update-ldcache: unexpected argument 'x' (usage: xpu-cdi-hook update-ldcache --folder VALUE...)",
    "no value": "create-symlinks: option --link needs a value",
}


@pytest.mark.parametrize("why, edits", [
    ("fifo", {"deviceNodes": [{"path": "/dev/tp", "type": "p", "major": 0, "minor": 0}]}),
    ("no host node", {"deviceNodes": [{"path": "/dev/tx", "hostPath": "/nonexistent/node"}]}),
    ("relative node", {"deviceNodes": [{"path": "dev/tx", "major": 1, "minor": 3}]}),
    ("dotdot node", {"deviceNodes": [{"path": "/dev/../tx", "major": 1, "minor": 3}]}),
    ("bad permissions", {"deviceNodes": [{"path": "/dev/tx", "major": 1, "minor": 3, "permissions": "rx"}]}),
    ("huge major", {"deviceNodes": [{"path": "/dev/tx", "major": 5000, "minor": 3}]}),
    ("tmpfs mount", {"mounts": [{"hostPath": "/tmp", "containerPath": "/opt/t", "type": "tmpfs"}]}),
    ("unknown option", {"mounts": [{"hostPath": "/tmp", "containerPath": "/opt/t", "options": ["bind", "mode=1"]}]}),
    ("mount on /", {"mounts": [{"hostPath": "/tmp", "containerPath": "/", "options": ["bind"]}]}),
    ("bad link", {"hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                             "args": ["xpu-cdi-hook", "create-symlinks", "--link", "x:/y"]}]}),
    ("relative folder", {"hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                                    "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "lib"]}]}),
    ("extra argument", {"hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                                   "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/l", "x"]}]}),
    ("no value", {"hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                             "args": ["xpu-cdi-hook", "create-symlinks", "--link"]}]}),
])
def test_refused_before_touching(base: Path, hooks: Dict[str, Path], host: Path, sleeper: int, why: str,
                                 edits: Dict[str, Any]) -> None:
    """What the plan does not take is refused in one line before anything in the container is touched."""
    slug = re.sub(r"\W", "-", why)
    specs = spec_dir(base, "defer-" + slug, edits)
    rootfs = base / ("b-" + slug) / "rootfs"
    rootfs.mkdir(parents=True)
    before = snapshot(rootfs)
    log = base / f"defer-{slug}.log"
    r = run_direct(hooks["c"], specs, rootfs, sleeper, log)
    lines = log_lines(log)
    assert r.returncode == 1 and r.stderr.decode() == f"xpu-cdi-hook: {REASONS[why]}\n", (why, r.stderr, lines)
    assert lines == [f"error: {REASONS[why]}"], lines
    assert snapshot(rootfs) == before


# what runc itself leaves in an on-disk /dev (as tests/e2e/test_hook_failures.py)
RUNC_DEV = {"null", "zero", "full", "random", "urandom", "tty", "fd", "stdin", "stdout", "stderr", "ptmx",
            "pts", "shm"}


def link_conflict(rootfs: Path) -> None:
    (rootfs / "opt" / "links").mkdir(parents=True)
    (rootfs / "opt" / "links" / "x").write_text("image file\n")


def failing_ldconfig(rootfs: Path) -> None:
    (rootfs / "sbin" / "ldconfig").write_text("#!/bin/sh\necho 'ldconfig: cannot do it' >&2\nexit 3\n")
    (rootfs / "sbin" / "ldconfig").chmod(0o755)


@pytest.mark.parametrize("image, reason", [
    (link_conflict, "'/opt/links/x' already exists in the container and is not a link to 'a'"),
    (failing_ldconfig, "/sbin/ldconfig exited with 3: ldconfig: cannot do it"),
], ids=["link-conflict", "ldconfig-fails"])
def test_late_failure_is_rolled_back(base: Path, hooks: Dict[str, Path], host: Path, image: Any,
                                     reason: str) -> None:
    """A step late in the injection fails after nodes (on disk), mounts, dirs, links and the ld.so.conf.d
    entry were made: the hook takes everything back and says which step failed, in one line."""
    edits = {"deviceNodes": nodes(host), "mounts": mounts(host),
             "hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                        "args": ["xpu-cdi-hook", "create-symlinks", "--link", "b::/opt/deep/er/y",
                                 "--link", "a::/opt/links/x"]},
                       {"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                        "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/opt/lib"]}]}
    specs = spec_dir(base, "late-" + image.__name__, edits)
    log = base / f"late-{image.__name__}.log"
    b = bundle(base, hooks["c"], specs, log, image=image, dev_tmpfs=False)
    before = snapshot(b.rootfs)
    r = runtimes.run_runc(b)
    lines = log_lines(log)
    assert r.returncode != 0 and f"xpu-cdi-hook: {lines[-1][len('error: '):]}" in r.stderr, (r.stderr, lines)
    assert lines[-1].startswith("error: ") and reason in lines[-1], lines
    after = snapshot(b.rootfs)
    assert set(before) <= set(after), sorted(set(before) - set(after))
    left = sorted(e.split()[0] for e in set(after) - set(before))
    assert all(e.startswith("dev/") and e.split("/")[1] in RUNC_DEV for e in left), f"left behind: {left}"
    shutil.rmtree(b.dir, ignore_errors=True)
