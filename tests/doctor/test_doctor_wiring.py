"""Doctor checks of the runtime wiring: containerd, CRI-O and Docker configs,
the hook where a runtime has no CDI, oci-hooks.d files."""

from __future__ import annotations

import json
import os

import pytest

from support import fakehost
from support.doctornode import Node, status, worst

pytestmark = pytest.mark.privileged


@pytest.fixture
def ready(node: Node) -> Node:
    """A Kunlunxin node with a fresh spec."""
    node.kunlunxin()
    node.generate()
    return node


class TestContainerdCdi:
    def test_enabled_17_passes(self, ready: Node) -> None:
        """containerd 1.7 with enable_cdi and our spec dir: ok."""
        ready.containerd_config()
        _code, res = ready.doctor()
        assert status(res, "containerd-cdi") == "ok"

    @pytest.mark.parametrize("cdi", [False, None])
    def test_disabled_17_fails(self, ready: Node, cdi: object) -> None:
        """enable_cdi false or absent (1.7 defaults to off): fail, the fix sets it in the right table."""
        ready.containerd_config(cdi=cdi)  # type: ignore[arg-type]
        _code, res = ready.doctor()
        r = worst(res, "containerd-cdi")
        assert r["status"] == "fail" and "CDI is off" in r["found"]
        assert 'enable_cdi = true in [plugins."io.containerd.grpc.v1.cri"]' in r["fix"]
        assert "--enable-cdi" in r["fix"]

    def test_v3_config_defaults_to_on(self, ready: Node) -> None:
        """containerd 2.x (config version 3) has CDI on by default."""
        ready.containerd_config(version=3, cdi=None)
        _code, res = ready.doctor(versions=("containerd=2.1.0",))
        assert status(res, "containerd-cdi") == "ok"

    def test_spec_dir_not_read_fails(self, ready: Node) -> None:
        """Our spec dir missing from cdi_spec_dirs: fail naming both."""
        ready.containerd_config(spec_dirs=["/etc/cdi", "/var/run/cdi"])
        _code, res = ready.doctor()
        r = worst(res, "containerd-cdi")
        assert r["status"] == "fail" and str(ready.spec_dir) in r["found"] and "cdi_spec_dirs" in r["fix"]

    def test_imports_are_merged(self, ready: Node) -> None:
        """enable_cdi set in an imported drop-in counts."""
        ready.containerd_config(cdi=None, top=f'imports = ["{ready.tmp}/containerd/conf.d/*.toml"]')
        fakehost.write(ready.tmp / "containerd/conf.d/cdi.toml",
                       'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n')
        _code, res = ready.doctor()
        assert status(res, "containerd-cdi") == "ok"

    def test_unparseable_config_fails(self, ready: Node) -> None:
        """A config containerd cannot parse: fail, fix the syntax."""
        fakehost.write(ready.containerd, "version = 2\n[plugins\n")
        _code, res = ready.doctor()
        r = worst(res, "containerd-cdi")
        assert r["status"] == "fail" and "cannot parse" in r["found"] and "syntax" in r["fix"]


