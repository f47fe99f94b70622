"""``xpu-cdi dra-driver``: the main loop and one :class:`KindDriver` per CDI kind.

Start-up, per kind the specs define: take the kind (:mod:`xpu_cdi.node.servemode`:
never served twice on a node), load the checkpoint (a corrupt one is a log
line and an Event; one from an earlier boot is discarded and the running
claims are rebuilt from the API server), release the claims the API no
longer has, serve the DRA socket, then the registration socket (kubelet
dials back at once), publish the slices and follow them.

Each pass of the loop (at most ``--health-interval`` apart, at once on an
inotify event in the spec directories or the cards' node directories):
re-read the specs when a file changed, judge every card's health
(:func:`xpu_cdi.node.health.problem`: the device plugin's rule),
hand the inventory to the publisher (a change bumps the pool's generation,
an unhealthy card carries a NoSchedule taint) and sync it, serve again on a
socket that was deleted, write the status file ``--probe`` and ``doctor`` read.

SIGTERM: unregister (registration socket first), withdraw the slices unless
the other pod of a rolling update still serves, stop, exit 0.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple
from urllib.parse import quote

from .. import interconnect, nodeconfig, partitions, ranktable
from ..node import health as _health
from ..node import inventory as _devices
from ..node import carved, servemode
from ..node import status as _status
from ..errors import ClaimError, XpuCdiError
from ..log import ERROR, INFO, WARNING, Log, to_stderr
from ..driverversion import read_driver_version
from ..generate.hostfs import host_path
from ..node.loop import Loop
from . import checkpoint as _cp
from . import claims as _claims
from . import claimspec, domain, partitioned, shares, vnpu
from . import slices as _slices
from .config import Settings
from .kube import ApiError, Kube, claim_path
from .publisher import Publisher
from .server import Server, Services, dra_socket, registration_socket

LOGGER = "xpu-cdi dra-driver"


class KindDriver:
    """The DRA driver of one CDI kind: its sockets, pool, checkpoint and prepared claims."""

    def __init__(self, s: Settings, kind: str, kube: Kube, boot: str, log: Log, wake: Callable[[], None]) -> None:
        self.s, self.kind, self.kube, self.boot, self.log = s, kind, kube, boot, log
        self.name = s.driver(kind)
        self.pool = s.node_name
        self.dir = s.plugin_dir(self.name)
        self.cp_path = _cp.path_in(self.dir)
        self.publisher = Publisher(kube, self.name, s.node_name, log, wake)
        self.devices: Dict[str, _slices.DeviceInfo] = {}
        self.unhealthy: Dict[str, str] = {}
        self.health_gen = 0
        self.cond = threading.Condition()
        self.lock = threading.Lock()  # this process's calls; the flock serializes with the other pod's
        self._cp: Optional[_cp.Checkpoint] = None
        self._cp_stat: Optional[Tuple[int, int, int]] = None
        self.discarded = False  # the checkpoint was from an earlier boot, or corrupt
        endpoint = dra_socket(self.dir, s.pod_uid)
        self.services = Services(self, self.name, endpoint, log, s.health_service)
        self.dra = Server(endpoint, self.services.dra_handlers(), name="dra-" + self.name)
        self.registration = Server(registration_socket(s.registry_dir, self.name, s.pod_uid),
                                   [self.services.registration_handler()], workers=2, name="reg-" + self.name)
        self.stop_watch = threading.Event()
        self.watcher: Optional[threading.Thread] = None
        self.tool: Optional[vnpu.Tool] = None  # the vendor's partitioning tool, where the kind's chips partition
        self.common: Dict[str, Any] = {}  # the static spec's own containerEdits: a claim-scoped spec repeats them
        # training domains: each member claim's rank table, in a directory of its own the container mounts
        self.domains = domain.Domains(kube, self.name, s.node_name, os.path.join(self.dir, "training"), log)

    # -- the checkpoint, shared with the other pod of a rolling update ------------------------------------

    @contextmanager
    def serialized(self) -> Iterator[_cp.Checkpoint]:
        """The checkpoint as on disk now, under this process's lock and the plugin dir's flock."""
        with self.lock:
            fd = os.open(os.path.join(self.dir, "serialize.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield self._load()
            finally:
                os.close(fd)

    def _load(self) -> _cp.Checkpoint:
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

    def _save(self, cp: _cp.Checkpoint) -> None:
        _cp.save(self.cp_path, cp)
        st = os.stat(self.cp_path)
        self._cp, self._cp_stat = cp, (st.st_ino, st.st_size, st.st_mtime_ns)

    def event(self, reason: str, message: str) -> None:
        node = {"apiVersion": "v1", "kind": "Node", "name": self.s.node_name, "uid": self.publisher.node_uid}
        try:
            self.kube.event("default", node, reason, f"{self.name}: {message}")
        except ApiError as err:
            self.log(f"{self.name}: event {reason} not recorded: {err}", WARNING)

    # -- start-up ------------------------------------------------------------------------------------------

    def start(self) -> None:
        os.makedirs(self.dir, mode=0o750, exist_ok=True)
        self.destroy_earlier_boots_vnpus()
        with self.serialized() as cp:
            self.reconcile(cp, rebuild=self.discarded or not os.path.exists(self.cp_path))
            for uid, c in cp.claims.items():
                if c.training is not None:
                    self._adopt(uid, c)
        self.domains.start()
        self.dra.start()  # served before kubelet hears of it: it dials back at once
        self.registration.start()
        self.log(f"{self.kind}: driver {self.name} serving {self.dra.path}, registering through "
                 f"{self.registration.path}")
        self.watcher = threading.Thread(target=self.publisher.watch, args=(self.stop_watch,), daemon=True,
                                        name="watch-" + self.name)
        self.watcher.start()

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
                    self.tool.destroy(int(v["card"]), int(v["chip"]), int(v["id"]))
                except ClaimError as err:
                    self.log(f"{self.name}: vNPU {v['id']} of claim {c.namespace}/{c.name} (an earlier boot) not "
                             f"destroyed: {err}", WARNING)
                    continue
                self.log(f"{self.name}: vNPU {v['id']} of claim {c.namespace}/{c.name}, made on an earlier boot: "
                         f"destroyed")

    def reconcile(self, cp: _cp.Checkpoint, rebuild: bool) -> None:
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
                     + (f" (vNPU {', '.join(str(v['id']) for v in c.vnpus())} destroyed)" if c.vnpus() else ""))
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
                cp.claims[uid] = _cp.Prepared(meta.get("namespace", ""), meta.get("name", ""), entries,
                                              training=training)
                self.log(f"{self.name}: claim {meta.get('namespace')}/{meta.get('name')} in use: taken back "
                         f"from the API ({', '.join(e['device'] for e in entries)})")
                changed = True
        if changed or not os.path.exists(self.cp_path):
            self._save(cp)

    def _taken_back(self, result: Dict[str, Any], card: Optional[_slices.DeviceInfo]) -> Dict[str, Any]:
        """The checkpoint entry of an allocation result taken back from the API (a share keeps its memory)."""
        entry: Dict[str, Any] = {"requests": [str(result.get("request", "")).split("/")[0]], "pool": self.pool,
                                 "device": result["device"], "cdi": [card.cdi] if card else []}
        if result.get("shareID") and card is not None and card.share is not None:
            entry.update(shareID=result["shareID"], memory=shares.consumed(result),
                         total=shares.parse_quantity(card.memory))
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

    def _join(self, uid: str, namespace: str, name: str, devices: List[Dict[str, Any]],
              joining: Tuple[domain.Spec, str, str, Dict[str, Any]]) -> Dict[str, Any]:
        """Make the claim a member of its training domain: its table's directory (a first table written), the
        claim-scoped spec that mounts it and says the container's ranks; its CDI name appended to the first
        device's.  The checkpoint's record of it returned.  Raises ClaimError, OSError, ValueError."""
        spec, pod, pod_uid, doc = joining
        cards = []
        for d in devices:
            info = self.devices.get(d["device"])
            if info is None or info.template or d.get("shareID") or info.index is None:
                raise ClaimError(f"device {d['device']}: a training domain takes whole NPUs, not partitions or shares")
            if not info.device_ip:
                raise ClaimError(f"NPU {info.index} has no RoCE address (address_{info.index}= in /etc/hccn.conf): "
                                 f"every NPU of a training domain needs one")
            cards.append((d["device"], info.index, info.device_ip))
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
        devices[0]["cdi"] = list(devices[0]["cdi"]) + [cdi]
        self.log(f"{self.name}: claim {namespace}/{name}: member {local.index} of training domain "
                 f"{namespace}/{spec.name} ({spec.size} members), ranks "
                 f"{','.join(map(str, ranktable.rank_ids(local.index, len(cards))))}")
        return local.to_json()

    def _adopt(self, uid: str, c: _cp.Prepared) -> None:
        try:
            self.domains.adopt(uid, domain.Local.from_json(c.namespace, c.name, c.training or {}))
        except (KeyError, TypeError, ValueError, IndexError) as err:
            self.log(f"{self.name}: claim {c.namespace}/{c.name}: its training record is unreadable ({err}): its "
                     f"rank table is no longer updated", WARNING)

    def write_claim_spec(self, uid: str, devices: List[Dict[str, Any]]) -> None:
        """The claim-scoped spec telling each share the memory the claim holds of its card; its CDI names
        appended to the shares' ``cdi``.

        Raises:
            OSError, ValueError: the spec could not be written (nothing is recorded then).
        """
        shared = [d for d in devices if d.get("shareID")]
        if not shared:
            return
        card_name = {d.name: d.cdi.partition("=")[2] for d in self.devices.values()}
        held: Dict[str, int] = {}  # two shares of one card in a claim: one variable, their sum (docs/sharing.md)
        for d in shared:
            held[d["device"]] = held.get(d["device"], 0) + d["memory"]
        edits = [(f"{d['device']}-{d['shareID'][:8]}",
                  {"env": shares.env(card_name.get(d["device"], d["device"]), held[d["device"]], d["total"])})
                 for d in shared]
        for d, name in zip(shared, claimspec.write(self.s.claim_spec_dir, self.name, uid, edits, {})):
            d["cdi"] = [c for c in d["cdi"] if c.partition("=")[0] != claimspec.kind(self.name)] + [name]

    # -- the Driver protocol of server.Services --------------------------------------------------------------

    def prepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, Tuple[List[Dict[str, Any]], str]]:
        out: Dict[str, Tuple[List[Dict[str, Any]], str]] = {}
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
                    if any(self.devices[d["device"]].template for d in devices):
                        self._make(cp, uid, namespace, name, devices)
                except (ClaimError, OSError, ValueError) as err:
                    out[uid] = ([], f"{self.name}: {err}")
                    self.log(f"{self.name}: claim {namespace}/{name} not prepared: {err}", WARNING)
                    continue
                cp.claims[uid] = _cp.Prepared(namespace, name, devices, training=training)
                out[uid] = (devices, "")
                changed = True
                self.log(f"{self.name}: claim {namespace}/{name} prepared: "
                         f"{', '.join(c for d in devices for c in d['cdi']) or 'no devices of ours'}")
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
                         + (f" (vNPU {', '.join(str(v['id']) for v in made)} destroyed)" if made else ""))
        return {uid: errors.get(uid, "") for _ns, _n, uid in claims}

    # -- partitions made for a claim (Ascend vNPU) ----------------------------------------------------------

    def _make(self, cp: _cp.Checkpoint, uid: str, namespace: str, name: str, devices: List[Dict[str, Any]]) -> None:
        """Make the claim's partitions and its claim-scoped spec; *devices* get their CDI names.

        The intent (which vNPU id on which chip) is saved before the tool runs, so a crash at any
        point leaves a record that start-up undoes (:meth:`reconcile`); a failure here is undone at once.
        """
        if self.tool is None:
            raise ClaimError("this node's chips are not partitioned by this driver (no vendor tool)")
        taken = set(cp.vnpu_ids())
        for d in devices:
            info = self.devices[d["device"]]
            if not info.template:
                continue
            card, chip, first, stop = info.tool_ids
            free = next((i for i in range(first, stop) if i not in taken and not self.tool.exists(i)), None)
            if free is None:
                raise ClaimError(f"no vNPU id is free on chip {info.parent} ({first}..{stop - 1} are taken)")
            taken.add(free)
            d["vnpu"] = {"card": card, "chip": chip, "template": info.template, "id": free}
            d["cdi"] = []
        cp.claims[uid] = _cp.Prepared(namespace, name, devices, pending=True)
        self._save(cp)
        try:
            made = []
            for d in devices:
                v = d.get("vnpu")
                if v:
                    host = self.tool.create(v["card"], v["chip"], v["template"], v["id"])
                    made.append((d, f"vnpu-{v['id']}", vnpu.node_edits(host, v["id"])))
            names = claimspec.write(self.s.claim_spec_dir, self.name, uid, [(sfx, e) for _d, sfx, e in made],
                                    self.common)
        except (ClaimError, OSError):
            for d in devices:  # destroy only what the tool said it made: an id it refused may be another's
                if "vnpu" in d and not any(m[0] is d for m in made):
                    del d["vnpu"]
            self._release(cp, uid)
            raise
        for (d, _sfx, _e), cdi in zip(made, names):
            d["cdi"] = [cdi]

    def _release(self, cp: _cp.Checkpoint, uid: str) -> None:
        """Destroy what was made for the claim, remove its spec, forget it (saved).  Raises ClaimError:
        a vNPU the tool would not destroy (in use), the claim kept."""
        c = cp.claims[uid]
        for v in c.vnpus():
            if self.tool is None:
                raise ClaimError(f"vNPU {v['id']} was made for the claim, but no vendor tool is set to destroy it")
            self.tool.destroy(int(v["card"]), int(v["chip"]), int(v["id"]))
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
        return {int(v["id"]) for c in dict(cp.claims).values() for v in c.vnpus()}

    def health(self) -> Tuple[int, List[Tuple[str, str, str]]]:
        with self.cond:
            return self.health_gen, [(self.pool, n, self.unhealthy.get(n, "")) for n in self.devices]

    def wait_health(self, generation: int, timeout: float) -> None:
        with self.cond:
            if self.health_gen == generation:
                self.cond.wait(timeout)

    # -- inventory -----------------------------------------------------------------------------------------

    def update(self, devices: Dict[str, _slices.DeviceInfo], unhealthy: Dict[str, str]) -> None:
        for name in devices:
            changed = unhealthy.get(name, "") != self.unhealthy.get(name, "")
            if changed and (name in self.devices or unhealthy.get(name)):
                self.log(f"{self.kind}={devices[name].cdi.partition('=')[2]}: "
                         + (f"unhealthy, tainted: {unhealthy[name]}" if unhealthy.get(name) else "healthy again"),
                         WARNING if unhealthy.get(name) else INFO)
        with self.cond:
            if devices != self.devices or unhealthy != self.unhealthy:
                self.devices, self.unhealthy = dict(devices), dict(unhealthy)
                self.health_gen += 1
                self.cond.notify_all()
        self.publisher.set(list(devices.values()), unhealthy)

    def check_sockets(self) -> None:
        for server in (self.dra, self.registration):
            if not server.alive():
                self.log(f"{self.name}: socket {server.path} is gone: serving again")
                try:
                    server.start()
                except OSError as err:
                    self.log(f"{self.name}: cannot serve on {server.path}: {err}", ERROR)

    def status(self) -> Dict[str, Any]:
        with self.cond:
            return {"driver": self.name, "pool": self.pool, "registered": self.services.registered.is_set(),
                    "registration_error": self.services.registration_error,
                    "published": self.publisher.published, "publish_error": self.publisher.last_error,
                    "generation": self.publisher.generation,
                    "devices": {n: d.cdi for n, d in self.devices.items() if d.cdi},  # partitions have none yet
                    "partitions": sum(1 for d in self.devices.values() if d.template),
                    "unhealthy": dict(self.unhealthy), "dra_socket": self.dra.path,
                    "registration_socket": self.registration.path, "checkpoint": self.cp_path}

    def shutdown(self, withdraw: bool) -> None:
        self.services.stopping.set()
        self.registration.stop(0.2)  # kubelet forgets us first
        self.stop_watch.set()
        self.domains.shutdown()
        if withdraw:
            self.publisher.withdraw()
        self.dra.stop(0.5)


class Daemon(Loop):
    """Every kind's driver, and the loop."""

    waiting_for_specs = "nothing is published until one does"

    def __init__(self, settings: Settings, log: Optional[Log] = None, kube: Optional[Kube] = None) -> None:
        super().__init__(log or to_stderr(LOGGER), settings)
        self.s: Settings = settings
        self.kube = kube
        self.drivers: Dict[str, KindDriver] = {}
        self.described: Dict[str, Dict[str, _slices.DeviceInfo]] = {}  # kind -> slice device name -> card
        self.tools: Dict[str, Tuple[vnpu.Tool, Dict[int, partitioned.ToolChip]]] = {}  # kind -> its tool, chips
        self.boot = _cp.boot_id(settings.boot_id_file)
        self.pid_namespace = _status.pid_namespace()  # doctor elsewhere asks the sockets instead of the pid

    # -- inventory -----------------------------------------------------------------------------------------

    def specs_changed(self, before: Dict[str, _devices.KindSet]) -> None:
        self.described = {}
        for kind, ks in self.kinds.items():
            profile = self.profile_named(ks.profile)
            version = read_driver_version(profile, self.s.proc, self.s.driver_root)
            parts = partitions.builtin(ks.profile) if ks.profile else None
            # a static vNPU says its chip's index and name, as a partition does (the chip's CDI name is its index)
            static = carved.parents(ks, parts)
            chip = {c.id: static.get(c.id, c.index) for c in ks.cards.values()}  # a vNPU's links are its chip's
            host = interconnect.read(profile, [i for i in chip.values() if i is not None],
                                     self.s.sysfs_root, self.s.driver_root)
            infos = [_slices.describe(c, profile, self.s.sysfs_root, self.s.proc, self.s.driver_root, version,
                                      host.cards.get(chip[c.id]) if chip[c.id] is not None else None)
                     for c in ks.cards.values()]
            policy = self.s.shares.get(kind)
            if policy is not None:
                infos = [self.shared(kind, info, policy) for info in infos]
            infos = [dataclasses.replace(i, index=static[c.id], parent=_slices.device_name(str(static[c.id])))
                     if c.id in static else i for c, i in zip(ks.cards.values(), infos)]
            phys = [i.index for i in infos if i.index is not None and not i.parent]  # /dev/davinci<phy id>
            chips = self.tool_of(kind, parts, phys)[1] if parts is not None else {}
            self.described[kind] = partitioned.expand(_slices.by_name(infos), chips, parts)

    def tool_of(self, kind: str, parts: partitions.Partitions,
                phys: Sequence[int] = ()) -> Tuple[Optional[vnpu.Tool], Dict[int, partitioned.ToolChip]]:
        """The kind's partitioning tool and the chips it names by phy id (*phys*: the chips' /dev/davinci
        numbers; asked once, again after a failure)."""
        if kind not in self.tools:
            tool = vnpu.Tool(self.s.vnpu_tool or host_path(self.s.driver_root, f"/usr/local/bin/{parts.tool}"),
                             self.s.dev_root)
            try:
                chips = tool.chips(phys)
            except ClaimError as err:
                self.say_once(f"tool:{kind}:{err}", f"{kind}: no partitions published: {err}", WARNING)
                return None, {}
            self.tools[kind] = (tool, chips)
            if chips:
                self.log(f"{kind}: {tool.path} names {len(chips)} chip(s): their {parts.tool} partitions published")
        return self.tools[kind]

    def own_vnpus(self) -> Set[int]:
        return set().union(*(d.own_vnpus() for d in self.drivers.values()))

    def shared(self, kind: str, info: _slices.DeviceInfo, policy: shares.Policy) -> _slices.DeviceInfo:
        """*info* shared by capacity, or whole with one line saying why not."""
        total = shares.card_memory(info.memory, policy)
        why = policy.problem(total) if total else (
            "its memory is unknown (the profile's model has none): give it with memory=")
        if why:
            self.say_once(f"share:{kind}:{why}", f"{kind}: cards not shared by capacity (first {info.name}): {why} "
                                                 f"(--share-capacity)", WARNING)
            return info
        return dataclasses.replace(info, memory=shares.format_quantity(total), share=policy)

    def health_of(self, kind: str) -> Dict[str, str]:
        ks = self.kinds[kind]
        profile = self.profile_named(ks.profile)
        out = {}
        for name, info in self.described[kind].items():  # a partition is as healthy as its chip
            card = ks.cards.get((self.described[kind].get(info.parent) or info).cdi.partition("=")[2])
            why = _health.problem(card, ks.shared, profile, self.s.sysfs_root, self.s.proc) if card else ""
            if why:
                out[name] = why
        return out

    # -- drivers -------------------------------------------------------------------------------------------

    def sync_drivers(self) -> None:
        cfg = self.node_config()
        for kind in sorted(set(self.kinds) - set(self.drivers)):
            name = self.s.driver(kind)
            clash = [k for k, d in self.drivers.items() if d.name == name]
            if clash:
                self.say_once("clash:" + kind, f"{kind}: not served: driver name {name} is already {clash[0]}'s: "
                                               f"give one of them another with --driver-name {kind}=<name>", WARNING)
                continue
            if cfg is None:
                continue
            why = servemode.claim(kind, servemode.DRA, cfg, self.s.run_dir)
            if why:
                self.say_once("refused:" + kind + why, why, WARNING)
                continue
            assert self.kube is not None
            driver = KindDriver(self.s, kind, self.kube, self.boot, self.log, self.wake)
            driver.devices = dict(self.described[kind])  # the checkpoint's rebuild names cards
            self.arm(kind, driver)
            try:
                driver.start()
            except OSError as err:
                self.say_once("serve:" + kind, f"{kind}: cannot serve: {err}", ERROR)
                servemode.release(kind, servemode.DRA, self.s.run_dir)
                continue
            driver.devices = {}
            self.drivers[kind] = driver
            if driver.own_vnpus():  # its vNPUs are no static cards: read the specs again knowing them
                self.refresh(force=True)
        for kind, driver in self.drivers.items():
            devices = self.described.get(kind, {})
            self.arm(kind, driver)
            driver.update(devices, self.health_of(kind) if kind in self.kinds else {})
            driver.publisher.sync()
            driver.check_sockets()

    def arm(self, kind: str, driver: KindDriver) -> None:
        """What the driver needs to make partitions: the tool, the static spec's own edits."""
        driver.tool = self.tools.get(kind, (None, {}))[0]
        ks = self.kinds.get(kind)
        spec = ks.specs.get(ks.spec_paths[0]) if ks is not None and ks.spec_paths else None
        driver.common = dict((spec or {}).get("containerEdits") or {})

    def node_config(self) -> Optional[nodeconfig.NodeConfig]:
        try:
            return nodeconfig.read(self.s.node_config)
        except XpuCdiError as err:
            self.say_once("nodeconfig:" + str(err), f"{err}: serving nothing new until it is fixed", ERROR)
            return None

    # -- status and the loop -------------------------------------------------------------------------------

    def write_status(self) -> None:
        doc = {"pid": os.getpid(), "pid_namespace": self.pid_namespace, "started": int(self.started),
               "node": self.s.node_name, "boot_id": self.boot,
               "pod_uid": self.s.pod_uid, "spec_dirs": list(self.s.spec_dirs),
               "kinds": {k: d.status() for k, d in sorted(self.drivers.items())}}
        self.publish_status(self.s.status_file, doc, "--probe and doctor need it")

    def watch_dirs(self) -> None:
        self.watch([*self.s.spec_dirs, *_devices.node_dirs(self.kinds)])

    def step(self) -> None:
        self.refresh()
        self.watch_dirs()  # before health is read and published: a change after it is an event
        self.sync_drivers()
        self.write_status()

    def run(self) -> int:
        self.install_signals()
        self.load_profiles()
        if self.kube is None:
            self.kube = Kube(self.s.kubeconfig)
        self.open_events(self.s.health_interval)
        if self.kube.insecure:
            self.log(f"the API server's certificate is not verified (insecure-skip-tls-verify in "
                     f"{self.s.kubeconfig or 'the kubeconfig'})", WARNING)
        self.log(f"starting on node {self.s.node_name}: specs in {', '.join(self.s.spec_dirs)}, kubelet plugins in "
                 f"{self.s.plugins_dir}, registration in {self.s.registry_dir}, API server {self.kube.host}")
        while not self.stop.is_set():
            self.step()
            self.wait(self.poll_interval(self.s.health_interval))
        self.close()
        return 0

    def close(self) -> None:
        for kind, driver in self.drivers.items():
            driver.shutdown(withdraw=servemode.release_last(kind, servemode.DRA, self.s.run_dir))
        self.drivers.clear()
        self.close_loop(self.s.status_file)
        self.log("stopped")
