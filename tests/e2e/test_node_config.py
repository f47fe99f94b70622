"""Under real runc, the two node-side contracts the hook and the wrapper
implement in C (docs/hook.md, docs/runtime-integration.md):

* node ownership: each device node gets the spec's uid/gid/fileMode, else
  the host node's own owner, group and mode -- an HwHiAiUser-style 0660 node
  is usable by its owner inside the container (ENXIO: the cgroup let the
  open through to a driver-less node) and not by another uid (EACCES);
* the env-selection setting of the node config file: with
  accept-env-selection-when-unprivileged false, a selection variable of an
  unprivileged container is ignored (annotations still select), and a
  privileged container's is honoured; a malformed file stops the start."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from support import runtimes
from support.runtimes import ENXIO
from support.hookkit import HookHost, container_output

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
BIN = Path(sys.executable).parent
WRAPPER = BIN / "xpu-container-runtime"
EACCES = "Permission denied"
OWNER = 1000  # the fake HwHiAiUser: uid and gid of the host nodes
ALL_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
            "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
            "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
            "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
            "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
            "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
            "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ"]
PROBE = "stat -c '%n %u:%g %a' /dev/xpu1 2>&1; (echo x > /dev/xpu1) 2>&1; echo done"


def hwhiai_nodes(host: HookHost) -> None:
    """The host's card nodes as the Ascend driver makes them: HwHiAiUser:HwHiAiUser 0660."""
    for node in host.host.nodes:
        p = host.host.path(node)
        os.chown(p, OWNER, OWNER)
        os.chmod(p, 0o660)


def edit_nodes(host: HookHost, **fields: Any) -> None:
    """Drop fileMode/uid/gid from every deviceNodes entry of the spec, then set *fields*."""
    spec = host.spec
    for entry in [spec, *spec["devices"]]:
        for n in entry["containerEdits"].get("deviceNodes", []):
            for k in ("fileMode", "uid", "gid"):
                n.pop(k, None)
            n.update(fields)
    host.spec_path.write_text(json.dumps(spec))


def as_user(b: "runtimes.Bundle", uid: int) -> None:
    b.config["process"]["user"] = {"uid": uid, "gid": uid}


def wrapper_with_config(base: Path, config: Optional[Path]) -> str:
    """A runtime path the tests can hand run_runc: the wrapper, given --config when *config* is set."""
    if config is None:
        return str(WRAPPER)
    script = base / "wrapper-with-config"
    script.write_text(f'#!/bin/sh\nexec {WRAPPER} --config {config} "$@"\n')
    script.chmod(0o755)
    return str(script)


def wrapper_bundle(xpu: HookHost, args: List[str], env: List[str]) -> "runtimes.Bundle":
    b = runtimes.Bundle(xpu.base)
    b.set_process(args, env=env)
    return b


@pytest.fixture
def spec_env(xpu: HookHost, monkeypatch: pytest.MonkeyPatch) -> HookHost:
    """The wrapper reads the host's spec dir (XPU_CDI_SPEC_DIRS); its createContainer hooks are dropped."""
    spec = xpu.spec
    spec["containerEdits"].pop("hooks", None)
    xpu.spec_path.write_text(json.dumps(spec))
    monkeypatch.setenv("XPU_CDI_SPEC_DIRS", str(xpu.spec_dir))
    return xpu


class TestNodeOwnership:
    @pytest.mark.parametrize("declared", [False, True], ids=["host-node-owner", "spec-owner"])
    @pytest.mark.parametrize("path", ["hook", "wrapper"])
    def test_hwhiaiuser_node(self, xpu: HookHost, spec_env: HookHost, path: str, declared: bool) -> None:
        """uid 1000 opens its 0660 node (ENXIO); uid 2000 is refused (EACCES): the owner and mode reached it."""
        hwhiai_nodes(xpu)
        edit_nodes(xpu, **({"fileMode": 0o660, "uid": OWNER, "gid": OWNER} if declared else {}))
        for uid, want in ((OWNER, ENXIO), (2000, EACCES)):
            if path == "hook":
                b = xpu.bundle(["sh", "-c", PROBE], env=["CXPU_VISIBLE_DEVICES=1"])
                as_user(b, uid)
                r = runtimes.run_runc(b)
            else:
                b = wrapper_bundle(xpu, ["sh", "-c", PROBE], ["CXPU_VISIBLE_DEVICES=1"])
                as_user(b, uid)
                r = runtimes.run_runc(b, runtime=str(WRAPPER))
            assert r.returncode == 0, container_output(r)
            assert f"/dev/xpu1 {OWNER}:{OWNER} 660" in r.stdout, container_output(r)
            assert want in r.stdout, (uid, container_output(r))

    def test_spec_owner_wins_over_the_host_node(self, xpu: HookHost) -> None:
        """The spec says 0600 owned by 1000: the node in the container is so, whatever the host node is."""
        edit_nodes(xpu, fileMode=0o600, uid=OWNER, gid=OWNER)
        b = xpu.bundle(["sh", "-c", PROBE], env=["CXPU_VISIBLE_DEVICES=1"])
        as_user(b, OWNER)
        r = runtimes.run_runc(b)
        assert r.returncode == 0, container_output(r)
        assert f"/dev/xpu1 {OWNER}:{OWNER} 600" in r.stdout and ENXIO in r.stdout, container_output(r)


def node_config(base: Path, text: str) -> Path:
    p = base / "config.yaml"
    p.write_text(text)
    return p


