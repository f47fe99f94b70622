"""Training domains: the pods of one job share one Ascend rank table, each node writing for its own.

A job's pods each get a claim from one ResourceClaimTemplate whose opaque device
config names the domain and its size::

    config:
    - opaque:
        driver: huawei.com
        parameters: {apiVersion: xpu-cdi.io/v1, kind: TrainingDomain, name: job-a, size: 2}

The scheduler copies it into every claim's ``status.allocation.devices.config``.
A pod's rank index is its Indexed Job completion index or its StatefulSet ordinal.

What each node's driver does, for the claims it prepared (nothing central):

* **publishes** its members' facts in the claim's ``status.devices``, one entry per
  NPU of its own pool (``data``: the domain, the member's index, host IP, pod IP once
  the sandbox has one, the NPU's physical id and RoCE address).  The API server lets
  a driver pod write those entries only on claims allocated to its own node
  (``resourceclaims/driver`` ``associated-node:`` verbs, 1.36+) and the admission
  policy of ``deploy/dra`` only its own pool's entries;
* **assembles** the table from every member claim of the domain in the namespace
  (:func:`members`: only entries of claims allocated with the same domain, from the
  pool the claim was allocated on, for the pod the claim is reserved for) and writes it
  (:mod:`xpu_cdi.ranktable`) into a directory of each of its member claims, which the
  claim-scoped CDI spec mounts read-only at mind-cluster's path.

Pure but for :class:`Domains`' calls (the API, files).
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import quote

from .. import atomic, ranktable
from ..errors import ClaimError
from ..log import INFO, WARNING, Log
from ..kube.client import ApiError, Kube, claim_path

API_VERSION = "xpu-cdi.io/v1"
KIND = "TrainingDomain"
MEMBER_KIND = "TrainingMember"
MAX_SIZE = 4096
INDEX_KEYS = ("batch.kubernetes.io/job-completion-index", "apps.kubernetes.io/pod-index")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_UID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
# seconds between passes: while a pod of ours has no IP yet (kubelet sets it once the sandbox is up; after
# EAGER seconds, an image pull say, every PATIENT s: the API client's 5 calls a second are prepare's too),
# and otherwise (the members' claims are watched: a change wakes the pass at once)
FAST, PATIENT, SLOW, EAGER = 0.25, 1.0, 5.0, 30.0
WATCH_SECONDS = 300


@dataclass(frozen=True)
class Spec:
    """The domain a claim's config names."""

    name: str
    size: int


def spec_of(claim: Mapping[str, Any], driver: str) -> Optional[Spec]:
    """The training domain the claim's allocation names for *driver*, None when it names none.

    Raises:
        ClaimError: a config of ours that is not a valid TrainingDomain (one line saying what).
    """
    configs = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config") or []
    found: List[Spec] = []
    for c in configs:
        opaque = c.get("opaque") or {}
        if opaque.get("driver") != driver:
            continue
        found.append(parse(opaque.get("parameters")))
    if len({(s.name, s.size) for s in found}) > 1:
        raise ClaimError("the claim names more than one training domain: give one TrainingDomain config")
    return found[0] if found else None


def parse(params: Any) -> Spec:
    """A TrainingDomain's parameters. Raises ClaimError on anything else."""
    where = f"device config of kind {KIND} ({API_VERSION})"
    if not isinstance(params, dict):
        raise ClaimError(f"opaque device config: parameters must be an object, the {where}")
    if params.get("apiVersion") != API_VERSION or params.get("kind") != KIND:
        raise ClaimError(f"opaque device config {params.get('apiVersion')!r}/{params.get('kind')!r} is not known: "
                         f"this driver takes apiVersion {API_VERSION}, kind {KIND}")
    extra = sorted(set(params) - {"apiVersion", "kind", "name", "size"})
    if extra:
        raise ClaimError(f"{where}: unknown field(s) {', '.join(map(repr, extra))}: it takes name and size")
    name, size = params.get("name"), params.get("size")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ClaimError(f"{where}: name {name!r} is not a DNS label (lowercase letters, digits, '-', at most 63)")
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
        raise ClaimError(f"{where}: size {size!r} must be a whole number of pods from 1 to {MAX_SIZE}")
    return Spec(name, size)


