"""The churn soak (issue 28, item 7; docs/fleet.md, "The churn soak") on the fleet with deploy/ as a
user applies it: 500 pods made and deleted in waves across the three nodes, on the pod network;
node B (4 x 310P) switched to deploy/dra's driver (its allocation label), so that its pods get
their cards through claims from ResourceClaimTemplates, made and deleted in the same waves.

Each wave hands every card of every node to new pods: per node, pods asking 1-4 cards of its kind
(nodeSelector on its model label, the field's pools; on B a claim of that many NPUs instead of
the plugin's resource) until its cards are spoken for, and pods
asking none up to the wave's size, wherever the scheduler puts them.  A wave is made while the
previous one is being deleted, so its pods get the cards the previous wave's pods give back.
Checked while the waves run, not only at the end:

- in every one of kubelet's PodResources ``List`` answers (one moment of kubelet's view), and in
  every list of the namespace's ResourceClaims (their ``status.allocation``), sampled after each
  wave is made and once it runs, no card is held by two pods (two allocations);
- each running pod holds what it asked (PodResources; on B its claim's allocation, and nothing
  from the plugin) and its container has exactly those cards' device nodes, injected through CDI
  (what it printed at its start); a pod asking none sees none;
- at the end no pod holds a card, no claim is left, and every node offers all its cards again;
- B's ResourceSlice is the same object throughout (its resourceVersion): claims come and go
  without the driver publishing again;
- the daemons' processes (device plugin and ``watch``, DRA driver and its ``watch`` on B,
  exporter, labeller; found on each node through its containerd) keep their RSS and open fds
  within :data:`RSS_SLACK` / :data:`FDS_SLACK` (the DRA driver :data:`DRA_FDS_SLACK`: its API
  connection pool) of what they had after the warm-up wave, and
  never restart;
- then, idle (no churn) for :data:`IDLE` seconds: no plugin registers with kubelet again (the
  plugin's log, kubelet's log; the DRA driver's log), no node label is written (the labels and
  their managedFields entries), no ResourceSlice is (its resourceVersion).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from support import HANG
from xpu_cdi.kube.client import API_POOL
from support.k8s import fleetdeploy, nodekit
from support.k8s.fleet import NODES, Fleet, NodeSpec
from support.k8s.fleetdeploy import DRA_DS, PLUGIN_DS, ds_pods

pytestmark = [pytest.mark.privileged]
WAVES = 25
PER_WAVE = 20  # 25 waves of 20: 500 pods
MOST = 4  # a pod asks 1..MOST cards
SEED = 28
IDLE = 30.0  # seconds without churn
RSS_SLACK = 2 << 20  # bytes a daemon's RSS may grow from the warm-up wave to the end (measured: <= 0.4 MiB)
FDS_SLACK = 1  # open fds it may gain (measured: none)
# the DRA driver's API client keeps up to kube.API_POOL connections, opened as concurrent calls ask:
# a busier wave than the warm-up one opens more (14 -> 16 fds seen); a leak grows with the 500 pods
DRA_FDS_SLACK = FDS_SLACK + API_POOL - 1
NS_DS = "kube-system"
#: DaemonSet -> its containers that are long-running daemons
DAEMONS = {PLUGIN_DS: ("device-plugin", "watch"), DRA_DS: ("dra-driver", "watch"),
           "xpu-cdi-exporter": ("exporter",), "xpu-cdi-labeller": ("labeller",)}
DRA_NODE = NODES[1]  # B, 4 x 310P: served by deploy/dra's driver during the soak
DEVICE_CLASS = "npu.huawei.com"  # deploy/dra's DeviceClass of the Ascend driver
READY = "soak-ready"
#: what a pod prints: the card nodes CDI put in its /dev, then stays until deleted (TERM ends it)
SCRIPT = ('for n in /dev/xpu[0-9]* /dev/davinci[0-9]*; do [ -e "$n" ] && echo "card ${n#/dev/}"; done; '
          f'echo {READY}; trap "exit 0" TERM; sleep 2147483647 & wait')
KUBELET_REGISTERED = "Got registration request from device plugin"
DRA_REGISTERED = ": registered with kubelet"  # the DRA driver's log, once per registration


@pytest.fixture(scope="module")
def dra_b(fleet: Fleet, image: str, deployed: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Node B switched to deploy/dra's driver for the soak, back to the plugin after it."""
    with fleetdeploy.on_dra(fleet, image, tmp_path_factory.mktemp("soak-dra"), (DRA_NODE,)):
        yield None


