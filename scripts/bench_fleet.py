"""The fleet's figures of `make bench` (scripts/bench.py calls :func:`run`; issue 28).

On the fleet of tests/fleet (support/k8s/fleet.py: a control plane and three nodes, 8 P800, 4
310P, 8 910B, on a pod network) with deploy/labels and deploy/ applied as the fleet tests apply
them (support/k8s/fleetdeploy.py):

- pod start across nodes: pods of one card each (the node's kind) made one at a time, round
  robin over the three nodes, each timed from the API server's ADDED event (a watch) to its
  container started (the node containerd's CRI ``started_at``); p50 and p95 over all of them.
- then node C switched to deploy/dra's driver as an admin does it (the node label
  ``xpu-cdi.io/kubernetes-allocation=dra``, as the fleet's DRA tests do), so that the idle
  minute counts the DRA driver too, beside the device plugin of A and B;
- each daemon's API requests per idle minute: the API server's own audit log (Metadata level,
  the kube-system service accounts only) over a minute in which nothing changes, counted per
  service account and node (the node a pod's token is bound to, ``authentication.kubernetes.io/
  node-name``); a request counts once, in the minute it was received (a watch opened before the
  minute costs nothing in it).  Every DaemonSet of deploy/ runs as its own account
  (``xpu-cdi*``; one that does not stops the bench), so the row sums every daemon on a node, a
  silent one (no token: the device plugin's, the exporter's) as 0.  Target <= 2 per minute per
  node: a watch, not polling; the DRA driver's own count gets a row of its own.

Without root or the builds the rows are left out, saying why.  ``BENCH_FLEET_PODS`` sets the
pods per node (default 10), ``BENCH_FLEET_IDLE`` the idle window in seconds (default 60).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Tuple

from bench_k8s import CriStatus, Watch, p95
from support.k8s import builds, fleetdeploy, nodekit
from support.k8s.fleet import NODES, Fleet
from support.k8s.fleetdeploy import DRA_DS

Rows = List[Tuple[str, str, str]]
TARGET_PER_MINUTE = 2.0
DRA_NODE = NODES[2]  # C, 8 x 910B: served by the DRA driver during the idle minute
OURS = "system:serviceaccount:kube-system:xpu-cdi"  # every DaemonSet of deploy/ runs as its own, named so
NODE_NAME = "authentication.kubernetes.io/node-name"
#: the audit policy: who our daemons are, what they asked, nothing of bodies
AUDIT = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
         "rules": [{"level": "Metadata", "userGroups": ["system:serviceaccounts:kube-system"]}, {"level": "None"}]}


def requests_between(log: Path, start: datetime, end: datetime) -> Dict[Tuple[str, str], List[str]]:
    """(service account, node) -> the ``verb resource`` of each request of ours received in [start, end)."""
    out: Dict[Tuple[str, str], Dict[str, str]] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        user = event.get("user", {})
        if not user.get("username", "").startswith(OURS):
            continue
        received = datetime.fromisoformat(event["requestReceivedTimestamp"])
        if not start <= received < end:
            continue
        node = (user.get("extra", {}).get(NODE_NAME) or ["?"])[0]
        resource = event.get("objectRef", {}).get("resource", "")
        key = (user["username"].rsplit(":", 1)[1], node)
        out.setdefault(key, {})[event["auditID"]] = f"{event['verb']} {resource}"
    return {k: sorted(v.values()) for k, v in out.items()}


def idle_minute(fleet: Fleet, seconds: float) -> Dict[Tuple[str, str], List[str]]:
    """The requests of our daemons over *seconds* in which nothing changes (after 10 s to settle)."""
    time.sleep(10)  # the rollout's last writes (a label, a status) land before the window opens
    start = datetime.now(timezone.utc)
    time.sleep(seconds)  # the measurement itself is a span of wall time
    end = datetime.now(timezone.utc)
    time.sleep(2)  # the audit backend's writes of the window's last requests
    return requests_between(fleet.control.audit_log, start, end)


def daemon_accounts(fleet: Fleet) -> Dict[str, str]:
    """DaemonSet -> the service account its pods run as, for every DaemonSet of ours running: each
    must be its own (``xpu-cdi*``), or its requests would not be counted."""
    out = {ds["metadata"]["name"]: ds["spec"]["template"]["spec"].get("serviceAccountName", "default")
           for ds in fleet.get("daemonsets", "-n", "kube-system")["items"]
           if ds["metadata"]["name"].startswith("xpu-cdi")}
    foreign = {ds: sa for ds, sa in out.items() if not sa.startswith("xpu-cdi")}
    if foreign:
        raise SystemExit(f"bench: fleet: DaemonSets not under an account of their own, not counted: {foreign}")
    return out


def pod_starts(fleet: Fleet, per_node: int) -> Dict[str, List[float]]:
    """Seconds from ADDED to the container started, by node: one pod at a time, round robin."""
    watch = Watch(fleet.control)
    cris = {name: CriStatus(node) for name, node in fleet.nodes.items()}
    out: Dict[str, List[float]] = {s.name: [] for s in NODES}
    try:
        for i in range(per_node + 1):  # the first round warms each node (the image's snapshot, the spec)
            for spec in NODES:
                name = nodekit.unique("fleet-bench")
                pod = nodekit.pod(name, ["sh", "-c", 'trap "exit 0" TERM; sleep 2147483647 & wait'], {spec.kind: 1})
                pod["spec"].update(hostNetwork=False, nodeSelector={"kubernetes.io/hostname": spec.name})
                fleet.apply(pod)
                try:
                    added = watch.added(name, timeout=120)
                    started = fleet.wait(lambda: cris[spec.name].started_at(name), 180,
                                         f"pod {name}'s container running", interval=0.05)
                    if i:
                        out[spec.name].append((started - added) / 1e9)
                finally:
                    nodekit.wait_gone(fleet.control, name)
    finally:
        watch.close()
        for cri in cris.values():
            cri.close()
    return out


def measure(work: Path, per_node: int, idle: float) -> Dict[str, Any]:
    fleet = Fleet(work / "fleet", feature_gates=nodekit.FEATURE_GATES, audit=AUDIT)
    overlays: List[Path] = []
    try:
        fleet.start()
        tag = fleetdeploy.import_image(fleet)
        (work / "fleet-overlays").mkdir()
        overlays.append(work / "fleet-overlays" / "labels")
        fleetdeploy.apply_labels(fleet, tag, work / "fleet-overlays")
        overlays.append(work / "fleet-overlays" / "deploy")
        fleetdeploy.apply_deploy(fleet, tag, work / "fleet-overlays")
        starts = pod_starts(fleet, per_node)
        overlays.append(fleetdeploy.apply_dra(fleet, tag, work / "fleet-overlays"))
        fleetdeploy.serve_by(fleet, (DRA_NODE,), fleetdeploy.DRA)
        accounts = daemon_accounts(fleet)
        requests = idle_minute(fleet, idle)
        return {"cold_start_s": fleet.timings["total"], "idle_s": idle, "accounts": accounts, "dra_node": DRA_NODE.name,
                "idle_requests": {f"{sa}@{node}": v for (sa, node), v in sorted(requests.items())},
                "pod_start_s": starts}
    finally:
        for d in reversed(overlays):
            fleetdeploy.delete(fleet, d)
        fleet.stop()


def rows_of(s: Dict[str, Any]) -> Rows:
    everything = [v for values in s["pod_start_s"].values() for v in values]
    per_node = ", ".join(f"{n.rsplit('-', 1)[1].upper()} {statistics.median(v) * 1e3:.0f}"
                         for n, v in s["pod_start_s"].items())
    rows: Rows = [("Fleet: pod created -> container running, 1 card, 3 nodes",
                   f"p50 {statistics.median(everything) * 1e3:.0f} ms / p95 {p95(everything) * 1e3:.0f} ms",
                   f"{len(everything)} pods one at a time, round robin; medians by node (ms): {per_node}; "
                   f"fleet cold start {s['cold_start_s']:.1f} s")]
    minute = s["idle_s"] / 60
    by_sa: Dict[str, Dict[str, int]] = {sa: {} for sa in s["accounts"].values()}  # a silent daemon counts 0
    for key, reqs in s["idle_requests"].items():
        sa, node = key.split("@")
        by_sa.setdefault(sa, {})[node] = len(reqs)
    per_node = {n.name: sum(c.get(n.name, 0) for c in by_sa.values()) for n in NODES}
    worst = max(per_node.values()) / minute
    verdict = "met" if worst <= TARGET_PER_MINUTE else "missed"
    each = "; ".join(f"{sa}: {', '.join(f'{n}: {c}' for n, c in sorted(counts.items())) or 'none'}"
                     for sa, counts in sorted(by_sa.items()))
    rows.append((f"Fleet idle: API requests per minute per node, every daemon ({len(by_sa)} DaemonSets)",
                 f"**{worst:.1f}**", f"worst node, all daemons summed (node {s['dra_node']} on DRA); in "
                 f"{s['idle_s']:.0f} s (audit log) by account and node: {each}; target <= "
                 f"{TARGET_PER_MINUTE:.0f}: **{verdict}**"))
    dra = s["accounts"][DRA_DS]
    asked = s["idle_requests"].get(f"{dra}@{s['dra_node']}", [])
    rate = len(asked) / minute
    rows.append((f"Fleet idle: DRA driver's API requests per minute, its node ({s['dra_node']}, one pool)",
                 f"**{rate:.1f}**", f"in {s['idle_s']:.0f} s: {', '.join(asked) or 'none'} (its slices' watch, "
                 f"renewed every 5 min); target <= {TARGET_PER_MINUTE:.0f}: "
                 f"**{'met' if rate <= TARGET_PER_MINUTE else 'missed'}**"))
    return rows


def run(work: Path) -> Tuple[Rows, Dict[str, Any]]:
    """The rows and samples of the fleet; ``([], {})``, saying why, where it cannot run."""
    if os.geteuid() != 0:
        print("bench: fleet skipped: needs root", file=sys.stderr)
        return [], {}
    try:
        for c in ("kubernetes", "containerd", "etcd", "kube-proxy"):
            builds.check_go(builds.COMPONENTS[c])
    except builds.Unavailable as err:
        print(f"bench: fleet skipped: {err}", file=sys.stderr)
        return [], {}
    s = measure(work, int(os.environ.get("BENCH_FLEET_PODS", "10")), float(os.environ.get("BENCH_FLEET_IDLE", "60")))
    return rows_of(s), s


if __name__ == "__main__":  # the fleet's rows alone: python scripts/bench_fleet.py
    import tempfile

    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-fleet-") as tmp:
        rows, samples = run(Path(tmp))
    print(json.dumps(samples, indent=1))
    for row in rows:
        print(" | ".join(row))
