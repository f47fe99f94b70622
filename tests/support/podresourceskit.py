"""A stand-in for kubelet's PodResources API v1, built from the upstream proto.

Served on a unix socket as kubelet serves ``<root>/pod-resources/kubelet.sock``,
with stubs compiled from ``podresources/v1/api.proto`` (``tests/support/kubeproto.py``,
never the exporter's own table).  It answers as kubelet does: ``List`` gives
every pod with its containers, each container's device-plugin devices
(``resource_name`` + ``device_ids``) and its DRA claims under
``dynamic_resources`` (claim name and namespace, then per claim result the
driver, pool, device and the CDI device names); ``GetAllocatableResources``
gives the devices the device plugins advertised.  Tests change what it says
between calls; ``stop`` then ``start`` replays a kubelet restart (the socket
is removed and made again, as kubelet does on start).
"""

from __future__ import annotations

import os
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple


def stubs() -> Tuple[Any, Any]:
    from support import kubeproto

    return kubeproto.stubs("podresources/v1/api.proto")


@dataclass
class Container:
    name: str
    devices: List[Tuple[str, List[str]]] = field(default_factory=list)  # (resource name, device ids)
    claims: List[Tuple[str, List[str]]] = field(default_factory=list)  # (claim name, CDI device names)


@dataclass
class Pod:
    namespace: str
    name: str
    containers: List[Container]


class FakePodResources:
    """``v1.PodResourcesLister`` on *socket_path*."""

    def __init__(self, socket_path: Path) -> None:
        import grpc

        self.grpc = grpc
        self.pb2, self.grpc_pb2 = stubs()
        self.path = socket_path
        self.pods: List[Pod] = []
        self.allocatable: List[Tuple[str, List[str]]] = []
        self.calls: Dict[str, int] = {"List": 0, "GetAllocatableResources": 0}
        self.lock = threading.Lock()
        self.server: Optional[Any] = None
        self.start()

    def start(self) -> None:
        kit = self

        class Lister(self.grpc_pb2.PodResourcesListerServicer):  # type: ignore[name-defined,misc]
            def List(self, request: Any, context: Any) -> Any:
                return kit._list()

            def GetAllocatableResources(self, request: Any, context: Any) -> Any:
                return kit._allocatable()

        if self.path.exists():
            os.unlink(self.path)  # kubelet removes a stale socket before it listens
        self.server = self.grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.grpc_pb2.add_PodResourcesListerServicer_to_server(Lister(), self.server)
        self.server.add_insecure_port("unix:" + str(self.path))
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(None).wait()
            self.server = None
        if self.path.exists():
            os.unlink(self.path)

    def set(self, pods: List[Pod], allocatable: List[Tuple[str, List[str]]]) -> None:
        with self.lock:
            self.pods, self.allocatable = list(pods), list(allocatable)

    def _list(self) -> Any:
        pb = self.pb2
        with self.lock:
            self.calls["List"] += 1
            out = pb.ListPodResourcesResponse()
            for pod in self.pods:
                p = out.pod_resources.add(name=pod.name, namespace=pod.namespace)
                for c in pod.containers:
                    cr = p.containers.add(name=c.name)
                    for resource, ids in c.devices:
                        cr.devices.add(resource_name=resource, device_ids=ids)
                    for claim, cdi_names in c.claims:
                        dyn = cr.dynamic_resources.add(claim_name=claim, claim_namespace=pod.namespace)
                        for n in cdi_names:
                            res = dyn.claim_resources.add(driver_name="xpu.xpu-cdi.io", pool_name="node-a",
                                                          device_name=n.rpartition("=")[2])
                            res.cdi_devices.add(name=n)
            return out

    def _allocatable(self) -> Any:
        with self.lock:
            self.calls["GetAllocatableResources"] += 1
            out = self.pb2.AllocatableResourcesResponse()
            for resource, ids in self.allocatable:
                out.devices.add(resource_name=resource, device_ids=ids)
            out.cpu_ids.extend([0, 1])
            return out
