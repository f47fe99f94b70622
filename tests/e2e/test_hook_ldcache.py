"""The spec's createContainer tools: update-ldcache runs the image's
ldconfig confined (container pid namespace, chroot, no capabilities,
no_new_privs, only PATH), in-process on the prestart path and as a
createContainer hook of its own; create-symlinks makes in-root links."""

from __future__ import annotations

import json
import re

import pytest

import runtimes
from hookkit import HookHost, container_output, hook_launcher, xpu  # noqa: F401

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

# A stand-in for the image's ldconfig: reports what it can see and do.
FAKE_LDCONFIG = r"""#!/bin/sh
fds=$(for f in /proc/$$/fd/*; do readlink $f; done | tr '\n' ' ')
{
echo "args: $*"
echo "environ: $(tr '\0' ' ' < /proc/$$/environ)"
grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs):' /proc/$$/status
echo "pid: $$"
echo "fds: $fds"
echo "procs: $(ls /proc | grep -c '^[0-9]')"
echo "root: $(ls /)"
} > /ldconfig.report 2>&1
"""


def with_fake_ldconfig(b: "runtimes.Bundle") -> None:
    fake = b.rootfs / "sbin" / "ldconfig"
    fake.write_text(FAKE_LDCONFIG)
    fake.chmod(0o755)


def check_report(out: str) -> None:
    assert "args: /usr/local/xpu/lib64" in out
    assert "environ: PATH=/usr/sbin:/usr/bin:/sbin:/bin \n" in out + "\n" or \
        re.search(r"environ: PATH=/usr/sbin:/usr/bin:/sbin:/bin\s*$", out, re.M), out
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert re.search(rf"^{cap}:\s+0000000000000000$", out, re.M), out
    assert re.search(r"^NoNewPrivs:\s+1$", out, re.M), out
    pid = int(re.search(r"^pid: (\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert pid < 10, "ldconfig is not in the container's pid namespace"
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
