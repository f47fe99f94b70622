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

Where a kind's remediation policy evicts (``--evict``, :mod:`xpu_cdi.remedy`),
every health reading goes through its :class:`~xpu_cdi.remedy.Remedy`: a card
unhealthy for the grace is tainted ``NoExecute`` (Kubernetes' device taint
eviction controller deletes the pods whose claims do not tolerate it), one
that recovered stays tainted through the hold-down; each decision is a log
line, an Event on the Node and on each pod holding the card, and a count in
the status file (the exporter's ``xpu_cdi_evictions_total``).  The loop wakes
when a grace or a hold-down ends.

SIGTERM: unregister (registration socket first), withdraw the slices unless
the other pod of a rolling update still serves, stop, exit 0.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import interconnect, nodeconfig, partitions, remedy
from ..node import health as _health
from ..node import inventory as _devices
from ..node import carved, servemode
from ..node import status as _status
from ..errors import ClaimError, XpuCdiError
from ..log import ERROR, INFO, WARNING, Log, to_stderr
from ..driverversion import read_driver_version
from ..hostfs import host_path
from ..node.loop import Loop
from ..node import checkpoint as _cp
from ..node.prepared import PreparedDevice
from ..node import vnpu
from . import partitioned, shares
from . import slices as _slices
from .config import Settings
from ..kube.client import ApiError, Kube, claim_path
from .publisher import Publisher
from .server import Server, Services, dra_socket, registration_socket
from .state import DeviceState

LOGGER = "xpu-cdi dra-driver"
HELD_DOWN = "held down after a failure:"  # the reason a recovered card stays tainted (remedy's hold-down)
EVENT_EVICT, EVENT_RESTORE = "CardUnhealthyEvicting", "CardRestored"  # Event reasons (the admission policy's)


class KindDriver:
    """The DRA driver of one CDI kind: its sockets, pool and published cards; its prepared claims are
    :attr:`state`'s (:class:`.state.DeviceState`)."""

    def __init__(self, s: Settings, kind: str, kube: Kube, boot: str, log: Log, wake: Callable[[], None]) -> None:
        self.s, self.kind, self.kube, self.boot, self.log = s, kind, kube, boot, log
        self.name = s.driver(kind)
        self.pool = s.node_name
        self.dir = s.plugin_dir(self.name)
        self.publisher = Publisher(kube, self.name, s.node_name, log, wake)
        self.devices: Dict[str, _slices.DeviceInfo] = {}
        self.unhealthy: Dict[str, str] = {}  # the cards withheld (tainted): unhealthy, or held down
        self.remedy = remedy.Remedy(s.policy(kind))
        self.decided: Dict[str, Dict[str, int]] = {remedy.EVICT: {}, remedy.RESTORE: {}}  # action -> reason -> n
        self.health_gen = 0
        self.cond = threading.Condition()
        endpoint = dra_socket(self.dir, s.pod_uid)
        self.services = Services(self, self.name, endpoint, log, s.health_service)
        self.dra = Server(endpoint, self.services.dra_handlers(), name="dra-" + self.name)
        self.registration = Server(registration_socket(s.registry_dir, self.name, s.pod_uid),
                                   [self.services.registration_handler()], workers=2, name="reg-" + self.name)
        self.stop_watch = threading.Event()
        self.watcher: Optional[threading.Thread] = None
        self.state = DeviceState(s, self.name, self.pool, self.dir, kube, boot, log, self.event, lambda: self.devices)
        self.cp_path = self.state.cp_path

    def event(self, reason: str, message: str, pod: Optional[Tuple[str, str, str]] = None,
              kind: str = "Warning") -> None:
        """An Event about this Node, or about *pod* (namespace, name, uid) on it; a failure is a log line."""
        if pod is None:
            namespace = "default"
            about = {"apiVersion": "v1", "kind": "Node", "name": self.s.node_name, "uid": self.publisher.node_uid}
        else:
            namespace = pod[0]
            about = {"apiVersion": "v1", "kind": "Pod", "namespace": pod[0], "name": pod[1], "uid": pod[2]}
        try:
            self.kube.event(namespace, about, reason, f"{self.name}: {message}", kind, host=self.s.node_name)
        except ApiError as err:
            self.log(f"{self.name}: event {reason} not recorded: {err}", WARNING)

    # -- start-up ------------------------------------------------------------------------------------------

    def start(self) -> None:
        os.makedirs(self.dir, mode=0o750, exist_ok=True)
        self.state.destroy_earlier_boots_vnpus()
        with self.state.serialized() as cp:
            self.state.reconcile(cp, rebuild=self.state.discarded or not os.path.exists(self.cp_path))
            self.state.adopt_training(cp)
        self.state.domains.start()
        self.dra.start()  # served before kubelet hears of it: it dials back at once
        self.registration.start()
        self.log(f"{self.kind}: driver {self.name} serving {self.dra.path}, registering through "
                 f"{self.registration.path}")
        self.watcher = threading.Thread(target=self.publisher.watch, args=(self.stop_watch,), daemon=True,
                                        name="watch-" + self.name)
        self.watcher.start()

    # -- the Driver protocol of server.Services --------------------------------------------------------------

    def prepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, Tuple[List[PreparedDevice], str]]:
        return self.state.prepare(claims)

    def unprepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, str]:
        return self.state.unprepare(claims)

    def own_vnpus(self) -> Set[int]:
        return self.state.own_vnpus()

    def health(self) -> Tuple[int, List[Tuple[str, str, str]]]:
        with self.cond:
            return self.health_gen, [(self.pool, n, self.unhealthy.get(n, "")) for n in self.devices]

    def wait_health(self, generation: int, timeout: float) -> None:
        with self.cond:
            if self.health_gen == generation:
                self.cond.wait(timeout)

    # -- inventory -----------------------------------------------------------------------------------------

    def update(self, devices: Dict[str, _slices.DeviceInfo], unhealthy: Dict[str, str]) -> List[remedy.Decision]:
        """The cards and their health read now: the slices to publish, and what the policy decides."""
        for name in set(self.remedy.cards) - set(devices):
            self.remedy.forget(name)
        for name in devices:
            self.remedy.observe(name, name not in unhealthy)
        decisions = self.remedy.due()
        policy = self.remedy.policy
        unhealthy = dict(unhealthy)
        for name in devices:
            if name not in unhealthy and not self.remedy.offered(name):
                unhealthy[name] = f"{HELD_DOWN} {policy.hold_down:g}s of health before it is offered again"
        evicting = {name for name in unhealthy if self.remedy.evicted(name)}
        for name in devices:
            changed = unhealthy.get(name, "") != self.unhealthy.get(name, "")
            if changed and (name in self.devices or unhealthy.get(name)):
                why = unhealthy.get(name, "")
                self.log(f"{self.kind}={devices[name].cdi.partition('=')[2]}: "
                         + ("healthy again, " + why if why.startswith(HELD_DOWN) else
                            f"unhealthy, tainted: {why}" if why else "healthy again"),
                         WARNING if why and not why.startswith(HELD_DOWN) else INFO)
        with self.cond:
            if devices != self.devices or unhealthy != self.unhealthy:
                self.devices, self.unhealthy = dict(devices), dict(unhealthy)
                self.health_gen += 1
                self.cond.notify_all()
        self.publisher.set(list(devices.values()), unhealthy, evicting)
        return decisions

    def remediate(self, decisions: Sequence[remedy.Decision]) -> None:
        """Say each decision (the taint that carries it out is published already): a log line, a count, an
        Event on the Node and on each pod whose claim holds the card."""
        policy = self.remedy.policy
        for d in decisions:
            info = self.devices.get(d.card)
            cdi = info.cdi if info is not None and info.cdi else f"{self.kind} device {d.card}"
            pods = self.holders(d.card)
            if info is not None and info.template and not pods:
                continue  # a vNPU template no claim made: its chip's own decision says it
            held = f"; held by {', '.join(f'{ns}/{n}' for ns, n, _u in pods)}" if pods else "; no pod holds it"
            if d.action == remedy.EVICT:
                text = (f"{cdi} unhealthy for {policy.grace:g}s ({self.unhealthy.get(d.card) or 'unhealthy'}): "
                        f"tainted {_slices.taint_key(self.name)}:{_slices.EVICTING_EFFECT}, the pods whose claims "
                        f"do not tolerate it are evicted{held}")
                reason, level, kind = EVENT_EVICT, WARNING, "Warning"
            else:
                text = f"{cdi} healthy for {policy.hold_down:g}s: untainted, offered again{held}"
                reason, level, kind = EVENT_RESTORE, INFO, "Normal"
            counts = self.decided.setdefault(d.action, {})
            counts[d.reason] = counts.get(d.reason, 0) + 1
            self.log(f"{self.name}: {d.action} ({d.reason}): {text}", level)
            self.event(reason, text, kind=kind)
            for pod in pods:
                self.event(reason, text, pod=pod, kind=kind)

    def holders(self, device: str) -> List[Tuple[str, str, str]]:
        """(namespace, name, uid) of the pods whose prepared claims hold *device*: the claims from the
        checkpoint, their pods from each claim's ``status.reservedFor`` (a claim not read: none)."""
        with self.state.serialized() as cp:
            claims = sorted({(c.namespace, c.name) for c in cp.claims.values()
                             if any(x.device == device and x.pool == self.pool for x in c.devices)})
        pods = []
        for namespace, name in claims:
            try:
                claim = self.kube.get(claim_path(namespace, name))
            except ApiError as err:
                self.log(f"{self.name}: claim {namespace}/{name} not read ({err}): its pods get no Event", WARNING)
                continue
            pods += [(namespace, str(r.get("name", "")), str(r.get("uid", "")))
                     for r in (claim.get("status") or {}).get("reservedFor") or []
                     if r.get("resource") == "pods" and not r.get("apiGroup")]
        return pods

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
                    "remediation": dataclasses.asdict(self.remedy.policy),
                    "evictions": dict(self.decided.get(remedy.EVICT, {})),
                    "restores": dict(self.decided.get(remedy.RESTORE, {})),
                    "registration_socket": self.registration.path, "checkpoint": self.cp_path}

    def shutdown(self, withdraw: bool) -> None:
        self.services.stopping.set()
        self.registration.stop(0.2)  # kubelet forgets us first
        self.stop_watch.set()
        self.state.domains.shutdown()
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
            decisions = driver.update(devices, self.health_of(kind) if kind in self.kinds else {})
            driver.publisher.sync()  # the taint first: an Event must not delay the eviction
            driver.remediate(decisions)
            driver.check_sockets()

    def arm(self, kind: str, driver: KindDriver) -> None:
        """What the driver needs to make partitions: the tool, the static spec's own edits."""
        driver.state.tool = self.tools.get(kind, (None, {}))[0]
        ks = self.kinds.get(kind)
        spec = ks.specs.get(ks.spec_paths[0]) if ks is not None and ks.spec_paths else None
        driver.state.common = dict((spec or {}).get("containerEdits") or {})

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
            self.wait(self.next_wait())
        self.close()
        return 0

    def next_wait(self) -> float:
        """Until the next poll, or sooner when a card's grace or hold-down ends (a decision falls due)."""
        due = [t for t in (d.remedy.next_due() for d in self.drivers.values()) if t is not None]
        return min([self.poll_interval(self.s.health_interval), *due])

    def close(self) -> None:
        for kind, driver in self.drivers.items():
            driver.shutdown(withdraw=servemode.release_last(kind, servemode.DRA, self.s.run_dir))
        self.drivers.clear()
        self.close_loop(self.s.status_file)
        self.log("stopped")
