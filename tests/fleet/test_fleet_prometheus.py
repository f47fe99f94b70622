"""A real Prometheus on the fleet (issue 28, item 5), run as a process in the control plane's
network namespace, with deploy/monitoring's scrape job (Kubernetes service discovery through the
fleet's API server) and rules.  Upstream's, built from its Go module at the release
tests/support/k8s/go/prometheus pins with only the Kubernetes discovery plugin: Debian's package
is built without Kubernetes service discovery (its config parser rejects
``kubernetes_sd_configs``).  It must find the three exporter pods and
scrape them on their pod IPs, load the rules, fire XpuCdiCardUnhealthy for a card with its node's
and its own labels, and show the allocated cards under the pod that holds them.

What the test changes of deploy/monitoring, and why: the intervals (1 s scrapes and evaluations,
the unhealthy rule's ``for:`` 10 s instead of 5 min, so that the bound "within ``for:`` plus two
scrape intervals" is checked in seconds), and where the API server is and the client certificate
(Prometheus runs outside the cluster here, not as a pod with a service account).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import yaml
from support import fakehost
from support.k8s import builds, fleetdeploy, nodekit
from support.k8s.cluster import Daemon
from support.k8s.fleet import NODES, Fleet

pytestmark = [pytest.mark.privileged]
MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
A, B, C = NODES
JOB = "xpu-cdi-exporter"
SCRAPE = 1.0  # seconds: scrape and evaluation interval
FOR = 10  # seconds: XpuCdiCardUnhealthy's and XpuCdiCardLost's for: in the test's copy of the rules
LOST = "XpuCdiCardLost"
EXPORTER_INTERVAL = 1.0  # the exporters' --interval (conftest.py's overlay)


def config(fleet: Fleet, d: Path) -> Path:
    """prometheus.yml: deploy/monitoring's job and rules, the test's intervals, the API server."""
    (job,) = yaml.safe_load((MONITORING / "prometheus-scrape-config.yaml").read_text())["scrape_configs"]
    job.update(scrape_interval=f"{SCRAPE:g}s", scrape_timeout=f"{SCRAPE:g}s")
    pki = fleet.control.pki
    for sd in job["kubernetes_sd_configs"]:
        sd["api_server"] = fleet.control.api_server
        sd["tls_config"] = {"ca_file": str(pki.ca.cert), "cert_file": str(pki.dir / "admin.crt"),
                            "key_file": str(pki.dir / "admin.key")}
    rules = yaml.safe_load((MONITORING / "xpu-cdi.rules.yaml").read_text())
    for rule in (r for g in rules["groups"] for r in g["rules"] if r["alert"] in ("XpuCdiCardUnhealthy", LOST)):
        rule["for"] = f"{FOR}s"
    (d / "rules.yaml").write_text(yaml.safe_dump(rules))
    cfg = d / "prometheus.yml"
    cfg.write_text(yaml.safe_dump({"global": {"scrape_interval": f"{SCRAPE:g}s", "evaluation_interval": f"{SCRAPE:g}s"},
                                   "rule_files": [str(d / "rules.yaml")], "scrape_configs": [job]}))
    return cfg


class Prometheus:
    """The server, a daemon of the control plane (its cgroup: gone with the fleet whatever happens)."""

    def __init__(self, fleet: Fleet, bin_dir: Path, d: Path) -> None:
        self.fleet = fleet
        cfg = config(fleet, d)
        r = fleet.control.run_on_node([str(bin_dir / "promtool"), "check", "config", str(cfg)], mount=False)
        assert r.returncode == 0, r.stdout + r.stderr
        self.daemon: Daemon = fleet.control.start_daemon("prometheus", [
            str(bin_dir / "prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={d / 'data'}",
            "--web.listen-address=127.0.0.1:9090", "--log.level=info"])
        fleet.wait(lambda: self.daemon.alive() and self.get("/-/ready", raw=True) is not None, 120,
                   "Prometheus ready", interval=0.5)

    def get(self, path: str, raw: bool = False, **params: str) -> Any:
        """GET *path* of its HTTP API from the control plane's namespace; parsed ``data`` (None
        while it does not answer)."""
        url = "http://127.0.0.1:9090" + path + ("?" + urllib.parse.urlencode(params) if params else "")
        code = ("import sys, urllib.request\ntry:\n    print(urllib.request.urlopen(sys.argv[1], timeout=5)"
                ".read().decode())\nexcept OSError as e:\n    sys.exit(str(e))")
        r = self.fleet.control.run_on_node([sys.executable, "-c", code, url], mount=False, timeout=30)
        if r.returncode != 0:
            return None
        return r.stdout if raw else json.loads(r.stdout)["data"]

    def query(self, expr: str) -> List[Dict[str, Any]]:
        return self.get("/api/v1/query", query=expr)["result"]

    def stop(self) -> None:
        self.daemon.stop()


@pytest.fixture(scope="module")
def prometheus(fleet: Fleet, deployed: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    p = Prometheus(fleet, builds.ensure_or_skip("prometheus"), tmp_path_factory.mktemp("prometheus"))
    try:
        yield p
    finally:
        p.stop()
        print(f"Prometheus's log:\n{p.daemon.tail(4000)}")


def exporter_pods(fleet: Fleet) -> Dict[str, str]:
    """node -> its exporter pod's IP."""
    pods = fleet.get("pods", "-n", "kube-system", "-l", "app.kubernetes.io/name=xpu-cdi-exporter")["items"]
    return {p["spec"]["nodeName"]: p["status"]["podIP"] for p in pods}


