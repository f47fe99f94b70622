"""The DRA driver's remediation (`--evict`, docs/dra.md "Remediation") on the session cluster: the real
API server, scheduler, kube-controller-manager's device taint eviction controller and kubelet.

The driver runs as in test_dra_node.py (deploy/dra's service account, its admission policies), with
`--evict kunlunxin.com/xpu:grace=8,hold-down=5`: a card unhealthy for 8 s is tainted NoExecute and
Kubernetes evicts the pods whose claims do not tolerate it; a recovered card stays tainted 5 s more.
A card fails as in test_dra_node.py's `test_card_removed_tainted_and_unhealthy` (its device node
unlinked; that test is the policy off: NoSchedule only, the pod kept). Times are the API server's
own stamps (the taint's timeAdded, the pod's deletionTimestamp), not when a poll saw them.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time
from typing import Any, Dict, List, Optional

import pytest

from support import HANG, fakehost, matrix
from support.dranode import DRIVER, DraDriver, allocated, claim_pod, claim_template
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
GRACE, HOLD_DOWN = 8, 5
DRIVER_ARGS = ("--evict", f"{XPU}:grace={GRACE},hold-down={HOLD_DOWN}")
TAINT = f"{DRIVER}/unhealthy"


def stamp(text: str) -> float:
    """An API server timestamp (RFC 3339, whole seconds) as epoch seconds."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def taint(driver: DraDriver, card: int) -> Dict[str, Any]:
    (t,) = driver.devices().get(str(card), {}).get("taints") or [{}]
    return t


