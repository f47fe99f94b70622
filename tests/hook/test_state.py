"""Parsing the OCI state and config.json: rootfs forms, env, annotations."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from xpu_cdi.errors import HookError
from xpu_cdi.hook import state


def st(**kw: object) -> dict:
    base = {"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 42, "bundle": "/b"}
    base.update(kw)
    return base


class TestParseState:
    def test_runc_state(self) -> None:
        """runc's state (annotations optional) parses."""
        got = state.parse_state(json.dumps(st()).encode())
        assert got["pid"] == 42 and got["bundle"] == "/b"

    def test_pid_defaults_to_zero(self) -> None:
        """A state without pid (some createContainer runs) is pid 0, not an error."""
        data = st()
        del data["pid"]
        assert state.parse_state(json.dumps(data).encode()).get("pid", 0) == 0

    @pytest.mark.parametrize("bad, needle", [
        ({"annotations": []}, "'annotations' must be an object"),
        ({"id": ""}, "'id' must be a non-empty string"),
        ({"pid": "42"}, "'pid' must be a non-negative integer"),
        ({"bundle": None}, "'bundle' must be an absolute path"),
    ])
    def test_bad_fields(self, bad: dict, needle: str) -> None:
        """Each unusable field is named."""
        with pytest.raises(HookError, match=needle):
            state.parse_state(json.dumps(st(**bad)).encode())


class TestRootfs:
    @pytest.mark.parametrize("root, want", [
        ({"path": "rootfs"}, "/b/rootfs"),
        ({"path": "./x/../rootfs"}, "/b/rootfs"),
        ({"path": "/abs/rootfs"}, "/abs/rootfs"),
    ])
    def test_relative_and_absolute(self, root: dict, want: str) -> None:
        """root.path relative to the bundle, or absolute (podman, containerd --config)."""
        assert state.rootfs_of({"root": root}, st(), "/b") == want

    def test_crun_state_root(self) -> None:
        """No root in config.json but crun's state has one: used."""
        assert state.rootfs_of({}, st(root="/run/crun/r"), "/b") == "/run/crun/r"

    def test_config_root_wins(self) -> None:
        """config.json's root.path is preferred over the state's."""
        assert state.rootfs_of({"root": {"path": "rootfs"}}, st(root="/other"), "/b") == "/b/rootfs"

    @pytest.mark.parametrize("config", [{}, {"root": {}}, {"root": {"path": ""}}, {"root": "rootfs"}])
    def test_missing(self, config: dict) -> None:
        """No usable root: a clear error naming config.json."""
        with pytest.raises(HookError, match="has no root.path"):
            state.rootfs_of(config, st(), "/b")


class TestContainer:
    def test_env_and_annotations(self) -> None:
        """process.env is kept as data; state and config annotations merge (config wins)."""
        c = state.container(st(annotations={"a": "1", "b": "2"}),
                            {"root": {"path": "r"}, "process": {"env": ["X=1", "Y=2"]},
                             "annotations": {"b": "3", "n": 4}})
        assert c.env == ["X=1", "Y=2"] and c.annotations == {"a": "1", "b": "3", "n": "4"}
        assert (c.id, c.pid, c.rootfs, c.status) == ("c1", 42, "/b/r", "creating")

    def test_no_process(self) -> None:
        """A config without process (not runnable, but parseable) has an empty env."""
        assert state.container(st(), {"root": {"path": "r"}}).env == []

    def test_env_not_a_list(self) -> None:
        """A malformed env is an error, not a crash."""
        with pytest.raises(HookError, match="process.env must be a list"):
            state.container(st(), {"root": {"path": "r"}, "process": {"env": "X=1"}})


class TestRead:
    def test_limit(self) -> None:
        """read_limited stops one byte over the limit."""
        r, w = os.pipe()
        os.write(w, b"x" * 101)
        os.close(w)
        with pytest.raises(HookError, match="larger than 100 bytes"):
            state.read_limited(r, 100, "input")
        os.close(r)

    def test_load_from_fd(self, tmp_path: Path) -> None:
        """load() reads the state from an fd and config.json from the bundle."""
        (tmp_path / "config.json").write_text(json.dumps({"root": {"path": "rootfs"},
                                                          "process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}}))
        r, w = os.pipe()
        os.write(w, json.dumps(st(bundle=str(tmp_path))).encode())
        os.close(w)
        try:
            c = state.load(r)
        finally:
            os.close(r)
        assert c.rootfs == str(tmp_path / "rootfs") and c.env == ["CXPU_VISIBLE_DEVICES=1"]
