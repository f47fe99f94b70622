"""``xpu-cdi exporter``: the refresh passes and the HTTP server.

A scrape drives the refresh, as Prometheus exporters do, through a cache: when
the last snapshot is older than ``interval`` the scrape asks the loop for a pass
and waits for it a short while (:data:`SCRAPE_WAIT`, at most half the scrape
timeout Prometheus sends); a slower pass serves the next scrape instead.  So an
exporter nobody scrapes runs no tool (issue 30: the periodic pass was most of
its idle CPU), and however often it is scraped, each tool runs at most once per
interval.  One pass:

1. re-reads the CDI specs when a file changed (:meth:`xpu_cdi.node.loop.Loop.refresh`,
   the device plugin's and the DRA driver's too);
2. judges every card by the device plugin's health rule;
3. runs every reading source of every kind once, all at the same time, each
   bounded by its own timeout (one tool run per pass for all cards);
4. asks kubelet's PodResources API who holds which card, and reads the DRA
   driver's checkpoints for the claims' shares and vNPUs (:mod:`.claimdevices`)
   and the node daemons' remediation decisions from their status files beside
   its own (:mod:`.remediation`);
5. swaps in the new snapshot whole and writes the status file doctor reads.

Scrapes are answered from the last snapshot by the HTTP server's threads
(:mod:`.server`: prometheus_client's WSGI app, TLS and basic auth as
``--web-config-file`` says, :mod:`.webconfig`); a
scrape never waits for a pass it did not start, so a hung tool delays nothing
but its own source (which then reads as down).  Between passes the loop only
rewrites the status file each interval (doctor tells a live exporter by it).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from prometheus_client import generate_latest, make_wsgi_app

from ..log import DEBUG, ERROR, INFO, WARNING, Log, to_stderr
from ..node.loop import Loop
from ..node.settings import NodeSettings
from ..node import health
from ..node import inventory as devices
from ..node.status import pid_namespace
from ..node import checkpoint
from .. import interconnect
from ..driverversion import read_driver_version
from . import claimdevices, holders, metrics, remediation, server, sources, webconfig
from ..node.podresources import DEFAULT_SOCKET, Client, Listing, PodResourcesError


DEFAULT_PORT = 28470
DEFAULT_STATUS_FILE = "/run/xpu-cdi/exporter.json"
#: seconds a scrape waits for the pass it asked for (its tools and kubelet)
SCRAPE_WAIT = 2.0


LOGGER = "xpu-cdi exporter"


@dataclass(frozen=True)
class Settings(NodeSettings):
    listen: str = f":{DEFAULT_PORT}"
    interval: float = 10.0
    pod_resources_socket: str = DEFAULT_SOCKET
    status_file: str = DEFAULT_STATUS_FILE
    dra_plugins_dir: str = "/var/lib/kubelet/plugins"  # the DRA drivers' checkpoints, <dir>/<driver>/
    boot_id_file: str = checkpoint.BOOT_ID
    web_config_file: str = ""  # exporter-toolkit's web config: TLS, client certificates, basic auth


def parse_listen(listen: str) -> Tuple[str, int]:
    """``ADDR:PORT`` (``:PORT`` = every address, ``[::1]:PORT`` for IPv6) -> ``(host, port)``.

    Raises:
        ValueError: not that shape, or a port outside 1-65535.
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:  # 0: any free port (tests)
        raise ValueError(f"--listen {listen!r} is not ADDR:PORT (e.g. :{DEFAULT_PORT}, 127.0.0.1:{DEFAULT_PORT}, "
                         f"[::]:{DEFAULT_PORT})")
    return host.strip("[]"), int(port)


