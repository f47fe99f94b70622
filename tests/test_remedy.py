"""remedy: the remediation policy's decisions over time (a clock the test moves), and --evict's values."""

from __future__ import annotations

from typing import Tuple

import pytest

from xpu_cdi.errors import ConfigError
from xpu_cdi.remedy import Decision, Policy, Remedy, parse


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def remedy(**policy) -> Tuple[Remedy, Clock]:
    clock = Clock()
    return Remedy(Policy(**policy), clock), clock


def test_default_policy_is_todays_behaviour():
    r, clock = remedy()
    assert Policy() == Policy(evict=False, grace=30.0, hold_down=300.0)
    r.observe("0", True)
    r.observe("1", False)
    assert (r.offered("0"), r.offered("1")) == (True, False)
    clock.now += 10_000
    assert r.due() == [] and r.next_due() is None
    r.observe("1", True)  # offered again at once: no hold-down without the policy
    assert r.offered("1") and not r.evicted("1") and r.due() == []


def test_unhealthy_past_grace_evicts_once():
    r, clock = remedy(evict=True, grace=30, hold_down=300)
    r.observe("0", True)
    r.observe("3", True)
    clock.now += 5
    r.observe("3", False)
    assert not r.offered("3") and r.offered("0")
    clock.now += 29.9
    r.observe("3", False)  # every reading, unchanged: the grace runs from the first
    assert r.due() == [] and r.next_due() == pytest.approx(0.1)
    clock.now += 0.1
    assert r.due() == [Decision("3", "evict", "unhealthy")]
    assert r.evicted("3") and not r.offered("3")
    clock.now += 100
    r.observe("3", False)
    assert r.due() == [] and r.next_due() is None  # once


def test_recovery_within_grace_evicts_nothing_and_is_held_down():
    r, clock = remedy(evict=True, grace=30, hold_down=300)
    r.observe("2", True)
    for _ in range(5):  # flapping: each blip shorter than the grace
        r.observe("2", False)
        clock.now += 29
        assert r.due() == []
        r.observe("2", True)
        clock.now += 10
        assert r.due() == [] and not r.offered("2")
    assert not r.evicted("2")
    clock.now += 289.9
    assert r.due() == [] and not r.offered("2")
    clock.now += 0.1
    assert r.due() == [Decision("2", "restore", "held-down")]
    assert r.offered("2") and r.due() == []


def test_evicted_card_restored_after_hold_down_of_continuous_health():
    r, clock = remedy(evict=True, grace=10, hold_down=60)
    r.observe("1", False)  # unhealthy from the first reading
    clock.now += 10
    assert r.due() == [Decision("1", "evict", "unhealthy")]
    r.observe("1", True)
    clock.now += 50
    r.observe("1", False)  # fails again during the hold-down: not evicted twice, the hold-down starts over
    clock.now += 20
    assert r.due() == [] and r.evicted("1")
    r.observe("1", True)
    clock.now += 59
    assert r.due() == [] and not r.offered("1") and r.next_due() == pytest.approx(1)
    clock.now += 1
    assert r.due() == [Decision("1", "restore", "recovered")]
    assert r.offered("1") and not r.evicted("1")
    r.observe("1", False)  # a new failure after the restore: a new grace, a new evict
    clock.now += 10
    assert r.due() == [Decision("1", "evict", "unhealthy")]


def test_healthy_again_before_due_ran_evicts_nothing():
    r, clock = remedy(evict=True, grace=5, hold_down=0)
    r.observe("0", False)
    clock.now += 60
    r.observe("0", True)
    assert r.due() == [Decision("0", "restore", "held-down")]  # hold-down 0: offered again at once


def test_grace_zero_evicts_at_the_first_unhealthy_reading():
    r, _clock = remedy(evict=True, grace=0)
    r.observe("0", False)
    assert r.next_due() == 0 and r.due() == [Decision("0", "evict", "unhealthy")]


def test_decisions_sorted_and_forgotten_cards_dropped():
    r, clock = remedy(evict=True, grace=1)
    for card in ("b", "a", "c"):
        r.observe(card, False)
    r.forget("c")
    clock.now += 1
    assert [d.card for d in r.due()] == ["a", "b"]
    assert r.offered("c") and r.offered("never-seen")


@pytest.mark.parametrize("values, want", [
    ([], {}),
    (["kunlunxin.com/xpu"], {"kunlunxin.com/xpu": Policy(evict=True)}),
    (["huawei.com/npu:grace=5,hold-down=0.5"], {"huawei.com/npu": Policy(True, 5.0, 0.5)}),
    (["a.com/x:hold-down=60", "b.com/y:grace=0"], {"a.com/x": Policy(True, 30.0, 60.0),
                                                   "b.com/y": Policy(True, 0.0, 300.0)}),
])
def test_parse(values, want):
    assert parse(values) == want


@pytest.mark.parametrize("value, says", [
    ("xpu", "write KIND"),
    ("a.com/x/y", "write KIND"),
    ("/x", "write KIND"),
    ("a.com/x:", "write KIND"),
    ("a.com/x:grace", "not grace= or hold-down="),
    ("a.com/x:delay=3", "not grace= or hold-down="),
    ("a.com/x:grace=1,grace=2", "given once"),
    ("a.com/x:grace=-1", "grace must be a number of seconds between 0 and 86400, not '-1'"),
    ("a.com/x:hold-down=nan", "hold-down must be a number of seconds"),
    ("a.com/x:grace=inf", "grace must be"),
    ("a.com/x:grace=ten", "grace must be"),
])
def test_parse_refuses_with_one_line(value, says):
    with pytest.raises(ConfigError) as err:
        parse([value])
    assert says in str(err.value) and repr(value) in str(err.value) and "\n" not in str(err.value)


def test_parse_refuses_a_kind_twice():
    with pytest.raises(ConfigError, match="given twice"):
        parse(["a.com/x", "a.com/x:grace=1"])
