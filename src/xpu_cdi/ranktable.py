"""Ascend's rank table (``hccl.json``): the one place its format and rules live.

HCCL reads it (``RANK_TABLE_FILE``) to learn every rank of a job: which server,
which NPU (its physical id, the N of ``/dev/davinciN``), the NPU's RoCE address and
the rank id.  The format is the vendor's (CANN's HCCL user guide, "rank table
configuration"; mind-cluster ``docs/en/scheduling/api/hccl.json_file_description.md``,
which Ascend Operator writes); the rules here are:

* every value is a string (``"rank_id": "3"``, ``"server_count": "2"``);
* ``status`` is ``initializing`` until every member of the job is known with its
  pod IP, ``completed`` after: training scripts wait for ``completed``;
* version ``1.0`` (Atlas A2 / 910B and the 910) unless every NPU has a super device id
  (Atlas A3), then ``1.2`` with ``super_device_id`` per NPU and ``super_pod_list``
  (each super pod's servers, in rank order; super pods by id);
* members (a pod each: one ``server_list`` entry) are in member-index order; within a
  member its NPUs by physical id; rank ids are ``index * NPUs per member + position``,
  as Ascend Operator numbers them from each pod's rank index, so a member's rank ids
  never depend on which other members are known yet, and a replaced pod keeps them;
* ``server_id`` is the member's server (its host IP, as Ascend's device plugin names
  servers), ``host_ip`` the same, ``container_ip`` the pod IP, each left out while
  unknown (HCCL's own examples carry only ``server_id``).

Pure: members in, the table (a dict) and its bytes out.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

INITIALIZING = "initializing"
COMPLETED = "completed"
VERSION = "1.0"  # Atlas A2 / 910B, 910
VERSION_SUPER_POD = "1.2"  # Atlas A3: super device ids and super pods
MAX_SERVER_ID = 64  # HCCL: "a string of at most 64 characters"
FILE = "hccl.json"
CONTAINER_DIR = "/user/serverid/devindex/config"  # where Ascend Operator's jobs find it
CONTAINER_PATH = f"{CONTAINER_DIR}/{FILE}"


@dataclass(frozen=True)
class Device:
    """One NPU of a member."""

    device_id: int  # physical id, /dev/davinci<device_id>
    device_ip: str = ""  # its RoCE address (hccn.conf's address_<id>)
    super_device_id: str = ""  # A3 only


@dataclass(frozen=True)
class Member:
    """One pod of the job: its NPUs on one server."""

    index: int  # its rank index in the job (0 .. size-1)
    server_id: str
    devices: Tuple[Device, ...]
    host_ip: str = ""
    container_ip: str = ""  # "" until the pod's sandbox has an IP
    super_pod_id: str = ""  # A3 only
    hardware_type: str = ""  # mind-cluster's product model, where known

    @property
    def known(self) -> bool:
        return bool(self.container_ip)


@dataclass(frozen=True)
class Table:
    """What :func:`build` makes: the document, and whether it is complete."""

    doc: Dict[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.doc.get("status") == COMPLETED

    def dumps(self) -> bytes:
        return json.dumps(self.doc, indent=2).encode() + b"\n"


def problem(member: Member) -> str:
    """What is wrong with *member* for a rank table, or ``""``."""
    if member.index < 0:
        return f"rank index {member.index} is negative"
    if not member.server_id or len(member.server_id) > MAX_SERVER_ID:
        return f"server id {member.server_id!r} is empty or over {MAX_SERVER_ID} characters"
    if not member.devices:
        return "it has no NPU"
    ids = [d.device_id for d in member.devices]
    if len(set(ids)) != len(ids) or min(ids) < 0:
        return f"its NPU ids {sorted(ids)} repeat or are negative"
    for what, value in [("host IP", member.host_ip), ("pod IP", member.container_ip),
                        *((f"NPU {d.device_id}'s device IP", d.device_ip) for d in member.devices)]:
        if value and not _is_ip(value):
            return f"its {what} {value!r} is not an IP address"
    return ""


def rank_ids(index: int, count: int) -> List[int]:
    """The rank ids of the member of rank index *index* holding *count* NPUs."""
    return [index * count + i for i in range(count)]


def build(members: Sequence[Member], size: int, need_pod_ips: bool = True) -> Table:
    """The rank table of a job of *size* members, from those known (*members*).

    ``completed`` when members 0 .. size-1 are each there, with a pod IP unless
    *need_pod_ips* is false (a table of servers, not pods, as HCCL's own examples);
    till then the members known are listed.  Raises ValueError: a member :func:`problem` refuses,
    two of one index, an index out of range, members of different NPU counts (their
    rank ids would collide).
    """
    by_index: Dict[int, Member] = {}
    for m in members:
        why = problem(m)
        if why:
            raise ValueError(f"member {m.index}: {why}")
        if m.index >= size:
            raise ValueError(f"member {m.index}: rank index out of range for a job of {size}")
        if m.index in by_index:
            raise ValueError(f"two members have rank index {m.index}")
        by_index[m.index] = m
    counts = {len(m.devices) for m in by_index.values()}
    if len(counts) > 1:
        raise ValueError(f"members hold different numbers of NPUs ({', '.join(map(str, sorted(counts)))}): "
                         f"every member of a job must hold as many")
    ordered = [by_index[i] for i in sorted(by_index)]
    super_pod = bool(ordered) and all(d.super_device_id for m in ordered for d in m.devices)
    servers = [_server(m, super_pod) for m in ordered]
    complete = len(ordered) == size and (not need_pod_ips or all(m.known for m in ordered))
    doc: Dict[str, Any] = {"status": COMPLETED if complete else INITIALIZING,
                           "version": VERSION_SUPER_POD if super_pod else VERSION,
                           "server_count": str(len(servers)), "server_list": servers}
    if super_pod:
        pods: Dict[str, List[Dict[str, str]]] = {}
        for m in ordered:
            pods.setdefault(m.super_pod_id or "0", []).append({"server_id": m.server_id})
        doc["super_pod_list"] = [{"super_pod_id": p, "server_list": pods[p]}
                                 for p in sorted(pods, key=lambda p: (len(p), p))]
    return Table(doc)


def _server(m: Member, super_pod: bool) -> Dict[str, Any]:
    devices = sorted(m.devices, key=lambda d: d.device_id)
    out: Dict[str, Any] = {"server_id": m.server_id}
    for key, value in (("host_ip", m.host_ip), ("container_ip", m.container_ip), ("hardware_type", m.hardware_type)):
        if value:
            out[key] = value
    out["device"] = []
    for d, rank in zip(devices, rank_ids(m.index, len(devices))):
        entry = {"device_id": str(d.device_id), "device_ip": d.device_ip}
        if super_pod:
            entry["super_device_id"] = d.super_device_id
        entry["rank_id"] = str(rank)
        out["device"].append(entry)
    return out


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
