"""The device plugin's remediation (issue 43): the pods holding a card the policy gave up on, evicted.

:mod:`xpu_cdi.remedy` decides (the grace, the hold-down); this module acts on an ``evict``:

* **who holds the card** (:func:`holders`): kubelet's PodResources ``List``, the containers whose
  devices of the card's resource name it (a time-sliced replica ``3::1`` is card ``3``'s), and those
  whose DRA claims resolved to its CDI name -- a claim made through a DeviceClass's
  ``extendedResourceName`` too, which a ``NoExecute`` device taint does not evict
  (kubernetes#141290): kubelet lists that special claim with the container
  (``pod.status.extendedResourceClaimStatus``).
* **the eviction**: a ``policy/v1`` Eviction of each pod, so PodDisruptionBudgets hold.  It is made
  as the node the plugin runs on, through constrained impersonation (``associated-node``, KEP-5284,
  beta and on in 1.36+): the API server lets the plugin's pod-bound token be that node and nothing
  else, and the NodeRestriction admission plugin lets a node evict only pods bound to it.  A 429
  (the budget allows no disruption now) is logged, an Event on the pod says so, and it is tried
  again :data:`RETRY` seconds later while the card stays unhealthy -- never forced (no delete).
* **what it says**: a log line, an Event on the pod and on the node (as the plugin's own
  account, which an admission policy holds to Events of its own kinds), a count per
  ``(kind, reason)`` (the status file's ``evictions``: ``xpu_cdi_evictions_total``).

The API calls run on a thread of their own: an API server that is slow or down never holds up the
plugin's loop or kubelet's calls.
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple
from urllib.parse import quote

from ..errors import ApiError, PodResourcesError
from ..log import INFO, WARNING, Log
from ..node import sharing

RETRY = 5.0  # seconds before a pod whose eviction was refused (a budget, the API server) is tried again
COMPONENT = "xpu-cdi-device-plugin"
# Event reasons (the admission policy lets the plugin's account record these only)
EVICTING, BLOCKED, UNHEALTHY, RESTORED = "XpuCdiEvicting", "XpuCdiEvictionBlocked", "XpuCdiCardUnhealthy", \
    "XpuCdiCardRestored"


@dataclass(frozen=True)
class Card:
    """A card as the policy names it (its CDI name) and as kubelet knows it (resource, device id)."""

    kind: str
    id: str
    resource: str

    @property
    def name(self) -> str:
        return f"{self.kind}={self.id}"


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str


def holders(listing: Any, card: Card) -> List[Pod]:
    """The pods whose containers hold *card*, from a PodResources ``List`` answer (sorted, each once)."""
    out: Set[Pod] = set()
    for pod in listing.pod_resources:
        for c in pod.containers:
            held = any(d.resource_name == card.resource and card.id in {sharing.card_of(i) for i in d.device_ids}
                       for d in c.devices)
            held = held or any(cdi.name == card.name for dyn in c.dynamic_resources
                               for claim in dyn.claim_resources for cdi in claim.cdi_devices)
            if held:
                out.add(Pod(pod.namespace, pod.name))
    return sorted(out, key=lambda p: (p.namespace, p.name))


def event_body(namespace: str, involved: Dict[str, str], reason: str, message: str, node: str,
               kind: str = "Warning") -> Dict[str, Any]:
    """A core/v1 Event recorded by the plugin (what the admission policy checks)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{involved.get('name', 'xpu-cdi')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": dict(involved), "reason": reason, "message": message[:1024], "type": kind,
            "source": {"component": COMPONENT, "host": node}, "firstTimestamp": now, "lastTimestamp": now,
            "count": 1}


@dataclass
class _Work:
    card: Card
    reason: str
    tries: Dict[Pod, float] = field(default_factory=dict)  # pod -> when it may be tried again
    said: Set[Tuple[Pod, str]] = field(default_factory=set)  # (pod, refusal) already said


