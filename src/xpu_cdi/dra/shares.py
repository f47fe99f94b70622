"""Capacity-shared cards (DRA consumable capacity): the policy of a kind, and what a share is told.

``--share-capacity KIND:default=32Gi[,step=32Gi][,min=..][,max=..][,memory=96Gi]``
publishes each card of *KIND* with ``allowMultipleAllocations: true`` and a
``memory`` capacity whose ``requestPolicy`` is ``default`` (what a claim that
asks for no memory takes) and, with ``step``/``min``/``max``, a ``validRange``
(``min`` defaults to ``step``).  ``memory`` is the card's memory where the
profile does not know it.  The scheduler then places several claims on one
card while their memory adds up to at most the card's (``k8s.io/api``
``resource/v1`` ``DeviceCapacity``, ``CapacityRequestPolicy``); each
allocation carries a ``shareID`` and its ``consumedCapacity``.

Nothing here enforces a share: the container is told it (:func:`env`), and
whatever the vendor's runtime does with that is all the isolation there is
(docs/sharing.md).  Pure functions only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from ..errors import ConfigError

CAPACITY = "memory"  # the capacity name shared (a C identifier: the driver's own domain)
ENV_LIMIT = "XPU_CDI_MEMORY_LIMIT_"  # + the card's name: bytes of the card's memory this share may use
ENV_TOTAL = "XPU_CDI_MEMORY_TOTAL_"  # + the card's name: bytes the card has
_QUANTITY = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_FACTOR = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_KEYS = ("default", "step", "min", "max", "memory")


def parse_quantity(text: str) -> int:
    """Bytes of a whole-number Kubernetes quantity (``32Gi``, ``1500M``, ``34359738368``).

    Raises:
        ValueError: not such a quantity (fractions and exponents are not taken).
    """
    m = _QUANTITY.match(str(text).strip())
    if not m:
        raise ValueError(f"{text!r} is not a whole quantity such as 32Gi")
    return int(m.group(1)) * _FACTOR[m.group(2)]


def format_quantity(value: int) -> str:
    """*value* as the API server writes a binary quantity back (``32Gi``; ``1500`` when no suffix divides it)."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        if value and value % _FACTOR[suffix] == 0:
            return f"{value // _FACTOR[suffix]}{suffix}"
    return str(value)


@dataclass(frozen=True)
class Policy:
    """How one kind's cards are shared (bytes)."""

    default: int
    step: Optional[int] = None
    min: Optional[int] = None
    max: Optional[int] = None
    memory: Optional[int] = None  # the card's memory when the profile does not know it

    def problem(self, total: int) -> str:
        """Why this policy cannot share a card of *total* bytes (the API server's rules), or ``""``."""
        low = self.min if self.min is not None else self.step
        if self.default <= 0 or self.default > total:
            return f"default {format_quantity(self.default)} is not within the card's {format_quantity(total)}"
        if low is None:
            return ""
        if low > total or (self.max is not None and not low <= self.max <= total):
            return f"min/max must satisfy min <= max <= the card's {format_quantity(total)}"
        if self.default < low or (self.max is not None and self.default > self.max):
            return f"default {format_quantity(self.default)} is outside min..max"
        if self.step is not None and (low + self.step > total or (self.default - low) % self.step):
            return (f"default must be min + n*step, and min + step within the card's "
                    f"{format_quantity(total)}")
        return ""

    def capacity(self, total: int) -> Dict[str, Any]:
        """The device's ``capacity.memory`` entry."""
        policy: Dict[str, Any] = {"default": format_quantity(self.default)}
        low = self.min if self.min is not None else self.step
        if low is not None:
            valid: Dict[str, Any] = {"min": format_quantity(low)}
            if self.max is not None:
                valid["max"] = format_quantity(self.max)
            if self.step is not None:
                valid["step"] = format_quantity(self.step)
            policy["validRange"] = valid
        return {"value": format_quantity(total), "requestPolicy": policy}


def parse(values: Sequence[str]) -> Dict[str, Policy]:
    """``--share-capacity`` values: CDI kind -> policy.

    Raises:
        ConfigError: one line naming the value and what is wrong.
    """
    out: Dict[str, Policy] = {}
    for item in values:
        kind, sep, rest = item.partition(":")
        usage = f"--share-capacity {item!r}: write KIND:default=QUANTITY[,step=..][,min=..][,max=..][,memory=..]"
        if not sep or kind.count("/") != 1:
            raise ConfigError(usage + " (kunlunxin.com/xpu:default=32Gi,step=32Gi)")
        fields: Dict[str, int] = {}
        for part in rest.split(","):
            key, eq, value = part.strip().partition("=")
            if not eq or key not in _KEYS or key in fields:
                raise ConfigError(f"{usage}: {part.strip()!r} is not one of {', '.join(_KEYS)} given once")
            try:
                fields[key] = parse_quantity(value)
            except ValueError as err:
                raise ConfigError(f"--share-capacity {item!r}: {key}: {err}") from None
            if fields[key] <= 0 and key != "min":
                raise ConfigError(f"--share-capacity {item!r}: {key} must be more than 0")
        if "default" not in fields:
            raise ConfigError(f"{usage}: default is required")
        out[kind] = Policy(**fields)
    return out


def card_memory(profile_memory: str, policy: Policy) -> int:
    """Bytes of a card's memory: the profile's fact, else the policy's ``memory``; 0 when neither says."""
    if profile_memory:
        try:
            return parse_quantity(profile_memory)
        except ValueError:
            pass
    return policy.memory or 0


def consumed(result: Dict[str, Any]) -> int:
    """Bytes of memory an allocation result consumed (``consumedCapacity.memory``); 0 when absent or not whole."""
    try:
        return parse_quantity((result.get("consumedCapacity") or {}).get(CAPACITY, ""))
    except ValueError:
        return 0


def env_suffix(card: str) -> str:
    """A card's CDI device name as the tail of an environment variable (``3`` -> ``3``, ``a-b.c`` -> ``A_B_C``)."""
    return re.sub(r"[^A-Za-z0-9]", "_", card).upper()


def env(card: str, memory: int, total: int) -> List[str]:
    """What a container holding a share of *card* is told: its memory and the card's, in bytes."""
    return [f"{ENV_LIMIT}{env_suffix(card)}={memory}", f"{ENV_TOTAL}{env_suffix(card)}={total}"]
