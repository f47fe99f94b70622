"""The registration files in hooks/ work as shipped (only the hook's path,
log and spec dir replaced): oci-hooks.d with podman 4.3, the base runtime
spec with containerd 1.6, and twice-registered hooks are harmless."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from support import runtimes
from support.hookkit import HookHost, container_output, node_line, probe

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]
HOOKS = Path(__file__).resolve().parents[2] / "hooks"


def localised(entry: Dict[str, Any], xpu: HookHost) -> Dict[str, Any]:
    """A shipped hook entry pointed at this test's hook binary, log and spec dir."""
    out = dict(entry, path=str(xpu.hook))
    out["args"] = [str(xpu.log) if a == "/var/log/xpu-cdi-hook.log" else a for a in entry["args"]]
    out["env"] = [f"XPU_CDI_SPEC_DIRS={xpu.spec_dir}" if e.startswith("XPU_CDI_SPEC_DIRS=") else e
                  for e in entry["env"]]
    assert out != entry
    return out




def test_shipped_files_are_well_formed() -> None:
    """Every file names the same absolute hook path, the prestart stage and an explicit env."""
    for name in ("xpu-cdi.json", "xpu-cdi-annotations.json"):
        doc = json.loads((HOOKS / "oci-hooks.d" / name).read_text())
        assert doc["version"] == "1.0.0" and doc["stages"] == ["prestart"] and doc["when"]
        assert doc["hook"]["path"].startswith("/") and doc["hook"]["args"][:2] == ["xpu-cdi-hook", "prestart"]
        assert any(e.startswith("PATH=") for e in doc["hook"]["env"])
    base = json.loads((HOOKS / "containerd" / "xpu-cdi-base-spec.json").read_text())
    assert base["hooks"]["prestart"][0]["args"][:2] == ["xpu-cdi-hook", "prestart"]
    assert 'base_runtime_spec = "/etc/containerd/xpu-cdi-base-spec.json"' in \
        (HOOKS / "containerd" / "config.toml").read_text()


def test_containerd_base_spec(xpu: HookHost, ctrd: "runtimes.Containerd") -> None:
    """The shipped base runtime spec, completed as CRI would (rootfs, process), runs the hook."""
    spec = json.loads((HOOKS / "containerd" / "xpu-cdi-base-spec.json").read_text())
    spec["hooks"]["prestart"] = [localised(h, xpu) for h in spec["hooks"]["prestart"]]
    b = runtimes.Bundle(xpu.base)
    spec["root"] = {"path": str(b.rootfs)}
    # the probe writes into the rootfs, read from the host: `ctr run` (1.6) sometimes drops
    # the end of a task's output when the task exits quickly (seen once in a CI trial)
    sh, dash_c, command = probe(["/dev/xpu2"], "/usr/local/xpu")
    spec["process"]["args"] = [sh, dash_c, f"({command}) > /probe.out 2>&1"]
    spec["process"]["env"] = ["PATH=/bin", "CXPU_VISIBLE_DEVICES=2"]
    path = xpu.base / "ctr-spec.json"
    path.write_text(json.dumps(spec))
    r = ctrd.ctr("run", "--rm", "--config", str(path), runtimes.unique("ctr"), timeout=60)
    assert r.returncode == 0, container_output(r)
    out = (b.rootfs / "probe.out").read_text()
    assert out.endswith("done\n"), out
    assert node_line("/dev/xpu2", 240, 2) in out and "can't create /dev/xpu2: No such device or address" in out


def test_registered_twice_is_harmless(xpu: HookHost) -> None:
    """Two prestart entries (or a runtime that did CDI first): the second finds everything in place."""
    b = xpu.bundle(probe(["/dev/xpu1"], "/usr/local/xpu"), env=["CXPU_VISIBLE_DEVICES=1"])
    b.config["hooks"]["prestart"].append(xpu.hook_entry())
    r = runtimes.run_runc(b)
    assert r.returncode == 0, container_output(r)
    assert r.stdout.count(" /usr/local/xpu ") == 1, "the driver dir was mounted twice"
    lines = xpu.log_text().splitlines()
    assert len(lines) == 2 and "2 mount(s) (0 present)" in lines[0]
    assert "(0 mknod, 0 bind, 2 present), 0 mount(s) (2 present)" in lines[1]


