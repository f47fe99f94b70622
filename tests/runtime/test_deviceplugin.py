"""The device-plugin helper API (xpu_cdi.deviceplugin) and deploy/runtimeclass.yaml."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest
import yaml

from xpu_cdi import deviceplugin
from xpu_cdi.cdi import names
from xpu_cdi.errors import SelectionError

KIND = "kunlunxin.com/xpu"
REPO = Path(__file__).resolve().parent.parent.parent
# Kubernetes' qualified-name rule for the part of an annotation key after the prefix
K8S_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


class TestNames:
    def test_qualified_names(self) -> None:
        """Ids become qualified names in order, without duplicates."""
        assert deviceplugin.qualified_names(KIND, ["2", "0", "2"]) == ["kunlunxin.com/xpu=2", "kunlunxin.com/xpu=0"]

    @pytest.mark.parametrize("kind, ids", [("kunlunxin.com", ["0"]), (KIND, ["-1"]), (KIND, ["a b"]), (KIND, [])])
    def test_invalid_names(self, kind: str, ids: List[str]) -> None:
        """What the runtimes would reject is rejected here."""
        with pytest.raises(SelectionError):
            deviceplugin.qualified_names(kind, ids)

    def test_cdi_devices(self) -> None:
        """The cdi_devices field is a list of {name: qualified}."""
        assert deviceplugin.cdi_devices(KIND, ["0000:3b:00.0"]) == [{"name": "kunlunxin.com/xpu=0000:3b:00.0"}]


class TestAnnotations:
    @pytest.mark.parametrize("ids", [["1"], ["0", "2"], ["0000:3b:00.0"], ["npu-1_vir02"], [str(i) for i in range(64)]])
    def test_key_and_value_pass_the_runtime_parsers(self, ids: List[str]) -> None:
        """Generated keys are valid Kubernetes names and the value parses back (the binaries read it:
        tests/runtime/test_wrapper_binary.py)."""
        key, value = deviceplugin.annotation("xpu", KIND, ids)
        assert key.startswith("cdi.k8s.io/xpu_") and K8S_NAME.match(key.split("/", 1)[1])
        assert len(key.split("/", 1)[1]) <= 63
        assert names.devices_from_annotations({key: value}) == deviceplugin.qualified_names(KIND, ids)

    def test_explicit_allocation_id(self) -> None:
        """The issue's example: plugin 'test', allocation 'x', card 1."""
        assert deviceplugin.annotation("test", KIND, ["1"], allocation="x") == ("cdi.k8s.io/test_x",
                                                                                "kunlunxin.com/xpu=1")

    def test_slash_in_id_is_replaced(self) -> None:
        """'/' in the allocation id becomes '_', as the reference library does."""
        assert deviceplugin.annotation_key("vendor.xpu", "a/b") == "cdi.k8s.io/vendor.xpu_a_b"

    @pytest.mark.parametrize("plugin, allocation", [("", "x"), ("xpu", ""), ("-xpu", "1"), ("x" * 70, "1"),
                                                    ("xpu", "a:b")])
    def test_bad_keys(self, plugin: str, allocation: str) -> None:
        """Empty parts, bad characters and over-long keys are refused."""
        with pytest.raises(SelectionError):
            deviceplugin.annotation_key(plugin, allocation)


class TestEnvAndResponse:
    def test_selection_env(self) -> None:
        """Indices sorted and unique; 'all' kept."""
        assert deviceplugin.selection_env("CXPU_VISIBLE_DEVICES", ["3", "1", "3"]) == {"CXPU_VISIBLE_DEVICES": "1,3"}
        assert deviceplugin.selection_env("ASCEND_VISIBLE_DEVICES", ["all"]) == {"ASCEND_VISIBLE_DEVICES": "all"}

    @pytest.mark.parametrize("var, ids", [("xpu_visible", ["0"]), ("CXPU_VISIBLE_DEVICES", ["0000:3b:00.0"]),
                                          ("CXPU_VISIBLE_DEVICES", [])])
    def test_selection_env_refuses(self, var: str, ids: List[str]) -> None:
        """Lower-case names and non-index ids are refused."""
        with pytest.raises(SelectionError):
            deviceplugin.selection_env(var, ids)

    @pytest.mark.parametrize("strategy, field", [("cdi-cri", "cdi_devices"), ("cdi-annotations", "annotations"),
                                                 ("envvar", "envs")])
    def test_allocate_response(self, strategy: str, field: str) -> None:
        """Each strategy (the names `xpu-cdi device-plugin --device-list-strategy` takes) fills its own field
        of ContainerAllocateResponse."""
        assert list(deviceplugin.allocate_response(KIND, ["1"], strategy)) == [field]

    def test_strategies_together(self) -> None:
        """Several strategies at once; envvar selects the card indices given apart from PCI-named ids."""
        got = deviceplugin.allocate_response(KIND, ["0000:3b:00.0"], deviceplugin.STRATEGIES, env_ids=["2"])
        assert got == {"cdi_devices": [{"name": "kunlunxin.com/xpu=0000:3b:00.0"}],
                       "annotations": {"cdi.k8s.io/xpu_0000_3b_00.0": "kunlunxin.com/xpu=0000:3b:00.0"},
                       "envs": {"CXPU_VISIBLE_DEVICES": "2"}}

    def test_unknown_strategy(self) -> None:
        """An unknown strategy names the valid ones."""
        with pytest.raises(SelectionError, match="cdi-cri, cdi-annotations, envvar"):
            deviceplugin.allocate_response(KIND, ["1"], "dra")


def test_runtimeclass() -> None:
    """deploy/runtimeclass.yaml: RuntimeClass xpu, handler xpu (the configure default), a valid nodeSelector."""
    doc = yaml.safe_load((REPO / "deploy" / "runtimeclass.yaml").read_text())
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]["name"], doc["handler"]) == (
        "node.k8s.io/v1", "RuntimeClass", "xpu", "xpu")
    selector = doc["scheduling"]["nodeSelector"]
    assert selector and all(K8S_NAME.match(k.split("/")[-1]) and isinstance(v, str) for k, v in selector.items())
    from xpu_cdi.runtime.configure import Options
    assert Options(runtime="containerd").runtime_name == doc["handler"]
