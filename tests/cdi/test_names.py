"""CDI names, qualified device names and cdi.k8s.io annotations."""

from __future__ import annotations

import pytest

from xpu_cdi.cdi import names
from xpu_cdi.errors import SelectionError


class TestQualified:
    @pytest.mark.parametrize("device, kind, name", [
        ("kunlunxin.com/xpu=0", "kunlunxin.com/xpu", "0"),
        ("huawei.com/npu=all", "huawei.com/npu", "all"),
        ("kunlunxin.com/xpu=0000:3b:00.0", "kunlunxin.com/xpu", "0000:3b:00.0"),
    ])
    def test_valid(self, device: str, kind: str, name: str) -> None:
        """Fully qualified names split into kind and name."""
        assert names.parse_qualified(device) == (kind, name)

    @pytest.mark.parametrize("device, why", [
        ("kunlunxin.com/xpu", "not fully qualified"),
        ("xpu=0", "must be 'vendor/class'"),
        ("1bad.com/xpu=0", "vendor '1bad.com'"),
        ("kunlunxin.com/xpu-=0", "class 'xpu-'"),
        ("kunlunxin.com/xpu=-0", "device name '-0'"),
        ("kunlunxin.com/xpu=a b", "device name 'a b'"),
        ("kunlunxin.com/xpu=", "device name ''"),
    ])
    def test_invalid(self, device: str, why: str) -> None:
        """Malformed names say which part is wrong."""
        with pytest.raises(SelectionError, match=why):
            names.parse_qualified(device)

    def test_qualified_builds_and_checks(self) -> None:
        """qualified() joins and validates."""
        assert names.qualified("kunlunxin.com/xpu", "3") == "kunlunxin.com/xpu=3"
        with pytest.raises(SelectionError):
            names.qualified("kunlunxin.com/xpu", "3!")


class TestAnnotations:
    def test_devices_from_annotations(self) -> None:
        """Only cdi.k8s.io/ keys count; values are comma lists; duplicates collapse."""
        ann = {"cdi.k8s.io/plugin_a": "kunlunxin.com/xpu=1, kunlunxin.com/xpu=2",
               "cdi.k8s.io/plugin_b": "kunlunxin.com/xpu=1", "other/x": "junk"}
        assert names.devices_from_annotations(ann) == ["kunlunxin.com/xpu=1", "kunlunxin.com/xpu=2"]

    @pytest.mark.parametrize("key, value, why", [
        ("cdi.k8s.io/", "kunlunxin.com/xpu=1", "must start and end"),
        ("cdi.k8s.io/-x", "kunlunxin.com/xpu=1", "must start and end"),
        ("cdi.k8s.io/" + "a" * 64, "kunlunxin.com/xpu=1", "longer than 63"),
        ("cdi.k8s.io/p_1", "", "comma-separated list"),
        ("cdi.k8s.io/p_1", "kunlunxin.com/xpu=1,,", "comma-separated list"),
        ("cdi.k8s.io/p_1", "xpu1", "not fully qualified"),
    ])
    def test_malformed(self, key: str, value: str, why: str) -> None:
        """A malformed annotation is an error naming it, not silently ignored."""
        with pytest.raises(SelectionError, match=why):
            names.devices_from_annotations({key: value})

    def test_whitespace_is_ascii_as_in_the_binaries(self) -> None:
        """Spaces and tabs around a name are stripped; \x1c (which str.strip() takes) is not: the hook
        and the wrapper refuse it, and so does the tooling."""
        assert names.devices_from_annotations({"cdi.k8s.io/p": " kunlunxin.com/xpu=1\t"}) == ["kunlunxin.com/xpu=1"]
        with pytest.raises(SelectionError):
            names.devices_from_annotations({"cdi.k8s.io/p": "kunlunxin.com/xpu=1\x1c"})