class TestContainerdHandler:
    def test_handler_with_wrapper_passes(self, ready: Node) -> None:
        """xpu handler running the wrapper that exists: ok."""
        ready.containerd_config()
        _code, res = ready.doctor()
        assert status(res, "containerd-handler") == "ok"

    def test_handler_binary_missing_fails(self, ready: Node) -> None:
        """BinaryName points nowhere: every pod with the RuntimeClass fails; fix installs xpu-cdi."""
        ready.containerd_config(binary="/nonexistent/xpu-container-runtime")
        _code, res = ready.doctor()
        r = worst(res, "containerd-handler")
        assert r["status"] == "fail" and "/nonexistent/xpu-container-runtime' does not exist" in r["found"]
        assert "install xpu-cdi" in r["fix"]

    def test_handler_without_binary_warns(self, ready: Node) -> None:
        """An xpu handler without BinaryName runs plain runc: warn."""
        ready.containerd_config()
        ready.containerd.write_text(ready.containerd.read_text().split("[plugins.\"io.containerd.grpc.v1.cri\""
                                                                       ".containerd.runtimes.xpu.options]")[0])
        _code, res = ready.doctor()
        r = worst(res, "containerd-handler")
        assert r["status"] == "warn" and "plain runc" in r["found"] and "runtime configure" in r["fix"]

    def test_no_handler_with_cdi_is_ok_with_tip(self, ready: Node) -> None:
        """No xpu handler while CDI is on: fine, with a tip for env-based selection."""
        ready.containerd_config(handler=None)
        _code, res = ready.doctor()
        r = worst(res, "containerd-handler")
        assert r["status"] == "ok" and "CXPU_VISIBLE_DEVICES" in r["fix"]

    def test_runtime_name_option(self, ready: Node) -> None:
        """--runtime-name checks another handler name."""
        ready.containerd_config(handler="kunlun")
        _code, res = ready.doctor("--runtime-name", "kunlun")
        assert worst(res, "containerd-handler")["found"].startswith("handler 'kunlun' runs")


class TestCrio:
    def write(self, node: Node, dirs: list, runtime_path: str) -> None:
        fakehost.write(node.crio, f"[crio.runtime]\ncdi_spec_dirs = {json.dumps(dirs)}\n"
                                  f"[crio.runtime.runtimes.xpu]\nruntime_path = \"{runtime_path}\"\n")

    def test_configured_passes(self, ready: Node) -> None:
        """CRI-O reading our dir with an xpu handler: ok for both checks."""
        self.write(ready, [str(ready.spec_dir)], str(ready.wrapper))
        _code, res = ready.doctor(versions=("crio=1.30.0",))
        assert status(res, "crio-cdi") == "ok" and status(res, "crio-handler") == "ok"

    def test_wrong_dirs_and_binary_fail(self, ready: Node) -> None:
        """Spec dir not read and handler binary missing: both fail with their fixes."""
        self.write(ready, ["/etc/cdi"], "/nonexistent/xpu-container-runtime")
        _code, res = ready.doctor(versions=("crio=1.30.0",))
        assert "cdi_spec_dirs" in worst(res, "crio-cdi")["fix"]
        assert worst(res, "crio-handler")["status"] == "fail"

    def test_drop_in_overrides(self, ready: Node) -> None:
        """A crio.conf.d drop-in fixing cdi_spec_dirs wins over crio.conf."""
        self.write(ready, ["/etc/cdi"], str(ready.wrapper))
        fakehost.write(ready.crio.parent / "crio.conf.d" / "99-xpu.conf",
                       f"[crio.runtime]\ncdi_spec_dirs = {json.dumps([str(ready.spec_dir)])}\n")
        _code, res = ready.doctor(versions=("crio=1.30.0",))
        assert status(res, "crio-cdi") == "ok"


class TestDocker:
    def test_27_without_feature_fails(self, ready: Node) -> None:
        """Docker 27 needs features.cdi: fail, the fix names it."""
        fakehost.write(ready.docker, json.dumps({"cdi-spec-dirs": [str(ready.spec_dir)]}))
        _code, res = ready.doctor(versions=("docker=27.5.1",))
        r = worst(res, "docker-cdi")
        assert r["status"] == "fail" and '"features": {"cdi": true}' in r["fix"]

    def test_27_with_feature_passes(self, ready: Node) -> None:
        """features.cdi true: ok."""
        fakehost.write(ready.docker, json.dumps({"features": {"cdi": True},
                                                 "cdi-spec-dirs": [str(ready.spec_dir)]}))
        _code, res = ready.doctor(versions=("docker=27.5.1",))
        assert status(res, "docker-cdi") == "ok"

    def test_handler_path_missing_fails(self, ready: Node) -> None:
        """runtimes.xpu.path pointing nowhere: fail."""
        fakehost.write(ready.docker, json.dumps({"cdi-spec-dirs": [str(ready.spec_dir)],
                                                 "runtimes": {"xpu": {"path": "/nonexistent/x"}}}))
        _code, res = ready.doctor(versions=("docker=28.2.2",))
        assert status(res, "docker-cdi") == "ok" and status(res, "docker-handler") == "fail"