def test_podman_oci_hooks_d(xpu: HookHost, podman: "runtimes.Podman", tmp_path: Path) -> None:
    """podman --hooks-dir with each shipped file: xpu-cdi.json selects by env (CXPU_VISIBLE_DEVICES=1,3);
    xpu-cdi-annotations.json runs only for containers with a cdi.k8s.io/ annotation."""
    dirs = {}
    for name in ("xpu-cdi.json", "xpu-cdi-annotations.json"):
        doc = json.loads((HOOKS / "oci-hooks.d" / name).read_text())
        doc["hook"] = localised(doc["hook"], xpu)
        dirs[name] = tmp_path / name.replace(".json", ".d")
        dirs[name].mkdir()
        (dirs[name] / name).write_text(json.dumps(doc))

    def run(name: str, *args: str) -> "runtimes.subprocess.CompletedProcess":
        return podman.run_cmd(["--hooks-dir", str(dirs[name]), "run", "--rm", "--network", "none", *args])

    r = run("xpu-cdi.json", "-e", "CXPU_VISIBLE_DEVICES=1,3", runtimes.IMAGE,
            *probe(["/dev/xpu0", "/dev/xpu1", "/dev/xpu3"], "/usr/local/xpu"))
    out = r.stdout + r.stderr
    assert r.returncode == 0, container_output(r)
    assert node_line("/dev/xpu1", 240, 1) in out and node_line("/dev/xpu3", 240, 3) in out
    assert "/dev/xpu0 absent" in out and "can't create /dev/xpu1: No such device or address" in out
    assert "T touch: /usr/local/xpu/probe: Read-only file system" in out
    assert len(xpu.log_text().splitlines()) == 1

    r = run("xpu-cdi-annotations.json", "--annotation", "cdi.k8s.io/test_x=kunlunxin.com/xpu=2", runtimes.IMAGE,
            "sh", "-c", "(echo x > /dev/xpu2) 2>&1; true")
    assert r.returncode == 0 and "can't create /dev/xpu2: No such device or address" in r.stdout, \
        container_output(r)
    r = run("xpu-cdi-annotations.json", "-e", "CXPU_VISIBLE_DEVICES=1", runtimes.IMAGE, "sh", "-c", "ls /dev")
    assert r.returncode == 0 and "xpu" not in r.stdout  # no annotation: the hook did not run
    assert len(xpu.log_text().splitlines()) == 2


@pytest.mark.parametrize("env, want", [
    (["CXPU_VISIBLE_DEVICES=4,5", "XPU_VISIBLE_DEVICES=0,1"], [4, 5]),
    (["XPU_VISIBLE_DEVICES=0,1"], []),
], ids=["cxpu-and-xpu", "xpu-only"])
def test_podman_in_process_variable_is_no_selector(xpu: HookHost, podman: "runtimes.Podman", tmp_path: Path,
                                                   env: list, want: list) -> None:
    """podman with the shipped oci-hooks.d file (the hook for every container): an image exporting
    Kunlunxin's in-process XPU_VISIBLE_DEVICES=0,1 never gets host cards 0 and 1; with
    CXPU_VISIBLE_DEVICES=4,5 beside it the container sees exactly xpu4 and xpu5, usable."""
    doc = json.loads((HOOKS / "oci-hooks.d" / "xpu-cdi.json").read_text())
    doc["hook"] = localised(doc["hook"], xpu)
    hooks_dir = tmp_path / "hooks.d"
    hooks_dir.mkdir()
    (hooks_dir / "xpu-cdi.json").write_text(json.dumps(doc))
    args = [a for e in env for a in ("-e", e)]
    nodes = [f"/dev/xpu{i}" for i in range(8)]
    r = podman.run_cmd(["--hooks-dir", str(hooks_dir), "run", "--rm", "--network", "none", *args, runtimes.IMAGE,
                        *probe(nodes, "/usr/local/xpu")])
    out = r.stdout + r.stderr
    assert r.returncode == 0, container_output(r)
    for i in range(8):
        if i in want:
            assert node_line(f"/dev/xpu{i}", 240, i) in out, out
            assert f"can't create /dev/xpu{i}: No such device or address" in out, out
        else:
            assert f"/dev/xpu{i} absent" in out, out
