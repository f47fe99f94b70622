"""Regressions of the front end's security audit: hostile images and odd
invocations the compiled hook (and, where it shares the flaw, its Python
implementation) must survive without touching the host.

The hook runs as root, in the host's device cgroup, against an image the
pod chose.  Each case runs the compiled front end alone (no ``.py`` beside
it: a deferral shows as "cannot run the Python implementation", its reason
in the log) and the Python hook alone, directly, against a rootfs directory
and a sleeping host process as the container (as test_fast_inject's
deferral tests do: no runtime needed).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Dict, Iterator

import pytest

import runtimes
import test_request as trq
from test_fast_inject import base, hooks, log_lines, run_direct, sleeper, spec_dir  # noqa: F401

pytestmark = pytest.mark.privileged  # mknod, chroot

CONF = Path("etc/ld.so.conf.d/00-xpu-cdi.conf")
HEADER = "# written by xpu-cdi-hook update-ldcache\n"
LDCACHE_EDITS = {"hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                            "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/opt/lib"]}]}


@pytest.fixture
def host_disk(tmp_path: Path) -> Iterator[Path]:
    """A host block device (a loop device over a 64 KiB file of zeros), detached afterwards."""
    backing = tmp_path / "disk.img"
    backing.write_bytes(bytes(65536))
    r = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"no loop device here: {r.stderr.strip()}")
    dev = Path(r.stdout.strip())
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", str(dev)], capture_output=True)


def image_with_ldconfig(root: Path) -> Path:
    """A busybox rootfs whose ldconfig records its arguments, with the library folder."""
    runtimes.make_rootfs(root)
    (root / "sbin" / "ldconfig").write_text('#!/bin/sh\necho "$@" > /ldconfig.args\n')
    (root / "sbin" / "ldconfig").chmod(0o755)
    (root / "opt" / "lib").mkdir(parents=True)
    (root / CONF.parent).mkdir(parents=True)
    return root


@pytest.mark.parametrize("which", ["c", "py"])
@pytest.mark.parametrize("what", ["regular", "host-block-device", "host-char-device", "fifo", "symlink"])
def test_ld_conf_entry_planted_by_the_image(base: Path, hooks: Dict[str, Path], sleeper: int,  # noqa: F811
                                            request: pytest.FixtureRequest, what: str, which: str) -> None:
    """The image may already hold /etc/ld.so.conf.d/00-xpu-cdi.conf.  A regular file (ours from an earlier
    start) is rewritten in place; anything else is refused without opening it: a device node there would
    have the hook, root in the host's device cgroup, write to (or merely open: a watchdog) a host device --
    here the first block of a host disk; a fifo would block the hook."""
    slug = f"ldconf-{what}-{which}"
    rootfs = image_with_ldconfig(base / slug / "rootfs")
    conf = rootfs / CONF
    disk = request.getfixturevalue("host_disk") if what == "host-block-device" else None
    if what == "regular":
        conf.write_text("/old/dir\n")
        conf.chmod(0o600)
    elif disk is not None:
        os.mknod(conf, stat.S_IFBLK | 0o660, disk.stat().st_rdev)
    elif what == "host-char-device":
        os.mknod(conf, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null: takes any write
    elif what == "fifo":
        os.mkfifo(conf)
    else:
        os.symlink("/etc/passwd", conf)
    specs = spec_dir(base, slug, LDCACHE_EDITS)
    log = base / f"{slug}.log"
    r = run_direct(hooks[which], specs, rootfs, sleeper, log)
    err = r.stderr.decode()
    lines = log_lines(log)
    if disk is not None:
        with open(disk, "rb") as f:
            assert f.read(65536) == bytes(65536), "the hook wrote to the host disk the image pointed at"
    if what == "regular":
        assert r.returncode == 0, (err, lines)
        assert not any(line.startswith("fast path:") for line in lines), lines
        assert lines[-1].startswith("injected example.com/fast=a: ") and "ld cache updated for /opt/lib" in lines[-1]
        assert conf.read_text() == HEADER + "/opt/lib\n"
        assert stat.S_IMODE(conf.stat().st_mode) == 0o600  # rewritten in place, not replaced
        assert (rootfs / "ldconfig.args").read_text() == "/opt/lib\n"
        return
    assert r.returncode == 1, (err, lines)
    why = "is a symlink" if what == "symlink" else "is not a regular file"
    assert why in err and err.count("\n") == 1 and lines[-1].startswith("error: ") and why in lines[-1], (err, lines)
    assert not (rootfs / "ldconfig.args").exists()
    if what == "symlink":
        assert conf.is_symlink() and (rootfs / "etc" / "passwd").read_text() == "root:x:0:0:root:/:/bin/sh\n"
    else:
        kind = {"host-block-device": stat.S_ISBLK, "host-char-device": stat.S_ISCHR, "fifo": stat.S_ISFIFO}[what]
        assert kind(conf.lstat().st_mode)


@pytest.mark.parametrize("which", ["c", "py"])
def test_empty_log_option_logs_nothing(base: Path, hooks: Dict[str, Path], which: str) -> None:  # noqa: F811
    """`--log=` is no log at all (Log("") writes nothing): no warning about a file named "" either."""
    r = subprocess.run([str(hooks[which]), "prestart", "--log="], input=b'{"id": "x"', capture_output=True,
                       timeout=30, env={"PATH": "/usr/bin:/bin"})
    err = r.stderr.decode()
    assert r.returncode == 1 and "warning" not in err, err
    assert "not valid JSON" in err and err.count("\n") == 1, err


def test_more_spec_dirs_than_the_front_end_holds(hooks: Dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    """XPU_CDI_SPEC_DIRS with more dirs than the front end keeps (64): Python reads them all (a later dir
    wins), so the hook must refuse in one line -- not answer "nothing asked" from the first 64 when a later
    one serves the request.  (With 64 the request is seen, and refused for its pid 0.)"""
    d = tmp_path / "last"
    trq.write_json(d / "gpu.json", trq.spec(trq.GPU, trq.gpu_devices(["a"])))
    trq.write_json(d / "gpu.json.xpu-cdi", trq.index(trq.GPU, ["GPU_DEVS"], {"0": "a"}))
    b = tmp_path / "bundle"
    trq.write_json(b / "config.json", {"root": {"path": "rootfs"}, "process": {"env": ["GPU_DEVS=0"]}})
    dirs = [str(tmp_path / f"none{i}") for i in range(64)] + [str(d)]
    state = json.dumps({"id": "c", "pid": 0, "bundle": str(b)}).encode()
    for n, why in ((64, "pid 0 is not a container process"), (65, "more than 64 spec dirs")):
        log = tmp_path / f"log{n}"
        r = subprocess.run([str(hooks["c"]), "prestart", "--log", str(log)], input=state, capture_output=True,
                           timeout=30, env={"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": ":".join(dirs[-n:])})
        # 64: the request is seen (and refused for its pid 0, by the front end itself)
        assert r.returncode == 1 and r.stderr.decode().count("\n") == 1 and why in r.stderr.decode(), (n, r.stderr)
        assert why in log_lines(log)[-1], log_lines(log)
