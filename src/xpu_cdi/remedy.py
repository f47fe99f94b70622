"""What to do about an unhealthy card: the remediation policy both node paths share.

A :class:`Remedy` is fed every health reading of a kind's cards
(:meth:`Remedy.observe`) and says, when asked (:meth:`Remedy.due`), what to
do now -- evict the pods holding a card, or offer a recovered card again --
and, at any time, whether a card is offered (:meth:`Remedy.offered`).  The
DRA driver turns a decision into a slice taint (``NoExecute``, then none),
the device plugin into Eviction API calls; both log it, record an Event and
count it.  Pure: no I/O, time from the *clock* it is given.

With ``Policy(evict=True)``, per card::

    healthy --unhealthy--> failing --grace--> evicted (one "evict")
       ^                     |                  |
       |                  healthy            healthy
       |                     v                  v
       +---hold_down of---- held <--------------+
           continuous health  (one "restore"; unhealthy again: back to
                               failing, or to evicted once evicted)

* a card unhealthy for less than ``grace`` evicts nothing, however often it
  fails (a flapping card never empties itself by its blips alone);
* a card that was unhealthy is offered again only after ``hold_down`` seconds
  of continuous health, then one ``restore``: a flapping card stays withheld;
* the evict is decided only while the card is unhealthy: one found healthy
  again after the grace, before :meth:`Remedy.due` ran, evicts nothing.

With ``Policy()`` (``evict=False``: today's behaviour, the default) there
are no decisions and no hold-down: a card is offered exactly while its last
reading was healthy, as before the policy existed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from . import bounded
from .errors import ConfigError, InputError

EVICT, RESTORE = "evict", "restore"
GRACE_RANGE = (0.0, 86400.0)  # seconds: 0 evicts at the first unhealthy reading
HOLD_DOWN_RANGE = (0.0, 86400.0)
_KEYS = {"grace": GRACE_RANGE, "hold-down": HOLD_DOWN_RANGE}


@dataclass(frozen=True)
class Policy:
    """One kind's remediation; ``Policy()`` is today's behaviour (taint or withhold, never evict)."""

    evict: bool = False
    grace: float = 30.0  # seconds a card stays unhealthy before its pods are evicted
    hold_down: float = 300.0  # seconds a card that failed and recovered is held unhealthy (flapping)


@dataclass(frozen=True)
class Decision:
    """One thing to do now about one card."""

    card: str  # the card's name as the daemon knows it
    action: str  # "evict" | "restore"
    reason: str  # a short machine word for the metric label: "unhealthy", "recovered"


@dataclass
class _Card:
    healthy: bool
    since: float  # when the current run of unhealthy (or, held, healthy) readings began
    held: bool = False  # failed and not yet restored
    evicted: bool = False  # an evict was decided and no restore since


class Remedy:
    """The policy's state over one kind's cards."""

    def __init__(self, policy: Policy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self.cards: Dict[str, _Card] = {}

    def observe(self, card: str, healthy: bool) -> None:
        """One health reading of *card* (every reading, changed or not)."""
        now = self.clock()
        c = self.cards.get(card)
        if c is None:
            self.cards[card] = _Card(healthy, now, held=not healthy and self.policy.evict)
            return
        if c.healthy != healthy:
            c.healthy, c.since = healthy, now
            if not healthy and self.policy.evict:
                c.held = True

    def forget(self, card: str) -> None:
        """*card* is gone from the node's inventory: nothing more to decide about it."""
        self.cards.pop(card, None)

    def due(self) -> List[Decision]:
        """What to do now, each decision returned once (sorted by card)."""
        if not self.policy.evict:
            return []
        now = self.clock()
        out = []
        for name in sorted(self.cards):
            c = self.cards[name]
            if not c.healthy and not c.evicted and now - c.since >= self.policy.grace:
                c.evicted = True
                out.append(Decision(name, EVICT, "unhealthy"))
            elif c.healthy and c.held and now - c.since >= self.policy.hold_down:
                out.append(Decision(name, RESTORE, "recovered" if c.evicted else "held-down"))
                c.held = c.evicted = False
        return out

    def offered(self, card: str) -> bool:
        """False while *card* is unhealthy or held down (a card never observed is offered)."""
        c = self.cards.get(card)
        return c is None or (c.healthy and not c.held)

    def evicted(self, card: str) -> bool:
        """True from *card*'s ``evict`` decision until its ``restore``."""
        c = self.cards.get(card)
        return c is not None and c.evicted

    def next_due(self) -> Optional[float]:
        """Seconds until the next decision may fall due (0: now), None when none is pending: how long a
        daemon may sleep without missing a grace or a hold-down."""
        if not self.policy.evict:
            return None
        now = self.clock()
        waits = [c.since + (self.policy.hold_down if c.healthy else self.policy.grace) - now
                 for c in self.cards.values() if (c.held if c.healthy else not c.evicted)]
        return max(0.0, min(waits)) if waits else None


def parse(values: Sequence[str], flag: str = "--evict") -> Dict[str, Policy]:
    """``--evict KIND[:grace=S][,hold-down=S]`` values: CDI kind -> its policy (``evict=True``).

    Raises:
        ConfigError: one line naming the value and what is wrong.
    """
    out: Dict[str, Policy] = {}
    for one in values:
        kind, sep, rest = one.partition(":")
        usage = f"{flag} {one!r}: write KIND[:grace=SECONDS][,hold-down=SECONDS] (kunlunxin.com/xpu:grace=30)"
        vendor, _slash, klass = kind.partition("/")
        if not vendor or not klass or "/" in klass or kind != kind.strip() or (sep and not rest):
            raise ConfigError(usage)
        if kind in out:
            raise ConfigError(f"{flag} {one!r}: {kind} is given twice")
        fields: Dict[str, float] = {}
        for part in rest.split(",") if sep else []:
            key, eq, value = part.strip().partition("=")
            if not eq or key not in _KEYS or key in fields:
                raise ConfigError(f"{usage}: {part.strip()!r} is not grace= or hold-down= given once")
            fields[key] = seconds(value, key, *_KEYS[key], where=f"{flag} {one!r}")
        out[kind] = Policy(evict=True, grace=fields.get("grace", Policy.grace),
                           hold_down=fields.get("hold-down", Policy.hold_down))
    return out


def seconds(value: object, key: str, low: float, high: float, where: str) -> float:
    """*value* (text, or a config file's number) as seconds in ``[low, high]`` (:func:`bounded.seconds`);
    ConfigError naming *where* and *key*."""
    try:
        return bounded.seconds(float(value) if isinstance(value, str) else value, low, high)
    except ValueError as err:  # InputError is one too
        text = str(err) if isinstance(err, InputError) else f"must be a number of seconds between {low:g} and {high:g}"
        raise ConfigError(f"{where}: {key} {text}, not {value!r}") from None