class Exporter(Loop):
    """The exporter's state: the loop's profiles and cards, the last snapshot."""

    waiting_for_specs = "no card is exported until a spec appears"
    offers_cards = False  # reports what the host has, carved chips too

    def __init__(self, settings: Settings, log: Optional[Log] = None) -> None:
        super().__init__(log or to_stderr(LOGGER), settings)
        self.s: Settings = settings
        self.load_profiles()
        self.identity: Dict[Tuple[str, str], Dict[str, str]] = {}  # what sources told, kept while the card lives
        self.collector = metrics.SnapshotCollector()  # its snapshot is what scrapes see: swapped whole by each pass
        self.registry = metrics.registry(self.collector)
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="source")
        self.refreshed = 0.0  # monotonic time of the last finished pass
        self.passes = 0  # finished passes
        self.in_pass = 0.0  # monotonic start of the pass in flight, 0 when none
        self.wanted = False  # a scrape asked for a pass
        self.cond = threading.Condition()
        self.status_doc: Dict[str, Any] = {}
        self.sources_roots = sources.Roots(settings.driver_root, settings.sysfs_root, settings.proc)
        self.bound = ""  # the address the server listens on, once it does
        self.pid_namespace = pid_namespace()

    # -- one pass ------------------------------------------------------------------------------------------

    def specs_changed(self, before: Dict[str, devices.KindSet]) -> None:
        live = {(k, c) for k, ks in self.kinds.items() for c in ks.cards}
        self.identity = {key: v for key, v in self.identity.items() if key in live}

    def _pod_resources(self) -> Tuple[sources.Result, Optional[Listing]]:
        start = time.monotonic()
        path = self.s.pod_resources_socket
        if not os.path.exists(path):
            return sources.Result(metrics.POD_RESOURCES, up=False,
                                  why=f"no kubelet pod-resources socket at {path} (not a Kubernetes node, or kubelet "
                                      f"uses another root: pass --pod-resources-socket)"), None
        try:
            client = Client(path, timeout=min(2.0, self.s.interval))
            try:
                listing = client.fetch()
            finally:  # no channel between passes: gRPC's threads end with the last one (they woke ~8 times a second)
                client.close()
        except PodResourcesError as err:
            return sources.Result(metrics.POD_RESOURCES, up=False, why=str(err),
                                  duration=time.monotonic() - start), None
        return sources.Result(metrics.POD_RESOURCES, up=True, duration=time.monotonic() - start), listing

    def step(self) -> metrics.Snapshot:
        """One pass (see the module doc); the new snapshot is also what scrapes see from now on."""
        with self.cond:
            self.in_pass = self.in_pass or time.monotonic()
        try:
            snap = self._pass()
        finally:
            with self.cond:
                self.in_pass = 0.0
                self.passes += 1
                self.cond.notify_all()
        return snap

    def _pass(self) -> metrics.Snapshot:
        self.refresh()
        jobs = []
        for kind, ks in sorted(self.kinds.items()):
            prof = self.profile_named(ks.profile)
            if prof is None:
                continue
            cards = list(ks.cards.values())
            for src in prof.metrics:
                jobs.append(self.pool.submit(sources.read, f"{prof.name}/{src.name}", src, kind, cards,
                                             self.sources_roots))
        pod_job = self.pool.submit(self._pod_resources)
        states = []
        for kind, ks in sorted(self.kinds.items()):
            prof = self.profile_named(ks.profile)
            for card in ks.cards.values():
                why = health.problem(card, ks.shared, prof, self.s.sysfs_root, self.s.proc)
                states.append(metrics.CardState(kind, card.id, healthy=not why, pci=card.pci or ""))
        results: List[sources.Result] = [j.result() for j in jobs]
        pod_result, listing = pod_job.result()
        by_key = {(c.kind, c.card): c for c in states}
        for r in results:
            for key, values in r.readings.items():
                if key in by_key:
                    by_key[key].readings.update(values)
            for key, ident in r.identity.items():
                self.identity.setdefault(key, {}).update(ident)
        for key, c in by_key.items():
            ident = self.identity.get(key, {})
            c.uuid, c.model = ident.get("uuid", ""), ident.get("model", "")
            c.pci = c.pci or ident.get("pci", "")
        if listing is not None:
            cards = {kind: ks.cards for kind, ks in self.kinds.items()}
            aliases = {kind: prof.selection.alias_prefixes for kind, ks in self.kinds.items()
                       if (prof := self.profile_named(ks.profile)) is not None}
            for key, holder in holders.assign(cards, aliases, listing).items():
                if key in by_key:
                    by_key[key].holder = holder
        claimed = claimdevices.read(self.s.dra_plugins_dir, checkpoint.boot_id(self.s.boot_id_file))
        if listing is not None:
            claimed = claimdevices.with_holders(claimed, listing)
        results.append(pod_result)
        for r in results:
            self.say_changed(f"source:{r.source}", f"source {r.source}: " + ("up" if r.up else f"down: {r.why}"),
                             INFO if r.up else WARNING)
        drivers = {kind: version for kind, ks in self.kinds.items()
                   if (version := read_driver_version(self.profile_named(ks.profile), self.s.proc, self.s.driver_root))}
        snap = metrics.Snapshot(states, allocation_known=listing is not None, sources=results, claim_devices=claimed,
                                drivers=drivers, links=self._links(),
                                remedies=remediation.read(os.path.dirname(self.s.status_file), self.s.status_file))
        self.collector.snapshot = snap
        self.refreshed = time.monotonic()
        self.log(f"pass: {len(states)} card(s), {sum(r.up for r in results)} of {len(results)} source(s) up", DEBUG)
        self.write_status(snap)
        return snap

    def _links(self) -> Dict[Tuple[str, str], Tuple[str, str]]:
        """(kind, card) -> (device IP, domain) of every card with either known."""
        out = {}
        for kind, ks in self.kinds.items():
            cards = {c.index: c.id for c in ks.cards.values() if c.index is not None}
            host = interconnect.read(self.profile_named(ks.profile), cards, self.s.sysfs_root, self.s.driver_root)
            for index, link in host.cards.items():
                if link.device_ip or link.domain is not None:
                    out[(kind, cards[index])] = (link.device_ip, "" if link.domain is None else str(link.domain))
        return out

    def write_status(self, snap: metrics.Snapshot) -> None:
        now = time.time()
        self.status_doc = {"pid": os.getpid(), "pid_namespace": self.pid_namespace,
                           "listen": self.bound or self.s.listen, "interval": self.s.interval, "updated": now,
                           "refreshed": now, "cards": len(snap.cards),
                           "sources": {r.source: {"up": r.up, "why": r.why} for r in snap.sources}}
        self.publish_status(self.s.status_file, self.status_doc, "doctor reads it")

    def heartbeat(self) -> None:
        """The status file rewritten without a pass: ``updated`` tells doctor the loop turns."""
        if self.status_doc:
            self.publish_status(self.s.status_file, dict(self.status_doc, updated=time.time()), "doctor reads it")

    # -- serving -------------------------------------------------------------------------------------------

    def alive(self) -> bool:
        """A pass has finished, and none has been running for three intervals (and a tool timeout)."""
        started = self.in_pass
        return self.passes > 0 and not (started and time.monotonic() - started > 3 * self.s.interval + 60)

    def catch_up(self, scrape_timeout: str = "") -> None:
        """Before a scrape: when the snapshot is older than the interval, ask the loop for a pass and wait
        for it up to :data:`SCRAPE_WAIT` (and half of *scrape_timeout*, Prometheus's
        ``X-Prometheus-Scrape-Timeout-Seconds``).  A pass already running is not waited for."""
        try:
            budget = min(SCRAPE_WAIT, float(scrape_timeout) / 2)
        except ValueError:
            budget = SCRAPE_WAIT
        with self.cond:
            if self.in_pass or time.monotonic() - self.refreshed < self.s.interval:
                return
            done = self.passes
            self.wanted = True
            self.wake()
            self.cond.wait_for(lambda: self.passes > done, max(budget, 0.0))

    def take_wanted(self) -> bool:
        """The loop's side of :meth:`catch_up`: True (and the pass counted as started) when one was asked."""
        with self.cond:
            wanted, self.wanted = self.wanted, False
            if wanted:
                self.in_pass = time.monotonic()
            return wanted

    def scrape(self) -> bytes:
        """The text format of the last snapshot, as a scraper that asks nothing special gets it."""
        return generate_latest(self.registry)

    def web_log(self, message: str, bad: bool) -> None:
        self.log(message, ERROR if bad else INFO)

    def app(self, web: webconfig.Watched) -> server.App:
        """The WSGI app that answers /metrics, /healthz and / as *web* says."""
        return server.app(web, make_wsgi_app(self.registry), self.catch_up, self.alive)

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT; 0 then."""
        web = webconfig.Watched(self.s.web_config_file, self.web_log)  # checked by the command: loads
        try:
            srv = server.listen(*parse_listen(self.s.listen), self.app(web), web,
                                on_error=lambda message: self.log(f"connection from {message}", DEBUG))
        except OSError as err:
            self.log(f"cannot listen on {self.s.listen}: {err.strerror or err} (another process holds the port? "
                     f"pass --listen)", ERROR)
            return 1
        host, port = srv.server_address[:2]
        self.bound = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        hup = threading.Event()  # SIGHUP: the web config re-read now (the loop does it, not the handler)
        self.install_signals(on_hup=hup.set)
        self.step()  # the first scrape already has the cards
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 1.0}, daemon=True,
                         name="http").start()
        scheme = "https" if web.config.context is not None else "http"
        self.log(f"serving /metrics on [{host}]:{port}, over {scheme}, refreshing when scraped, at most every "
                 f"{self.s.interval:g}s")
        beat = time.monotonic() + self.s.interval
        while not self.stop.is_set():
            self.wait(beat - time.monotonic())
            if self.stop.is_set():
                break
            if hup.is_set():
                hup.clear()
                web.current(force=True)
            if self.take_wanted():
                self.step()
            elif time.monotonic() >= beat:
                self.heartbeat()
            else:
                continue
            beat = time.monotonic() + self.s.interval
        srv.shutdown()
        srv.server_close()
        self.pool.shutdown(wait=False)
        self.close_loop(self.s.status_file)
        return 0
