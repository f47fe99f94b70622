"""deploy/exporter.yaml and deploy/monitoring/: the exporter's DaemonSet and Service, the
ServiceMonitor, the plain scrape config, the alert rules and the Grafana dashboard.

The manifests are checked against the Kubernetes API models (as test_deploy.py
does); the scrape config and the rules by Prometheus's own ``promtool``
(``check config``, ``check rules``, and ``test rules``: each alert fires on the
series it is about and stays quiet otherwise); the dashboard's queries by
promtool too, and against the metric names the exporter really serves.

promtool is upstream's, built from its Go module with the fleet's Prometheus
(support/k8s/builds.py): Debian 13's ``prometheus`` package has none, and
Debian 12's refuses ``kubernetes_sd_configs`` (built without that discovery).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from test_deploy import DEPLOY, api_problems, cli_accepts, docs

from support.k8s import builds

MONITORING = DEPLOY / "monitoring"
PORT = 28470


def exporter_docs() -> Dict[str, Dict[str, Any]]:
    return {d["kind"]: d for d in docs("exporter.yaml")}


@pytest.fixture(scope="module")
def promtool() -> str:
    """Upstream's promtool, of the pinned Prometheus the fleet runs (built once into the test cache)."""
    return str(builds.ensure_or_skip("prometheus") / "promtool")


