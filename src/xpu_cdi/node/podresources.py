"""kubelet's PodResources API v1: who holds which device, read over kubelet's local socket.

``<kubelet root>/pod-resources/kubelet.sock`` serves ``v1.PodResourcesLister``:
``List`` gives every pod's containers with the device-plugin devices
(``resource_name`` + ``device_ids``) and the DRA claims (``dynamic_resources``:
the CDI device names each claim resolved to) they hold;
``GetAllocatableResources`` gives the devices kubelet knows per resource.
The messages are built from the table below by :mod:`xpu_cdi.node.protobuild` (as
the device-plugin API is); it holds the fields the exporter reads, with the
numbers and types of ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto``
(tests compare them with the upstream file).  Fields left out (CPU ids,
memory, topology, ``share_id``) are skipped by the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ..errors import PodResourcesError
from . import protobuild
from .protobuild import MANY, ONE, STRING

PACKAGE = "v1"
SERVICE = "PodResourcesLister"
DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"

MESSAGES: Dict[str, List[Tuple[str, int, Any, str]]] = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, "PodResources", MANY)],
    "PodResources": [("name", 1, STRING, ONE), ("namespace", 2, STRING, ONE),
                     ("containers", 3, "ContainerResources", MANY)],
    "ContainerResources": [("name", 1, STRING, ONE), ("devices", 2, "ContainerDevices", MANY),
                           ("dynamic_resources", 5, "DynamicResource", MANY)],
    "ContainerDevices": [("resource_name", 1, STRING, ONE), ("device_ids", 2, STRING, MANY)],
    "DynamicResource": [("claim_name", 2, STRING, ONE), ("claim_namespace", 3, STRING, ONE),
                        ("claim_resources", 4, "ClaimResource", MANY)],
    "ClaimResource": [("cdi_devices", 1, "CDIDevice", MANY), ("driver_name", 2, STRING, ONE),
                      ("pool_name", 3, STRING, ONE), ("device_name", 4, STRING, ONE)],
    "CDIDevice": [("name", 1, STRING, ONE)],
    "AllocatableResourcesRequest": [],
    "AllocatableResourcesResponse": [("devices", 1, "ContainerDevices", MANY)],
}
SERVICES = {SERVICE: [("List", "ListPodResourcesRequest", "ListPodResourcesResponse", False),
                      ("GetAllocatableResources", "AllocatableResourcesRequest", "AllocatableResourcesResponse",
                       False)]}

_CLASSES = protobuild.build(PACKAGE, MESSAGES, SERVICES)


def message(name: str) -> Any:
    """The message class called *name* (``"PodResources"``)."""
    return _CLASSES[name]


@dataclass(frozen=True)
class Holder:
    """A container that holds a device."""

    namespace: str
    pod: str
    container: str


@dataclass
class Listing:
    """What kubelet said: every container's device-plugin devices and DRA CDI devices, and the allocatable ones."""

    devices: List[Tuple[Holder, str, Tuple[str, ...]]]  # (holder, resource name, device ids)
    cdi_devices: List[Tuple[Holder, str]]  # (holder, fully qualified CDI device name)
    allocatable: List[Tuple[str, Tuple[str, ...]]]  # (resource name, device ids)


class Client:
    """A channel to one kubelet's pod-resources socket (the exporter opens one per pass and closes it)."""

    def __init__(self, socket_path: str, timeout: float = 2.0) -> None:
        import grpc  # only the exporter pays for it

        self.grpc = grpc
        self.socket_path = socket_path
        self.timeout = timeout
        self.channel = grpc.insecure_channel("unix:" + socket_path)
        path = f"/{PACKAGE}.{SERVICE}/"
        self._list = self.channel.unary_unary(path + "List", request_serializer=_serialize,
                                              response_deserializer=message("ListPodResourcesResponse").FromString)
        self._allocatable = self.channel.unary_unary(
            path + "GetAllocatableResources", request_serializer=_serialize,
            response_deserializer=message("AllocatableResourcesResponse").FromString)

    def close(self) -> None:
        self.channel.close()

    def listed(self) -> Any:
        """``List``'s answer as kubelet gave it (the device plugin's evictor reads it).

        Raises:
            PodResourcesError: kubelet does not answer, or refuses (one line).
        """
        try:
            return self._list(message("ListPodResourcesRequest")(), timeout=self.timeout)
        except self.grpc.RpcError as err:
            raise self._error(err) from None

    def _error(self, err: Any) -> PodResourcesError:
        code = err.code().name if hasattr(err, "code") else "UNKNOWN"
        details = err.details() if hasattr(err, "details") else str(err)
        return PodResourcesError(f"kubelet's pod-resources API at {self.socket_path} did not answer: "
                                 f"{code}: {' '.join(str(details).split())[:200]}")

    def fetch(self) -> Listing:
        """Both calls.

        Raises:
            PodResourcesError: kubelet does not answer, or refuses (one line).
        """
        try:
            listed = self._list(message("ListPodResourcesRequest")(), timeout=self.timeout)
            alloc = self._allocatable(message("AllocatableResourcesRequest")(), timeout=self.timeout)
        except self.grpc.RpcError as err:
            raise self._error(err) from None
        out = Listing([], [], [(d.resource_name, tuple(d.device_ids)) for d in alloc.devices])
        for pod in listed.pod_resources:
            for c in pod.containers:
                holder = Holder(pod.namespace, pod.name, c.name)
                for d in c.devices:
                    out.devices.append((holder, d.resource_name, tuple(d.device_ids)))
                for dyn in c.dynamic_resources:
                    for claim in dyn.claim_resources:
                        out.cdi_devices.extend((holder, cdi.name) for cdi in claim.cdi_devices)
        return out


def _serialize(msg: Any) -> bytes:
    return msg.SerializeToString()
