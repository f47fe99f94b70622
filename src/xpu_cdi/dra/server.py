"""kubelet's side of the driver: the gRPC services on two unix sockets.

* the registration socket in kubelet's plugin watcher directory
  (``plugins_registry/<driver>-<pod uid>-reg.sock``): ``GetInfo`` says who we
  are and where the DRA socket is, ``NotifyRegistrationStatus`` tells us
  what kubelet made of it;
* the DRA socket (``plugins/<driver>/dra-<pod uid>.sock``): ``DRAPlugin``
  under both ``v1`` and ``v1beta1`` (same messages), ``DRAResourceHealth``
  under ``v1`` and ``v1alpha1``.

Sockets carry the pod uid so that the two pods of a rolling update both
serve (kubelet talks to either).  Handlers are registered through gRPC's
generic handlers with the message classes of :mod:`.api`.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent import futures
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

import grpc

from ..log import WARNING, Log
from ..node.grpcserve import MAX_SOCKET_PATH, remove_stale_socket, serve_unix
from ..node.prepared import PreparedDevice
from . import api

HEALTH_RESEND = 10.0  # kubelet marks a device Unknown after 30 s without news of it
HEALTH_TIMEOUT = 30


class Driver(Protocol):
    """What the services call (the daemon)."""

    def prepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, Tuple[List[PreparedDevice], str]]: ...

    def unprepare(self, claims: Sequence[Tuple[str, str, str]]) -> Dict[str, str]: ...

    def health(self) -> Tuple[int, List[Tuple[str, str, str]]]: ...  # (generation, [(pool, device, why)])

    def wait_health(self, generation: int, timeout: float) -> None: ...


def registration_socket(registry_dir: str, driver: str, pod_uid: str) -> str:
    """``<driver>-<pod uid>-reg.sock`` (``<driver>-reg.sock`` without a uid); a shorter
    hashed name where the path would be over the unix socket limit (as kubelet's helper does)."""
    import base64
    import hashlib

    if not pod_uid:
        return os.path.join(registry_dir, f"{driver}-reg.sock")
    for name in (f"{driver}-{pod_uid}-reg.sock",
                 f"{driver}-{base64.urlsafe_b64encode(hashlib.sha256(pod_uid.encode()).digest()[:8]).decode().rstrip('=')}-reg.sock",
                 "dra-" + base64.urlsafe_b64encode(hashlib.sha256(f"{driver}\0{pod_uid}".encode()).digest()[:16])
                 .decode().rstrip("=") + "-reg.sock"):
        path = os.path.join(registry_dir, name)
        if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
            return path
    return path


def dra_socket(plugin_dir: str, pod_uid: str) -> str:
    """``dra-<pod uid>.sock`` in the driver's own plugin directory; ``dra-<hash of the uid>.sock`` where
    that path would be over the unix socket limit (a long kubelet --root-dir)."""
    import base64
    import hashlib

    if not pod_uid:
        return os.path.join(plugin_dir, "dra.sock")
    path = os.path.join(plugin_dir, f"dra-{pod_uid}.sock")
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    short = base64.urlsafe_b64encode(hashlib.sha256(pod_uid.encode()).digest()[:8]).decode().rstrip("=")
    return os.path.join(plugin_dir, f"dra-{short}.sock")


class Services:
    """The RPC handlers over a :class:`Driver`."""

    def __init__(self, driver: Driver, driver_name: str, endpoint: str, log: Log,
                 health_enabled: bool = True) -> None:
        self.driver, self.name, self.endpoint, self.log = driver, driver_name, endpoint, log
        self.health_enabled = health_enabled
        self.registered = threading.Event()
        self.registration_error = ""
        self.stopping = threading.Event()

    # -- registration ------------------------------------------------------------------------------------

    def supported(self) -> List[str]:
        return list(api.SUPPORTED_SERVICES) + (list(api.HEALTH_SERVICES) if self.health_enabled else [])

    def get_info(self, request: Any, context: Any) -> Any:
        return api.PluginInfo(type=api.PLUGIN_TYPE, name=self.name, endpoint=self.endpoint,
                              supported_versions=self.supported())

    def notify(self, request: Any, context: Any) -> Any:
        if request.plugin_registered:
            if not self.registered.is_set():
                self.log(f"{self.name}: registered with kubelet (endpoint {self.endpoint})")
            self.registration_error = ""
            self.registered.set()
        else:
            self.registered.clear()
            self.registration_error = request.error or "kubelet refused the registration"
            self.log(f"{self.name}: kubelet refused the registration: {self.registration_error}", WARNING)
        return api.RegistrationStatusResponse()

    def registration_handler(self) -> Any:
        return api.handler("registration", "Registration", api.REGISTRATION_SERVICE,
                           {"GetInfo": self.get_info, "NotifyRegistrationStatus": self.notify})

    # -- DRAPlugin ---------------------------------------------------------------------------------------

    def prepare(self, request: Any, context: Any) -> Any:
        claims = [(c.namespace, c.name, c.uid) for c in request.claims]
        out = api.NodePrepareResourcesResponse()
        for uid, (devices, error) in self.driver.prepare(claims).items():
            entry = out.claims[uid]
            if error:
                entry.error = error
                continue
            for d in devices:
                dev = entry.devices.add(request_names=d.requests, pool_name=d.pool, device_name=d.device,
                                        cdi_device_ids=d.cdi)
                if d.share_id:  # kubelet matches it to the allocation's result (consumable capacity)
                    dev.share_id = d.share_id
        return out

    def unprepare(self, request: Any, context: Any) -> Any:
        claims = [(c.namespace, c.name, c.uid) for c in request.claims]
        out = api.NodeUnprepareResourcesResponse()
        for uid, error in self.driver.unprepare(claims).items():
            out.claims[uid].error = error
        return out

    def watch_health(self, request: Any, context: Any) -> Any:
        """The whole list at once, again on every change and every :data:`HEALTH_RESEND` seconds."""
        ended = threading.Event()
        context.add_callback(ended.set)
        sent = -1
        last = 0.0
        while not ended.is_set() and not self.stopping.is_set():
            generation, devices = self.driver.health()
            if generation != sent or time.monotonic() - last >= HEALTH_RESEND:
                now = int(time.time())
                out = api.NodeWatchResourcesResponse()
                for pool, device, why in devices:
                    out.devices.add(device=api.DeviceIdentifier(pool_name=pool, device_name=device),
                                    health=api.UNHEALTHY if why else api.HEALTHY, last_updated_time=now,
                                    health_check_timeout_seconds=HEALTH_TIMEOUT,
                                    message=why[:api.HEALTH_MESSAGE_MAX])
                yield out
                sent, last = generation, time.monotonic()
            self.driver.wait_health(sent, min(1.0, HEALTH_RESEND))

    def dra_handlers(self) -> List[Any]:
        out = [api.handler("dra", "DRAPlugin", service, {"NodePrepareResources": self.prepare,
                                                         "NodeUnprepareResources": self.unprepare})
               for service in api.DRA_SERVICES]
        if self.health_enabled:
            out += [api.handler("health", "DRAResourceHealth", service, {"NodeWatchResources": self.watch_health})
                    for service in api.HEALTH_GRPC_SERVICES]
        return out


class Server:
    """One gRPC server on one unix socket."""

    def __init__(self, path: str, handlers: Sequence[Any], workers: int = 8, name: str = "dra") -> None:
        self.path, self.handlers, self.workers, self.name = path, list(handlers), workers, name
        self.server: Optional[grpc.Server] = None
        self.pool: Optional[futures.ThreadPoolExecutor] = None

    def start(self) -> None:
        """Listen on the socket (a stale socket of ours replaced)."""
        self.stop(0)
        os.makedirs(os.path.dirname(self.path), mode=0o750, exist_ok=True)
        self.server, self.pool = serve_unix(self.path, self.handlers, self.workers, self.name,
                                            "--plugins-dir")

    def stop(self, grace: float = 0.5) -> None:
        if self.server is None:
            return
        self.server.stop(grace).wait(grace + 2)
        self.server = None
        if self.pool is not None:
            self.pool.shutdown(wait=False)
            self.pool = None
        remove_stale_socket(self.path)

    def alive(self) -> bool:
        """Serving, and the socket is still there (kubelet or an admin may have removed it)."""
        return self.server is not None and os.path.exists(self.path)
