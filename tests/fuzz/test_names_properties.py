"""Properties of CDI names and cdi.k8s.io annotations (cdi/names): accepted
exactly when the reference library's rules accept, else a SelectionError."""

from __future__ import annotations

import string
from typing import Dict

from fuzzcontract import FUZZ, ours
from hypothesis import example, given
from hypothesis import strategies as st

from xpu_cdi.cdi import names
from xpu_cdi.deviceplugin import response
from xpu_cdi.errors import SelectionError

LETTERS = set(string.ascii_letters)
ALNUM = LETTERS | set(string.digits)


def go_rule(s: str, first: set, inner: set, last: set) -> bool:
    """The reference regexes read as Go runs them (no $-before-newline, ASCII classes)."""
    if not s or s[0] not in first:
        return False
    if len(s) == 1:
        return True
    return s[-1] in last and all(c in inner for c in s[1:-1])


def vendor_ok(s: str) -> bool:
    return go_rule(s, LETTERS, ALNUM | set("_.-"), ALNUM)


def name_ok(s: str) -> bool:
    return go_rule(s, ALNUM, ALNUM | set("_.:-"), ALNUM)


# near-miss text: the characters the rules care about, plus a few that they must refuse
parts = st.text(alphabet=st.sampled_from(list("aZ09_.:-/=,\n é\x00")), max_size=12)
devices = st.one_of(st.text(max_size=30),
                    st.tuples(parts, parts, parts).map(lambda t: f"{t[0]}/{t[1]}={t[2]}"),
                    st.sampled_from(["kunlunxin.com/xpu=0", "huawei.com/npu=all", "a.com/b=0000:03:00.0"]))


class TestQualified:
    @FUZZ
    @given(device=devices)
    @example(device="kunlunxin.com/xpu=0\n")
    @example(device="kunlunxin.com/xpu\n=0")
    @example(device="a/b=c")
    def test_accepts_exactly_the_reference_rules(self, device: str) -> None:
        """parse_qualified accepts a name iff the reference rules do; otherwise a one-line SelectionError."""
        got = ours(names.parse_qualified, device)
        kind, sep, name = device.partition("=")
        vendor, slash, cls = kind.partition("/")
        want = bool(sep and slash) and vendor_ok(vendor) and vendor_ok(cls) and name_ok(name)
        assert isinstance(got, tuple) == want, f"{device!r}: got {got!r}"
        if want:
            assert got == (kind, name) and names.qualified(kind, name) == device

    @FUZZ
    @given(name=parts)
    def test_name_problem_matches_rule(self, name: str) -> None:
        """name_problem is empty exactly for valid device names."""
        assert (names.name_problem(name) == "") == name_ok(name)


class TestAnnotations:
    @FUZZ
    @given(key=st.one_of(st.text(max_size=20), parts.map(lambda p: names.ANNOTATION_PREFIX + p),
                         st.integers(0, 80).map(lambda n: names.ANNOTATION_PREFIX + "a" * n)),
           value=st.one_of(st.text(max_size=40), st.lists(devices, max_size=4).map(",".join)))
    @example(key="cdi.k8s.io/x\n", value="a.com/b=c")
    def test_any_key_and_value(self, key: str, value: str) -> None:
        """Any annotation gives a list of qualified devices or a SelectionError; every result re-parses."""
        got = ours(names.parse_annotation_value, key, value)
        if isinstance(got, list):
            rest = key[len(names.ANNOTATION_PREFIX):]
            assert key.startswith(names.ANNOTATION_PREFIX) and len(rest) <= 63 and go_rule(
                rest, ALNUM, ALNUM | set("_.-"), ALNUM)
            assert got and all(names.parse_qualified(d) for d in got)

    @FUZZ
    @given(annotations=st.dictionaries(st.one_of(st.text(max_size=15), parts.map("cdi.k8s.io/".__add__)),
                                       st.one_of(devices, st.integers(), st.none()), max_size=4))
    def test_many_annotations(self, annotations: Dict[str, object]) -> None:
        """Any annotation map gives de-duplicated qualified devices or a SelectionError."""
        got = ours(names.devices_from_annotations, annotations)
        if isinstance(got, list):
            assert len(got) == len(set(got))

    @FUZZ
    @given(plugin=parts, allocation=parts, ids=st.lists(parts, max_size=3))
    def test_a_plugins_annotation_round_trips(self, plugin: str, allocation: str, ids: list) -> None:
        """What a device plugin's annotation() returns is read back by parse_annotation_value as
        the same devices, each once (or it is refused with a SelectionError)."""
        got = ours(response.annotation, plugin, "kunlunxin.com/xpu", ids, allocation)
        if isinstance(got, tuple):
            assert names.parse_annotation_value(*got) == [f"kunlunxin.com/xpu={i}" for i in dict.fromkeys(ids)]

    def test_huge_value_is_linear_and_short_in_messages(self) -> None:
        """An annotation naming 200,000 devices parses quickly; an error about it stays short."""
        big = ",".join(f"kunlunxin.com/xpu={i}" for i in range(200_000))
        assert len(ours(names.devices_from_annotations, {"cdi.k8s.io/p_1": big})) == 200_000
        err = ours(names.devices_from_annotations, {"cdi.k8s.io/p_1": big + ",bad"})
        assert isinstance(err, SelectionError) and len(str(err)) < 400