def run_hook_path(xpu: HookHost, config: Optional[Path], env: List[str], annotations: Optional[Dict[str, str]] = None,
                  privileged: bool = False) -> Any:
    b = xpu.bundle(["sh", "-c", PROBE], env=env, annotations=annotations)
    if config is not None:
        b.config["hooks"]["prestart"][0]["args"][1:1] = ["--config", str(config)]
    if privileged:
        b.config["process"]["capabilities"]["bounding"] = list(ALL_CAPS)
    return runtimes.run_runc(b)


def run_wrapper_path(xpu: HookHost, config: Optional[Path], env: List[str],
                     annotations: Optional[Dict[str, str]] = None, privileged: bool = False) -> Any:
    b = wrapper_bundle(xpu, ["sh", "-c", PROBE], env)
    if annotations:
        b.config["annotations"].update(annotations)
    if privileged:
        b.config["process"]["capabilities"]["bounding"] = list(ALL_CAPS)
    return runtimes.run_runc(b, runtime=wrapper_with_config(xpu.base, config))


RUNNERS = {"hook": run_hook_path, "wrapper": run_wrapper_path}
# block YAML, as deploy/ and the packages write it (libyaml reads it in the binaries)
SETTING = "# xpu-cdi node settings\naccept-env-selection-when-unprivileged: false\n"


@pytest.mark.parametrize("path", ["hook", "wrapper"])
class TestEnvSelectionSetting:
    def test_unprivileged_env_is_ignored(self, xpu: HookHost, spec_env: HookHost, path: str) -> None:
        r = RUNNERS[path](xpu, node_config(xpu.base, SETTING), ["CXPU_VISIBLE_DEVICES=1"])
        assert r.returncode == 0, container_output(r)
        assert "/dev/xpu1': No such file" in r.stdout or "can't stat '/dev/xpu1'" in r.stdout, container_output(r)
        said = xpu.log_text() if path == "hook" else r.stderr
        assert ("CXPU_VISIBLE_DEVICES ignored: the container is not privileged and "
                f"{xpu.base / 'config.yaml'} sets accept-env-selection-when-unprivileged: false") in said, said

    def test_privileged_env_is_honoured(self, xpu: HookHost, spec_env: HookHost, path: str) -> None:
        r = RUNNERS[path](xpu, node_config(xpu.base, SETTING), ["CXPU_VISIBLE_DEVICES=1"], privileged=True)
        assert r.returncode == 0 and ENXIO in r.stdout, container_output(r)

    def test_annotation_still_selects(self, xpu: HookHost, spec_env: HookHost, path: str) -> None:
        r = RUNNERS[path](xpu, node_config(xpu.base, SETTING), ["CXPU_VISIBLE_DEVICES=0"],
                          annotations={"cdi.k8s.io/xpu": "kunlunxin.com/xpu=1"})
        assert r.returncode == 0 and ENXIO in r.stdout, container_output(r)

    @pytest.mark.parametrize("text", [None, "", SETTING.replace("false", "true")], ids=["absent", "empty", "true"])
    def test_default_accepts_env(self, xpu: HookHost, spec_env: HookHost, path: str, text: Optional[str]) -> None:
        config = xpu.base / "absent.yaml" if text is None else node_config(xpu.base, text)
        r = RUNNERS[path](xpu, config, ["CXPU_VISIBLE_DEVICES=1"])
        assert r.returncode == 0 and ENXIO in r.stdout, container_output(r)

    @pytest.mark.parametrize("text, message", [
        ('{"accept-env-selection-when-unprivileged": "no"}',
         "node config '{p}': accept-env-selection-when-unprivileged must be true or false"),
        ("[1]", "node config '{p}' must be a mapping of settings"),
        ("{", "node config {p}: not valid YAML: "),
        ("a: 1\na: 2\n", "node config {p}: not valid YAML: duplicate key"),
    ])
    def test_malformed_file_stops_the_start(self, xpu: HookHost, spec_env: HookHost, path: str, text: str,
                                            message: str) -> None:
        p = node_config(xpu.base, text)
        r = RUNNERS[path](xpu, p, ["CXPU_VISIBLE_DEVICES=1"])
        assert r.returncode != 0, container_output(r)
        assert message.format(p=p) in r.stderr, container_output(r)


def test_setting_false_with_a_broken_spec_beside(xpu: HookHost) -> None:
    """With the setting false and a broken spec file beside the good one: the broken file is a warning,
    the env (card 1) is ignored, the annotation (card 2) is still injected from the good file."""
    broken = xpu.spec_dir / "example.com-card.json"
    broken.write_text('{"cdiVersion": "0.5.0", "kind": ')
    try:
        b = xpu.bundle(["sh", "-c", "ls /dev | grep '^xpu[0-9]'; echo done"], env=["CXPU_VISIBLE_DEVICES=1"],
                       annotations={"cdi.k8s.io/x": "kunlunxin.com/xpu=2"})
        b.config["hooks"]["prestart"][0]["args"][1:1] = ["--config", str(node_config(xpu.base, SETTING))]
        r = runtimes.run_runc(b)
    finally:
        broken.unlink()
    assert r.returncode == 0 and r.stdout == "xpu2\ndone\n", container_output(r)
    log = xpu.log_text()
    assert f"warning: spec '{broken}': not valid JSON: " in log and "CXPU_VISIBLE_DEVICES ignored" in log, log
    assert "injected kunlunxin.com/xpu=2: " in log, log
