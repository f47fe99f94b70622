"""``xpu-cdi device-plugin``: the main loop.

One :class:`~.server.KindPlugin` per CDI kind our specs define.  The loop
sleeps in ``select`` on inotify (kubelet's directory, the spec directories,
the directories of the cards' nodes, the config file's), the uevent monitor (libudev's, where
netlink is available) and a wake-up pipe (signals, Allocate seeing a new
spec), at most ``health-interval`` seconds: the poll is the floor that
catches what no event announced.  Each pass (after a reload, on SIGHUP or
when the config file changed: a stat decides):

1. re-reads the specs when a file changed (a few stats decide), then
   watches the directories of the cards' nodes before their health is
   read, so that a node changing after the read is an event;
2. starts a plugin for a new kind (serve, then register), and for a kind
   whose specs are gone advertises no devices, then stops its server;
3. re-checks every card's health and re-sends the list where it changed;
4. steps every plugin's :class:`.restart.Registrar`: serve on a new socket
   where ours is gone, register where the registration does not hold for
   the ``kubelet.sock`` there now.  Events (a socket deleted or created, a
   stream ended) only wake the loop; what to do is read from the sockets;
5. writes the status file that ``--probe`` and ``doctor`` read.

With ``--evict`` for a kind (issue 43), each health reading also feeds that kind's
:class:`xpu_cdi.remedy.Remedy`: a card it does not offer (unhealthy, or held down after a
recovery) is reported Unhealthy to kubelet, and its ``evict`` decisions go to
:class:`.evict.Evictor`, the one part that talks to the API server.  Without it, the plugin
never does: everything it needs is on the node.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

from .. import partitions, remedy
from ..node import vnpu
from ..hostfs import host_path
from ..node import carved, servemode
from ..errors import XpuCdiError
from ..generate.discover import Roots
from ..log import INFO, WARNING, Log, to_stderr
from ..node.loop import Loop
from ..node import grpcserve, health
from ..node import inventory as devices
from . import evict, naming, registration, stale, vnpunames
from ..node import status as _status
from .config import Settings, resource_problem
from .server import KindPlugin


LOGGER = "xpu-cdi device-plugin"


class Daemon(Loop):
    """The device plugin daemon's state."""

    waiting_for_specs = "nothing is advertised until a spec appears"

    def __init__(self, settings: Settings, log: Optional[Log] = None,
                 reload_settings: Optional[Callable[[], Settings]] = None, config_file: str = "",
                 evictor: Optional[Callable[["Daemon"], evict.Evictor]] = None) -> None:
        """*config_file*: the settings file *reload_settings* reads, followed: a change reloads.
        *evictor*: makes the :class:`.evict.Evictor` when a kind has a policy (tests give a fake API)."""
        super().__init__(log or to_stderr(LOGGER), settings)
        self.s: Settings = settings
        self.reload_settings = reload_settings
        self.config_file = config_file
        self.config_seen = self.config_state()
        self.plugins: Dict[str, KindPlugin] = {}
        self.known: Dict[str, devices.KindSet] = {}  # the last spec-defined view of every kind still served
        # cards no spec defines any more, kept Unhealthy for the removal grace (a driver reload
        # makes `watch` drop a spec for a while: the cards must not leave kubelet meanwhile)
        self.vanished: Dict[str, Dict[str, Tuple[devices.SpecCard, float]]] = {}
        self.lock = threading.RLock()  # the main loop and Allocate threads both refresh the inventory
        self.reload_asked = False
        self.stale_due = False
        self.pid_namespace = _status.pid_namespace()
        self.vnpu_namer = vnpunames.Namer(self.vnpu_tool)
        self.make_evictor = evictor or default_evictor
        self.evictor: Optional[evict.Evictor] = None
        self.remedies: Dict[str, remedy.Remedy] = {}
        self.decided: Dict[Tuple[str, str, str], int] = {}  # (kind, action, reason) -> decisions, for the exporter

    def set_policies(self) -> None:
        """A :class:`remedy.Remedy` per kind with a policy (the settings' ``evict``); the evictor with the first.

        Raises:
            ConfigError: no node name, no way to the API server.
        """
        self.remedies = {kind: remedy.Remedy(p) for kind, p in self.s.evict.items()}
        if self.remedies and self.evictor is None:
            self.evictor = self.make_evictor(self)
            self.evictor.start()
        elif not self.remedies and self.evictor is not None:
            self.evictor.stop()
            self.evictor = None

    def ask_reload(self) -> None:
        self.reload_asked = True

    def config_state(self) -> Optional[Tuple[int, int, int, int]]:
        """What tells the config file changed: its inode (a ConfigMap's update swaps a symlink,
        an editor renames a new file in), mtime and size; None when absent."""
        if not self.config_file:
            return None
        try:
            st = os.stat(self.config_file)
        except OSError:
            return None
        return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size

    # -- inventory -----------------------------------------------------------------------------------------

    def refresh(self, force: bool = False) -> bool:
        with self.lock:  # Allocate threads refresh too
            return super().refresh(force)

    def arrange(self, kinds: Dict[str, devices.KindSet]) -> Dict[str, devices.KindSet]:
        """The units served: the kinds, or each kind's cards by model resource, and each static vNPU under
        its template's resource; a vNPU whose name is unknown is not offered (:mod:`.naming`, :mod:`.vnpunames`)."""
        kinds = devices.with_domains(kinds, self.profile_named, self.s.sysfs_root)  # preferred allocation's
        names: Dict[str, Dict[str, str]] = {}
        for kind, ks in list(kinds.items()):
            parts = partitions.builtin(ks.profile) if ks.profile else None
            names[kind], lines = self.vnpu_namer.names(ks, parts)
            for line in lines:
                self.say_once("vnpu:" + line, line, WARNING)
            unnamed = set(carved.parents(ks, parts)) - set(names[kind])
            if unnamed:
                kinds[kind] = dataclasses.replace(ks, cards={c: v for c, v in ks.cards.items() if c not in unnamed})
        return naming.split(kinds, self.s.resource_naming, self.profile_named, self.s.sysfs_root, names)

    def vnpu_tool(self, name: str) -> vnpu.Tool:
        """The partition data's tool (npu-smi) as the host has it, under the driver root."""
        return vnpu.Tool(host_path(self.s.driver_root, f"/usr/local/bin/{name}"), self.s.dev_root, timeout=20)

    def specs_changed(self, before: Dict[str, devices.KindSet]) -> None:
        now = time.monotonic()
        for kind, old in before.items():
            for cid, card in old.cards.items():
                if cid not in (self.kinds[kind].cards if kind in self.kinds else {}):
                    self.vanished.setdefault(kind, {}).setdefault(cid, (card, now))
        for kind, ks in self.kinds.items():
            for cid in ks.cards:
                self.vanished.get(kind, {}).pop(cid, None)
        self.known.update(self.kinds)
        self.stale_due = True  # the main loop's: it rediscovers the host, too slow for Allocate's path
        self.apply_health()

    def check_stale(self) -> None:
        roots = Roots(self.s.dev_root, self.s.driver_root, self.s.sysfs_root)
        try:
            for note in stale.notes(self.kinds, self.profiles, roots):
                self.say_once("stale:" + repr(self.sig) + note, note, WARNING)
        except XpuCdiError as err:
            self.log(f"stale-spec check skipped: {err}", WARNING)

    def apply_health(self) -> None:
        """Health of every card into its plugin (only plugins that exist: the main loop makes them)."""
        with self.lock:
            for kind, plugin in self.plugins.items():
                ks = self.known.get(kind)
                if ks is None:
                    continue
                defined = self.kinds[kind].cards if kind in self.kinds else {}
                cards = dict(defined)
                unhealthy = {}
                for cid, card in cards.items():
                    why = health.problem(card, ks.shared, self.profile_named(ks.profile), self.s.sysfs_root,
                                         self.s.proc)
                    if why:
                        unhealthy[cid] = why
                for cid, (card, _since) in self.vanished.get(kind, {}).items():
                    cards[cid] = card
                    unhealthy[cid] = (f"no spec in {', '.join(self.s.spec_dirs)} defines it now (kept for "
                                      f"{self.s.removal_grace:g}s in case the spec comes back, then dropped)")
                policy = self.remedies.get(plugin.kind)
                if policy is not None:
                    for cid in cards:
                        name = f"{plugin.kind}={cid}"
                        policy.observe(name, not unhealthy.get(cid))
                        if not unhealthy.get(cid) and not policy.offered(name):
                            unhealthy[cid] = (f"healthy again, held down for {policy.policy.hold_down:g}s "
                                              f"(--evict) before it is offered")
                with plugin.cond:
                    before, known = dict(plugin.unhealthy), set(plugin.cards)
                for cid in cards:  # said before kubelet hears it, so the log leads the list
                    if before.get(cid, "") != unhealthy.get(cid, "") and (cid in known or unhealthy.get(cid)):
                        self.log(f"{kind}={cid}: " + (f"Unhealthy: {unhealthy[cid]}" if unhealthy.get(cid)
                                                      else "Healthy again"), WARNING if unhealthy.get(cid) else INFO)
                plugin.update(cards, unhealthy, ks.env_var)

    def expire_vanished(self) -> None:
        """Drop the cards no spec has defined for the removal grace; forget kinds with nothing left."""
        now = time.monotonic()
        with self.lock:
            for kind, gone in list(self.vanished.items()):
                for cid, (_card, since) in list(gone.items()):
                    if now - since >= self.s.removal_grace:
                        del gone[cid]
                        self.log(f"{kind}={cid}: dropped: no spec has defined it for {self.s.removal_grace:g}s")
                if not gone:
                    del self.vanished[kind]
            for kind in list(self.known):
                if kind not in self.kinds and kind not in self.vanished:
                    del self.known[kind]

    def remediate(self) -> None:
        """Carry out the policies' decisions that are due; a card restored is offered at once."""
        restored = False
        with self.lock:  # Allocate threads feed the policies too (apply_health)
            due = [(kind, d) for kind, policy in self.remedies.items() for d in policy.due()]
        for kind, d in due:
            cid = d.card.partition("=")[2]
            resource = next((p.resource for p in self.plugins.values() if p.kind == kind and cid in p.cards),
                            self.s.resource(kind))
            card = evict.Card(kind, cid, resource)
            key = (kind, d.action, d.reason)
            self.decided[key] = self.decided.get(key, 0) + 1
            assert self.evictor is not None  # set_policies made it with the first policy
            if d.action == remedy.EVICT:
                self.evictor.evict(card, d.reason)
            else:
                self.evictor.restore(card, d.reason)
                restored = True
        if restored:
            self.apply_health()

    def expiries(self) -> List[float]:
        """When each vanished card's removal grace ends (time.monotonic): the loop wakes then, not at its poll."""
        with self.lock:
            return [since + self.s.removal_grace for gone in self.vanished.values() for _card, since in gone.values()]

    def served(self) -> Set[str]:
        """Kinds with a plugin: defined by a spec now, or with cards still in their removal grace."""
        return set(self.kinds) | set(self.vanished)

    def before_request(self) -> None:
        """Allocate / GetPreferredAllocation: answer from the specs as they are now."""
        if self.refresh():
            self.wake()  # a new or vanished kind is the main loop's to start or stop

    # -- plugins -------------------------------------------------------------------------------------------

    def sync_plugins(self) -> None:
        """A plugin per kind in the specs (per model resource: :mod:`.naming`); a vanished one
        advertises nothing, then stops."""
        for unit in sorted(set(self.kinds) - set(self.plugins)):
            kind = self.kinds[unit].kind
            problem = resource_problem(self.s.resource(unit))
            if problem:
                self.say_once("resource:" + kind, f"{kind}: not served: {problem}: give it one with "
                                                  f"--resource-name {kind}=<domain>/<name>", WARNING)
                continue
            refused = servemode.claim_for(kind, servemode.DEVICE_PLUGIN, self.s.node_config, self.s.run_dir)
            if refused:  # the DRA driver serves it: one way per kind
                self.say_once("way:" + kind + refused, refused, WARNING)
                continue
            plugin = KindPlugin(kind, self.s.resource(unit), self.s.plugin_dir, self.s.strategies, self.log,
                                self.before_request, self.wake, replication=self.s.replication(unit), unit=unit)
            with self.lock:
                self.plugins[unit] = plugin  # served and registered by reconcile(), in this pass
        for unit in sorted(set(self.plugins) - self.served()):
            plugin = self.plugins[unit]
            self.log(f"{unit}: no spec has defined it for {self.s.removal_grace:g}s: advertising no devices, "
                     f"then stopping")
            plugin.drain()
            plugin.shutdown()
            with self.lock:
                del self.plugins[unit]
            if not any(p.kind == plugin.kind for p in self.plugins.values()):  # the kind's last unit
                servemode.release(plugin.kind, servemode.DEVICE_PLUGIN, self.s.run_dir)
        self.apply_health()

    def reconcile(self) -> None:
        """Every plugin served and registered with the kubelet there now (:mod:`.restart`)."""
        path = registration.kubelet_socket(self.s.plugin_dir)
        kubelet = grpcserve.socket_identity(path)
        if kubelet is None:
            if self.plugins:
                self.say_once("nokubelet", f"waiting for kubelet: {path} does not exist (is kubelet running, and "
                                           f"is --plugin-dir its device-plugins directory?)", WARNING)
        else:
            self.logged.discard("nokubelet")
        for plugin in list(self.plugins.values()):
            plugin.registrar.step(kubelet)

    # -- status --------------------------------------------------------------------------------------------

    def write_status(self) -> None:
        with self.lock:
            doc = {"pid": os.getpid(), "pid_namespace": self.pid_namespace, "started": int(self.started),
                   "plugin_dir": self.s.plugin_dir,
                   "spec_dirs": list(self.s.spec_dirs), "strategies": list(self.s.strategies),
                   "kinds": {k: p.status() for k, p in sorted(self.plugins.items())}}
            self.remediation_status(doc["kinds"])
            if self.evictor is not None:
                doc["remediation"] = {"policies": {k: {"grace": p.policy.grace, "hold_down": p.policy.hold_down}
                                                   for k, p in sorted(self.remedies.items())},
                                      **self.evictor.status()}
        self.publish_status(self.s.status_file, doc, "--probe and doctor need it")

    def remediation_status(self, kinds: Dict[str, Dict[str, object]]) -> None:
        """Each policy's kind, in the status file as the exporter reads it (``xpu_cdi_evictions_total``,
        exporter/remediation.py): ``remediation``, and the decisions as ``evictions``/``restores``
        ``{reason: n}``, once per kind (its own entry, else its first model resource's)."""
        for kind, policy in self.remedies.items():
            units = [u for u in sorted(kinds) if kinds[u].get("kind") == kind]
            if not units:
                continue
            entry = kinds[kind if kind in units else units[0]]
            entry["remediation"] = {"evict": True, "grace": policy.policy.grace, "holdDown": policy.policy.hold_down}
            for key, action in (("evictions", remedy.EVICT), ("restores", remedy.RESTORE)):
                entry[key] = {r: n for (k, a, r), n in sorted(self.decided.items()) if k == kind and a == action}

    # -- the loop ------------------------------------------------------------------------------------------

    def watch_dirs(self) -> None:
        with self.lock:
            node_dirs = devices.node_dirs(self.kinds)
        config_dir = [os.path.dirname(os.path.abspath(self.config_file))] if self.config_file else []
        self.watch([self.s.plugin_dir, *self.s.spec_dirs, *node_dirs, *config_dir])

    def reload(self, why: str = "SIGHUP") -> None:
        self.reload_asked = False
        self.config_seen = self.config_state()
        self.log(f"{why}: reloading the settings, profiles and specs")
        if self.reload_settings is not None:
            try:
                new = self.reload_settings()
            except XpuCdiError as err:
                self.log(f"reload refused, keeping the running settings: {err}", WARNING)
                return
            if new != self.s:
                for plugin in self.plugins.values():
                    plugin.shutdown()
                self.plugins.clear()
                policies_changed = new.evict != self.s.evict
                self.s = new
                if policies_changed:
                    try:
                        self.set_policies()
                    except XpuCdiError as err:
                        self.log(f"--evict not applied: {err}", WARNING)
        try:
            self.load_profiles()
        except XpuCdiError as err:
            self.log(f"reload: profiles not reloaded: {err}", WARNING)
        self.logged.clear()
        self.refresh(force=True)

    def step(self) -> None:
        """One pass of the loop (see the module docstring)."""
        if self.reload_asked:
            self.reload()
        elif self.reload_settings is not None and self.config_state() != self.config_seen:
            self.reload(f"config file {self.config_file} changed")
        self.refresh()
        self.watch_dirs()  # before health is read and the list sent: a change after it is an event
        if self.stale_due:
            self.stale_due = False
            self.check_stale()
        self.expire_vanished()
        self.sync_plugins()
        self.remediate()
        self.reconcile()
        self.write_status()

    def run(self) -> int:
        """Until SIGTERM; exit status 0."""
        self.install_signals(on_hup=self.ask_reload)
        self.set_policies()
        self.load_profiles()
        self.open_events(self.s.health_interval, self.s.uevents)
        self.log(f"starting: kubelet dir {self.s.plugin_dir}, specs in {', '.join(self.s.spec_dirs)}, "
                 f"strategies {','.join(self.s.strategies)}, profiles {', '.join(sorted(self.ours.values()))}")
        self.refresh(force=True)
        while not self.stop.is_set():
            self.step()
            due = [t for t in (p.registrar.due() for p in self.plugins.values()) if t is not None]
            due += self.expiries()
            due += [time.monotonic() + w for w in (r.next_due() for r in self.remedies.values()) if w is not None]
            timeout = self.poll_interval(self.s.health_interval)
            if due:
                timeout = min(timeout, max(0.0, min(due) - time.monotonic()))
            self.wait(timeout)
        self.close()
        return 0

    def close(self) -> None:
        """Stop every server, remove our sockets and the status file."""
        for plugin in self.plugins.values():
            plugin.shutdown(grace=0.2)
        self.plugins.clear()
        if self.evictor is not None:
            self.evictor.stop()
        self.close_loop(self.s.status_file)
        self.log("stopped: sockets removed")


def default_evictor(daemon: Daemon) -> evict.Evictor:
    """The evictor of a running plugin: kubelet's PodResources, the API server as the plugin's account
    and as its node.

    Raises:
        ConfigError: no node name, or no way to the API server (one line).
    """
    from ..kube.node import node_name
    from ..node.podresources import Client

    s = daemon.s
    node = node_name(s.node_name or None)
    api, as_node = evict.node_kube(s.kubeconfig, node)

    def list_pods() -> object:
        client = Client(s.pod_resources_socket, timeout=5.0)
        try:
            return client.listed()
        finally:
            client.close()

    daemon.log(f"--evict: {', '.join(sorted(s.evict))}: the pods of a card unhealthy past its grace are evicted "
               f"as node {node}")
    return evict.Evictor(node, daemon.log, list_pods, api, as_node, changed=daemon.wake)