@dataclass(frozen=True)
class Want:
    name: str
    node: Optional[NodeSpec]  # None: asks no card
    cards: int


def plan(rng: random.Random) -> List[List[Want]]:
    """:data:`WAVES` waves of :data:`PER_WAVE` pods: every node's cards split into asks of
    1..:data:`MOST`, the rest asking none (at least two per wave)."""
    waves: List[List[Want]] = []
    for w in range(WAVES):
        while True:
            asks = []
            for spec in NODES:
                left = spec.cards
                while left:
                    n = rng.randint(1, min(MOST, left))
                    asks.append((spec, n))
                    left -= n
            if len(asks) <= PER_WAVE - 2:
                break
        asks += [(None, 0)] * (PER_WAVE - len(asks))
        waves.append([Want(f"w{w:02d}-{i:02d}", spec, n) for i, (spec, n) in enumerate(asks)])
    return waves


def model_label(spec: NodeSpec) -> str:
    return f"xpu-cdi.io/{'xpu' if spec.kind == nodekit.XPU else 'npu'}.model"


def template(cards: int) -> str:
    return f"npus-{cards}"


def templates(ns: str) -> List[Dict[str, Any]]:
    """A ResourceClaimTemplate of n NPUs for each n of 1..:data:`MOST`, named :func:`template`."""
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": template(n), "namespace": ns},
             "spec": {"spec": {"devices": {"requests": [{"name": "npus", "exactly": {
                 "deviceClassName": DEVICE_CLASS, "count": n}}]}}}} for n in range(1, MOST + 1)]


def pod_object(want: Want, ns: str, wave: int) -> Dict[str, Any]:
    by_claim = want.node == DRA_NODE
    p = nodekit.pod(want.name, ["sh", "-c", SCRIPT], {want.node.kind: want.cards} if want.node and not by_claim
                    else None)
    p["metadata"].update(namespace=ns, labels={"soak-wave": str(wave)})
    p["spec"]["hostNetwork"] = False
    if want.node:
        p["spec"]["nodeSelector"] = {model_label(want.node): want.node.model}
    if by_claim:
        p["spec"]["resourceClaims"] = [{"name": "npus", "resourceClaimTemplateName": template(want.cards)}]
        p["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "npus"}]
    return p


def allocations(fleet: Fleet, ns: str) -> Dict[str, List[str]]:
    """pod -> the devices its claim was allocated (``pool/device``), from one list of *ns*'s
    ResourceClaims (one moment of the API server's view); no device in two allocations."""
    out: Dict[str, List[str]] = {}
    owners: Dict[str, List[str]] = {}
    for c in fleet.get("resourceclaims", "-n", ns)["items"]:
        alloc = (c.get("status") or {}).get("allocation")
        if not alloc:
            continue
        devices = sorted(f"{r['pool']}/{r['device']}" for r in alloc["devices"]["results"])
        for d in devices:
            owners.setdefault(d, []).append(c["metadata"]["name"])
        (pod,) = [o["name"] for o in c["metadata"].get("ownerReferences") or [] if o["kind"] == "Pod"]
        out[pod] = devices  # a template's claim is its pod's (the claim controller's owner reference)
    twice = {d: v for d, v in owners.items() if len(v) > 1}
    assert not twice, f"devices in two claims' allocations at once: {twice}"
    return out


def slice_versions(fleet: Fleet) -> Dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in fleet.get("resourceslices")["items"]}


