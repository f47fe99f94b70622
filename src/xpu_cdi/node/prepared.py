"""What the DRA driver prepared, as typed records: the checkpoint's content.

One :class:`PreparedClaim` per claim uid, each with the :class:`PreparedDevice` entries
``NodePrepareResources`` answered (one per card, its requests merged): the card's slice
device and pool, the CDI names handed out, and what the claim took beyond a whole card -- a
share of its memory (``shareID``, ``memory`` and ``total`` in bytes, the claim-scoped CDI name
last in ``cdi``) or a partition made for it (:class:`VNpu`).  A claim whose partitions are
being made is ``pending``: written before the vendor's tool runs, so a crash leaves the intent,
undone at start.  :class:`PreparedClaims` is every claim of one boot.

The JSON form (``to_json``/``from_json``) is the checkpoint file's (:mod:`.checkpoint`): the
exporter and doctor read the same records.  ``from_json`` refuses a wrong type with a
ValueError naming the field, never another exception: the file is outside input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple


_REQUIRED = object()
_KINDS = {str: "a string", int: "a whole number", list: "a list"}


def _typed(doc: Mapping[str, Any], key: str, kind: type, default: Any = _REQUIRED) -> Any:
    """``doc[key]`` when it is a *kind* (a bool is no number), *default* when absent; else ValueError."""
    if key not in doc and default is not _REQUIRED:
        return default
    value = doc.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{key} is not {_KINDS[kind]}")
    return value


def _strings(doc: Mapping[str, Any], key: str, default: Any = _REQUIRED) -> List[str]:
    value = _typed(doc, key, list, default)
    if not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} is not a list of strings")
    return list(value)


@dataclass
class VNpu:
    """A partition made for a claim by the vendor's tool (``npu-smi -i CARD -c CHIP``, its id)."""

    card: int
    chip: int
    template: str
    id: int

    def to_json(self) -> Dict[str, Any]:
        return {"card": self.card, "chip": self.chip, "template": self.template, "id": self.id}

    @classmethod
    def from_json(cls, doc: Any) -> "VNpu":
        if not isinstance(doc, dict):
            raise ValueError("vnpu is not an object")
        return cls(_typed(doc, "card", int), _typed(doc, "chip", int), _typed(doc, "template", str),
                   _typed(doc, "id", int))


@dataclass
class PreparedDevice:
    """One card as NodePrepareResources handed it out."""

    requests: List[str]
    pool: str
    device: str  # the card's device in the driver's ResourceSlice
    cdi: List[str]  # qualified CDI names; a share's claim-scoped one last
    share_id: str = ""  # a share of the card (consumable capacity), as the allocation names it
    memory: Optional[int] = None  # bytes the share holds
    total: Optional[int] = None  # bytes the card has
    vnpu: Optional[VNpu] = None  # the partition made for the claim

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"requests": self.requests, "pool": self.pool, "device": self.device, "cdi": self.cdi}
        if self.share_id:
            out["shareID"] = self.share_id
        if self.memory is not None:
            out["memory"] = self.memory
        if self.total is not None:
            out["total"] = self.total
        if self.vnpu is not None:
            out["vnpu"] = self.vnpu.to_json()
        return out

    @classmethod
    def from_json(cls, doc: Any) -> "PreparedDevice":
        if not isinstance(doc, dict):
            raise ValueError("a device is not an object")
        vnpu = doc.get("vnpu")
        return cls(_strings(doc, "requests", []), _typed(doc, "pool", str), _typed(doc, "device", str),
                   _strings(doc, "cdi"), _typed(doc, "shareID", str, ""), _typed(doc, "memory", int, None),
                   _typed(doc, "total", int, None), None if vnpu is None else VNpu.from_json(vnpu))


@dataclass
class PreparedClaim:
    """One prepared claim: what NodePrepareResources answered for it."""

    namespace: str
    name: str
    devices: List[PreparedDevice]
    pending: bool = False  # written before the vendor's tool runs: a crash leaves the intent, undone at start
    # a member of a training domain (:class:`xpu_cdi.dra.domain.Local`'s to_json): its rank table is kept up to date
    training: Optional[Dict[str, Any]] = None

    def vnpus(self) -> List[VNpu]:
        """The partitions made (or being made) for this claim."""
        return [d.vnpu for d in self.devices if d.vnpu is not None]

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"namespace": self.namespace, "name": self.name,
                               "devices": [d.to_json() for d in self.devices]}
        if self.pending:
            out["pending"] = True
        if self.training is not None:
            out["training"] = self.training
        return out

    @classmethod
    def from_json(cls, doc: Any) -> "PreparedClaim":
        if not isinstance(doc, dict) or not isinstance(doc.get("devices"), list):
            raise ValueError("not an object with a list of devices")
        if doc.get("training") is not None and not isinstance(doc["training"], dict):
            raise ValueError("its training domain is not an object")
        return cls(str(doc.get("namespace", "")), str(doc.get("name", "")),
                   [PreparedDevice.from_json(d) for d in doc["devices"]], doc.get("pending") is True,
                   doc.get("training"))


@dataclass
class PreparedClaims:
    """The claims prepared on this boot, by claim uid."""

    boot_id: str
    claims: Dict[str, PreparedClaim] = field(default_factory=dict)

    def devices_in_use(self, exclude: str = "") -> Dict[Tuple[str, str], str]:
        """``(pool, device)`` -> uid of the claim holding it whole, other than *exclude* (shares are not holds)."""
        out: Dict[Tuple[str, str], str] = {}
        for uid, claim in self.claims.items():
            if uid != exclude:
                for d in claim.devices:
                    if not d.share_id:
                        out[(d.pool, d.device)] = uid
        return out

    def vnpu_ids(self) -> Dict[int, str]:
        """vNPU id -> the uid of the claim it was made for."""
        return {v.id: uid for uid, c in self.claims.items() for v in c.vnpus()}
