"""Properties of the settings files an admin edits: the node config (nodeconfig.py) and the device
plugin's config (deviceplugin/config.py): any file gives settings or a one-line ConfigError naming
the file, at once (nesting, aliases and size bounded: xpu_cdi.bounded)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from fuzzcontract import FUZZ, file_contents, json_values, mutated, ours
from hypothesis import example, given
from hypothesis import strategies as st
from test_registry_properties import BILLION_LAUGHS

from xpu_cdi import nodeconfig
from xpu_cdi.deviceplugin import config
from xpu_cdi.errors import ConfigError

NODE = {"accept-env-selection-when-unprivileged": False, "kubernetes-allocation": {"kunlunxin.com/xpu": "dra"},
        "configure-containerd": True}
PLUGIN = {"plugin-dir": "/k", "spec-dir": ["/a"], "health-interval": 5, "removal-grace": 30,
          "resource-name": {"huawei.com/npu": "huawei.com/Ascend910"}, "device-list-strategy": "cdi-cri",
          "sharing": {"timeSlicing": {"resources": [{"name": "huawei.com/npu", "replicas": 4}]}}}
PLUGIN_V1 = {"version": "v1", "flags": {"pluginDir": "/k", "specDir": ["/a"], "migStrategy": "none",
                                        "nvidiaDriverRoot": "/d", "plugin": {"deviceListStrategy": ["cdi-cri"],
                                                                             "passDeviceSpecs": False}},
             "sharing": PLUGIN["sharing"]}
settings = st.one_of(mutated(NODE), mutated(PLUGIN), mutated(PLUGIN_V1), json_values,
                     st.sampled_from([float("nan"), float("inf"), -1, 0, True]).map(lambda v: {"health-interval": v}))


def load_both(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "config.yaml")
        with open(path, "wb") as f:
            f.write(data)
        for fn in (nodeconfig.read, lambda p: config.build(p, {})):
            got = ours(fn, path)
            assert not isinstance(got, ConfigError) or "config.yaml" in str(got), got
            assert not isinstance(got, ConfigError) or len(str(got)) < 1000, len(str(got))


class TestFiles:
    @FUZZ
    @given(data=file_contents(settings))
    @example(data=BILLION_LAUGHS)
    @example(data=b"sharing: " + b"[" * 500 + b"]" * 500)
    @example(data=b"health-interval: .nan\n")
    @example(data=b"&a [*a]")
    def test_any_file(self, data: bytes) -> None:
        load_both(data)


class TestMappings:
    @FUZZ
    @given(data=settings)
    def test_any_mapping(self, data: Any) -> None:
        """from_mapping() (what a reload builds) gives settings fields or a ConfigError, never another exception."""
        ours(config.from_mapping, data, "config file 'x'")