def pod_of(claim: Mapping[str, Any]) -> Tuple[str, str]:
    """``(name, uid)`` of the one pod the claim is reserved for. Raises ClaimError."""
    pods = [r for r in (claim.get("status") or {}).get("reservedFor") or [] if r.get("resource") == "pods"]
    if len(pods) != 1:
        raise ClaimError(f"a training domain's claim is one pod's (a ResourceClaimTemplate): this one is reserved "
                         f"for {len(pods)} pods")
    return str(pods[0].get("name", "")), str(pods[0].get("uid", ""))


def index_of(pod: Mapping[str, Any], size: int) -> int:
    """The pod's rank index: its Indexed Job completion index or StatefulSet ordinal. Raises ClaimError."""
    meta = pod.get("metadata") or {}
    for key in INDEX_KEYS:
        value = (meta.get("labels") or {}).get(key, (meta.get("annotations") or {}).get(key))
        if value is None:
            continue
        if not re.match(r"^(0|[1-9][0-9]{0,8})$", str(value)):
            raise ClaimError(f"pod {meta.get('name')}: {key} {value!r} is not an index")
        if int(value) >= size:
            raise ClaimError(f"pod {meta.get('name')} has index {value}, but its training domain has {size} "
                             f"members (0..{size - 1}): give the Job as many completions as the domain's size")
        return int(value)
    raise ClaimError(f"pod {meta.get('name')} has no rank index: run a training domain's pods as an Indexed Job "
                     f"(completionMode: Indexed) or a StatefulSet ({' or '.join(INDEX_KEYS)})")


def member_data(spec: Spec, index: int, pod: str, pod_uid: str, host_ip: str, pod_ip: str, device_id: int,
                device_ip: str) -> Dict[str, Any]:
    """What a node publishes in ``status.devices[].data`` for one NPU of its member."""
    return {"apiVersion": API_VERSION, "kind": MEMBER_KIND, "domain": spec.name, "size": spec.size, "index": index,
            "pod": pod, "podUID": pod_uid, "hostIP": host_ip, "podIP": pod_ip, "deviceID": device_id,
            "deviceIP": device_ip}


