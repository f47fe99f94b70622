"""`xpu-cdi runtime configure` for Docker, CRI-O and podman, the oci hook
file, and option checks."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from xpu_cdi.cli import main
from xpu_cdi.runtime import crio, docker, ocihooks, podman

DATA = Path(__file__).resolve().parent.parent / "data" / "runtime-configs"
WRAPPER = "/opt/xpu-cdi/bin/xpu-container-runtime"
HOOK = "/opt/xpu-cdi/bin/xpu-cdi-hook"


def run(runtime: str, *args: str) -> Any:
    return CliRunner().invoke(main, ["runtime", "configure", "--runtime", runtime, "--wrapper-path", WRAPPER,
                                     "--hook-path", HOOK, *args])


class TestDocker:
    def test_runtime_and_cdi_keep_other_keys(self, tmp_path: Path) -> None:
        """runtimes.xpu and features.cdi are added; every other key, and their order, stays."""
        path = tmp_path / "daemon.json"
        shutil.copy(DATA / "daemon.json", path)
        before = json.loads(path.read_text())
        r = run("docker", "--config", str(path), "--enable-cdi")
        assert r.exit_code == 0, r.output
        after = json.loads(path.read_text())
        assert after["runtimes"]["xpu"] == {"path": WRAPPER}
        assert after["features"] == {"buildkit": True, "cdi": True}
        assert list(after) == list(before)
        for key in before:
            if key not in ("runtimes", "features"):
                assert after[key] == before[key]
        assert after["runtimes"]["nvidia"] == before["runtimes"]["nvidia"]
        assert '\n  "log-driver"' in path.read_text(), "the file's 2-space indent is kept"

    def test_second_run_and_default(self, tmp_path: Path) -> None:
        """--set-as-default sets default-runtime; running again changes nothing."""
        path = tmp_path / "daemon.json"
        shutil.copy(DATA / "daemon.json", path)
        assert run("docker", "--config", str(path), "--set-as-default").exit_code == 0
        once = path.read_text()
        assert json.loads(once)["default-runtime"] == "xpu"
        r = run("docker", "--config", str(path), "--set-as-default")
        assert r.exit_code == 0 and "unchanged" in r.output and path.read_text() == once
        assert len(list(tmp_path.glob("daemon.json.bak-*"))) == 1

    def test_semantically_equal_file_is_not_reformatted(self, tmp_path: Path) -> None:
        """A compact daemon.json that already has everything is left byte for byte."""
        path = tmp_path / "daemon.json"
        text = json.dumps({"runtimes": {"xpu": {"path": WRAPPER}}, "debug": True}, separators=(",", ":"))
        path.write_text(text)
        assert run("docker", "--config", str(path)).exit_code == 0
        assert path.read_text() == text

    @pytest.mark.parametrize("text, message", [("{", "cannot parse"), ("[1]", "expected a JSON object"),
                                               ('{"runtimes": 3}', "not an object")])
    def test_bad_daemon_json_is_refused(self, tmp_path: Path, text: str, message: str) -> None:
        """Broken files are refused with one line, untouched."""
        path = tmp_path / "daemon.json"
        path.write_text(text)
        r = run("docker", "--config", str(path))
        assert r.exit_code == 1 and message in r.output and len(r.output.strip().splitlines()) == 1
        assert path.read_text() == text

    def test_missing_and_empty_files(self, tmp_path: Path) -> None:
        """A missing or empty daemon.json becomes one with just our runtime."""
        for path in (tmp_path / "a" / "daemon.json", tmp_path / "empty.json"):
            if path.name == "empty.json":
                path.write_text("")
            assert run("docker", "--config", str(path)).exit_code == 0
            assert json.loads(path.read_text()) == {"runtimes": {"xpu": {"path": WRAPPER}}}

    def test_no_drop_in(self, tmp_path: Path) -> None:
        """Docker has no drop-ins: --drop-in is refused."""
        r = run("docker", "--config", str(tmp_path / "d.json"), "--drop-in", str(tmp_path / "x.json"))
        assert r.exit_code == 1 and "no drop-in" in r.output

    def test_readers(self) -> None:
        """cdi_enabled, handlers and default_runtime for doctor."""
        doc = docker.load(str(DATA / "daemon.json"))
        assert not docker.cdi_enabled(doc) and docker.default_runtime(doc) == "runc"
        assert list(docker.handlers(doc)) == ["nvidia"]


class TestCrio:
    def test_drop_in_copies_the_runc_handler(self, tmp_path: Path) -> None:
        """The drop-in has cdi_spec_dirs and an oci handler with runc's settings and our runtime_path."""
        drop = tmp_path / "crio.conf.d" / "99-xpu-cdi.conf"
        r = run("crio", "--config", str(DATA / "crio.conf"), "--drop-in", str(drop), "--no-oci-hook",
                "--set-as-default")
        assert r.exit_code == 0, r.output
        doc = tomllib.loads(drop.read_text())
        assert doc["crio"]["runtime"]["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
        assert doc["crio"]["runtime"]["default_runtime"] == "xpu"
        h = doc["crio"]["runtime"]["runtimes"]["xpu"]
        assert h["runtime_path"] == WRAPPER and h["runtime_type"] == "oci"
        assert h["runtime_root"] == "/run/runc" and h["monitor_path"] == "/usr/libexec/crio/conmon"
        assert "XPU_CDI_RUNTIME=/usr/libexec/crio/runc" in r.output

    def test_second_run_and_other_drop_ins(self, tmp_path: Path) -> None:
        """Idempotent; an earlier drop-in's runc handler is what gets copied."""
        d = tmp_path / "crio.conf.d"
        d.mkdir()
        (d / "10-runc.conf").write_text('[crio.runtime.runtimes.runc]\nruntime_path = "/usr/sbin/runc"\n'
                                        'runtime_root = "/run/runc-site"\n')
        args = ("--config", str(tmp_path / "missing.conf"), "--drop-in", str(d / "99-xpu-cdi.conf"), "--no-oci-hook")
        assert run("crio", *args).exit_code == 0
        once = (d / "99-xpu-cdi.conf").read_text()
        assert tomllib.loads(once)["crio"]["runtime"]["runtimes"]["xpu"]["runtime_root"] == "/run/runc-site"
        r = run("crio", *args)
        assert "unchanged" in r.output and (d / "99-xpu-cdi.conf").read_text() == once
        assert sorted(p.name for p in d.iterdir()) == ["10-runc.conf", "99-xpu-cdi.conf"], "no backups in crio.conf.d"

    def test_hook_file_is_installed(self, tmp_path: Path) -> None:
        """CRI-O gets the oci-hooks.d file by default, with the installed hook's path."""
        hooks = tmp_path / "hooks.d"
        r = run("crio", "--config", str(DATA / "crio.conf"), "--drop-in", str(tmp_path / "d" / "99.conf"),
                "--hooks-dir", str(hooks))
        assert r.exit_code == 0, r.output
        doc = json.loads((hooks / "xpu-cdi.json").read_text())
        assert doc["hook"]["path"] == HOOK and doc["version"] == "1.0.0" and doc["stages"]
        assert ocihooks.installed([str(hooks)])[str(hooks / "xpu-cdi.json")] == doc

    def test_readers(self) -> None:
        """handlers, default_runtime and hooks_dirs for doctor."""
        doc = crio.load(str(DATA / "crio.conf"))
        assert set(crio.handlers(doc)) == {"runc", "crun"} and crio.default_runtime(doc) == "crun"
        assert crio.hooks_dirs(doc) == ["/usr/share/containers/oci/hooks.d"]


class TestPodman:
    def test_in_place_keeps_comments(self, tmp_path: Path) -> None:
        """containers.conf gains engine.runtimes.xpu; comments and other keys stay."""
        path = tmp_path / "containers.conf"
        shutil.copy(DATA / "containers.conf", path)
        before = path.read_text()
        r = run("podman", "--config", str(path), "--no-oci-hook", "--set-as-default")
        assert r.exit_code == 0, r.output
        after = path.read_text()
        for line in before.splitlines():
            assert line in after
        doc = tomllib.loads(after)
        assert doc["engine"]["runtimes"] == {"runc": ["/usr/sbin/runc"], "xpu": [WRAPPER]}
        assert doc["engine"]["runtime"] == "xpu" and doc["engine"]["cgroup_manager"] == "cgroupfs"
        assert "unchanged" in run("podman", "--config", str(path), "--no-oci-hook", "--set-as-default").output
        assert podman.handlers(podman.load(str(path)))["xpu"] == [WRAPPER]

    def test_drop_in(self, tmp_path: Path) -> None:
        """With --drop-in the main file is not touched."""
        drop = tmp_path / "containers.conf.d" / "99-xpu-cdi.conf"
        r = run("podman", "--config", str(tmp_path / "containers.conf"), "--drop-in", str(drop), "--no-oci-hook")
        assert r.exit_code == 0
        assert tomllib.loads(drop.read_text()) == {"engine": {"runtimes": {"xpu": [WRAPPER]}}}
        assert not (tmp_path / "containers.conf").exists()


class TestHookFile:
    def test_template_path_is_replaced(self, tmp_path: Path) -> None:
        """A template's hook.path becomes the installed hook; the rest is kept."""
        t = tmp_path / "xpu-cdi.json"
        t.write_text(json.dumps({"version": "1.0.0", "hook": {"path": "/usr/bin/xpu-cdi-hook", "args": ["x"]},
                                 "when": {"annotations": {"^cdi\\.k8s\\.io/": ".*"}}, "stages": ["prestart"]}))
        doc = json.loads(ocihooks.render(HOOK, t))
        assert doc["hook"] == {"path": HOOK, "args": ["x"]} and "annotations" in doc["when"]

    def test_without_template(self, tmp_path: Path) -> None:
        """Without the repository's file the built-in one is valid for podman and CRI-O."""
        doc = json.loads(ocihooks.render(HOOK, tmp_path / "absent.json"))
        ocihooks.check(doc, "builtin")
        assert doc["hook"]["path"] == HOOK and doc["when"] == {"always": True}

    @pytest.mark.parametrize("doc", [{"version": "1.0.0", "hook": {"path": "/x"}, "when": {}, "stages": ["prestart"]},
                                     {"version": "1.0.0", "hook": {"path": "/x"}, "when": {"always": True},
                                      "stages": ["preStart"]}])
    def test_broken_template_is_refused(self, tmp_path: Path, doc: Any) -> None:
        """A template podman would never run (no condition, bad stage) is an error."""
        t = tmp_path / "t.json"
        t.write_text(json.dumps(doc))
        with pytest.raises(Exception, match="oci hook file"):
            ocihooks.render(HOOK, t)


class TestFiles:
    def test_symlinked_config_is_edited_where_it_lives(self, tmp_path: Path) -> None:
        """A config that is a symlink stays a symlink; its target is edited and backed up."""
        real = tmp_path / "managed" / "daemon.json"
        real.parent.mkdir()
        real.write_text('{"debug": true}\n')
        link = tmp_path / "daemon.json"
        link.symlink_to(real)
        assert run("docker", "--config", str(link)).exit_code == 0
        assert link.is_symlink() and json.loads(real.read_text())["runtimes"]["xpu"] == {"path": WRAPPER}
        assert len(list(real.parent.glob("daemon.json.bak-*"))) == 1

    def test_disabled_cri_is_noted(self, tmp_path: Path) -> None:
        """Docker's containerd config disables CRI: configure says Kubernetes cannot use the handler."""
        path = tmp_path / "config.toml"
        path.write_text('disabled_plugins = ["cri"]\n')
        r = run("containerd", "--config", str(path))
        assert r.exit_code == 0 and "disables the CRI plugin" in r.output


class TestOptions:
    @pytest.mark.parametrize("args, message", [
        (("--runtime-name", "XPU_1"), "must be a DNS label"),
        (("--wrapper-path", "xpu-container-runtime"), "must be absolute"),
        (("--drop-in", "conf.d/x.toml"), "must be absolute"),
    ])
    def test_bad_options(self, tmp_path: Path, args: Any, message: str) -> None:
        """Bad names and relative paths are refused before anything is read or written."""
        r = run("containerd", "--config", str(tmp_path / "c.toml"), *args)
        assert r.exit_code == 1 and message in r.output
        assert not list(tmp_path.iterdir())

    def test_runtime_name(self, tmp_path: Path) -> None:
        """--runtime-name picks the handler name (what the RuntimeClass names)."""
        path = tmp_path / "daemon.json"
        assert run("docker", "--config", str(path), "--runtime-name", "kunlun").exit_code == 0
        assert list(json.loads(path.read_text())["runtimes"]) == ["kunlun"]