def test_the_rules_load(fleet: Fleet, prometheus: Prometheus) -> None:
    """Every rule of deploy/monitoring loaded and, once evaluated, healthy (its query runs)."""
    def evaluated() -> Any:
        rules = {r["name"]: r for g in prometheus.get("/api/v1/rules")["groups"] for r in g["rules"]}
        return rules if rules and all(r["health"] != "unknown" for r in rules.values()) else None

    rules = fleet.wait(evaluated, 60, "the rules evaluated", interval=1)
    want = {r["alert"] for g in yaml.safe_load((MONITORING / "xpu-cdi.rules.yaml").read_text())["groups"]
            for r in g["rules"]}
    assert want and set(rules) == want, (sorted(rules), sorted(want))
    assert all(r["health"] == "ok" for r in rules.values()), rules


def test_three_exporters_discovered_and_scraped_on_their_pod_ips(fleet: Fleet, prometheus: Prometheus) -> None:
    ips = exporter_pods(fleet)
    assert sorted(ips) == sorted(s.name for s in NODES)
    for ip in ips.values():  # pod IPs of the pod network, not node addresses
        assert ip.startswith("10.252."), ips

    def targets() -> Any:
        active = [t for t in prometheus.get("/api/v1/targets")["activeTargets"] if t["labels"]["job"] == JOB]
        return active if len(active) == 3 and all(t["health"] == "up" for t in active) else None

    active = fleet.wait(targets, 120, "three exporter targets up", interval=1)
    got = {t["labels"]["node"]: urllib.parse.urlparse(t["scrapeUrl"]).hostname for t in active}
    assert got == ips, (got, ips)
    series = prometheus.query("count by (node) (xpu_cdi_card_healthy)")
    assert {s["metric"]["node"]: s["value"][1] for s in series} == {s.name: str(s.cards) for s in NODES}, series


def test_allocated_series_name_the_pod_on_its_node(fleet: Fleet, prometheus: Prometheus) -> None:
    """A pod holding two NPUs on node C: xpu_cdi_card_allocated is 1 for two cards, all of node C,
    each naming the pod, its namespace and container."""
    name = nodekit.unique("holder")
    pod = nodekit.pod(name, ["sh", "-c", "exec sleep 2147483647"], {nodekit.NPU: 2})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": C.name}
    fleet.apply(pod)
    try:
        fleet.control.wait_pod_phase(name, "Running", 180)
        series = fleet.wait(lambda: (lambda r: r if len(r) == 2 else None)(
            prometheus.query(f'xpu_cdi_card_allocated{{pod="{name}"}} == 1')), 60, "two allocated series", interval=1)
        assert {(s["metric"]["node"], s["metric"]["namespace"], s["metric"]["container"]) for s in series} == \
            {(C.name, "default", "c")}, series
        assert len({s["metric"]["card"] for s in series}) == 2
        others = prometheus.query(f'xpu_cdi_card_allocated{{pod="{name}", node!="{C.name}"}}')
        assert others == [], others
    finally:
        nodekit.wait_gone(fleet.control, name)