def views(fleet: Fleet, node: str, ns: str) -> Dict[str, List[str]]:
    """pod -> the card nodes it printed, for the pods of *ns* on *node* that have printed them all
    (their container logs, in CRI's format, in kubelet's podLogsDir)."""
    out: Dict[str, List[str]] = {}
    for log in (fleet.nodes[node].base / "pod-logs").glob(f"{ns}_*/c/*.log"):
        pod = log.parent.parent.name.split("_")[1]
        try:
            texts = [ln.split(" ", 3)[3] for ln in log.read_text().splitlines() if ln.count(" ") >= 3]
        except FileNotFoundError:  # kubelet removed a deleted pod's
            continue
        if READY in texts:
            out[pod] = sorted(t.split()[1] for t in texts if t.startswith("card "))
    return out


def no_card_twice(node: str, held: Dict[Tuple[str, str], Dict[str, List[str]]]) -> None:
    """No card in two pods of one PodResources answer."""
    owners: Dict[Tuple[str, str], List[str]] = {}
    for (ns, pod), resources in held.items():
        for resource, ids in resources.items():
            for i in ids:
                owners.setdefault((resource, i), []).append(f"{ns}/{pod}")
    twice = {k: v for k, v in owners.items() if len(v) > 1}
    assert not twice, f"{node}: cards held by two pods at once: {twice}"


class Daemons:
    """The processes of deploy/'s daemons on the fleet: (node, container) -> pid."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.pids: Dict[Tuple[str, str], int] = {}
        self.restarts: Dict[Tuple[str, str], int] = {}
        want = 0
        for ds, containers in DAEMONS.items():
            for p in ds_pods(fleet, ds):  # by owner: deploy/'s selector matches deploy/dra's pods too
                want += len(containers)
                for cs in p["status"]["containerStatuses"]:
                    if cs["name"] in containers:
                        self.restarts[(p["spec"]["nodeName"], f"{ds}/{cs['name']}")] = cs["restartCount"]
            for node, pids in fleetdeploy.daemon_pids(fleet, ds).items():
                self.pids.update({(node, f"{ds}/{c}"): pid for c, pid in pids.items() if c in containers})
        assert len(self.pids) == want and want >= len(NODES) * 4, self.pids

    def usage(self) -> Dict[Tuple[str, str], Tuple[int, int]]:
        """(node, container) -> (RSS bytes, open fds), the least of five readings over a second (a
        pass in flight holds a connection or a buffer for a moment)."""
        out: Dict[Tuple[str, str], Tuple[int, int]] = {}
        for _ in range(5):
            for key, pid in self.pids.items():
                status = open(f"/proc/{pid}/status").read()
                rss = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:"))) * 1024
                fds = len(os.listdir(f"/proc/{pid}/fd"))
                old = out.get(key, (rss, fds))
                out[key] = (min(rss, old[0]), min(fds, old[1]))
            time.sleep(0.2)  # readings spread over a second: a measurement, not a wait
        return out

    def same_processes(self) -> None:
        again = Daemons(self.fleet)
        assert (again.pids, again.restarts) == (self.pids, self.restarts), "a daemon restarted during the soak"


def idle_state(fleet: Fleet) -> Dict[str, Any]:
    """What must not change while nothing happens: registrations (the plugin's log, kubelet's),
    node labels and who last wrote them, ResourceSlices' resourceVersions."""
    state: Dict[str, Any] = {}
    for p in ds_pods(fleet, PLUGIN_DS):
        node = p["spec"]["nodeName"]
        log = fleet.kubectl("logs", p["metadata"]["name"], "-n", NS_DS, "-c", "device-plugin").stdout
        state[f"{node} plugin registrations"] = log.count(": registered ")
        state[f"{node} kubelet registrations"] = fleet.nodes[node].kubelet_log().count(KUBELET_REGISTERED)
    for p in ds_pods(fleet, DRA_DS):
        log = fleet.kubectl("logs", p["metadata"]["name"], "-n", NS_DS, "-c", "dra-driver").stdout
        state[f"{p['spec']['nodeName']} dra driver registrations"] = log.count(DRA_REGISTERED)
    for n in fleet.get("nodes", "--show-managed-fields")["items"]:
        meta = n["metadata"]
        fields = meta.get("managedFields", [])
        writers = sorted((m["manager"], m.get("operation", ""), m.get("time", "")) for m in fields
                         if '"f:xpu-cdi.io/' in json.dumps(m.get("fieldsV1", {})))
        assert writers, f"no writer of {meta['name']}'s xpu-cdi.io labels in its managedFields"
        state[f"{meta['name']} labels"] = (meta.get("labels", {}), writers)
    state["resourceslices"] = slice_versions(fleet)
    assert state["resourceslices"], "no ResourceSlice: the DRA node publishes none"
    return state