def promtool_run(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


# --- exporter.yaml -----------------------------------------------------------------

class TestExporterManifest:
    def test_api_fields(self) -> None:
        d = exporter_docs()
        assert api_problems(d["DaemonSet"], "V1DaemonSet") == []
        assert api_problems(d["Service"], "V1Service") == []

    def test_in_the_kustomization(self) -> None:
        (k,) = docs("kustomization.yaml")
        assert "exporter.yaml" in k["resources"]

    def test_command_mounts_and_network(self) -> None:
        """`xpu-cdi exporter` on the spec dir the xpu-cdi DaemonSet writes, its port named metrics,
        no host network, kubelet's pod-resources dir and the status dir mounted where the defaults
        point, every host path read-only but the status dir."""
        ds = exporter_docs()["DaemonSet"]
        spec = ds["spec"]["template"]["spec"]
        assert spec["hostNetwork"] is False and spec["automountServiceAccountToken"] is False
        (c,) = spec["containers"]
        assert c["command"] == ["/usr/bin/xpu-cdi"] and c["args"][0] == "exporter"
        params = cli_accepts(c["args"]).params
        assert params["spec_dirs"] == ("/var/run/cdi",) and params["listen"].endswith(f":{PORT}")
        (port,) = c["ports"]
        assert (port["name"], port["containerPort"]) == ("metrics", PORT)
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert os.path.dirname(params["pod_resources_socket"]) in mounts
        assert os.path.dirname(params["status_file"]) in mounts
        for path, m in mounts.items():
            assert volumes[m["name"]]["hostPath"]["path"] == path
            assert m.get("readOnly", False) == (path != os.path.dirname(params["status_file"])), path
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        for probe in ("livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}

    def test_service_finds_the_pods(self) -> None:
        d = exporter_docs()
        svc, ds = d["Service"], d["DaemonSet"]
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
        (port,) = svc["spec"]["ports"]
        assert (port["name"], port["port"], port["targetPort"]) == ("metrics", PORT, "metrics")


# --- ServiceMonitor, scrape config --------------------------------------------------

def test_servicemonitor_selects_the_service() -> None:
    (sm,) = docs("monitoring/servicemonitor.yaml")
    svc = exporter_docs()["Service"]
    assert (sm["apiVersion"], sm["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert svc["metadata"]["namespace"] in sm["spec"]["namespaceSelector"]["matchNames"]
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] == "metrics" and ep["path"] == "/metrics" and ep["honorLabels"] is True
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in ep["relabelings"]


# kubernetes_sd_configs fields and roles (Prometheus's configuration reference)
K8S_SD_FIELDS = {"role", "namespaces", "selectors", "api_server", "kubeconfig_file", "attach_metadata",
                 "basic_auth", "authorization", "oauth2", "tls_config", "proxy_url", "follow_redirects"}
K8S_SD_ROLES = {"node", "service", "pod", "endpoints", "endpointslice", "ingress"}


def test_scrape_config_is_valid_and_keeps_the_service(promtool: str, tmp_path: Path) -> None:
    """promtool checks the job as shipped (its Kubernetes discovery included), and again with a
    static target, the relabelling it keeps the exporter's Service by, and a broken copy."""
    cfg = yaml.safe_load((MONITORING / "prometheus-scrape-config.yaml").read_text())
    (job,) = cfg["scrape_configs"]
    keep = next(r for r in job["relabel_configs"]
                if r["source_labels"] == ["__meta_kubernetes_service_label_app_kubernetes_io_name"])
    assert re.fullmatch(keep["regex"], exporter_docs()["Service"]["metadata"]["labels"]["app.kubernetes.io/name"])
    (sd,) = job["kubernetes_sd_configs"]
    assert set(sd) <= K8S_SD_FIELDS and sd["role"] in K8S_SD_ROLES
    assert sd["namespaces"]["names"] == [exporter_docs()["Service"]["metadata"]["namespace"]]
    shipped = promtool_run(promtool, "check", "config", str(MONITORING / "prometheus-scrape-config.yaml"), cwd=tmp_path)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    static = {k: v for k, v in job.items() if k != "kubernetes_sd_configs"}
    static["static_configs"] = [{"targets": [f"127.0.0.1:{PORT}"]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": [static]}))
    res = promtool_run(promtool, "check", "config", "prometheus.yml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    bad = dict(static, relabel_configs=[dict(keep, action="kep")])  # the checker really checks
    (tmp_path / "bad.yml").write_text(yaml.safe_dump({"scrape_configs": [bad]}))
    assert promtool_run(promtool, "check", "config", "bad.yml", cwd=tmp_path).returncode != 0


# --- alert rules ---------------------------------------------------------------------

RULES = MONITORING / "xpu-cdi.rules.yaml"


def test_rules_pass_promtool(promtool: str, tmp_path: Path) -> None:
    shutil.copy(RULES, tmp_path / "rules.yaml")
    res = promtool_run(promtool, "check", "rules", "rules.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    names = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert {"XpuCdiCardHot", "XpuCdiCardMemoryFull", "XpuCdiCardStuck", "XpuCdiCardAllocatedIdle"} <= set(names)


def _card(metric: str, card: str, pod: str = "") -> str:
    extra = f',namespace="ml",pod="{pod}",container="main"' if pod else ""
    return f'{metric}{{instance="n1:{PORT}",node="n1",kind="kunlunxin.com/xpu",card="{card}"{extra}}}'


def test_each_alert_fires_on_its_case_only(promtool: str, tmp_path: Path) -> None:
    """promtool's rule unit tests: card 0 is hot, card 1 nearly full, card 2 holds memory but computes
    nothing (stuck, and allocated and idle), card 3 is allocated, busy and fine."""
    gib = 2 ** 30
    series = [
        (_card("xpu_cdi_card_temperature_celsius", "0"), "90x60"),
        (_card("xpu_cdi_card_temperature_celsius", "3", "busy"), "70x60"),
        (_card("xpu_cdi_card_memory_used_bytes", "1"), f"{int(0.95 * 64 * gib)}x60"),
        (_card("xpu_cdi_card_memory_total_bytes", "1"), f"{64 * gib}x60"),
        (_card("xpu_cdi_card_utilization_ratio", "1"), "0.5x60"),
        (_card("xpu_cdi_card_memory_used_bytes", "2", "idle"), f"{8 * gib}x60"),
        (_card("xpu_cdi_card_memory_total_bytes", "2", "idle"), f"{64 * gib}x60"),
        (_card("xpu_cdi_card_utilization_ratio", "2", "idle"), "0x60"),
        (_card("xpu_cdi_card_allocated", "2", "idle"), "1x60"),
        (_card("xpu_cdi_card_memory_used_bytes", "3", "busy"), f"{8 * gib}x60"),
        (_card("xpu_cdi_card_memory_total_bytes", "3", "busy"), f"{64 * gib}x60"),
        (_card("xpu_cdi_card_utilization_ratio", "3", "busy"), "0.8x60"),
        (_card("xpu_cdi_card_allocated", "3", "busy"), "1x60"),
    ]
    labels = {"instance": f"n1:{PORT}", "node": "n1", "kind": "kunlunxin.com/xpu"}

    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}

    def alert(name: str, card: str, pod: str = "", summary: str = "", **extra: str) -> Dict[str, Any]:
        ls = dict(labels, alertname=name, card=card, **extra)
        if pod:
            ls.update(namespace="ml", pod=pod, container="main")
        return {"exp_labels": ls, "exp_annotations": {"summary": summary,
                                                      "description": _render(rules[name]["annotations"]["description"],
                                                                             ls)}}

    def at(minutes: int, name: str, alerts: List[Dict[str, Any]]) -> Dict[str, Any]:
        return {"eval_time": f"{minutes}m", "alertname": name, "exp_alerts": alerts}

    sev = {"XpuCdiCardHot": "warning", "XpuCdiCardMemoryFull": "warning", "XpuCdiCardStuck": "warning",
           "XpuCdiCardAllocatedIdle": "info"}
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series],
        "alert_rule_test": [
            at(4, "XpuCdiCardHot", []),  # not yet: `for: 5m`
            at(10, "XpuCdiCardHot", [alert("XpuCdiCardHot", "0", summary="kunlunxin.com/xpu card 0 on n1 is at 90 °C",
                                           severity=sev["XpuCdiCardHot"])]),
            at(15, "XpuCdiCardMemoryFull", [alert("XpuCdiCardMemoryFull", "1", summary="kunlunxin.com/xpu card 1 on "
                                                  "n1 uses 95% of its memory", severity="warning")]),
            at(35, "XpuCdiCardStuck", [alert("XpuCdiCardStuck", "2", "idle", summary="kunlunxin.com/xpu card 2 on n1 "
                                             "holds memory but has computed nothing for 30 minutes",
                                             severity="warning")]),
            at(25, "XpuCdiCardStuck", []),
            at(25, "XpuCdiCardAllocatedIdle", []),
            at(35, "XpuCdiCardAllocatedIdle", [alert("XpuCdiCardAllocatedIdle", "2", "idle", summary="ml/idle holds "
                                                     "kunlunxin.com/xpu card 2 on n1 but has not used it for 30 "
                                                     "minutes", severity="info")]),
        ],
    }]}
    shutil.copy(RULES, tmp_path / "rules.yaml")
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    res = promtool_run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    # and the test really tests: expecting the busy card idle fails
    tests["tests"][0]["alert_rule_test"][-1]["exp_alerts"].append(
        alert("XpuCdiCardAllocatedIdle", "3", "busy", summary="ml/busy holds kunlunxin.com/xpu card 3 on n1 but has "
                                                             "not used it for 30 minutes", severity="info"))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    assert promtool_run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path).returncode != 0


def test_a_lost_card_fires_on_its_node_and_kind(promtool: str, tmp_path: Path) -> None:
    """promtool's rule unit tests for XpuCdiCardLost: node n1's card 3 of four XPUs goes at minute
    10 (its series end, as when `watch` rewrites it out of the spec), node n1's only NPU at minute
    20 (no series of that kind left, the exporter still answering); node n2's four XPUs stay, and
    its exporter's scrape fails from minute 30 (every series gone: XpuCdiExporterSourceDown's and
    `up`'s case, not a lost card)."""
    def healthy(node: str, kind: str, card: int, values: str) -> Dict[str, str]:
        return {"series": f'xpu_cdi_card_healthy{{instance="{node}:{PORT}",node="{node}",kind="{kind}",'
                          f'card="{card}"}}', "values": values}

    xpu, npu = "kunlunxin.com/xpu", "huawei.com/npu"
    series = [healthy("n1", xpu, c, "1x80" if c < 3 else "1x10 stale") for c in range(4)]
    series += [healthy("n1", npu, 0, "1x20 stale")]
    series += [healthy("n2", xpu, c, "1x30 stale") for c in range(4)]
    series += [{"series": f'xpu_cdi_exporter_source_up{{instance="n1:{PORT}",node="n1",source="podresources"}}',
                "values": "1x80"},
               {"series": f'xpu_cdi_exporter_source_up{{instance="n2:{PORT}",node="n2",source="podresources"}}',
                "values": "1x30 stale"}]
    rule = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
                if r["alert"] == "XpuCdiCardLost")

    def lost(kind: str, count: int) -> Dict[str, Any]:
        labels = {"alertname": "XpuCdiCardLost", "node": "n1", "kind": kind, "severity": "critical"}
        return {"exp_labels": labels, "exp_annotations": {
            "summary": f"n1 has {count} {kind} cards, fewer than in the last hour",
            "description": _render(rule["annotations"]["description"], labels)}}

    def at(minutes: int, alerts: List[Dict[str, Any]]) -> Dict[str, Any]:
        return {"eval_time": f"{minutes}m", "alertname": "XpuCdiCardLost", "exp_alerts": alerts}

    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [at(9, []), at(13, []),  # `for: 5m`
                            at(17, [lost(xpu, 3)]),
                            at(27, [lost(xpu, 3), lost(npu, 0)]),
                            at(45, [lost(xpu, 3), lost(npu, 0)])],  # n2 silent: no alert of it
    }]}
    shutil.copy(RULES, tmp_path / "rules.yaml")
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    res = promtool_run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def _render(template: str, labels: Dict[str, str]) -> str:
    """The descriptions' only template constructs: {{ with $labels.pod }}...{{ . }}...{{ end }}, $labels.x."""
    def with_block(m: "re.Match[str]") -> str:
        value = labels.get(m.group(1), "")
        return m.group(2).replace("{{ . }}", value) if value else ""
    text = re.sub(r"\{\{ with \$labels\.(\w+) \}\}(.*?)\{\{ end \}\}", with_block, template)
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)


