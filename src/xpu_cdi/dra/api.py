"""The kubelet gRPC APIs a DRA driver serves: message classes and service names.

Three upstream protos of ``k8s.io/kubelet/pkg/apis``, as field tables built
into message classes by :mod:`xpu_cdi.node.protobuild` (no generated code, so
Debian's and PyPI's grpcio/protobuf both run them):

* ``pluginregistration/v1`` -- ``Registration`` (``GetInfo``,
  ``NotifyRegistrationStatus``), served on the socket in kubelet's plugin
  watcher directory;
* ``dra/v1`` -- ``DRAPlugin`` (``NodePrepareResources``,
  ``NodeUnprepareResources``).  ``dra/v1beta1`` has the same messages on the
  wire but for ``Device.share_id`` (set for shares of a card, consumable
  capacity; a v1beta1 kubelet skips the unknown field), so the same handlers
  serve both service names;
* ``dra-health/v1`` -- ``DRAResourceHealth.NodeWatchResources``, likewise
  served under ``v1alpha1`` too (kubelets 1.34-1.36 know only that one).

The tables are the wire contract: tests compare them field by field with
stubs compiled from the upstream protos.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from ..node import protobuild
from ..node.protobuild import BOOL, INT64, MANY, MAP, ONE, OPTIONAL, STRING

REGISTRATION_PACKAGE = "pluginregistration"  # upstream: "This should have been v1."
DRA_PACKAGE = "k8s.io.kubelet.pkg.apis.dra.v1"
DRA_V1BETA1_PACKAGE = "k8s.io.kubelet.pkg.apis.dra.v1beta1"
HEALTH_PACKAGE = "v1"
HEALTH_V1ALPHA1_PACKAGE = "v1alpha1"

PLUGIN_TYPE = "DRAPlugin"  # PluginInfo.type kubelet's plugin watcher routes to its DRA manager
# PluginInfo.supported_versions: kubelet takes the first DRAPlugin entry it knows, and the
# health service of the first entry it knows (kubelet 1.37+; older ones call v1alpha1 regardless)
SUPPORTED_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")

# gRPC service names (package + service) the handlers are registered under
DRA_SERVICES = (f"{DRA_PACKAGE}.DRAPlugin", f"{DRA_V1BETA1_PACKAGE}.DRAPlugin")
HEALTH_GRPC_SERVICES = (f"{HEALTH_PACKAGE}.DRAResourceHealth", f"{HEALTH_V1ALPHA1_PACKAGE}.DRAResourceHealth")
REGISTRATION_SERVICE = f"{REGISTRATION_PACKAGE}.Registration"

Table = Dict[str, List[Tuple[str, int, Any, str]]]

REGISTRATION_MESSAGES: Table = {
    "PluginInfo": [("type", 1, STRING, ONE), ("name", 2, STRING, ONE), ("endpoint", 3, STRING, ONE),
                   ("supported_versions", 4, STRING, MANY)],
    "RegistrationStatus": [("plugin_registered", 1, BOOL, ONE), ("error", 2, STRING, ONE)],
    "RegistrationStatusResponse": [],
    "InfoRequest": [],
}
REGISTRATION_METHODS = {"Registration": [("GetInfo", "InfoRequest", "PluginInfo", False),
                                         ("NotifyRegistrationStatus", "RegistrationStatus",
                                          "RegistrationStatusResponse", False)]}

DRA_MESSAGES: Table = {
    "NodePrepareResourcesRequest": [("claims", 1, "Claim", MANY)],
    "NodePrepareResourcesResponse": [("claims", 1, "NodePrepareResourceResponse", MAP)],
    "NodePrepareResourceResponse": [("devices", 1, "Device", MANY), ("error", 2, STRING, ONE)],
    "Device": [("request_names", 1, STRING, MANY), ("pool_name", 2, STRING, ONE), ("device_name", 3, STRING, ONE),
               ("cdi_device_ids", 4, STRING, MANY), ("share_id", 5, STRING, OPTIONAL)],
    "NodeUnprepareResourcesRequest": [("claims", 1, "Claim", MANY)],
    "NodeUnprepareResourcesResponse": [("claims", 1, "NodeUnprepareResourceResponse", MAP)],
    "NodeUnprepareResourceResponse": [("error", 1, STRING, ONE)],
    "Claim": [("namespace", 1, STRING, ONE), ("uid", 2, STRING, ONE), ("name", 3, STRING, ONE)],
}
DRA_METHODS = {"DRAPlugin": [("NodePrepareResources", "NodePrepareResourcesRequest",
                              "NodePrepareResourcesResponse", False),
                             ("NodeUnprepareResources", "NodeUnprepareResourcesRequest",
                              "NodeUnprepareResourcesResponse", False)]}

HEALTH_ENUMS = {"HealthStatus": [("UNKNOWN", 0), ("HEALTHY", 1), ("UNHEALTHY", 2)]}
HEALTH_MESSAGES: Table = {
    "NodeWatchResourcesRequest": [],
    "DeviceIdentifier": [("pool_name", 1, STRING, ONE), ("device_name", 2, STRING, ONE)],
    "DeviceHealth": [("device", 1, "DeviceIdentifier", ONE), ("health", 2, "HealthStatus", ONE),
                     ("last_updated_time", 3, INT64, ONE), ("health_check_timeout_seconds", 4, INT64, ONE),
                     ("message", 5, STRING, ONE)],
    "NodeWatchResourcesResponse": [("devices", 1, "DeviceHealth", MANY)],
}
HEALTH_METHODS = {"DRAResourceHealth": [("NodeWatchResources", "NodeWatchResourcesRequest",
                                         "NodeWatchResourcesResponse", True)]}
UNKNOWN, HEALTHY, UNHEALTHY = 0, 1, 2
HEALTH_MESSAGE_MAX = 1024  # kubelet truncates longer messages

_REG = protobuild.build(REGISTRATION_PACKAGE, REGISTRATION_MESSAGES, REGISTRATION_METHODS)
_DRA = protobuild.build(DRA_PACKAGE, DRA_MESSAGES, DRA_METHODS)
_HEALTH = protobuild.build(HEALTH_PACKAGE, HEALTH_MESSAGES, HEALTH_METHODS, HEALTH_ENUMS)
__getattr__ = protobuild.attributes(__name__, _REG, _DRA, _HEALTH)  # api.PluginInfo, api.Device, ...


_TABLES = {"dra": (_DRA, DRA_METHODS), "health": (_HEALTH, HEALTH_METHODS),
           "registration": (_REG, REGISTRATION_METHODS)}


def message(table: str, name: str) -> Any:
    """The class of message *name* of one table (``"dra"``, ``"health"``, ``"registration"``)."""
    return _TABLES[table][0][name]


def handler(table: str, service: str, name: str, implementations: Dict[str, Callable[[Any, Any], Any]]) -> Any:
    """gRPC's generic handler of *service* of one table, registered as *name* (``package.Service``: the
    same methods serve under two versions), with one callable per method of the table."""
    from ..node.grpcserve import service_handler

    classes, methods = _TABLES[table]
    return service_handler(name, methods[service], classes, implementations)
