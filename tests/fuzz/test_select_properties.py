"""Properties of the selection syntax (hook/select): any env value, any
annotation and any hook index file give a device list or a SelectionError."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, List

from fuzzcontract import FUZZ, file_contents, json_values, mutated, ours
from hypothesis import example, given
from hypothesis import strategies as st

from xpu_cdi.errors import SelectionError
from xpu_cdi.hook import select

XPU: Dict[str, Any] = {"xpuCdiIndex": 1, "kind": "kunlunxin.com/xpu",
                       "selection": {"env": ["CXPU_VISIBLE_DEVICES", "CXPU_VISIBLE_DEVICES"], "aliases": None,
                                     "none": ["", "void", "none"]},
                       "indices": {str(i): str(i) for i in range(8)}, "all": "all"}
NPU: Dict[str, Any] = {"xpuCdiIndex": 1, "kind": "huawei.com/npu",
                       "selection": {"env": ["ASCEND_VISIBLE_DEVICES"],
                                     "aliases": ["Ascend910-", "Ascend310B-", "Ascend310P-", "Ascend310-", "npu-"],
                                     "none": ["", "void"]},
                       "indices": {str(i): str(i) for i in range(4)}, "all": "all"}

# values built from the grammar's own pieces reach deeper than random text
tokens = st.sampled_from(["0", "1", "3", "7", "8", "65535", "999999", "1000000", "0-3", "3-1", "0-4095", "0-9999",
                          "all", "void", "none", "", " ", "Ascend910-1", "npu-2", "Ascend310P-9", "npu-x",
                          "-", "1-", "٣", "0x1", "+1", "1e3", "\t2", "GPU-0"])
values = st.one_of(st.text(max_size=30), st.lists(tokens, max_size=6).map(",".join))


class TestParseValue:
    @FUZZ
    @given(index=st.sampled_from([XPU, NPU]), value=values)
    @example(index=XPU, value="0-4095,5")
    def test_any_value(self, index: Dict[str, Any], value: str) -> None:
        """Any value gives the sorted, de-duplicated names of known cards, 'all', or a SelectionError."""
        got = ours(select.parse_value, "V", value, index)
        if isinstance(got, SelectionError):
            assert "V=" in str(got)
            return
        names = list(index["indices"].values())
        assert got == ["all"] or (all(n in names for n in got) and got == sorted(set(got), key=int))

    @FUZZ
    @given(picked=st.lists(st.integers(0, 7), max_size=10), spaces=st.booleans())
    def test_index_lists_mean_what_they_say(self, picked: List[int], spaces: bool) -> None:
        """A comma list of known indices selects exactly those cards (the model)."""
        sep = " , " if spaces else ","
        value = sep.join(map(str, picked))
        assert select.parse_value("V", value, XPU) == [str(i) for i in sorted(set(picked))]


class TestIndexFiles:
    @FUZZ
    @given(files=st.lists(st.tuples(st.sampled_from(["a.json.xpu-cdi", "b.yaml.xpu-cdi", "c.xpu-cdi", "d.json"]),
                                    file_contents(st.sampled_from([XPU, NPU]).flatmap(mutated))),
                          max_size=3),
           env=st.lists(st.one_of(st.text(max_size=10),
                                  st.tuples(st.sampled_from(["CXPU_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"]),
                                            values).map("=".join)), max_size=3),
           annotations=st.dictionaries(st.sampled_from(["cdi.k8s.io/p_1", "cdi.k8s.io/", "other", "cdi.k8s.io/x\n"]),
                                       st.text(max_size=30) | st.just("kunlunxin.com/xpu=1"), max_size=2))
    def test_any_index_any_env(self, files: List[Any], env: List[str], annotations: Dict[str, str]) -> None:
        """Broken or hostile hook index files never break selection: result or SelectionError."""
        with tempfile.TemporaryDirectory() as d:
            for name, data in files:
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
            indexes = ours(select.load_indexes, [d])
            assert isinstance(indexes, dict)
            got = ours(select.requested, env, annotations, indexes)
            assert isinstance(got, (list, SelectionError))

    @FUZZ
    @given(index=st.sampled_from([XPU, NPU]).flatmap(mutated), value=values)
    @example(index=dict(NPU, selection=dict(NPU["selection"], aliases="^npu-[0-9]$")), value="npu-1")
    @example(index=dict(NPU, selection=dict(NPU["selection"], aliases=["npu-"])), value="npu-x")
    @example(index=dict(NPU, selection=dict(NPU["selection"], aliases=[""])), value="npu-x")
    @example(index=dict(XPU, indices={"a": "0"}), value="all")
    @example(index=dict(XPU, selection="CXPU_VISIBLE_DEVICES"), value="0")
    def test_mutated_index_in_memory(self, index: Any, value: str) -> None:
        """An index that passes load_indexes' checks never makes selection fail with a bug."""
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "k.json.xpu-cdi"), "w") as f:
                import json

                json.dump(index, f)
            indexes = ours(select.load_indexes, [d])
            for kind in indexes:
                for var in ("CXPU_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES"):
                    ours(select.requested, [f"{var}={value}"], {}, indexes)


class TestEnvMap:
    @FUZZ
    @given(env=st.lists(json_values, max_size=6))
    def test_any_env_list(self, env: List[Any]) -> None:
        """Non-string or '='-less env entries are ignored; the last K=V wins."""
        got = select.env_map(env)
        for entry in env:
            if isinstance(entry, str) and "=" in entry:
                assert entry.partition("=")[0] in got


class TestBounds:
    BIG: Dict[str, Any] = dict(XPU, indices={str(i): str(i) for i in range(4096)})

    def test_overlapping_ranges_cost_one_pass(self) -> None:
        """9,000 copies of the widest range select the 4096 cards once, in well under a second."""
        import time

        value = ",".join(["0-4095"] * 9000)
        t = time.perf_counter()
        got = ours(select.parse_value, "CXPU_VISIBLE_DEVICES", value, self.BIG)
        assert got == [str(i) for i in range(4096)] and time.perf_counter() - t < 1.0

    def test_huge_value_refused_with_short_message(self) -> None:
        """A value over the limit is refused at once; the message does not echo megabytes."""
        err = ours(select.parse_value, "CXPU_VISIBLE_DEVICES", "0," * 500_000, self.BIG)
        assert isinstance(err, SelectionError) and "characters" in str(err) and len(str(err)) < 300

    def test_long_token_is_refused_before_the_aliases(self) -> None:
        """A long token is refused with a short message before the alias prefixes are tried."""
        index = dict(NPU, selection=dict(NPU["selection"], aliases=["a-"]))
        err = ours(select.parse_value, "ASCEND_VISIBLE_DEVICES", "a" * 5000 + "!", index)
        assert isinstance(err, SelectionError) and "5001 characters" in str(err)