def fmt(usage: Dict[Tuple[str, str], Tuple[int, int]]) -> Dict[str, str]:
    return {f"{n.rsplit('-', 1)[1].upper()} {c.split('/')[-1]}": f"{rss / 2**20:.1f} MiB {fds} fds"
            for (n, c), (rss, fds) in sorted(usage.items())}


def test_churn_soak(fleet: Fleet, deployed: None, dra_b: None) -> None:
    waves = plan(random.Random(SEED))
    assert sum(map(len, waves)) == 500
    ns = nodekit.unique("soak")
    fleet.kubectl("create", "namespace", ns)
    fleet.wait(lambda: fleet.kubectl("get", "serviceaccount", "default", "-n", ns, check=False).returncode == 0,
               HANG, "the namespace's service account")
    fleet.apply(*templates(ns))
    podres = {name: nodekit.PodResources(node) for name, node in fleet.nodes.items()}
    published = slice_versions(fleet)
    assert len(published) == 1, published
    daemons = Daemons(fleet)
    before = daemons.usage()
    load = [os.getloadavg()[0]]
    samples = claims = 0
    t0 = time.monotonic()
    try:
        for w, wave in enumerate(waves):
            fleet.apply(*[pod_object(want, ns, w) for want in wave])
            if w:
                fleet.kubectl("delete", "pods", "-n", ns, "-l", f"soak-wave={w - 1}", "--wait=false")
            for name, pr in podres.items():  # the previous wave going, this one coming
                no_card_twice(name, pr.held())
                samples += 1
            allocations(fleet, ns)
            samples += 1

            def running() -> Optional[Dict[str, Dict[str, Any]]]:
                pods = {p["metadata"]["name"]: p for p in fleet.get("pods", "-n", ns, "-l", f"soak-wave={w}")["items"]}
                ended = [n for n, p in pods.items() if p["status"].get("phase") in ("Failed", "Succeeded")]
                assert not ended, f"wave {w}: pods ended: {ended}"
                return pods if len(pods) == len(wave) and all(p["status"].get("phase") == "Running"
                                                              for p in pods.values()) else None

            pods = fleet.wait(running, 3 * HANG, f"wave {w}'s {len(wave)} pods running", interval=0.5)
            on = {want.name: pods[want.name]["spec"]["nodeName"] for want in wave}
            seen = fleet.wait(lambda: (lambda v: v if all(want.name in v for want in wave) else None)(
                {k: c for node in set(on.values()) for k, c in views(fleet, node, ns).items()}),
                HANG, f"wave {w}'s pods' cards printed", interval=0.5)
            claimed = allocations(fleet, ns)
            samples += 1
            for name, pr in podres.items():
                held = pr.held()
                samples += 1
                no_card_twice(name, held)
                for want in wave:
                    if on[want.name] != name:
                        continue
                    got = held.get((ns, want.name), {})
                    if want.node is None:
                        assert got == {} and seen[want.name] == [] and want.name not in claimed, \
                            (want, got, seen[want.name])
                        continue
                    assert name == want.node.name, (want, name)
                    if want.node == DRA_NODE:  # its claim's cards, none from the plugin
                        devices = claimed.get(want.name, [])
                        assert got == {} and len(devices) == want.cards and {d.split("/")[0] for d in devices} \
                            == {name} and seen[want.name] == sorted(f"davinci{d.split('/')[1]}" for d in devices), \
                            (want, got, devices, seen[want.name])
                        claims += 1
                        continue
                    ids = got.get(want.node.kind, [])
                    prefix = "xpu" if want.node.kind == nodekit.XPU else "davinci"
                    assert len(ids) == want.cards and seen[want.name] == sorted(f"{prefix}{i}" for i in ids), \
                        (want, got, seen[want.name])
            if w == 0:
                warm = daemons.usage()
            load.append(os.getloadavg()[0])
        fleet.kubectl("delete", "pods", "-n", ns, "-l", f"soak-wave={len(waves) - 1}", "--wait=false")
        fleet.wait(lambda: not fleet.get("pods", "-n", ns)["items"], 3 * HANG, "every soak pod gone", interval=0.5)
        for spec in NODES:  # every card free again
            fleet.wait(lambda: not [k for k, v in podres[spec.name].held().items() if spec.kind in v], HANG,
                       f"no card of {spec.name} held")
            assert fleet.nodes[spec.name].allocatable(spec.kind) == (0 if spec == DRA_NODE else spec.cards)
        fleet.wait(lambda: not fleet.get("resourceclaims", "-n", ns)["items"], HANG, "every claim gone")
        assert slice_versions(fleet) == published, "the DRA driver published B's slice again during the churn"
        took = time.monotonic() - t0
        end = daemons.usage()
        daemons.same_processes()
    finally:
        for pr in podres.values():
            pr.close()
        fleet.kubectl("delete", "namespace", ns, "--wait=true", timeout=300, check=False)
    print(f"churn soak: {sum(map(len, waves))} pods in {len(waves)} waves in {took:.0f} s ({claims} by claims on "
          f"{DRA_NODE.name}), {samples} PodResources and claim samples, load {min(load):.1f}-{max(load):.1f}")
    print(f"daemons before: {fmt(before)}\nafter warm-up: {fmt(warm)}\nend: {fmt(end)}")
    grown = {k: (end[k][0] - warm[k][0], end[k][1] - warm[k][1]) for k in end}
    over = {k: v for k, v in grown.items()
            if v[0] > RSS_SLACK or v[1] > (DRA_FDS_SLACK if k[1].endswith("/dra-driver") else FDS_SLACK)}
    assert not over, f"grew past the slack: {fmt(over)}; all: {fmt(grown)}"  # the culprit first: pytest cuts long dicts

    idle = idle_state(fleet)
    assert all(v >= 1 for k, v in idle.items() if k.endswith("registrations")), idle  # the patterns are real
    time.sleep(IDLE)  # the idle window is a span of wall time: what must not happen in it
    assert idle_state(fleet) == idle
    daemons.same_processes()
    print(f"idle {IDLE:.0f} s: registrations (plugin's log / kubelet's) "
          f"{ {k.split()[0]: v for k, v in idle.items() if k.endswith('plugin registrations')} } / "
          f"{ {k.split()[0]: v for k, v in idle.items() if k.endswith('kubelet registrations')} }, DRA driver's "
          f"{ {k.split()[0]: v for k, v in idle.items() if k.endswith('dra driver registrations')} }, "
          f"label writers {sum(len(v[1]) for k, v in idle.items() if k.endswith(' labels'))}, "
          f"{len(idle['resourceslices'])} ResourceSlices: unchanged")