class Evictor:
    """Carries out ``evict`` decisions on a thread of its own (:meth:`start`, :meth:`stop`).

    *list_pods* returns a PodResources ``List`` answer; *api* records Events as the plugin's
    account; *as_node* evicts as the node (both :class:`xpu_cdi.kube.client.Kube`-like: ``request``).
    """

    def __init__(self, node: str, log: Log, list_pods: Callable[[], Any], api: Any, as_node: Any,
                 clock: Callable[[], float] = time.monotonic, changed: Callable[[], None] = lambda: None) -> None:
        """*changed*: called when :meth:`status` changed (the daemon rewrites its status file)."""
        self.node, self.log, self.list_pods, self.api, self.as_node = node, log, list_pods, api, as_node
        self.changed = changed
        self.clock = clock
        self.lock = threading.Lock()
        self.work: Dict[str, _Work] = {}  # card name -> what is left to do
        self.counts: Dict[Tuple[str, str], int] = {}  # (kind, reason) -> pods evicted
        self.blocked: Dict[Tuple[str, str], int] = {}  # (kind, why) -> evictions refused
        self.notes: List[Tuple[str, str, str]] = []  # Node Events to record: (reason, message, type)
        self.woken = threading.Event()
        self.stopping = threading.Event()
        self.thread: Optional[threading.Thread] = None

    # -- the daemon's side ---------------------------------------------------------------------------------

    def evict(self, card: Card, reason: str) -> None:
        """The policy gave up on *card*: its pods are to go."""
        self.log(f"{card.name}: unhealthy past the grace: evicting the pods holding it ({reason})", WARNING)
        with self.lock:
            self.work[card.name] = _Work(card, reason)
            self.notes.append((UNHEALTHY, f"card {card.name} unhealthy past the grace: evicting the pods holding it",
                               "Warning"))
        self.woken.set()

    def restore(self, card: Card, reason: str) -> None:
        """*card* is offered again: nothing more to evict for it."""
        with self.lock:
            self.work.pop(card.name, None)
            self.notes.append((RESTORED, f"card {card.name} offered again ({reason})", "Normal"))
        self.log(f"{card.name}: healthy for the hold-down: offered again ({reason})")
        self.woken.set()

    def status(self) -> Dict[str, Any]:
        with self.lock:
            return {"pods_evicted": [{"kind": k, "reason": r, "count": n} for (k, r), n in sorted(self.counts.items())],
                    "evictions_blocked": [{"kind": k, "why": w, "count": n}
                                          for (k, w), n in sorted(self.blocked.items())],
                    "evicting": sorted(self.work)}

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="dp-evict", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.woken.set()
        if self.thread is not None:
            self.thread.join(5)

    # -- the worker ----------------------------------------------------------------------------------------

    def run(self) -> None:
        while not self.stopping.is_set():
            wait = self.step()
            self.woken.wait(wait)
            self.woken.clear()

    def step(self) -> float:
        """One pass over the cards to empty; the seconds until the next is due (at most :data:`RETRY`)."""
        with self.lock:
            todo = list(self.work.values())
            notes, self.notes = self.notes, []
        for reason, message, kind in notes:  # the API calls on this thread, never the loop's
            self.node_event(reason, message, kind)
        if not todo:
            return 3600.0
        try:
            listing = self.list_pods()
        except PodResourcesError as err:
            self.log(f"evictions wait: {err}", WARNING)
            return RETRY
        now = self.clock()
        for w in todo:
            pods = holders(listing, w.card)
            if not pods:
                with self.lock:
                    if self.work.get(w.card.name) is w:
                        del self.work[w.card.name]
                self.log(f"{w.card.name}: no pod holds it any more")
                continue
            for pod in pods:
                if w.tries.get(pod, 0.0) <= now:
                    self.evict_pod(w, pod)
        return RETRY

    def evict_pod(self, w: _Work, pod: Pod) -> None:
        card = w.card
        path = f"/api/v1/namespaces/{quote(pod.namespace)}/pods/{quote(pod.name)}"
        uid = ""
        try:
            found = self.as_node.request("GET", path)  # as the node: only pods bound to it can be read
            uid = found.get("metadata", {}).get("uid", "")
            body = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": pod.name, "namespace": pod.namespace},
                    "deleteOptions": {"preconditions": {"uid": uid}} if uid else {}}
            self.as_node.request("POST", path + "/eviction", body)
        except ApiError as err:
            if err.status == 404:  # gone meanwhile: nothing to do
                return
            why = "disruption-budget" if err.status == 429 else f"http-{err.status}"
            w.tries[pod] = self.clock() + RETRY
            with self.lock:
                self.blocked[(card.kind, why)] = self.blocked.get((card.kind, why), 0) + 1
            self.changed()
            if (pod, why) not in w.said:  # one line and one Event per pod and cause, then quiet retries
                w.said.add((pod, why))
                self.log(f"{card.name}: eviction of pod {pod.namespace}/{pod.name} refused, tried again every "
                         f"{RETRY:g}s: {err}", WARNING)
                self.pod_event(pod, uid, BLOCKED,
                               f"card {card.name} on node {self.node} is unhealthy; the eviction is refused and "
                               f"retried: {err}")
            return
        with self.lock:
            self.counts[(card.kind, w.reason)] = self.counts.get((card.kind, w.reason), 0) + 1
        self.changed()
        w.tries[pod] = float("inf")  # evicted: its deletion is the API server's and kubelet's now
        self.log(f"{card.name}: evicted pod {pod.namespace}/{pod.name} (card {w.reason})", WARNING)
        self.pod_event(pod, uid, EVICTING, f"card {card.name} on node {self.node} is unhealthy past the grace: "
                                           f"the pod is evicted")

    # -- events (best effort: a failure is a log line) ------------------------------------------------------

    def pod_event(self, pod: Pod, uid: str, reason: str, message: str) -> None:
        involved = {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name,
                    **({"uid": uid} if uid else {})}
        self.record(pod.namespace, involved, reason, message)

    def node_event(self, reason: str, message: str, kind: str = "Warning") -> None:
        self.record("default", {"apiVersion": "v1", "kind": "Node", "name": self.node}, reason, message, kind)

    def record(self, namespace: str, involved: Dict[str, str], reason: str, message: str,
               kind: str = "Warning") -> None:
        try:
            self.api.request("POST", f"/api/v1/namespaces/{quote(namespace)}/events",
                             event_body(namespace, involved, reason, message, self.node, kind))
        except ApiError as err:
            self.log(f"event {reason} about {involved['kind']} {involved['name']} not recorded: {err}", INFO)


def node_kube(kubeconfig: Optional[str], node: str) -> Tuple[Any, Any]:
    """Two API clients: the plugin's own account (Events), and the same token acting as *node*
    (``Impersonate-User: system:node:<node>``, constrained impersonation's associated-node mode)."""
    from ..kube.client import Kube

    class Own(Kube):
        def _headers(self, content_type: str = "application/json") -> Dict[str, str]:
            return dict(super()._headers(content_type), **{"User-Agent": COMPONENT})

    class AsNode(Own):
        def _headers(self, content_type: str = "application/json") -> Dict[str, str]:
            return dict(super()._headers(content_type), **{"Impersonate-User": f"system:node:{node}"})

    return Own(kubeconfig), AsNode(kubeconfig)