def _allocated_node(claim: Mapping[str, Any]) -> str:
    """The node the claim is allocated on (its allocation's node selector names one node), or ""."""
    terms = ((((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {})
             .get("nodeSelectorTerms") or [])
    if len(terms) != 1:
        return ""
    fields = terms[0].get("matchFields") or []
    if len(fields) != 1 or terms[0].get("matchExpressions") or fields[0].get("key") != "metadata.name":
        return ""
    values = fields[0].get("values") or []
    return str(values[0]) if fields[0].get("operator") == "In" and len(values) == 1 else ""


def members(claims: Sequence[Mapping[str, Any]], spec: Spec, driver: str) -> Tuple[List[ranktable.Member], List[str]]:
    """The members of *spec* the claims (of one namespace) show, and a line per claim not taken.

    A claim counts when its allocation names the same domain, and only the entries its own
    node's driver published: *driver*'s, of the pool the claim was allocated on, naming an
    allocated device, for the pod it is reserved for.  Of two claims with one index (a pod
    replaced while the old one goes), the one still reserved, then the newest, wins.
    """
    by_index: Dict[int, Tuple[Tuple[int, str, str], ranktable.Member]] = {}
    notes: List[str] = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        try:
            if spec_of(claim, driver) != spec:
                continue
        except ClaimError:
            continue
        status = claim.get("status") or {}
        node = _allocated_node(claim)
        allocated = {(r.get("pool"), r.get("device")) for r in
                     ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
                     if r.get("driver") == driver}
        pods = {r.get("uid") for r in status.get("reservedFor") or [] if r.get("resource") == "pods"}
        entries = [d for d in status.get("devices") or [] if d.get("driver") == driver and d.get("pool") == node
                   and (d.get("pool"), d.get("device")) in allocated
                   and isinstance(d.get("data"), dict) and d["data"].get("kind") == MEMBER_KIND]
        if not entries:
            continue  # not prepared yet
        data = [e["data"] for e in entries]
        first = data[0]
        same = all(d.get(k) == first.get(k) for d in data for k in ("domain", "index", "podUID", "hostIP", "podIP"))
        if not same or first.get("domain") != spec.name or not isinstance(first.get("index"), int) \
                or len(entries) != len(allocated):
            notes.append(f"claim {meta.get('name')}: its published facts disagree or are partial: not taken")
            continue
        pod_ip = str(first.get("podIP") or "") if first.get("podUID") in pods else ""
        try:
            devices = tuple(ranktable.Device(int(d["deviceID"]), str(d.get("deviceIP") or "")) for d in data)
        except (KeyError, TypeError, ValueError):
            notes.append(f"claim {meta.get('name')}: an NPU without its id: not taken")
            continue
        host = str(first.get("hostIP") or "")
        m = ranktable.Member(index=first["index"], server_id=host or node, host_ip=host, container_ip=pod_ip,
                             devices=devices)
        why = ranktable.problem(m)
        if why or m.index >= spec.size:
            notes.append(f"claim {meta.get('name')}: {why or 'its index is out of range'}: not taken")
            continue
        rank = (1 if pods else 0, str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))
        if m.index not in by_index or rank > by_index[m.index][0]:
            by_index[m.index] = (rank, m)
    return [by_index[i][1] for i in sorted(by_index)], notes


@dataclass
class Local:
    """One member this node prepared (what the checkpoint keeps of it)."""

    namespace: str
    claim: str
    spec: Spec
    index: int
    pod: str
    pod_uid: str
    devices: Tuple[Tuple[str, int, str], ...]  # (slice device name, physical id, RoCE address)
    host_ip: str = ""
    pod_ip: str = ""
    since: float = field(default_factory=time.monotonic)  # joined (or adopted): its pod IP is asked for eagerly

    def to_json(self) -> Dict[str, Any]:
        return {"domain": self.spec.name, "size": self.spec.size, "index": self.index, "pod": self.pod,
                "podUID": self.pod_uid, "devices": [list(d) for d in self.devices], "hostIP": self.host_ip,
                "podIP": self.pod_ip}

    @classmethod
    def from_json(cls, namespace: str, claim: str, doc: Mapping[str, Any]) -> "Local":
        return cls(namespace, claim, Spec(str(doc["domain"]), int(doc["size"])), int(doc["index"]), str(doc["pod"]),
                   str(doc["podUID"]), tuple((str(d[0]), int(d[1]), str(d[2])) for d in doc["devices"]),
                   str(doc.get("hostIP", "")), str(doc.get("podIP", "")))

    def env(self) -> List[str]:
        ids = ranktable.rank_ids(self.index, len(self.devices))
        return [f"RANK_TABLE_FILE={ranktable.CONTAINER_PATH}", f"XPU_CDI_TRAINING_DOMAIN={self.spec.name}",
                f"XPU_CDI_RANK_INDEX={self.index}", f"XPU_CDI_RANK_IDS={','.join(map(str, ids))}",
                f"XPU_CDI_RANK_SIZE={self.spec.size * len(self.devices)}"]


def ok_local(doc: Any) -> bool:
    """A checkpoint's training record, well-formed (the checkpoint's own check)."""
    try:
        Local.from_json("", "", doc)
    except (KeyError, TypeError, ValueError, IndexError):
        return False
    return True


class Domains:
    """This node's members of training domains: their table directories, facts and tables."""

    def __init__(self, kube: Kube, driver: str, node: str, root: str, log: Log) -> None:
        self.kube, self.driver, self.node, self.root, self.log = kube, driver, node, root, log
        self.locals: Dict[str, Local] = {}  # claim uid -> member
        self.written: Dict[str, bytes] = {}  # claim uid -> the table last written
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.watched: Dict[str, threading.Thread] = {}  # namespace -> the watch of its claims
        self._said: Dict[str, str] = {}

    # -- files ---------------------------------------------------------------------------------------------

    def dir_of(self, uid: str) -> str:
        if not _UID.match(uid):
            raise ValueError(f"claim uid {uid!r} is not a uid")
        return os.path.join(self.root, uid)

    def edits(self, uid: str, local: Local) -> Dict[str, Any]:
        """The claim-scoped CDI device's edits: the table's directory read-only at mind-cluster's path, the env."""
        return {"env": local.env(),
                "mounts": [{"hostPath": self.dir_of(uid), "containerPath": ranktable.CONTAINER_DIR,
                            "options": ["ro", "nosuid", "nodev", "noexec", "bind"]}]}

    def write(self, uid: str, table: ranktable.Table) -> bool:
        """Write the table of one member claim if it changed (atomically: the container sees old or new)."""
        data = table.dumps()
        if self.written.get(uid) == data:
            return False
        d = self.dir_of(uid)
        os.makedirs(d, mode=0o755, exist_ok=True)
        atomic.write_atomic(os.path.join(d, ranktable.FILE), data, mode=0o644, durable=False)
        self.written[uid] = data
        return True

    # -- members -------------------------------------------------------------------------------------------

    def join(self, uid: str, local: Local) -> None:
        """A member prepared here: its first table (itself, initializing) written before the container starts."""
        with self.lock:
            self.locals[uid] = local
            self.write(uid, ranktable.build([self._self_member(local)], local.spec.size))
        self.wake.set()

    def adopt(self, uid: str, local: Local) -> None:
        """A member prepared before the driver restarted (from the checkpoint)."""
        with self.lock:
            self.locals[uid] = local
        self.wake.set()

    def leave(self, uid: str) -> None:
        with self.lock:
            self.locals.pop(uid, None)
            self.written.pop(uid, None)
            try:
                d = self.dir_of(uid)
                for name in os.listdir(d):  # only the table and atomic.py's temporaries: files, never a tree
                    os.unlink(os.path.join(d, name))
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as err:
                self.log(f"{self.driver}: rank table directory of claim {uid} not removed: {err}", WARNING)

    def _self_member(self, local: Local) -> ranktable.Member:
        return ranktable.Member(local.index, local.host_ip or self.node, tuple(ranktable.Device(i, ip)
                                for _n, i, ip in local.devices), host_ip=local.host_ip, container_ip=local.pod_ip)

    # -- the pass ------------------------------------------------------------------------------------------

    def sync(self) -> bool:
        """One pass: learn our pods' IPs, publish our facts, write every member's table. True when every
        table of ours is complete."""
        with self.lock:
            mine = dict(self.locals)
        for uid, local in mine.items():
            self._learn(uid, local)
        complete = True
        for (ns, name), uids in self._by_domain(mine).items():
            try:
                items = self.kube.get(f"/apis/resource.k8s.io/v1/namespaces/{quote(ns)}/resourceclaims").get("items")
            except ApiError as err:
                self._say(f"list:{ns}", f"{self.driver}: training domain {ns}/{name}: claims not read: {err}")
                complete = False
                continue
            spec = mine[uids[0]].spec
            found, notes = members(items or [], spec, self.driver)
            for note in notes:
                self._say(f"note:{ns}:{note}", f"{self.driver}: training domain {ns}/{name}: {note}")
            try:
                table = ranktable.build(found, spec.size)
            except ValueError as err:
                self._say(f"build:{ns}/{name}", f"{self.driver}: training domain {ns}/{name}: no table: {err}")
                complete = False
                continue
            complete = complete and table.completed
            ranks = sum(len(s["device"]) for s in table.doc["server_list"])
            with self.lock:
                for uid in uids:
                    if uid in self.locals:
                        try:
                            if self.write(uid, table):
                                self.log(f"{self.driver}: training domain {ns}/{name}: claim {mine[uid].claim}'s "
                                         f"table {table.doc['status']} ({ranks} ranks)", INFO)
                        except OSError as err:
                            self._say(f"write:{uid}", f"{self.driver}: rank table of claim {uid} not written: {err}")
        return complete

    def _by_domain(self, mine: Mapping[str, Local]) -> Dict[Tuple[str, str], List[str]]:
        out: Dict[Tuple[str, str], List[str]] = {}
        for uid, local in sorted(mine.items()):
            out.setdefault((local.namespace, local.spec.name), []).append(uid)
        return out

    def _learn(self, uid: str, local: Local) -> None:
        """Our pod's IPs (once its sandbox has one) and our facts on its claim."""
        if not local.pod_ip:
            try:
                pod = self.kube.get(f"/api/v1/namespaces/{quote(local.namespace)}/pods/{quote(local.pod)}")
            except ApiError as err:
                if err.status != 404:
                    self._say(f"pod:{uid}", f"{self.driver}: pod {local.namespace}/{local.pod} not read: {err}")
                return
            if (pod.get("metadata") or {}).get("uid") != local.pod_uid:
                return  # another pod of that name: ours is gone, its claim goes with it
            st = pod.get("status") or {}
            host, ip = str(st.get("hostIP") or ""), str(st.get("podIP") or "")
            if (host, ip) != (local.host_ip, local.pod_ip):
                local.host_ip, local.pod_ip = host, ip
        self._publish(uid, local)

    def _publish(self, uid: str, local: Local) -> None:
        entries = [{"driver": self.driver, "pool": self.node, "device": name,
                    "data": member_data(local.spec, local.index, local.pod, local.pod_uid, local.host_ip,
                                        local.pod_ip, phy, ip)} for name, phy, ip in local.devices]
        key = repr(entries)
        if self._said.get(f"published:{uid}") == key:
            return
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": local.claim, "namespace": local.namespace, "uid": uid},
                "status": {"devices": entries}}
        path = claim_path(local.namespace, local.claim) + "/status"
        try:
            self.kube.request("PATCH", path, body, query={"fieldManager": f"xpu-cdi-{self.driver}", "force": "true"},
                              content_type="application/apply-patch+yaml")
        except ApiError as err:
            self._say(f"publish:{uid}:{err.status}", f"{self.driver}: claim {local.namespace}/{local.claim}: "
                                                     f"training facts not published: {err}")
            return
        self._said[f"published:{uid}"] = key

    def _say(self, key: str, line: str) -> None:
        if self._said.get(key) != line:
            self._said[key] = line
            self.log(line, WARNING)

    # -- the thread ----------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, daemon=True, name="domains-" + self.driver)
            self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.wake.clear()
            with self.lock:
                mine = list(self.locals.values())
            for ns in sorted({m.namespace for m in mine} - set(self.watched)):
                self.watched[ns] = threading.Thread(target=self._watch, args=(ns,), daemon=True,
                                                    name=f"domains-{self.driver}-{ns}")
                self.watched[ns].start()
            if mine:
                try:
                    self.sync()
                except Exception as err:  # noqa: BLE001 -- the pass runs again; a dead thread would update nothing
                    self._say("sync", f"{self.driver}: training domains: pass failed: {type(err).__name__}: {err}")
            waiting = [m for m in mine if not m.pod_ip]
            now = time.monotonic()
            self.wake.wait(SLOW if not waiting else FAST if any(now - m.since < EAGER for m in waiting) else PATIENT)

    def _watch(self, ns: str) -> None:
        """Wake the pass on every change of a claim in *ns* (another node's facts, a member gone), while this
        node has members there."""
        path = f"/apis/resource.k8s.io/v1/namespaces/{quote(ns)}/resourceclaims"
        while not self.stop.is_set():
            with self.lock:
                if not any(m.namespace == ns for m in self.locals.values()):
                    self.watched.pop(ns, None)
                    return
            try:
                for _type, _obj in self.kube.watch(path, {}, WATCH_SECONDS):
                    self.wake.set()
                    if self.stop.is_set():
                        return
            except (ApiError, ValueError) as err:
                self._say(f"watch:{ns}", f"{self.driver}: claims of {ns} not watched ({err}): read every {SLOW:g} s")
                self.stop.wait(SLOW)

    def shutdown(self) -> None:
        self.stop.set()
        self.wake.set()
        if self.thread is not None:
            self.thread.join(5)