def firing(prometheus: Prometheus, alert: str = "XpuCdiCardUnhealthy") -> List[Dict[str, Any]]:
    return [a for a in prometheus.get("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == alert and a["state"] == "firing"]


def active_at(alert: Dict[str, Any]) -> float:
    """The alert's activeAt (when it went pending) as a Unix time."""
    stamp = alert["activeAt"].rstrip("Z")
    whole, _, frac = stamp.partition(".")
    return datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp() + \
        float(f"0.{frac or 0}")


def test_an_unhealthy_card_fires_its_alert_with_its_node_and_card(fleet: Fleet, prometheus: Prometheus) -> None:
    """Card 5 of node A: its driver reports state ERROR (Kunlunxin's per-card state file, which the
    device plugin and the exporter read): XpuCdiCardUnhealthy goes pending within two scrape
    intervals and an exporter pass of the change, fires for: later, with node A and card 5; the
    state back to RUNNING, the alert goes.  (Not a card of node B: an Ascend NPU has no driver
    state file, and a node that vanishes or is renumbered is rewritten out of the spec by `watch`
    on the uevent, so its healthy series goes rather than staying at 0: the next test.)"""
    state = fleet.hosts[A.name].path("/proc/xpu/dev5/state")
    fleet.wait(lambda: prometheus.query(f'xpu_cdi_card_healthy{{node="{A.name}", card="5"}} == 1'), 60,
               "A's card 5 scraped healthy", interval=1)
    assert firing(prometheus) == []
    t0 = time.time()
    fakehost.write(state, "ERROR\n")
    try:
        alerts = fleet.wait(lambda: firing(prometheus), FOR + 60, "XpuCdiCardUnhealthy firing", interval=0.5)
        took = time.time() - t0
        pending_after = active_at(alerts[0]) - t0
        print(f"card unhealthy -> alert pending {pending_after:.1f} s, firing seen {took:.1f} s "
              f"(for: {FOR} s, scrape {SCRAPE:g} s, exporter pass {EXPORTER_INTERVAL:g} s)")
        assert [(a["labels"]["node"], a["labels"]["card"], a["labels"]["kind"]) for a in alerts] == \
            [(A.name, "5", nodekit.XPU)], alerts
        assert pending_after <= 2 * SCRAPE + EXPORTER_INTERVAL, pending_after
    finally:
        fakehost.write(state, "RUNNING\n")
    fleet.wait(lambda: not firing(prometheus), 60, "the alert resolved", interval=0.5)


def test_a_lost_npu_fires_its_alert_with_its_node_and_kind(fleet: Fleet, prometheus: Prometheus) -> None:
    """NPU 3 of node B disappears (its /dev/davinci3 gone, as when the chip falls off the bus):
    `watch` rewrites it out of the spec, so its series go rather than turn 0 and
    XpuCdiCardUnhealthy cannot fire; XpuCdiCardLost does, for node B and huawei.com/npu with 3
    cards, and no other node.  The node back: the alert resolves, B offers its four NPUs again.
    (A host's kernel tells `watch` with a remove uevent; a node's network namespace gets no
    uevents, so the test sends `watch` the SIGHUP that makes it refresh the same way.)"""
    host = fleet.hosts[B.name]
    node, away = host.path("/dev/davinci3"), host.root / "davinci3.away"
    watch = fleetdeploy.daemon_pids(fleet, "xpu-cdi")[B.name]["watch"]
    count = f'count by (node, kind) (xpu_cdi_card_healthy{{node="{B.name}"}})'
    fleet.wait(lambda: [s["value"][1] for s in prometheus.query(count)] == [str(B.cards)], 60,
               "B's four NPUs scraped", interval=1)
    assert firing(prometheus, LOST) == []
    t0 = time.time()
    os.rename(node, away)
    try:
        os.kill(watch, signal.SIGHUP)
        alerts = fleet.wait(lambda: firing(prometheus, LOST), FOR + 60, f"{LOST} firing", interval=0.5)
        print(f"NPU gone -> {LOST} pending {active_at(alerts[0]) - t0:.1f} s, firing seen {time.time() - t0:.1f} s "
              f"(for: {FOR} s, watch's debounce 2 s)")
        assert [(a["labels"]["node"], a["labels"]["kind"], a["labels"]["severity"]) for a in alerts] == \
            [(B.name, nodekit.NPU, "critical")], alerts
        assert alerts[0]["annotations"]["summary"] == \
            f"{B.name} has 3 {nodekit.NPU} cards, fewer than in the last hour", alerts
        assert prometheus.query(f'xpu_cdi_card_healthy{{node="{B.name}", card="3"}}') == []  # gone, not 0
    finally:
        os.rename(away, node)
        os.kill(watch, signal.SIGHUP)
    fleet.wait(lambda: not firing(prometheus, LOST), 60, f"{LOST} resolved", interval=0.5)
    fleet.nodes[B.name].wait_allocatable(nodekit.NPU, B.cards, timeout=60)
