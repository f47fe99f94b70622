"""Frozen data of the generate flow: profiles (what a vendor needs) and what
discovery found on a host.

Named tuples, not frozen dataclasses: a frozen dataclass compiles six methods when its
module is imported (3 M instructions each on Python 3.11, a fifth of ``generate``'s own
work for these sixteen), a named tuple one.  Equality and hashing are by value alike;
being tuples, they also compare equal to a plain tuple of the same values.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Tuple

# a PCI function as sysfs names it (domain:bus:device.function), and as the pci naming
# strategy names devices
PCI_ADDRESS = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\Z")


class NodeRule(NamedTuple):
    """A device node every container of a profile needs (or may need).

    ``paths`` are alternatives tried in order (the first that exists wins);
    each may be a glob, in which case every match is taken.
    """

    paths: Tuple[str, ...]
    container_path: Optional[str] = None
    optional: bool = False
    when: Optional[str] = None  # only on hosts where this node exists (a product's marker node)


class Companion(NamedTuple):
    """A node that belongs to one card and goes into that card's CDI device only.

    Either ``path`` is a template with ``{index}`` (``/dev/commu{index}``,
    a glob after formatting), or ``sysfs`` names a class directory under the
    card's PCI function (``drm``) whose entries become nodes at ``path``
    formatted with ``{name}`` (``/dev/dri/{name}``).
    """

    path: str
    sysfs: Optional[str] = None
    required: bool = False


class CardRule(NamedTuple):
    """How to find the per-card device nodes and read a card's index."""

    glob: str
    index_regex: str
    container_path: Optional[str] = None  # template with {index}; default: same path
    index_base: int = 0  # subtracted from the number the regex reads
    companions: Tuple[Companion, ...] = ()
    # generic node names (/dev/dri/renderD*, /dev/accel/accel*) are anyone's:
    # only a node whose PCI function is of the profile's vendor is a card
    require_pci_vendor: bool = False


class MountRule(NamedTuple):
    """A driver file or directory to bind read-only into containers."""

    path: str
    container_path: Optional[str] = None  # default: the same path
    required: bool = False  # absent: generate fails, where an optional one is a note


class Symlink(NamedTuple):
    """A symlink to create inside the container (``link`` -> ``target``)."""

    target: str
    link: str


class Selection(NamedTuple):
    """How a container names the cards it wants in its environment."""

    env: Tuple[str, ...] = ()
    alias_prefixes: Tuple[str, ...] = ()  # a prefix then the card index: "Ascend910-" reads "Ascend910-3" as 3
    none_values: Tuple[str, ...] = ("", "void", "none")
    all_words: Tuple[str, ...] = ("all",)  # words that select every card
    ignore_case: bool = False  # compare the words and prefixes without regard to ASCII case
    uuids_from: Optional[str] = None  # who puts chip UUIDs in the variable: such tokens are refused, naming it


# The exporter's per-card readings: unit name -> factor to the metric's base unit
# (bytes, ratio, degrees Celsius, watts), and the unit a tool's number has by default
READING_UNITS = {
    "memory_used": {"bytes": 1.0, "KiB": 1024.0, "MiB": 1048576.0, "GiB": 1073741824.0},
    "memory_total": {"bytes": 1.0, "KiB": 1024.0, "MiB": 1048576.0, "GiB": 1073741824.0},
    "utilization": {"ratio": 1.0, "percent": 0.01},
    "temperature": {"celsius": 1.0, "millicelsius": 0.001},
    "power": {"watts": 1.0, "milliwatts": 0.001, "microwatts": 0.000001},
}
DEFAULT_TOOL_UNITS = {"memory_used": "MiB", "memory_total": "MiB", "utilization": "percent",
                      "temperature": "celsius", "power": "watts"}
IDENTITY_FIELDS = ("index", "pci", "uuid", "model")  # what a tool record may say about its card


class MetricFile(NamedTuple):
    """A per-card sysfs/procfs file holding one reading (``{index}``, ``{pci}`` in the path; may glob)."""

    reading: str  # a key of READING_UNITS
    path: str
    unit: str


class MetricSource(NamedTuple):
    """Where the exporter reads a kind's per-card readings: files, or one tool run for all cards.

    A tool's output is cut into one record per card by ``regex`` (every
    match is a record; named groups are the fields) or by ``columns``
    (every line matching ``line``, split on ``separator``; field -> column).
    ``card`` names the field that says which card a record is.
    """

    name: str
    files: Tuple[MetricFile, ...] = ()
    argv: Tuple[str, ...] = ()  # argv[0] absolute, looked up under the driver root
    env: Tuple[str, ...] = ()  # the tool's whole environment beside a fixed PATH and LC_ALL=C
    timeout: float = 5.0
    max_output: int = 1 << 20
    card: str = "index"  # "index" or "pci"
    regex: str = ""
    columns: Tuple[Tuple[str, int], ...] = ()
    line: str = ""
    separator: str = ""  # a regex; "" = runs of whitespace
    units: Tuple[Tuple[str, str], ...] = ()  # field -> unit of the tool's numbers