def pod_or_none(cluster: Cluster, name: str) -> Optional[Dict[str, Any]]:
    r = cluster.kubectl("get", "pod", name, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def evicted(cluster: Cluster, name: str) -> Any:
    """The pod's DisruptionTarget condition once it is being deleted (``{}`` when it is gone already),
    else None."""
    p = pod_or_none(cluster, name)
    if p is None:
        return {"gone": True}
    if not p["metadata"].get("deletionTimestamp"):
        return None
    return {c["type"]: c for c in p["status"].get("conditions") or []}.get("DisruptionTarget") or {"no": "condition"}


def events(cluster: Cluster, kind: str, name: str, reason: str, namespace: str = "default") -> List[Dict[str, Any]]:
    return cluster.get("events", "-n", namespace, "--field-selector",
                       f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}")["items"]


def start(cluster: Cluster, pods: List[str], prefix: str, tolerate: bool = False) -> int:
    """A running pod of one card (its claim tolerating the unhealthy taint when *tolerate*); its card."""
    exactly: Dict[str, Any] = {}
    if tolerate:
        exactly["tolerations"] = [{"key": TAINT, "operator": "Exists", "effect": "NoExecute"}]
    name = nodekit.unique(prefix)
    pods.append(name)
    nodekit.run_pod(cluster, claim_pod(name, claim_template(cluster, exactly)))
    (card,) = allocated(cluster, name)
    return card


def fail(cards: Cards, *numbers: int) -> float:
    """The cards' device nodes unlinked (the driver sees it at once: inotify); the wall time."""
    now = time.time()
    for n in numbers:
        cards.host.path(f"/dev/xpu{n}").unlink()
    return now


def heal(cards: Cards, *numbers: int) -> None:
    for n in numbers:
        path = cards.host.path(f"/dev/xpu{n}")
        if not path.exists():
            fakehost.mknod(path, fakehost.XPU_MAJOR, n)


def test_unhealthy_card_evicts_its_pod_a_tolerating_one_stays(cluster: Cluster, driver: DraDriver, cards: Cards,
                                                             pods: List[str]) -> None:
    """Two pods, each on its own card, one claim tolerating the taint; both cards fail at once: the
    taint is NoSchedule until the grace is over, then NoExecute; the other pod is deleted by the
    device taint eviction controller within the grace plus 5 s, never before the grace; the tolerating
    one keeps running. Each decision: an Event on the Node and on both pods, a log line, a count the
    exporter serves. Healed: NoExecute through the hold-down, then untainted and one restore each."""
    plain = start(cluster, pods, "evicted")
    kept = start(cluster, pods, "tolerating", tolerate=True)
    t0 = fail(cards, plain, kept)
    try:
        cond = cluster.wait(lambda: evicted(cluster, pods[0]), HANG, f"{pods[0]} evicted", interval=0.1)
        for card in (plain, kept):
            t = taint(driver, card)
            assert t["key"] == TAINT and t["effect"] == "NoExecute", t
            # the API server's stamp, whole seconds rounded down: not before the grace
            assert stamp(t["timeAdded"]) >= int(t0) + GRACE, (t, t0)
        assert cond.get("reason") == "DeletionByDeviceTaintManager", cond  # the controller, before its delete
        took = stamp(cond["lastTransitionTime"]) - t0
        assert took <= GRACE + 5, f"evicted {took:.1f}s after the card failed (grace {GRACE}s)"
        other = cluster.pod(pods[1])
        assert other["status"]["phase"] == "Running" and not other["metadata"].get("deletionTimestamp"), other
        assert other["status"]["containerStatuses"][0]["restartCount"] == 0
        node_events = events(cluster, "Node", cluster.node_name, "CardUnhealthyEvicting")
        assert {e["message"].partition(": ")[2].split(" ")[0] for e in node_events} >= \
            {f"{XPU}={plain}", f"{XPU}={kept}"}, node_events
        for pod in pods:
            (e,) = events(cluster, "Pod", pod, "CardUnhealthyEvicting")
            assert e["type"] == "Warning" and e["source"]["host"] == cluster.node_name, e
            assert f"held by default/{pod}" in e["message"] and "NoExecute" in e["message"], e
        assert sum(f"evict (unhealthy): {XPU}=" in ln for ln in driver.text().splitlines()) == 2, driver.text()
        cluster.wait(lambda: driver.status().get("evictions") == {"unhealthy": 2}, HANG, "2 evictions counted")
        scrape = exporter_once(cluster, driver, cards)
        assert f'xpu_cdi_evictions_total{{kind="{XPU}",reason="unhealthy"}} 2.0' in scrape, scrape
    finally:
        heal(cards, plain, kept)
    healed = time.monotonic()
    cluster.wait(lambda: not taint(driver, plain) and not taint(driver, kept), HANG, "both untainted", interval=0.05)
    assert time.monotonic() - healed >= HOLD_DOWN - 0.5  # held down, NoExecute still (above) until then
    cluster.wait(lambda: driver.status().get("restores") == {"recovered": 2}, HANG, "2 restores counted")
    assert len(events(cluster, "Node", cluster.node_name, "CardRestored")) >= 2
    (e,) = events(cluster, "Pod", pods[1], "CardRestored")
    assert e["type"] == "Normal", e


def test_a_blip_shorter_than_the_grace_evicts_nothing(cluster: Cluster, driver: DraDriver, cards: Cards,
                                                      pods: List[str]) -> None:
    """A pod's card fails and is back before the grace is over: the taint stays NoSchedule (held down
    for the hold-down, so a flapping card takes no new claims) and goes; the pod never evicted."""
    card = start(cluster, pods, "blip")
    before = driver.status()["evictions"]
    effects = set()

    def seen() -> bool:
        """The driver's status says the card is unhealthy; the taint read after it (the status file is
        written after the slices: the taint is there by then)."""
        if not driver.status().get("unhealthy", {}).get(str(card)):
            return False
        effects.add(taint(driver, card).get("effect"))
        return True

    t0 = time.monotonic()
    fail(cards, card)
    try:
        cluster.wait(seen, HANG, f"card {card} unhealthy in the driver's status", interval=0.02)
    finally:
        heal(cards, card)
    assert time.monotonic() - t0 < GRACE, "the blip lasted the grace: the machine is too slow for this test"

    def untainted() -> bool:
        effects.add(taint(driver, card).get("effect"))
        return not taint(driver, card)

    cluster.wait(untainted, HANG, f"card {card} untainted after the hold-down", interval=0.05)
    assert "NoSchedule" in effects, effects
    assert time.monotonic() - t0 >= HOLD_DOWN - 0.5
    assert "NoExecute" not in effects, effects
    p = cluster.pod(pods[0])
    assert p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp"), p
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    assert not events(cluster, "Pod", pods[0], "CardUnhealthyEvicting")
    cluster.wait(lambda: driver.status().get("restores", {}).get("held-down"), HANG, "the restore counted")
    assert driver.status()["evictions"] == before


def test_extended_resource_pod_evicted_too(cluster: Cluster, driver: DraDriver, cards: Cards,
                                          pods: List[str]) -> None:
    """A pod that asks `limits: {kunlunxin.com/xpu: 1}`, served by DRA through the DeviceClass's
    extendedResourceName (its claim named in the pod's status, not its spec: the gap
    kubernetes#141290 reports for NoExecute): evicted within the grace plus 5 s as well, its Event
    found through the claim's reservedFor."""
    assert cluster.allocatable(XPU) == 0  # no device plugin advertises the resource here
    name = nodekit.unique("extended")
    pods.append(name)
    nodekit.run_card_pod(cluster, name, {XPU: 1})
    status = cluster.pod(name)["status"]["extendedResourceClaimStatus"]
    claim = cluster.get("resourceclaim", status["resourceClaimName"])
    (card,) = [int(r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]]
    t0 = fail(cards, card)
    try:
        cond = cluster.wait(lambda: evicted(cluster, name), HANG, f"{name} evicted", interval=0.1)
        assert cond.get("reason") == "DeletionByDeviceTaintManager", cond
        took = stamp(cond["lastTransitionTime"]) - t0
        assert took <= GRACE + 5, f"evicted {took:.1f}s after the card failed (grace {GRACE}s)"
        assert stamp(taint(driver, card)["timeAdded"]) >= int(t0) + GRACE
        (e,) = events(cluster, "Pod", name, "CardUnhealthyEvicting")
        assert f"held by default/{name}" in e["message"], e
    finally:
        heal(cards, card)
    cluster.wait(lambda: not taint(driver, card), HANG, f"card {card} untainted", interval=0.1)


def exporter_once(cluster: Cluster, driver: DraDriver, cards: Cards) -> str:
    """`xpu-cdi exporter --once` beside the driver (its status file in the driver's run dir): the scrape."""
    r = subprocess.run([matrix.XPU_CDI, "exporter", "--once", *cards.host.cli_roots, "--profile", cards.profile,
                        "--profiles-dir", "/nonexistent", "--spec-dir", str(cluster.cdi_dir),
                        "--status-file", str(driver.run_dir / "exporter.json"),
                        "--pod-resources-socket", "/nonexistent.sock", "--dra-plugins-dir", "/nonexistent"],
                       capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0, r.stderr
    return r.stdout
