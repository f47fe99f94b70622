"""The prepared claims, kept across driver restarts.

``NodeUnprepareResources`` gets only a claim's uid, namespace and name, and
a restarted driver must not hand a card that a running pod holds to a
second claim: what was prepared is written down here.  The file
(``<plugin dir>/checkpoint.json``) is

* written atomically (temp file, rename), with a SHA-256 of its claims so a
  damaged file is told from a valid one; not fsynced: it must outlive the
  driver's process (the page cache does), not the machine -- after a crash
  the boot is a new one and the file is discarded anyway (~14 ms an fsync on
  a loaded disk, three of them a vNPU prepare);
* keyed to the boot (``/proc/sys/kernel/random/boot_id``): after a reboot no
  container of before is running, and the claims still in use are prepared
  again as kubelet asks (a stale file never blocks a card);
* never a reason to stop: a corrupt or unreadable file is one log line and
  an Event, and the driver starts empty (kubelet prepares again what runs).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .. import atomic, bounded

NAME = "checkpoint.json"
VERSION = 1
BOOT_ID = "/proc/sys/kernel/random/boot_id"
MAX_BYTES = 16 << 20


@dataclass
class Prepared:
    """One prepared claim: what NodePrepareResources answered."""

    namespace: str
    name: str
    # [{"requests": [...], "pool": ..., "device": ..., "cdi": [...]}]; a share of a card also with
    # "shareID", "memory" and "total" (bytes), its claim-scoped CDI name last in "cdi"; a partition
    # made for the claim with "vnpu": {"card": .., "chip": .., "template": .., "id": ..}
    devices: List[Dict[str, Any]]
    pending: bool = False  # written before the vendor's tool runs: a crash leaves the intent, undone at start
    # a member of a training domain (:class:`xpu_cdi.dra.domain.Local`'s to_json): its rank table is kept up to date
    training: Optional[Dict[str, Any]] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"namespace": self.namespace, "name": self.name, "devices": self.devices}
        if self.pending:
            out["pending"] = True
        if self.training is not None:
            out["training"] = self.training
        return out

    def vnpus(self) -> List[Dict[str, Any]]:
        """The partitions made (or being made) for this claim."""
        return [d["vnpu"] for d in self.devices if isinstance(d.get("vnpu"), dict)]


@dataclass
class Checkpoint:
    """The claims prepared on this boot, by claim uid."""

    boot_id: str
    claims: Dict[str, Prepared] = field(default_factory=dict)

    def devices_in_use(self, exclude: str = "") -> Dict[Tuple[str, str], str]:
        """``(pool, device)`` -> uid of the claim holding it whole, other than *exclude* (shares are not holds)."""
        out: Dict[Tuple[str, str], str] = {}
        for uid, claim in self.claims.items():
            if uid != exclude:
                for d in claim.devices:
                    if not d.get("shareID"):
                        out[(d["pool"], d["device"])] = uid
        return out

    def vnpu_ids(self) -> Dict[int, str]:
        """vNPU id -> the uid of the claim it was made for."""
        return {int(v["id"]): uid for uid, c in self.claims.items() for v in c.vnpus()}


def boot_id(path: str = BOOT_ID) -> str:
    """This boot's id (a fresh UUID per boot), or "" where the kernel has none."""
    try:
        with open(path) as f:
            return f.read(64).strip()
    except OSError:
        return ""


def _digest(claims: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def dumps(cp: Checkpoint) -> bytes:
    claims = {uid: c.to_json() for uid, c in sorted(cp.claims.items())}
    doc = {"version": VERSION, "bootId": cp.boot_id, "claims": claims, "sha256": _digest(claims)}
    return json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"


def save(path: str, cp: Checkpoint) -> None:
    """Write *cp* to *path* atomically (not durably: see the module's doc)."""
    atomic.write_atomic(path, dumps(cp), mode=0o600, durable=False)


def _parse(raw: bytes) -> Tuple[Dict[str, Prepared], str]:
    """The claims of a checkpoint file and its boot id. Raises ValueError naming what is wrong."""
    doc = bounded.json_loads(raw)
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise ValueError(f"not a version-{VERSION} checkpoint")
    claims = doc.get("claims")
    if not isinstance(claims, dict) or doc.get("sha256") != _digest(claims):
        raise ValueError("its checksum does not match its content")
    out = {}
    for uid, c in claims.items():
        if not (isinstance(c, dict) and isinstance(c.get("devices"), list)
                and all(_device_ok(d) for d in c["devices"])
                and (c.get("training") is None or isinstance(c["training"], dict))):
            raise ValueError(f"claim {bounded.short(uid)} is malformed")
        out[uid] = Prepared(str(c.get("namespace", "")), str(c.get("name", "")), c["devices"], c.get("pending") is True,
                            c.get("training"))
    return out, str(doc.get("bootId", ""))


def _device_ok(d: Any) -> bool:
    """A prepared device as :meth:`Prepared.to_json` writes it: the fields the driver reads typed."""
    vnpu = d.get("vnpu") if isinstance(d, dict) else None
    return (isinstance(d, dict) and isinstance(d.get("pool"), str) and isinstance(d.get("device"), str)
            and isinstance(d.get("cdi"), list) and all(isinstance(n, str) for n in d["cdi"])
            and (vnpu is None or isinstance(vnpu, dict) and isinstance(vnpu.get("id"), int)))


def read(path: str) -> Tuple[Dict[str, Prepared], str]:
    """The claims of the checkpoint at *path* and the boot id it was written on; reads only (doctor).

    Raises:
        OSError: absent or unreadable.
        ValueError: corrupt (the message says how): not a regular file, over 16 MiB, nested
            deeper than :data:`xpu_cdi.bounded.MAX_DEPTH`, not JSON, a bad checksum or shape.
    """
    return _parse(bounded.read(path, MAX_BYTES))


def load(path: str, current_boot: str) -> Tuple[Checkpoint, Optional[str], bool]:
    """The checkpoint at *path* for this boot.

    Returns:
        ``(checkpoint, note, corrupt)``: an empty checkpoint with a note when
        the file is absent (no note), from an earlier boot, or unreadable
        (*corrupt* True: the caller also raises an Event).
    """
    atomic.remove_stale_temps(path)
    try:
        claims, written_on = read(path)
    except FileNotFoundError:
        return Checkpoint(current_boot), None, False
    except OSError as err:
        return Checkpoint(current_boot), f"checkpoint {path} is unreadable ({err.strerror}): starting empty", True
    except ValueError as err:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        return (Checkpoint(current_boot),
                f"checkpoint {path} is corrupt ({' '.join(str(err).split())}): starting empty; kubelet prepares "
                f"the running pods' claims again", True)
    if written_on != current_boot:
        return (Checkpoint(current_boot),
                f"checkpoint {path} is from an earlier boot (boot id {written_on or '?'}, now "
                f"{current_boot or '?'}): its {len(claims)} claim(s) discarded, prepared again as kubelet asks",
                False)
    return Checkpoint(current_boot, claims), None, False


def path_in(plugin_data_dir: str) -> str:
    """The checkpoint's path in the driver's plugin data directory."""
    return os.path.join(plugin_data_dir, NAME)