class CardModel(NamedTuple):
    """What a PCI device id of the profile's vendor is: its model name and, where known, its memory."""

    pci_device: str  # "0x3684"
    name: str
    memory: str = ""  # a Kubernetes quantity ("96Gi"), "" when unknown
    resource: str = ""  # the vendor plugin's resource name for it (huawei.com/Ascend310P), "" = the kind's


class DomainRule(NamedTuple):
    """Which NPUs of one model share an interconnect domain (Ascend's HCCS ring or mesh).

    On a server with ``servers`` NPUs of ``model`` (one of them), the NPU with
    physical id ``i`` is in domain ``i // size``: the vendor's own scheduler
    rules (docs/vendors.md, "Interconnect"), as data.
    """

    model: str
    size: int
    servers: Tuple[int, ...]


class Profile(NamedTuple):
    """A vendor profile: everything xpu-cdi knows about one device kind."""

    name: str
    vendor: str
    device_class: str
    source: str
    description: str = ""
    experimental: bool = False
    cards: Tuple[CardRule, ...] = ()
    control_nodes: Tuple[NodeRule, ...] = ()
    mounts: Tuple[MountRule, ...] = ()
    library_dirs: Tuple[str, ...] = ()
    env: Tuple[str, ...] = ()
    symlinks: Tuple[Symlink, ...] = ()
    selection: Selection = Selection()
    pci_vendor: Optional[str] = None
    pci_devices: Tuple[str, ...] = ()
    # PCI classes (``0x1200``: processing accelerator) that make a function of
    # the vendor an accelerator even when its device id is not listed
    pci_classes: Tuple[str, ...] = ("0x1200",)
    watch_files: Tuple[str, ...] = ()  # driver/runtime version files; %v = kernel release
    modules: Tuple[str, ...] = ()  # kernel modules of the driver
    # the driver's cheap per-card state file ({index} = the card's index) and the
    # values that mean the card runs: read by the device plugin's health check
    health_state_file: str = ""
    health_running: Tuple[str, ...] = ()
    # the driver makes its nodes owned by its run user (Ascend's HwHiAiUser):
    # by design, so doctor names the group a container user needs instead of failing
    driver_owned_nodes: bool = False
    # why sysfs cannot place this kind's cards on the PCIe tree (the driver
    # registers them without a parent): topology is then "unknown", never guessed
    topology_unknown: str = ""
    metrics: Tuple[MetricSource, ...] = ()  # the exporter's reading sources
    # what the DRA driver publishes beyond topology: models by PCI device id, the
    # driver's version file (its first x.y.z), a per-card UUID file ({index}/{pci})
    models: Tuple[CardModel, ...] = ()
    driver_version_file: str = ""
    uuid_file: str = ""
    # interconnect facts: the file holding each NPU's RoCE address (Ascend's /etc/hccn.conf,
    # address_<id>=) and the interconnect domain rules per model
    device_ip_file: str = ""
    domains: Tuple[DomainRule, ...] = ()

    @property
    def kind(self) -> str:
        """The CDI kind, ``vendor/class``."""
        return f"{self.vendor}/{self.device_class}"


class NodeInfo(NamedTuple):
    """What hoststat found for one host path."""

    path: str
    type: str  # "c" or "b"
    major: int
    minor: int
    mode: int  # permission bits (st_mode & 0o7777)
    uid: int
    gid: int


class DeviceNode(NamedTuple):
    """A host device node and the path it has in the container: the host's path less the
    dev root, unless the profile names another (310B's davinci_manager_docker is
    /dev/davinci_manager inside)."""

    container_path: str
    host: NodeInfo


class Card(NamedTuple):
    """One accelerator card found on the host."""

    index: int  # read from the node's name (CardRule.index_regex, less index_base)
    nodes: Tuple[DeviceNode, ...]  # its own node first, then its companions
    pci: Optional[str] = None  # PCI_ADDRESS; None: sysfs shows no PCI function behind its node
    numa_node: Optional[int] = None  # None: sysfs does not say (-1 there)


class Mount(NamedTuple):
    """A read-only bind mount of a driver path: where it is on the host (under the driver
    root) -> where the profile puts it in the container (by default the same path)."""

    host_path: str
    container_path: str


class HostView(NamedTuple):
    """Everything discovery found on a host for one profile."""

    profile: Profile
    cards: Tuple[Card, ...]
    shared_nodes: Tuple[DeviceNode, ...] = ()
    mounts: Tuple[Mount, ...] = ()
    library_dirs: Tuple[str, ...] = ()  # container paths of library dirs that exist
    notes: Tuple[str, ...] = ()


class Discovery(NamedTuple):
    """What ``--profile auto`` found: a view per profile that applies, and
    one line per profile that failed (reported and skipped, never fatal to the others)."""

    views: Tuple[HostView, ...]
    failures: Tuple[Tuple[str, str], ...] = ()  # (profile name, what went wrong and the fix)
