"""The prestart hook through containerd 1.6 (no CDI support): a full OCI
spec with the hook, run by `ctr run --config` on a private containerd."""

from __future__ import annotations

import json

import pytest

from support import runtimes
from support.hookkit import HookHost, container_output, node_line, probe

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]




def test_ctr_run_config_with_hook(xpu: HookHost, ctrd: "runtimes.Containerd") -> None:
    """ctr run --config: CXPU_VISIBLE_DEVICES=1,3 gives cards 1 and 3, allowed, driver dir read-only."""
    b = runtimes.Bundle(xpu.base)
    cmd = probe(["/dev/xpu0", "/dev/xpu1", "/dev/xpu3", "/dev/xpuctrl"], "/usr/local/xpu")
    spec = runtimes.runtime_spec(b.rootfs, cmd, env=["CXPU_VISIBLE_DEVICES=1,3"])
    spec["hooks"] = {"prestart": [xpu.hook_entry()]}
    path = xpu.base / "ctr-spec.json"
    path.write_text(json.dumps(spec))
    r = ctrd.ctr("run", "--rm", "--config", str(path), runtimes.unique("ctr"), timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 0, container_output(r)
    assert node_line("/dev/xpu1", 240, 1) in out and node_line("/dev/xpu3", 240, 3) in out
    assert node_line("/dev/xpuctrl", 240, 200) in out
    assert "/dev/xpu0 absent" in out
    assert "can't create /dev/xpu3: No such device or address" in out
    assert "T touch: /usr/local/xpu/probe: Read-only file system" in out
    assert "injected kunlunxin.com/xpu=1, kunlunxin.com/xpu=3" in xpu.log_text()


def test_ctr_hook_failure_stops_the_container(xpu: HookHost, ctrd: "runtimes.Containerd") -> None:
    """An unknown card makes ctr fail with the hook's one-line message; the container never runs."""
    b = runtimes.Bundle(xpu.base)
    spec = runtimes.runtime_spec(b.rootfs, ["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=9"])
    spec["hooks"] = {"prestart": [xpu.hook_entry()]}
    path = xpu.base / "ctr-spec.json"
    path.write_text(json.dumps(spec))
    r = ctrd.ctr("run", "--rm", "--config", str(path), runtimes.unique("ctr"), timeout=60)
    assert r.returncode != 0
    assert "RAN" not in r.stdout
    assert "no card 9 in the kunlunxin.com/xpu spec" in r.stderr, container_output(r)
