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

import fcntl
import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .. import nodeconfig
from ..node import health as _health
from ..node import inventory as _devices
from ..node import servemode
from ..node import status as _status
from ..errors import XpuCdiError
from ..log import ERROR, INFO, WARNING, Log, to_stderr
from ..node.loop import Loop
from . import checkpoint as _cp
from . import claims as _claims
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
        with self.serialized() as cp:
            self.reconcile(cp, rebuild=self.discarded or not os.path.exists(self.cp_path))
        self.dra.start()  # served before kubelet hears of it: it dials back at once
        self.registration.start()
        self.log(f"{self.kind}: driver {self.name} serving {self.dra.path}, registering through "
                 f"{self.registration.path}")
        self.watcher = threading.Thread(target=self.publisher.watch, args=(self.stop_watch,), daemon=True,
                                        name="watch-" + self.name)
        self.watcher.start()

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
        for uid in [u for u in cp.claims if u not in live]:
            c = cp.claims.pop(uid)
            self.log(f"{self.name}: claim {c.namespace}/{c.name} ({uid}) is gone from the API: released")
            changed = True
        if rebuild:
            devices = {d.name: d for d in self.devices.values()}
            for uid, claim in live.items():
                if uid in cp.claims or not (claim.get("status") or {}).get("reservedFor"):
                    continue
                results = [r for r in _claims.our_results(claim, self.name) if r.get("pool") == self.pool]
                if not results:
                    continue
                meta = claim["metadata"]
                held = cp.devices_in_use()
                taken = [r["device"] for r in results if (self.pool, r["device"]) in held and not r.get("adminAccess")]
                if taken:
                    self.log(f"{self.name}: claim {meta.get('namespace')}/{meta.get('name')} names "
                             f"{', '.join(taken)}, which another claim holds: not taken back", WARNING)
                    continue
                entries = [{"requests": [str(r.get("request", "")).split("/")[0]], "pool": self.pool,
                            "device": r["device"],
                            "cdi": [devices[r["device"]].cdi] if r["device"] in devices else []} for r in results]
                cp.claims[uid] = _cp.Prepared(meta.get("namespace", ""), meta.get("name", ""), entries)
                self.log(f"{self.name}: claim {meta.get('namespace')}/{meta.get('name')} in use: taken back "
                         f"from the API ({', '.join(e['device'] for e in entries)})")
                changed = True
        if changed or not os.path.exists(self.cp_path):
            self._save(cp)

    # -- the Driver protocol of server.Services --------------------------------------------------------------

    def prepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, Tuple[List[Dict[str, Any]], str]]:
        out: Dict[str, Tuple[List[Dict[str, Any]], str]] = {}
        fetched = []
        for namespace, name, uid in claims:  # the slow part, before the lock
            try:
                claim = self.kube.get(claim_path(namespace, name))
                _claims.check_claim(claim, uid)
                fetched.append((namespace, name, uid, claim))
            except (ApiError, _claims.ClaimError) as err:
                out[uid] = ([], f"{self.name}: {err}")
        with self.serialized() as cp:
            changed = False
            for namespace, name, uid, claim in fetched:
                if uid in cp.claims:  # a repeated call: the same answer
                    out[uid] = (cp.claims[uid].devices, "")
                    continue
                try:
                    devices = _claims.prepare(claim, self.name, self.pool, self.devices, cp.devices_in_use(uid))
                except _claims.ClaimError as err:
                    out[uid] = ([], f"{self.name}: {err}")
                    self.log(f"{self.name}: claim {namespace}/{name} not prepared: {err}", WARNING)
                    continue
                cp.claims[uid] = _cp.Prepared(namespace, name, devices)
                out[uid] = (devices, "")
                changed = True
                self.log(f"{self.name}: claim {namespace}/{name} prepared: "
                         f"{', '.join(c for d in devices for c in d['cdi']) or 'no devices of ours'}")
            if changed:
                self._save(cp)
        return out

    def unprepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, str]:
        with self.serialized() as cp:
            gone = [(ns, n, uid) for ns, n, uid in claims if uid in cp.claims]
            for ns, n, uid in gone:
                del cp.claims[uid]
                self.log(f"{self.name}: claim {ns}/{n} unprepared")
            if gone:
                self._save(cp)
        return {uid: "" for _ns, _n, uid in claims}

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
                    "generation": self.publisher.generation, "devices": {n: d.cdi for n, d in self.devices.items()},
                    "unhealthy": dict(self.unhealthy), "dra_socket": self.dra.path,
                    "registration_socket": self.registration.path, "checkpoint": self.cp_path}

    def shutdown(self, withdraw: bool) -> None:
        self.services.stopping.set()
        self.registration.stop(0.2)  # kubelet forgets us first
        self.stop_watch.set()
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
        self.boot = _cp.boot_id(settings.boot_id_file)
        self.pid_namespace = _status.pid_namespace()  # doctor elsewhere asks the sockets instead of the pid

    # -- inventory -----------------------------------------------------------------------------------------

    def specs_changed(self, before: Dict[str, _devices.KindSet]) -> None:
        self.described = {}
        for kind, ks in self.kinds.items():
            profile = self.profile_named(ks.profile)
            version = _slices.read_driver_version(profile, self.s.proc, self.s.driver_root)
            infos = [_slices.describe(c, profile, self.s.sysfs_root, self.s.proc, self.s.driver_root, version)
                     for c in ks.cards.values()]
            self.described[kind] = _slices.by_name(infos)

    def health_of(self, kind: str) -> Dict[str, str]:
        ks = self.kinds[kind]
        profile = self.profile_named(ks.profile)
        out = {}
        cards = list(ks.cards.values())
        for (name, _info), card in zip(self.described[kind].items(), cards):
            why = _health.problem(card, ks.shared, profile, self.s.sysfs_root, self.s.proc)
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
            try:
                driver.start()
            except OSError as err:
                self.say_once("serve:" + kind, f"{kind}: cannot serve: {err}", ERROR)
                servemode.release(kind, servemode.DRA, self.s.run_dir)
                continue
            driver.devices = {}
            self.drivers[kind] = driver
        for kind, driver in self.drivers.items():
            devices = self.described.get(kind, {})
            driver.update(devices, self.health_of(kind) if kind in self.kinds else {})
            driver.publisher.sync()
            driver.check_sockets()

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
            self.wait(self.s.health_interval)
        self.close()
        return 0

    def close(self) -> None:
        for kind, driver in self.drivers.items():
            driver.shutdown(withdraw=servemode.release_last(kind, servemode.DRA, self.s.run_dir))
        self.drivers.clear()
        self.close_loop(self.s.status_file)
        self.log("stopped")