class TestHook:
    def test_containerd_16_with_wrapper_passes(self, ready: Node) -> None:
        """containerd 1.6 has no CDI; an xpu handler running the wrapper injects cards: ok."""
        ready.containerd_config(cdi=None)
        _code, res = ready.doctor(versions=("containerd=1.6.20",))
        r = worst(res, "hook")
        assert r["status"] == "ok" and "handler 'xpu' runs xpu-container-runtime" in r["found"]

    def test_containerd_16_with_base_spec_hook_passes(self, ready: Node) -> None:
        """A base_runtime_spec that registers xpu-cdi-hook also counts."""
        base = ready.tmp / "base.json"
        fakehost.write(base, json.dumps({"hooks": {"prestart": [{"path": str(ready.hook)}]}}))
        ready.containerd_config(cdi=None, handler=None, runc=f'  base_runtime_spec = "{base}"')
        _code, res = ready.doctor(versions=("containerd=1.6.20",))
        r = worst(res, "hook")
        assert r["status"] == "ok" and "'runc' has xpu-cdi-hook in its base_runtime_spec" in r["found"]

    def test_containerd_16_without_anything_fails(self, ready: Node) -> None:
        """containerd 1.6 with neither wrapper nor hook: fail, the fix runs runtime configure."""
        ready.containerd_config(cdi=None, handler=None)
        _code, res = ready.doctor(versions=("containerd=1.6.20",))
        r = worst(res, "hook")
        assert r["status"] == "fail" and "containerd 1.6.20 has no CDI" in r["found"]
        assert "xpu-cdi runtime configure --runtime containerd" in r["fix"] and "runtimeClassName: xpu" in r["fix"]

    def test_old_docker_without_runtime_fails(self, ready: Node) -> None:
        """Docker 24 has no CDI either."""
        _code, res = ready.doctor(versions=("docker=24.0.7",))
        assert "Docker 24.0.7 has no CDI" in worst(res, "hook")["found"]


class TestOciHooks:
    def test_valid_file_passes(self, ready: Node) -> None:
        """A hooks.d file running the existing hook: ok."""
        fakehost.write(ready.hooks_dir / "xpu-cdi.json", json.dumps(
            {"version": "1.0.0", "hook": {"path": str(ready.hook)}, "when": {"always": True},
             "stages": ["prestart"]}))
        _code, res = ready.doctor()
        assert status(res, "oci-hooks") == "ok"

    def test_compiled_hook_alone_passes(self, ready: Node) -> None:
        """The compiled hook copied alone into a dir passes: nothing beside it is needed."""
        from support.hookkit import copy_binary

        (ready.tmp / "alone").mkdir()
        hook = copy_binary("xpu-cdi-hook", ready.tmp / "alone")
        fakehost.write(ready.hooks_dir / "xpu-cdi.json", json.dumps(
            {"version": "1.0.0", "hook": {"path": str(hook)}, "when": {"always": True}, "stages": ["prestart"]}))
        _code, res = ready.doctor()
        assert status(res, "oci-hooks") == "ok"
        assert sorted(os.listdir(ready.tmp / "alone")) == ["xpu-cdi-hook"]


    def test_missing_hook_binary_fails(self, ready: Node) -> None:
        """A hooks.d file whose hook is gone breaks matching containers: fail."""
        fakehost.write(ready.hooks_dir / "xpu-cdi.json", json.dumps(
            {"version": "1.0.0", "hook": {"path": "/nonexistent/xpu-cdi-hook"}, "when": {"always": True},
             "stages": ["prestart"]}))
        _code, res = ready.doctor()
        r = worst(res, "oci-hooks")
        assert r["status"] == "fail" and "does not exist" in r["found"] and "reinstall" in r["fix"]
