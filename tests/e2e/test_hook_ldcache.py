"""The spec's createContainer tools: update-ldcache runs the image's
ldconfig confined (container pid namespace, chroot, no capabilities,
no_new_privs, only PATH), in-process on the prestart path and as a
createContainer hook of its own; create-symlinks makes in-root links."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from support import runtimes
from support.hookkit import HookHost, container_output

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

# A stand-in for the image's ldconfig: reports what it can see and do.
FAKE_LDCONFIG = r"""#!/bin/sh
fds=$(for f in /proc/$$/fd/*; do readlink $f; done | tr '\n' ' ')
{
echo "args: $*"
echo "environ: $(tr '\0' ' ' < /proc/$$/environ)"
grep -E '^(CapInh|CapEff|CapPrm|CapAmb|NoNewPrivs):' /proc/$$/status
echo "pid: $$"
echo "pidns: $(readlink /proc/$$/ns/pid)"
echo "fds: $fds"
echo "procs: $(ls /proc | grep -c '^[0-9]')"
echo "root: $(ls /)"
} > /ldconfig.report 2>&1
"""


def with_fake_ldconfig(b: "runtimes.Bundle") -> None:
    fake = b.rootfs / "sbin" / "ldconfig"
    fake.write_text(FAKE_LDCONFIG)
    fake.chmod(0o755)


def check_report(out: str, pidns_of: "int | None" = None) -> None:
    """The fake ldconfig ran confined, in the container.  *pidns_of*: a host
    pid whose pid namespace it must be in (the shared-namespace case)."""
    assert "args: /usr/local/xpu/lib64" in out
    assert "environ: PATH=/usr/sbin:/usr/bin:/sbin:/bin \n" in out + "\n" or \
        re.search(r"environ: PATH=/usr/sbin:/usr/bin:/sbin:/bin\s*$", out, re.M), out
    # no capability, though uid 0 exec'ed this sh: no_new_privs and the
    # locked SECBIT_NOROOT bar every way back to one (the bounding set is left as it is)
    for cap in ("CapInh", "CapEff", "CapPrm", "CapAmb"):
        assert re.search(rf"^{cap}:\s+0000000000000000$", out, re.M), out
    assert re.search(r"^NoNewPrivs:\s+1$", out, re.M), out
    pid = int(re.search(r"^pid: (\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    if pidns_of is not None:
        assert f"pidns: {os.readlink(f'/proc/{pidns_of}/ns/pid')}" in out, out
    else:
        # a fresh namespace: low numbers (runc init's Go threads take some), never a host pid
        assert pid < 100, "ldconfig is not in the container's pid namespace"
    # what its open fds point at: /dev/null, the output pipe, the script; never the
    # hook's O_PATH fds (rootfs dirs, namespaces, cgroup, bpf) or the state pipe
    fds = re.search(r"^fds: (.*)$", out, re.M).group(1).split()  # type: ignore[union-attr]
    assert fds and all(f in ("/dev/null", "/sbin/ldconfig") or f.startswith("pipe:") for f in fds), fds
    assert "ldconfig.report" in out  # it saw the container's root, not the host's


def test_prestart_runs_update_ldcache_in_process(xpu: HookHost) -> None:
    """The spec's update-ldcache hook is run by prestart: conf entry written, ldconfig confined."""
    b = xpu.bundle(["sh", "-c", "cat /ldconfig.report; cat /etc/ld.so.conf.d/00-xpu-cdi.conf"],
                   env=["CXPU_VISIBLE_DEVICES=1"])
    with_fake_ldconfig(b)
    r = runtimes.run_runc(b)
    out = r.stdout
    assert r.returncode == 0, container_output(r)
    check_report(out)
    assert "# written by xpu-cdi-hook update-ldcache\n/usr/local/xpu/lib64" in out
    assert "ld cache updated for /usr/local/xpu/lib64" in xpu.log_text()


def test_no_ldconfig_in_image_is_skipped(xpu: HookHost) -> None:
    """busybox has no ldconfig: skipped cleanly, no conf entry written."""
    b = xpu.bundle(["sh", "-c", "ls /etc/ld.so.conf.d 2>&1; true"], env=["CXPU_VISIBLE_DEVICES=1"])
    r = runtimes.run_runc(b)
    assert r.returncode == 0, container_output(r)
    assert "No such file or directory" in r.stdout
    assert "no ldconfig in the image" in xpu.log_text()


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_update_ldcache_as_create_container_hook(xpu: HookHost, runtime: str) -> None:
    """As a CDI runtime runs it (createContainer, already inside the container): same confinement."""
    runtimes.require(runtime)
    b = runtimes.Bundle(xpu.base)
    b.set_process(["sh", "-c", "cat /ldconfig.report"])
    (b.rootfs / "usr" / "local" / "xpu" / "lib64").mkdir(parents=True)
    with_fake_ldconfig(b)
    b.add_hook("createContainer", str(xpu.hook), ["xpu-cdi-hook", "update-ldcache", "--folder",
                                                   "/usr/local/xpu/lib64", "--log", str(xpu.log)],
               env=["PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
    r = runtimes.run_runc(b, runtime=runtime, private_ns=runtime == "crun")
    assert r.returncode == 0, container_output(r)
    check_report(r.stdout)
    assert "update-ldcache: ld cache updated" in xpu.log_text()


@pytest.fixture
def shared_pidns() -> "Iterator[int]":
    """A process sleeping as pid 1 of a new pid namespace (as a pod's pause
    container with shareProcessNamespace): its host pid; killed afterwards."""
    p = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", "sleep", "600"], start_new_session=True)
    try:
        for _ in range(200):  # unshare forks: the sleeper is its child
            kids = Path(f"/proc/{p.pid}/task/{p.pid}/children")
            if kids.exists() and kids.read_text().split():
                yield int(kids.read_text().split()[0])
                break
            time.sleep(0.01)
        else:
            pytest.fail("the pid-namespace sleeper did not start")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def tool_bundle(xpu: HookHost, stage: str, shared_pid: "int | None" = None) -> "runtimes.Bundle":
    """A bundle whose spec hooks at *stage* are update-ldcache and create-symlinks (what a
    CDI runtime puts in config.json), its pid namespace shared with *shared_pid* when given."""
    b = runtimes.Bundle(xpu.base)
    b.set_process(["sh", "-c", "cat /ldconfig.report; readlink /usr/lib/libxpu-link.so"])
    (b.rootfs / "usr" / "local" / "xpu" / "lib64").mkdir(parents=True)
    with_fake_ldconfig(b)
    b.add_hook(stage, str(xpu.hook), ["xpu-cdi-hook", "update-ldcache", "--folder", "/usr/local/xpu/lib64",
                                      "--log", str(xpu.log)])
    b.add_hook(stage, str(xpu.hook), ["xpu-cdi-hook", "create-symlinks", "--link",
                                      "libxpu.so.1::/usr/lib/libxpu-link.so", "--log", str(xpu.log)])
    if shared_pid is not None:
        for ns in b.config["linux"]["namespaces"]:
            if ns["type"] == "pid":
                ns["path"] = f"/proc/{shared_pid}/ns/pid"
    return b


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_create_container_tools_in_a_shared_pid_namespace(xpu: HookHost, runtime: str, shared_pidns: int) -> None:
    """A pod sharing its pid namespace: the state pid is not a host pid, the tools still work in place."""
    runtimes.require(runtime)
    b = tool_bundle(xpu, "createContainer", shared_pidns)
    r = runtimes.run_runc(b, runtime=runtime, private_ns=runtime == "crun")
    assert r.returncode == 0, container_output(r)
    check_report(r.stdout, pidns_of=shared_pidns)
    assert r.stdout.strip().splitlines()[-1] == "libxpu.so.1"
    log = xpu.log_text()
    assert "update-ldcache: ld cache updated for /usr/local/xpu/lib64" in log, log
    assert "create-symlinks: 1 link(s) created" in log, log


@pytest.mark.parametrize("stage", ["createContainer", "prestart", "createRuntime"])
def test_tools_at_every_stage(xpu: HookHost, stage: str) -> None:
    """The same tool hooks registered at a runtime-side stage join the container; at createContainer they do not."""
    b = tool_bundle(xpu, stage)
    r = runtimes.run_runc(b)
    assert r.returncode == 0, container_output(r)
    check_report(r.stdout)
    assert r.stdout.strip().splitlines()[-1] == "libxpu.so.1"
    assert "create-symlinks: 1 link(s) created" in xpu.log_text()


def test_spec_symlinks_and_foreign_hooks(xpu: HookHost) -> None:
    """A create-symlinks spec hook is run in-process (link made in-root); another tool's hook is only logged."""
    spec = xpu.spec
    spec["containerEdits"].setdefault("hooks", []).extend([
        {"hookName": "createContainer", "path": str(xpu.hook),
         "args": ["xpu-cdi-hook", "create-symlinks", "--link", "libxpuml.so.1::/usr/local/xpu-links/libxpuml.so"]},
        {"hookName": "createContainer", "path": "/usr/bin/other-hook", "args": ["other-hook", "stuff"]},
    ])
    xpu.spec_path.write_text(json.dumps(spec))
    b = xpu.bundle(["sh", "-c", "readlink /usr/local/xpu-links/libxpuml.so"], env=["CXPU_VISIBLE_DEVICES=1"])
    r = runtimes.run_runc(b)
    assert r.returncode == 0, container_output(r)
    assert r.stdout.strip() == "libxpuml.so.1"
    log = xpu.log_text()
    assert "1 link(s)" in log and "spec hook '/usr/bin/other-hook' stuff not run" in log


def test_prestart_registered_as_create_container_is_refused(xpu: HookHost, shared_pidns: int) -> None:
    """`prestart` at createContainer (pid namespace shared: the state pid is some other process's
    number on the host) refuses in one line naming the stage to use; no host process is joined."""
    b = xpu.bundle(["true"], env=["CXPU_VISIBLE_DEVICES=1"], stage="createContainer")
    for ns in b.config["linux"]["namespaces"]:
        if ns["type"] == "pid":
            ns["path"] = f"/proc/{shared_pidns}/ns/pid"
    r = runtimes.run_runc(b)
    assert r.returncode != 0, container_output(r)
    assert "is not a container process of this runtime (a createContainer hook runs inside the container): " \
           "register `xpu-cdi-hook prestart` as a prestart or createRuntime hook" in r.stderr, container_output(r)
