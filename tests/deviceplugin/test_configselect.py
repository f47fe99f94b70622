"""``xpu-cdi device-plugin-config`` (deviceplugin/configselect.py): the node label picks a named config,
written for the plugin; unknown names and bad files keep the config in place.  The API server is a
stand-in here (its list and watch of one Node); tests/k8s/test_helm_node.py runs the sidecar on the
real cluster."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import click
import pytest
import yaml
from click.testing import CliRunner

from support.fakeapi import HttpFront
from xpu_cdi import cli, labels, log
from xpu_cdi.deviceplugin import config, configselect
from xpu_cdi.errors import ApiError, ConfigError

LABEL = configselect.DEFAULT_LABEL
NODE = "node-a"
A = "version: v1\nflags: {resourceNaming: kind}\n"
B = "version: v1\nsharing: {timeSlicing: {resources: [{name: kunlunxin.com/xpu, replicas: 4}]}}\n"
BAD = "version: v1\nflags: {gfd: {oneshot: true}}\n"  # NVIDIA's, refused by the plugin


def configmap_dir(where: Path, configs: Dict[str, str]) -> Path:
    """*configs* laid out as kubelet mounts a ConfigMap: ``..data`` -> a timestamped dir, a symlink per key."""
    d = where / "configs"
    stamp = d / "..2026_12_07_20_00_00.000000001"
    stamp.mkdir(parents=True)
    for name, text in configs.items():
        (stamp / name).write_text(text)
    (d / "..data").symlink_to(stamp.name)
    for name in configs:
        (d / name).symlink_to(f"..data/{name}")
    return d


class Lines:
    """A Log that keeps its lines."""

    def __init__(self) -> None:
        self.lines: List[Tuple[int, str]] = []

    def __call__(self, message: str, level: int = log.INFO) -> None:
        self.lines.append((level, message))

    def warnings(self) -> List[str]:
        return [m for level, m in self.lines if level == log.WARNING]


@pytest.fixture
def lines() -> Lines:
    return Lines()


def selector(tmp_path: Path, lines: Lines, configs: Optional[Dict[str, str]] = None,
             default: str = "default") -> configselect.Selector:
    d = configmap_dir(tmp_path, {"default": A, "b": B, "bad": BAD} if configs is None else configs)
    out = tmp_path / "out"
    out.mkdir()
    return configselect.Selector(str(d), str(out / "config.yaml"), default, LABEL, lines)


def written(s: configselect.Selector) -> str:
    return Path(s.output).read_text()


class TestSelector:
    def test_the_configs_are_the_configmaps_keys(self, tmp_path: Path) -> None:
        d = configmap_dir(tmp_path, {"default": A, "b": B})
        (d / "sub").mkdir()
        (d / ".hidden").write_text(A)
        assert sorted(configselect.available(str(d))) == ["b", "default"]

    def test_no_label_is_the_default_then_the_label_picks(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        assert s.apply(None) and written(s) == A
        assert s.apply("b") and written(s) == B
        assert config.read_file(s.output, True)["sharing"].resources[0].replicas == 4  # what the plugin reads
        assert not s.apply("b"), "the same config again: no write (the plugin would reload for nothing)"
        assert s.apply("") and written(s) == A, "an empty value is no label"
        assert lines.warnings() == []

    def test_written_atomically(self, tmp_path: Path, lines: Lines) -> None:
        """A new file renamed over the old one (a new inode, as the plugin's file check sees a change)."""
        s = selector(tmp_path, lines)
        s.apply(None)
        before = os.stat(s.output).st_ino
        s.apply("b")
        assert os.stat(s.output).st_ino != before
        assert os.listdir(os.path.dirname(s.output)) == ["config.yaml"], "no temp file left"

    def test_unknown_name_keeps_the_config_in_place(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        s.apply("b")
        assert not s.apply("c") and written(s) == B
        (line,) = lines.warnings()
        assert line == (f"{LABEL}=c: no config named 'c' in {s.configs_dir} (there are: b, bad, default): "
                        f"config 'b' stays")
        s.apply("c")
        assert len(lines.warnings()) == 1, "said once while nothing changes"

    def test_a_config_the_plugin_refuses_is_not_written(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        s.apply("b")
        assert not s.apply("bad") and written(s) == B
        (line,) = lines.warnings()
        assert "config 'bad'" in line and "gfd" in line and line.endswith("config 'b' stays"), line

    def test_unknown_at_start_gives_the_default(self, tmp_path: Path, lines: Lines) -> None:
        """Nothing in place yet (the init container): the default, and the line says so."""
        s = selector(tmp_path, lines)
        assert s.apply("typo") and written(s) == A
        (line,) = lines.warnings()
        assert "no config named 'typo'" in line and "the default config 'default' is used" in line

    def test_a_file_in_place_is_kept_over_the_default(self, tmp_path: Path, lines: Lines) -> None:
        """The sidecar after a restart (the emptyDir keeps the file): an unknown name keeps what is there."""
        s = selector(tmp_path, lines)
        Path(s.output).write_text(B)
        assert not s.apply("typo") and written(s) == B
        assert lines.warnings()[0].endswith(f"{s.output} as it is stays")

    def test_config_in_place_is_recognised(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        Path(s.output).write_text(B)
        assert not s.apply("b")
        assert s.current == "b" and any("is in place" in m for _, m in lines.lines)

    def test_an_edited_configmap_is_written_on_the_next_pass(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        s.apply("b")
        target = Path(s.configs_dir) / "b"
        os.unlink(target.resolve())
        target.resolve().parent.joinpath("b").write_text(A)
        assert s.apply("b") and written(s) == A

    def test_label_is_not_the_labellers(self) -> None:
        """The labeller removes labels it owns and no longer computes: the admin's label must not be one."""
        assert not labels.ours(LABEL)


class FakeNodes:
    """The API server's list and watch of Nodes, as configselect reads them: the field selector
    honoured, each watch playing the next script of events."""

    def __init__(self, value: Optional[str], scripts: Optional[List[List[Tuple[str, Any]]]] = None) -> None:
        self.value = value
        self.scripts = scripts or []
        self.queries: List[Tuple[str, Dict[str, Any]]] = []
        self.fail: List[ApiError] = []
        self.stop = threading.Event()

    def node(self, value: Optional[str]) -> Dict[str, Any]:
        labels_ = {"kubernetes.io/hostname": NODE}
        if value is not None:
            labels_[LABEL] = value
        return {"metadata": {"name": NODE, "labels": labels_}}

    def get(self, path: str, query: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        self.queries.append(("list", dict(query or {})))
        if self.fail:
            raise self.fail.pop(0)
        assert path == "/api/v1/nodes" and query == {"fieldSelector": f"metadata.name={NODE}"}
        return {"metadata": {"resourceVersion": "7"}, "items": [self.node(self.value)]}

    def watch(self, path: str, query: Mapping[str, Any], timeout_seconds: int) -> Iterator[Tuple[str, Any]]:
        self.queries.append(("watch", dict(query)))
        assert query["fieldSelector"] == f"metadata.name={NODE}" and query["resourceVersion"] == "7"
        if not self.scripts:
            self.stop.set()
            return
        for kind, value in self.scripts.pop(0):
            if kind == "ERROR":
                yield kind, {"code": 410}
            else:
                self.value = value
                yield kind, self.node(value)


class TestRun:
    def test_follows_the_label_through_the_watch(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        seen: List[str] = []
        apply = s.apply

        def record(value: Optional[str]) -> bool:
            changed = apply(value)
            seen.append(written(s))
            return changed

        s.apply = record  # type: ignore[method-assign]
        kube = FakeNodes(None, [[("MODIFIED", "b"), ("BOOKMARK", "b"), ("MODIFIED", "nope"), ("MODIFIED", None)],
                                [("ERROR", None)]])
        assert configselect.run(kube, NODE, s, 60, once=False, stop=kube.stop) == 0
        # listed A (no label); b; the bookmark is not a change; nope kept b; no label: A; listed again after
        # the watch's end and after the 410: A each time
        assert seen == [A, B, B, A, A, A]
        assert [q[0] for q in kube.queries] == ["list", "watch", "list", "watch", "list", "watch"]
        assert [w for w in lines.warnings() if "nope" in w] and len(lines.warnings()) == 1

    def test_api_errors_are_retried_with_one_line(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        kube = FakeNodes("b")
        kube.fail = [ApiError(0, "API server https://x not reached"), ApiError(0, "API server https://x not reached"),
                     ApiError(503, "GET /api/v1/nodes: 503 unavailable")]
        waits: List[float] = []
        configselect.run(kube, NODE, s, 60, once=False, stop=kube.stop, sleep=waits.append)
        assert written(s) == B
        assert waits == [0.5, 1.0, 2.0]
        assert len(lines.warnings()) == 2, lines.warnings()  # one per different error

    def test_once(self, tmp_path: Path, lines: Lines) -> None:
        s = selector(tmp_path, lines)
        assert configselect.run(FakeNodes("b"), NODE, s, 60, once=True) == 0
        assert written(s) == B

    def test_once_without_any_config_fails(self, tmp_path: Path, lines: Lines) -> None:
        """No config for the label and no default: the init container fails, saying why (Init:Error)."""
        s = selector(tmp_path, lines, configs={"b": B})
        with pytest.raises(ConfigError, match="no config named 'default'.*nothing to start the plugin with"):
            configselect.run(FakeNodes(None), NODE, s, 60, once=True)

    def test_once_node_missing(self, tmp_path: Path, lines: Lines) -> None:
        class NoNode(FakeNodes):
            def get(self, path: str, query: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
                return {"metadata": {"resourceVersion": "1"}, "items": []}

        with pytest.raises(ApiError, match="node 'node-a' not found"):
            configselect.run(NoNode(None), NODE, selector(tmp_path, lines), 60, once=True)


class NodeTable:
    """HttpFront's tables: the nodes, listed by field selector as the API server does."""

    def __init__(self, nodes: Dict[str, Dict[str, str]]) -> None:
        self.nodes = nodes
        self.queries: List[Dict[str, Any]] = []

    def request(self, method: str, path: str, body: Any = None, query: Any = None, **_: Any) -> Dict[str, Any]:
        self.queries.append(dict(query or {}))
        if method != "GET" or path != "/api/v1/nodes":
            raise ApiError(403, f"{method} {path}: forbidden")
        wanted = dict(query or {}).get("fieldSelector", "").partition("metadata.name=")[2]
        items = [{"metadata": {"name": n, "labels": lb}} for n, lb in self.nodes.items() if not wanted or n == wanted]
        return {"metadata": {"resourceVersion": "1"}, "items": items}


class TestCommand:
    def kubeconfig(self, tmp_path: Path, url: str) -> Path:
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "clusters": [{"name": "k", "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {"token": "t"}}]}))
        return path

    def test_once_over_http(self, tmp_path: Path) -> None:
        """The command as the init container runs it, against an HTTP API: its node's label only."""
        table = NodeTable({NODE: {LABEL: "b"}, "node-b": {LABEL: "default"}})
        front = HttpFront(table)
        try:
            d = configmap_dir(tmp_path, {"default": A, "b": B})
            out = tmp_path / "config.yaml"
            r = CliRunner().invoke(cli.main, [
                "device-plugin-config", "--once", "--kubeconfig", str(self.kubeconfig(tmp_path, front.url)),
                "--configs-dir", str(d), "--output", str(out)], env={"NODE_NAME": NODE})
        finally:
            front.close()
        assert r.exit_code == 0, r.output
        assert out.read_text() == B
        assert table.queries == [{"fieldSelector": f"metadata.name={NODE}"}]
        assert f"{LABEL}=b: config 'b' written to {out}" in r.stderr

    def test_settings_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        cmd = cli.main.get_command(click.Context(cli.main), "device-plugin-config")
        assert cmd is not None
        ctx = cmd.make_context("device-plugin-config", [])
        assert ctx.params["node_label"] == LABEL and ctx.params["default_config"] == "default"
        for k, v in {"XPU_CDI_DEFAULT_CONFIG": "b", "XPU_CDI_NODE_LABEL": "example.com/cfg", "NODE_NAME": "n1"}.items():
            monkeypatch.setenv(k, v)
        ctx = cmd.make_context("device-plugin-config", [])
        assert (ctx.params["default_config"], ctx.params["node_label"], ctx.params["node"]) == \
            ("b", "example.com/cfg", "n1")

    def test_no_node_is_one_line(self, tmp_path: Path) -> None:
        r = CliRunner().invoke(cli.main, ["device-plugin-config", "--once", "--configs-dir", str(tmp_path)],
                               env={"NODE_NAME": None, "XPU_CDI_NODE": None})
        assert r.exit_code == 1 and "--node is needed" in r.stderr and len(r.stderr.splitlines()) == 1, r.output