# --- Grafana dashboard ------------------------------------------------------------------

DASHBOARD = MONITORING / "grafana-dashboard.json"


def _exporter_metric_names() -> set:
    from xpu_cdi.exporter import metrics

    return {n for n, _u, _d in metrics.READINGS.values()} | {metrics.HEALTHY, metrics.ALLOCATED, metrics.SOURCE_UP,
                                                             metrics.SOURCE_DURATION}


def test_dashboard_structure() -> None:
    dash = json.loads(DASHBOARD.read_text())
    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "node", "kind", "card"} <= variables
    titles = " ".join(p["title"].lower() for p in panels)
    for word in ("utilisation", "memory", "temperature", "power", "allocated"):
        assert word in titles, word
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for t in p.get("targets", []):
            used = set(re.findall(r"xpu_cdi_\w+", t["expr"]))
            assert used and used <= _exporter_metric_names(), (p["title"], used)
            assert set(re.findall(r"\$(\w+)", t["expr"])) <= variables, p["title"]
            assert t["datasource"]["uid"] == "${datasource}"


def test_dashboard_queries_parse(promtool: str, tmp_path: Path) -> None:
    """Every query (template variables as `.*`) is valid PromQL: promtool checks it as a recording rule."""
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"].split("(", 1)[1].rsplit(",", 1)[0] for v in dash["templating"]["list"]
              if v["type"] == "query"]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:q{i}", "expr": re.sub(r"\$\w+", ".*", e)} for i, e in enumerate(exprs)]}]}
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(rules))
    res = promtool_run(promtool, "check", "rules", "q.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
