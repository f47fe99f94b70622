"""A claim's allocation to CDI names: the refusals, the filtering, idempotent shapes."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from xpu_cdi.dra import claims
from xpu_cdi.dra.slices import DeviceInfo
from xpu_cdi.node.prepared import PreparedDevice

CARDS = {n: DeviceInfo(name=n, cdi=f"kunlunxin.com/xpu={n}") for n in ("0", "1", "2")}


def claim(results: List[Dict[str, Any]], uid: str = "u1", allocated: bool = True) -> Dict[str, Any]:
    status = {"allocation": {"devices": {"results": results}}} if allocated else {}
    return {"metadata": {"namespace": "ns", "name": "c", "uid": uid}, "status": status}


def r(device: str, request: str = "xpus", driver: str = "kunlunxin.com", pool: str = "n1", **kw) -> Dict[str, Any]:
    return {"request": request, "driver": driver, "pool": pool, "device": device, **kw}


def test_two_cards() -> None:
    got = claims.prepare(claim([r("0"), r("1")]), "kunlunxin.com", "n1", CARDS, {})
    assert got == [PreparedDevice(["xpus"], "n1", "0", ["kunlunxin.com/xpu=0"]),
                   PreparedDevice(["xpus"], "n1", "1", ["kunlunxin.com/xpu=1"])]


def test_other_drivers_results_are_theirs() -> None:
    got = claims.prepare(claim([r("0"), r("gpu-0", driver="gpu.example.com", pool="other")]), "kunlunxin.com",
                         "n1", CARDS, {})
    assert [d.device for d in got] == ["0"]


def test_requests_merged_and_subrequests_stripped() -> None:
    got = claims.prepare(claim([r("0", request="a/large", adminAccess=True), r("0", request="b", adminAccess=True)]),
                         "kunlunxin.com", "n1", CARDS, {})
    assert got == [PreparedDevice(["a", "b"], "n1", "0", ["kunlunxin.com/xpu=0"])]


@pytest.mark.parametrize("c, in_use, words", [
    (claim([r("0")], uid="u2"), {}, "replaced"),
    (claim([], allocated=False), {}, "not allocated"),
])
def test_check_claim_refuses(c: Dict[str, Any], in_use: Dict[Any, str], words: str) -> None:
    with pytest.raises(claims.ClaimError, match=words):
        claims.check_claim(c, "u1")


def test_check_claim_takes_the_right_one() -> None:
    claims.check_claim(claim([r("0")]), "u1")


@pytest.mark.parametrize("results, in_use, words", [
    ([r("0", pool="n2")], {}, "another node"),
    ([r("9")], {}, "not on this node"),
    ([r("1")], {("n1", "1"): "u-other"}, "prepared for claim u-other"),
])
def test_prepare_refuses(results: List[Dict[str, Any]], in_use: Dict[Any, str], words: str) -> None:
    with pytest.raises(claims.ClaimError, match=words):
        claims.prepare(claim(results), "kunlunxin.com", "n1", CARDS, in_use)


def test_admin_access_may_share_and_own_claim_is_no_conflict() -> None:
    got = claims.prepare(claim([r("1", adminAccess=True)]), "kunlunxin.com", "n1", CARDS, {("n1", "1"): "u-other"})
    assert got[0].device == "1"
    again = claims.prepare(claim([r("1")]), "kunlunxin.com", "n1", CARDS, {("n1", "1"): "u1"})
    assert again[0].device == "1"
