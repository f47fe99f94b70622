"""What one DRA driver has prepared: its claims, the checkpoint they live in, and the
preparing and unpreparing of claims against it -- apart from the loop (:mod:`.daemon`), which
owns the sockets, the published slices and the inventory this reads.

The records are :mod:`xpu_cdi.node.prepared`'s, kept in the checkpoint
(:mod:`xpu_cdi.node.checkpoint`) under this process's lock and the plugin dir's flock, which
serializes with the other pod of a rolling update.  Start-up destroys the vNPUs a checkpoint of
an earlier boot names and reconciles the checkpoint with the API server (:meth:`DeviceState.reconcile`).
"""

from __future__ import annotations

import fcntl
import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple
from urllib.parse import quote

from .. import ranktable
from ..errors import ClaimError
from ..kube.client import ApiError, Kube, claim_path
from ..log import WARNING, Log
from ..node import checkpoint as _cp
from ..node import claimspec, vnpu
from ..node.prepared import PreparedClaim, PreparedClaims, PreparedDevice, VNpu
from . import claims as _claims
from . import domain, shares
from . import slices as _slices
from .config import Settings


class DeviceState:
    """The prepared claims of one driver (NodePrepareResources and NodeUnprepareResources)."""

    def __init__(self, s: Settings, name: str, pool: str, plugin_dir: str, kube: Kube, boot: str, log: Log,
                 event: Callable[[str, str], None], inventory: Callable[[], Mapping[str, _slices.DeviceInfo]]) -> None:
        self.s, self.name, self.pool, self.dir, self.kube, self.boot = s, name, pool, plugin_dir, kube, boot
        self.log = log
        self.event = event  # an Event about the node (a corrupt checkpoint)
        self._inventory = inventory
        self.cp_path = _cp.path_in(plugin_dir)
        self.lock = threading.Lock()  # this process's calls; the flock serializes with the other pod's
        self._cp: Optional[PreparedClaims] = None
        self._cp_stat: Optional[Tuple[int, int, int]] = None
        self.discarded = False  # the checkpoint was from an earlier boot, or corrupt
        self.tool: Optional[vnpu.Tool] = None  # the vendor's partitioning tool, where the kind's chips partition
        self.common: Dict[str, Any] = {}  # the static spec's own containerEdits: a claim-scoped spec repeats them
        # training domains: each member claim's rank table, in a directory of its own the container mounts
        self.domains = domain.Domains(kube, name, s.node_name, os.path.join(plugin_dir, "training"), log)

    @property
    def devices(self) -> Mapping[str, _slices.DeviceInfo]:
        """The cards the driver publishes now, by slice device name (the loop's inventory)."""
        return self._inventory()

    # -- the checkpoint, shared with the other pod of a rolling update ------------------------------------

    @contextmanager
    def serialized(self) -> Iterator[PreparedClaims]:
        """The checkpoint as on disk now, under this process's lock and the plugin dir's flock."""
        with self.lock:
            fd = os.open(os.path.join(self.dir, "serialize.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield self._load()
            finally:
                os.close(fd)

    def _load(self) -> PreparedClaims:
        try:
            st = os.stat(self.cp_path)
            key: Optional[Tuple[int, int, int]] = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            key = None
        if self._cp is None or key != self._cp_stat:
            cp, note, corrupt = _cp.load(self.cp_path, self.boot)
            if note:
                self.log(f"{self.name}: {note}", WARNING)
                self.discarded = True
            if corrupt:
                self.event("CheckpointCorrupt", note or "")
            self._cp, self._cp_stat = cp, key
        return self._cp

    def _save(self, cp: PreparedClaims) -> None:
        _cp.save(self.cp_path, cp)
        st = os.stat(self.cp_path)
        self._cp, self._cp_stat = cp, (st.st_ino, st.st_size, st.st_mtime_ns)

    # -- start-up ------------------------------------------------------------------------------------------

    def destroy_earlier_boots_vnpus(self) -> None:
        """Destroy the vNPUs a checkpoint of an earlier boot names: the vendor makes them again after a
        reboot (``vnpu-cfg-recover``, on by default) and no claim holds them now (kubelet prepares the
        running pods' claims afresh)."""
        try:
            claims, written_on = _cp.read(self.cp_path)
        except (OSError, ValueError):
            return  # none, or corrupt: _load says so
        if written_on == self.boot or self.tool is None:
            return
        for c in claims.values():
            for v in c.vnpus():
                try:
                    self.tool.destroy(v.card, v.chip, v.id)
                except ClaimError as err:
                    self.log(f"{self.name}: vNPU {v.id} of claim {c.namespace}/{c.name} (an earlier boot) not "
                             f"destroyed: {err}", WARNING)
                    continue
                self.log(f"{self.name}: vNPU {v.id} of claim {c.namespace}/{c.name}, made on an earlier boot: "
                         f"destroyed")

    def reconcile(self, cp: PreparedClaims, rebuild: bool) -> None:
        """Release the claims the API server no longer has; after a lost checkpoint, take back from the
        API those allocated here and in use (kubelet will not prepare a running pod's claim again)."""
        try:
            items = self.kube.get("/apis/resource.k8s.io/v1/resourceclaims").get("items") or []
        except ApiError as err:
            self.log(f"{self.name}: claims not listed ({err}): checking the {len(cp.claims)} checkpointed "
                     f"one(s) one by one", WARNING)
            items = []
            for uid, c in list(cp.claims.items()):
                try:
                    items.append(self.kube.get(claim_path(c.namespace, c.name)))
                except ApiError as e:
                    if e.status != 404:
                        return  # the API is not usable now: keep everything
        live = {(i.get("metadata") or {}).get("uid"): i for i in items}
        changed = False
        for uid in [u for u in cp.claims if u not in live or cp.claims[u].pending]:
            c = cp.claims[uid]
            why = "was being prepared when the driver stopped" if c.pending else "is gone from the API"
            try:
                self._release(cp, uid)
            except ClaimError as err:
                self.log(f"{self.name}: claim {c.namespace}/{c.name} ({uid}) {why}, but {err}: kept", WARNING)
                continue
            self.log(f"{self.name}: claim {c.namespace}/{c.name} ({uid}) {why}: released"
                     + (f" (vNPU {', '.join(str(v.id) for v in c.vnpus())} destroyed)" if c.vnpus() else ""))
            changed = True
        for uid, path in claimspec.listed(self.s.claim_spec_dir, self.name).items():
            if uid not in cp.claims:
                claimspec.remove(self.s.claim_spec_dir, self.name, uid)
                self.log(f"{self.name}: claim-scoped spec {path} names no prepared claim: removed")
        if rebuild:
            devices = {d.name: d for d in self.devices.values()}
            for uid, claim in live.items():
                if uid in cp.claims or not (claim.get("status") or {}).get("reservedFor"):
                    continue
                results = [r for r in _claims.our_results(claim, self.name) if r.get("pool") == self.pool]
                if not results:
                    continue
                meta = claim["metadata"]
                made = [r["device"] for r in results if r["device"] in devices and devices[r["device"]].template]
                if made:  # which vNPU was made for it is lost with the checkpoint
                    self.log(f"{self.name}: claim {meta.get('namespace')}/{meta.get('name')} names the partition(s) "
                             f"{', '.join(made)}, made for it before the checkpoint was lost: not taken back "
                             f"(destroy its vNPU by hand once its pod is gone)", WARNING)
                    continue
                held = cp.devices_in_use()
                taken = [r["device"] for r in results if (self.pool, r["device"]) in held and not r.get("adminAccess")]
                if taken:
                    self.log(f"{self.name}: claim {meta.get('namespace')}/{meta.get('name')} names "
                             f"{', '.join(taken)}, which another claim holds: not taken back", WARNING)
                    continue
                entries = [self._taken_back(r, devices.get(r["device"])) for r in results]
                training = None
                try:
                    self.write_claim_spec(uid, entries)
                    joining = self._training_of(claim)
                    if joining is not None:
                        training = self._join(uid, meta.get("namespace", ""), meta.get("name", ""), entries, joining)
                except (OSError, ValueError, ClaimError, ApiError) as err:
                    self.log(f"{self.name}: claim {meta.get('namespace')}/{meta.get('name')}: its claim-scoped spec "
                             f"not written ({err}): not taken back", WARNING)
                    continue
                cp.claims[uid] = PreparedClaim(meta.get("namespace", ""), meta.get("name", ""), entries,
                                               training=training)
                self.log(f"{self.name}: claim {meta.get('namespace')}/{meta.get('name')} in use: taken back "
                         f"from the API ({', '.join(e.device for e in entries)})")
                changed = True
        if changed or not os.path.exists(self.cp_path):
            self._save(cp)

    def _taken_back(self, result: Dict[str, Any], card: Optional[_slices.DeviceInfo]) -> PreparedDevice:
        """The checkpoint entry of an allocation result taken back from the API (a share keeps its memory)."""
        entry = PreparedDevice([str(result.get("request", "")).split("/")[0]], self.pool, result["device"],
                               [card.cdi] if card else [])
        if result.get("shareID") and card is not None and card.share is not None:
            entry.share_id, entry.memory = result["shareID"], shares.consumed(result)
            entry.total = shares.parse_quantity(card.memory)
        return entry

    # -- training domains (dra/domain.py) --------------------------------------------------------------------

    def _training_of(self, claim: Dict[str, Any]) -> Optional[Tuple[domain.Spec, str, str, Dict[str, Any]]]:
        """The claim's training domain, its pod's name and uid and the pod read from the API; None when it
        names no domain.  Raises ClaimError (a bad config, no rank index) or ApiError (the pod not read)."""
        spec = domain.spec_of(claim, self.name)
        if spec is None:
            return None
        pod, pod_uid = domain.pod_of(claim)
        ns = (claim.get("metadata") or {}).get("namespace", "")
        doc = self.kube.get(f"/api/v1/namespaces/{quote(ns)}/pods/{quote(pod)}")
        if (doc.get("metadata") or {}).get("uid") != pod_uid:
            raise ClaimError(f"pod {ns}/{pod} is not the one the claim is reserved for (replaced)")
        return spec, pod, pod_uid, doc

    def _join(self, uid: str, namespace: str, name: str, devices: List[PreparedDevice],
              joining: Tuple[domain.Spec, str, str, Dict[str, Any]]) -> Dict[str, Any]:
        """Make the claim a member of its training domain: its table's directory (a first table written), the
        claim-scoped spec that mounts it and says the container's ranks; its CDI name appended to the first
        device's.  The checkpoint's record of it returned.  Raises ClaimError, OSError, ValueError."""
        spec, pod, pod_uid, doc = joining
        cards = []
        for d in devices:
            info = self.devices.get(d.device)
            if info is None or info.template or d.share_id or info.index is None:
                raise ClaimError(f"device {d.device}: a training domain takes whole NPUs, not partitions or shares")
            if not info.device_ip:
                raise ClaimError(f"NPU {info.index} has no RoCE address (address_{info.index}= in /etc/hccn.conf): "
                                 f"every NPU of a training domain needs one")
            cards.append((d.device, info.index, info.device_ip))
        st = doc.get("status") or {}
        local = domain.Local(namespace, name, spec, domain.index_of(doc, spec.size), pod, pod_uid,
                             tuple(sorted(cards, key=lambda c: c[1])), str(st.get("hostIP") or ""),
                             str(st.get("podIP") or ""))
        edits = self.domains.edits(uid, local)
        [cdi] = claimspec.write(self.s.claim_spec_dir, self.name, uid, [("training", edits)], {})
        try:
            self.domains.join(uid, local)
        except OSError:
            claimspec.remove(self.s.claim_spec_dir, self.name, uid)
            raise
        devices[0].cdi = list(devices[0].cdi) + [cdi]
        self.log(f"{self.name}: claim {namespace}/{name}: member {local.index} of training domain "
                 f"{namespace}/{spec.name} ({spec.size} members), ranks "
                 f"{','.join(map(str, ranktable.rank_ids(local.index, len(cards))))}")
        return local.to_json()

    def adopt_training(self, cp: PreparedClaims) -> None:
        """At start: the checkpoint's training members' tables kept up to date again."""
        for uid, c in cp.claims.items():
            if c.training is None:
                continue
            try:
                self.domains.adopt(uid, domain.Local.from_json(c.namespace, c.name, c.training))
            except (KeyError, TypeError, ValueError, IndexError) as err:
                self.log(f"{self.name}: claim {c.namespace}/{c.name}: its training record is unreadable ({err}): its "
                         f"rank table is no longer updated", WARNING)

    def write_claim_spec(self, uid: str, devices: List[PreparedDevice]) -> None:
        """The claim-scoped spec telling each share the memory the claim holds of its card; its CDI names
        appended to the shares' ``cdi``.

        Raises:
            OSError, ValueError: the spec could not be written (nothing is recorded then).
        """
        shared = [d for d in devices if d.share_id]
        if not shared:
            return
        card_name = {d.name: d.cdi.partition("=")[2] for d in self.devices.values()}
        held: Dict[str, int] = {}  # two shares of one card in a claim: one variable, their sum (docs/sharing.md)
        for d in shared:
            held[d.device] = held.get(d.device, 0) + (d.memory or 0)
        edits = [(f"{d.device}-{d.share_id[:8]}",
                  {"env": shares.env(card_name.get(d.device, d.device), held[d.device], d.total or 0)})
                 for d in shared]
        for d, name in zip(shared, claimspec.write(self.s.claim_spec_dir, self.name, uid, edits, {})):
            d.cdi = [c for c in d.cdi if c.partition("=")[0] != claimspec.kind(self.name)] + [name]

    # -- NodePrepareResources, NodeUnprepareResources --------------------------------------------------------

    def prepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, Tuple[List[PreparedDevice], str]]:
        out: Dict[str, Tuple[List[PreparedDevice], str]] = {}
        fetched = []
        for namespace, name, uid in claims:  # the slow part, before the lock
            try:
                claim = self.kube.get(claim_path(namespace, name))
                _claims.check_claim(claim, uid)
                fetched.append((namespace, name, uid, claim, self._training_of(claim)))
            except (ApiError, _claims.ClaimError) as err:
                out[uid] = ([], f"{self.name}: {err}")
                self.log(f"{self.name}: claim {namespace}/{name} not prepared: {err}", WARNING)
        with self.serialized() as cp:
            changed = False
            for namespace, name, uid, claim, joining in fetched:
                if uid in cp.claims and not cp.claims[uid].pending:  # a repeated call: the same answer
                    out[uid] = (cp.claims[uid].devices, "")
                    continue
                try:
                    if uid in cp.claims:  # half made by a call that failed to undo it: undone first
                        self._release(cp, uid)
                    devices = _claims.prepare(claim, self.name, self.pool, self.devices, cp.devices_in_use(uid))
                    training = self._join(uid, namespace, name, devices, joining) if joining and devices else None
                    self.write_claim_spec(uid, devices)  # shares: told their memory in a spec of the claim's
                    if any(self.devices[d.device].template for d in devices):
                        self._make(cp, uid, namespace, name, devices)
                except (ClaimError, OSError, ValueError) as err:
                    out[uid] = ([], f"{self.name}: {err}")
                    self.log(f"{self.name}: claim {namespace}/{name} not prepared: {err}", WARNING)
                    continue
                cp.claims[uid] = PreparedClaim(namespace, name, devices, training=training)
                out[uid] = (devices, "")
                changed = True
                self.log(f"{self.name}: claim {namespace}/{name} prepared: "
                         f"{', '.join(c for d in devices for c in d.cdi) or 'no devices of ours'}")
            if changed:
                self._save(cp)
        return out

    def unprepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, str]:
        errors: Dict[str, str] = {}
        with self.serialized() as cp:
            for ns, n, uid in claims:
                if uid not in cp.claims:
                    continue
                made = cp.claims[uid].vnpus()
                try:
                    self._release(cp, uid)
                except ClaimError as err:  # kubelet calls again
                    errors[uid] = f"{self.name}: {err}"
                    self.log(f"{self.name}: claim {ns}/{n} not unprepared: {err}", WARNING)
                    continue
                self.log(f"{self.name}: claim {ns}/{n} unprepared"
                         + (f" (vNPU {', '.join(str(v.id) for v in made)} destroyed)" if made else ""))
        return {uid: errors.get(uid, "") for _ns, _n, uid in claims}

    # -- partitions made for a claim (Ascend vNPU) ----------------------------------------------------------

    def _make(self, cp: PreparedClaims, uid: str, namespace: str, name: str, devices: List[PreparedDevice]) -> None:
        """Make the claim's partitions and its claim-scoped spec; *devices* get their CDI names.

        The intent (which vNPU id on which chip) is saved before the tool runs, so a crash at any
        point leaves a record that start-up undoes (:meth:`reconcile`); a failure here is undone at once.
        """
        if self.tool is None:
            raise ClaimError("this node's chips are not partitioned by this driver (no vendor tool)")
        taken = set(cp.vnpu_ids())
        for d in devices:
            info = self.devices[d.device]
            if not info.template:
                continue
            card, chip, first, stop = info.tool_ids
            free = next((i for i in range(first, stop) if i not in taken and not self.tool.exists(i)), None)
            if free is None:
                raise ClaimError(f"no vNPU id is free on chip {info.parent} ({first}..{stop - 1} are taken)")
            taken.add(free)
            d.vnpu = VNpu(card, chip, info.template, free)
            d.cdi = []
        cp.claims[uid] = PreparedClaim(namespace, name, devices, pending=True)
        self._save(cp)
        try:
            made = []
            for d in devices:
                v = d.vnpu
                if v:
                    host = self.tool.create(v.card, v.chip, v.template, v.id)
                    made.append((d, f"vnpu-{v.id}", vnpu.node_edits(host, v.id)))
            names = claimspec.write(self.s.claim_spec_dir, self.name, uid, [(sfx, e) for _d, sfx, e in made],
                                    self.common)
        except (ClaimError, OSError):
            for d in devices:  # destroy only what the tool said it made: an id it refused may be another's
                if d.vnpu is not None and not any(m[0] is d for m in made):
                    d.vnpu = None
            self._release(cp, uid)
            raise
        for (d, _sfx, _e), cdi in zip(made, names):
            d.cdi = [cdi]

    def _release(self, cp: PreparedClaims, uid: str) -> None:
        """Destroy what was made for the claim, remove its spec, forget it (saved).  Raises ClaimError:
        a vNPU the tool would not destroy (in use), the claim kept."""
        c = cp.claims[uid]
        for v in c.vnpus():
            if self.tool is None:
                raise ClaimError(f"vNPU {v.id} was made for the claim, but no vendor tool is set to destroy it")
            self.tool.destroy(v.card, v.chip, v.id)
        claimspec.remove(self.s.claim_spec_dir, self.name, uid)
        if c.training is not None:
            self.domains.leave(uid)
        del cp.claims[uid]
        self._save(cp)

    def own_vnpus(self) -> Set[int]:
        """The ids of the vNPUs made for claims (read without the lock: a prepare may hold it while the tool runs)."""
        cp = self._cp
        if cp is None:
            return set()
        return {v.id for c in dict(cp.claims).values() for v in c.vnpus()}
