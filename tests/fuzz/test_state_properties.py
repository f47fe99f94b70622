"""Properties of the hook's inputs (hook/state): any OCI state on stdin and any
config.json give a Container or a one-line HookError."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pytest
from fuzzcontract import DEEP, FUZZ, file_contents, json_values, mutated, ours
from hypothesis import example, given
from hypothesis import strategies as st

from xpu_cdi.errors import HookError
from xpu_cdi.hook import state

STATE = {"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 4242, "bundle": "/tmp/b",
         "annotations": {"cdi.k8s.io/p_1": "kunlunxin.com/xpu=1"}}
CONFIG = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": False},
          "process": {"env": ["PATH=/bin", "CXPU_VISIBLE_DEVICES=1,3"], "args": ["true"]},
          "annotations": {"io.kubernetes.x": "y"}, "mounts": [], "linux": {}}
states = st.one_of(st.just(STATE).flatmap(mutated), json_values)
configs = st.one_of(st.just(CONFIG).flatmap(mutated), json_values)


def as_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


class TestParseState:
    @FUZZ
    @given(data=st.one_of(file_contents(deep=False), states.map(as_bytes)))
    @example(data=b"")
    @example(data=b'{"id":"c","bundle":"/b","pid":1e400}')
    @example(data=b'{"id":"c","bundle":"/b","pid":NaN}')
    @example(data=as_bytes(STATE))
    def test_any_stdin(self, data: bytes) -> None:
        """parse_state gives a state with a string id, an absolute bundle and a pid >= 0, or a HookError."""
        got = ours(state.parse_state, data)
        if not isinstance(got, HookError):
            assert isinstance(got["id"], str) and got["id"] and os.path.isabs(got["bundle"])
            assert isinstance(got.get("pid", 0), int) and got.get("pid", 0) >= 0


class TestConfig:
    @FUZZ
    @given(st_=states, config=configs)
    @example(st_=STATE, config=CONFIG)
    @example(st_=STATE, config=dict(CONFIG, root={"path": 5}))
    @example(st_=STATE, config=dict(CONFIG, process={"env": "PATH=/bin"}))
    @example(st_=dict(STATE, root="/crun/root"), config=dict(CONFIG, root=None))
    def test_any_config(self, st_: Any, config: Any) -> None:
        """A parsed state plus any config.json give a Container (rootfs absolute, env a list, annotations str->str) or a HookError."""
        parsed = ours(state.parse_state, as_bytes(st_))
        if isinstance(parsed, HookError) or not isinstance(config, dict):
            return
        got = ours(state.container, parsed, config)
        if not isinstance(got, HookError):
            assert os.path.isabs(got.rootfs) and isinstance(got.env, list)
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in got.annotations.items())

    @FUZZ
    @given(data=st.one_of(file_contents(deep=False), configs.map(as_bytes)))
    @example(data=b"\xff\xfe{}")
    def test_any_config_file(self, data: bytes) -> None:
        """read_config on any bytes in <bundle>/config.json gives a dict or a HookError naming the file."""
        with tempfile.TemporaryDirectory() as bundle:
            with open(os.path.join(bundle, "config.json"), "wb") as f:
                f.write(data)
            got = ours(state.read_config, bundle)
            assert isinstance(got, dict) or "config.json" in str(got)

    def test_missing_bundle(self) -> None:
        """A bundle without config.json is a HookError naming the bundle."""
        with tempfile.TemporaryDirectory() as bundle:
            err = ours(state.read_config, bundle)
            assert isinstance(err, HookError) and bundle in str(err)


class TestDeepNesting:
    @pytest.mark.parametrize("data", DEEP[:2], ids=["array", "object"])
    def test_state(self, data: bytes) -> None:
        """A deeply nested state on stdin is a HookError, like any other invalid state."""
        assert isinstance(ours(state.parse_state, data), HookError)

    def test_config(self) -> None:
        """A deeply nested config.json is a HookError naming the file."""
        with tempfile.TemporaryDirectory() as bundle:
            with open(os.path.join(bundle, "config.json"), "wb") as f:
                f.write(DEEP[0])
            assert isinstance(ours(state.read_config, bundle), HookError)
