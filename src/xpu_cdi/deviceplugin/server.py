"""One device plugin (one CDI kind, one resource name): its state and its gRPC service.

The service is registered through gRPC's generic handlers with the message
classes of :mod:`.api` (no generated stubs, see there).  State changes
(cards, health) bump a generation and wake every ``ListAndWatch`` stream,
which sends the whole list again at once.  ``Allocate`` and
``GetPreferredAllocation`` answer from memory (they run on every pod
admission), after a cheap check that no spec changed under them.  When to
serve and register is the plugin's :class:`.restart.Registrar`.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent import futures
from typing import Any, Callable, Dict, Optional, Sequence

import grpc

from ..log import WARNING, Log
from ..node.grpcserve import Identity, same_inode, serve_unix, socket_identity
from ..node.inventory import SpecCard
from . import allocation, api
from ..node import sharing
from .restart import Registrar


def socket_name(kind: str) -> str:
    """The plugin's socket in kubelet's directory: ``xpu-cdi-kunlunxin.com-xpu.sock``."""
    return "xpu-cdi-" + kind.replace("/", "-") + ".sock"


class KindPlugin:
    """The device plugin of one kind."""

    def __init__(self, kind: str, resource: str, plugin_dir: str, strategies: Sequence[str], log: Log,
                 before_request: Callable[[], None] = lambda: None, wake: Callable[[], None] = lambda: None,
                 replication: Optional[sharing.Replicated] = None, unit: Optional[str] = None) -> None:
        """*unit*: what the socket is named after when a kind has several plugins (:mod:`.naming`)."""
        self.kind, self.resource, self.plugin_dir = kind, resource, plugin_dir
        self.replication = replication  # time-slicing: each card advertised as replicas (sharing.py)
        self.strategies = tuple(strategies)
        self.log = log
        self.before_request = before_request  # the daemon's "re-read specs if they changed"
        self.socket = os.path.join(plugin_dir, socket_name(unit or kind))
        self.cond = threading.Condition()
        self.cards: Dict[str, SpecCard] = {}
        self.unhealthy: Dict[str, str] = {}  # id -> why
        self.env_var: Optional[str] = None
        self.generation = 0
        self.sent: Dict[int, int] = {}  # ListAndWatch stream -> generation it last sent
        self.stopping = False
        self.server: Optional[grpc.Server] = None
        self.serving_gen = 0  # bumped per server: a stream of a server we stopped ended by our hand
        self.bound: Optional[Identity] = None  # the socket file our server listens on
        self.pool: Optional[futures.ThreadPoolExecutor] = None  # grpc does not stop the pool it is given
        self.registrar = Registrar(self, plugin_dir, log, wake)

    # -- state ---------------------------------------------------------------------------------------------

    def update(self, cards: Dict[str, SpecCard], unhealthy: Dict[str, str], env_var: Optional[str]) -> bool:
        """Set the cards and their health; True (and every stream woken) when anything changed."""
        with self.cond:
            if cards == self.cards and unhealthy == self.unhealthy and env_var == self.env_var:
                return False
            self.cards, self.unhealthy, self.env_var = dict(cards), dict(unhealthy), env_var
            self.generation += 1
            self.cond.notify_all()
            return True

    def device_list(self) -> Any:
        """The ``ListAndWatchResponse`` for the current state."""
        with self.cond:
            devices = []
            for card in self.cards.values():
                health = api.UNHEALTHY if self.unhealthy.get(card.id) else api.HEALTHY
                ids = sharing.replica_ids([card.id], self.replication.replicas) if self.replication else [card.id]
                for device_id in ids:
                    dev = api.Device(ID=device_id, health=health)
                    if card.numa_node is not None:
                        dev.topology.nodes.add(ID=card.numa_node)
                    devices.append(dev)
            return api.ListAndWatchResponse(devices=devices)

    def flushed(self) -> bool:
        """Every open ListAndWatch stream has sent the current state."""
        with self.cond:
            return all(g >= self.generation for g in self.sent.values())

    # -- RPCs ----------------------------------------------------------------------------------------------

    @staticmethod
    def options() -> Any:
        """What the plugin offers kubelet: in ``Register`` and from ``GetDevicePluginOptions``."""
        return api.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def get_options(self, request: Any, context: Any) -> Any:
        self.registrar.dialed_back()
        return self.options()

    def list_and_watch(self, request: Any, context: Any) -> Any:
        stream = id(context)
        sent = -1
        woken = threading.Event()

        def wake() -> None:
            woken.set()
            with self.cond:
                self.cond.notify_all()

        if not context.add_callback(wake):  # kubelet went away: end the stream
            return  # it went before this handler ran (a dead kubelet's stream, run late): nobody's stream
        tag, serving = self.registrar.stream_opened(), self.serving_gen
        try:
            while not woken.is_set():
                with self.cond:
                    while self.generation == sent and not self.stopping and not woken.is_set():
                        self.cond.wait()  # every change notifies: no timed wake-ups while idle
                    if woken.is_set() or (self.stopping and self.generation == sent):
                        return
                    gen = self.generation
                yield self.device_list()
                sent = gen
                with self.cond:
                    self.sent[stream] = sent
                    self.cond.notify_all()
        finally:
            with self.cond:
                self.sent.pop(stream, None)
                ours = self.stopping or serving != self.serving_gen
            if not ours:
                self.registrar.stream_ended(tag)

    def get_preferred(self, request: Any, context: Any) -> Any:
        self.before_request()
        with self.cond:
            cards = dict(self.cards)
        out = api.PreferredAllocationResponse()
        for req in request.container_requests:
            if self.replication is not None:
                ids = sharing.preferred(self.replication.replicas, list(req.available_deviceIDs),
                                        list(req.must_include_deviceIDs), req.allocation_size)
            else:
                ids = allocation.preferred(cards, list(req.available_deviceIDs), list(req.must_include_deviceIDs),
                                           req.allocation_size)
            out.container_responses.add(deviceIDs=ids)
        return out

    def allocate(self, request: Any, context: Any) -> Any:
        self.before_request()
        with self.cond:
            cards, unhealthy, env_var = self.cards, self.unhealthy, self.env_var
        out = api.AllocateResponse()
        try:
            for req in request.container_requests:
                ids = allocation.shared_cards(self.replication, self.resource, list(req.devices_ids), cards)
                fields = allocation.container_response(self.kind, cards, unhealthy, ids, self.strategies, env_var)
                resp = out.container_responses.add()
                for d in fields.get("cdi_devices", []):  # type: ignore[union-attr]
                    resp.cdi_devices.add(name=d["name"])
                resp.annotations.update(fields.get("annotations", {}))  # type: ignore[arg-type]
                resp.envs.update(fields.get("envs", {}))  # type: ignore[arg-type]
        except allocation.AllocationError as err:
            self.log(f"{self.resource}: Allocate refused: {err}", WARNING)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"xpu-cdi device plugin: {err}")
        return out

    def pre_start(self, request: Any, context: Any) -> Any:
        return api.PreStartContainerResponse()

    # -- serving -------------------------------------------------------------------------------------------

    def serve(self) -> None:
        """Listen on a new socket at our path, before any Register (the registrar's, see there).

        Raises:
            OSError: the path is too long, not writable, or another process serves there.
        """
        self.shutdown(grace=0)  # first: gRPC unlinks its path by name as it stops, whatever is there by then
        with self.cond:
            self.stopping = False
        handler = api.handler("DevicePlugin", {
            "GetDevicePluginOptions": self.get_options, "ListAndWatch": self.list_and_watch,
            "GetPreferredAllocation": self.get_preferred, "Allocate": self.allocate,
            "PreStartContainer": self.pre_start})
        # ListAndWatch holds a worker per stream: kubelet opens one, a restart briefly two
        server, self.pool = serve_unix(self.socket, [handler], 8, "dp-" + self.kind,
                                       "--plugin-dir (kubelet's device-plugins directory)")
        with self.cond:
            self.serving_gen += 1
        self.server, self.bound = server, socket_identity(self.socket)

    def shutdown(self, grace: float = 0.5) -> None:
        """Stop serving: streams end, our socket goes (only ours: never a file someone put at our path)."""
        if self.server is None:
            return
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.server.stop(grace).wait(grace + 2)
        self.server = None
        if self.pool is not None:
            self.pool.shutdown(wait=False)  # its threads end as their RPCs do
            self.pool = None
        if same_inode(self.socket, self.bound):
            os.unlink(self.socket)  # gRPC's stop unlinks it on the releases we know; not promised

    def drain(self, timeout: float = 2.0) -> None:
        """Advertise no devices and wait (bounded) until kubelet's streams have sent that."""
        self.update({}, {}, self.env_var)
        deadline = time.monotonic() + timeout
        while not self.flushed() and time.monotonic() < deadline:
            time.sleep(0.02)

    def status(self) -> Dict[str, Any]:
        """This plugin's part of the status file."""
        with self.cond:
            return {"kind": self.kind, "resource": self.resource, "socket": self.socket, **self.registrar.status(),
                    "devices": list(self.cards),
                    "unhealthy": dict(self.unhealthy),
                    "numa": {c.id: c.numa_node for c in self.cards.values() if c.numa_node is not None},
                    **({"replicas": self.replication.replicas} if self.replication else {})}
