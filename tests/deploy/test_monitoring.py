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


def test_pods_evicted_fires_on_the_first_eviction_and_clears(promtool: str, tmp_path: Path) -> None:
    """XpuCdiPodsEvicted: node n1's XPU policy evicts (its series from 0, as the exporter writes it), one
    card emptied at minute 5, a second at minute 7; node n2's NPUs never: it fires at once for n1 only,
    says 2 cards while both are within the 10 minutes, clears after."""
    def evictions(node: str, kind: str, values: str) -> Dict[str, str]:
        return {"series": f'xpu_cdi_evictions_total{{instance="{node}:{PORT}",node="{node}",kind="{kind}",'
                          f'reason="unhealthy"}}', "values": values}

    xpu, npu = "kunlunxin.com/xpu", "huawei.com/npu"
    rule = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
                if r["alert"] == "XpuCdiPodsEvicted")

    def fired(count: str) -> Dict[str, Any]:
        labels = {"alertname": "XpuCdiPodsEvicted", "instance": f"n1:{PORT}", "node": "n1", "kind": xpu,
                  "reason": "unhealthy", "severity": "warning"}
        return {"exp_labels": labels, "exp_annotations": {
            "summary": f"n1: pods evicted from {count} unhealthy {xpu} card(s) in 10 minutes",
            "description": _render(rule["annotations"]["description"], labels)}}

    def at(minutes: int, alerts: List[Dict[str, Any]]) -> Dict[str, Any]:
        return {"eval_time": f"{minutes}m", "alertname": "XpuCdiPodsEvicted", "exp_alerts": alerts}

    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [evictions("n1", xpu, "0x4 1 1 2x30"), evictions("n2", npu, "0x40")],
        "alert_rule_test": [at(4, []), at(5, [fired("1")]), at(10, [fired("2")]), at(25, [])],
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


# --- the other exporters' names (optional recording rules) --------------------------------

COMPAT = MONITORING / "xpu-cdi-compat.rules.yaml"
# what each name is in its own exporter, from its source: mind-cluster's npu-exporter
# (component/npu-exporter/collector/metrics/collector_for_npu.go, collector_for_hbm.go,
# collector_for_ddr.go; its card labels in collector/common/constants.go) and dcgm-exporter's
# etc/default-counters.csv (its labels gpu, UUID, pci_bus_id, modelName, Hostname)
NPU_EXPORTER = {"npu_chip_info_utilization": "%", "npu_chip_info_temperature": "celsius",
                "npu_chip_info_power": "watts", "npu_chip_info_health_status": "1 healthy, 0 not",
                "npu_chip_info_hbm_used_memory": "MB", "npu_chip_info_hbm_total_memory": "MB",
                "npu_chip_info_used_memory": "MB", "npu_chip_info_total_memory": "MB", "machine_npu_nums": "count"}
NPU_LABELS = ("id", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name")
DCGM_EXPORTER = {"DCGM_FI_DEV_GPU_UTIL": "%", "DCGM_FI_DEV_FB_USED": "MiB", "DCGM_FI_DEV_FB_FREE": "MiB",
                 "DCGM_FI_DEV_GPU_TEMP": "C", "DCGM_FI_DEV_POWER_USAGE": "W"}


def _compat_rules() -> List[Dict[str, Any]]:
    return [r for g in yaml.safe_load(COMPAT.read_text())["groups"] for r in g["rules"]]


def test_compat_rules_pass_promtool(promtool: str, tmp_path: Path) -> None:
    """Valid, recording exactly the names above, from names the exporter serves, and optional: the
    alert rules do not need them."""
    shutil.copy(COMPAT, tmp_path / "compat.yaml")
    res = promtool_run(promtool, "check", "rules", "compat.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    rules = _compat_rules()
    assert [r["record"] for r in rules] == list(NPU_EXPORTER) + list(DCGM_EXPORTER)
    used = {n for r in rules for n in re.findall(r"xpu_cdi_\w+", r["expr"])}
    assert used and used <= _exporter_metric_names(), used
    assert not set(re.findall(r"\b(npu_chip_info_\w+|DCGM_FI_\w+|machine_npu_nums)\b", RULES.read_text()))


_NPU0 = {"instance": f"n1:{PORT}", "node": "n1", "kind": "huawei.com/npu", "card": "0", "uuid": "u-0",
         "pci_bus_id": "0000:c1:00.0", "model": "910B3", "namespace": "ml", "pod": "train", "container": "main"}
_NPU1 = dict(_NPU0, card="1", uuid="u-1", pci_bus_id="0000:01:00.0", model="310P3", namespace="", pod="",
             container="")
_XPU3 = {"instance": f"n2:{PORT}", "node": "n2", "kind": "kunlunxin.com/xpu", "card": "3", "uuid": "x-3",
         "pci_bus_id": "0000:3b:00.0", "model": "P800"}


def _series(name: str, labels: Dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if v) + "}"


def _as_npu_exporter(ls: Dict[str, str]) -> Dict[str, str]:
    return dict(ls, id=ls["card"], model_name=ls["model"], vdie_id=ls["uuid"], pcie_bus_info=ls["pci_bus_id"],
                pod_name=ls.get("pod", ""), container_name=ls.get("container", ""))


def _as_dcgm_exporter(ls: Dict[str, str]) -> Dict[str, str]:
    return dict(ls, gpu=ls["card"], UUID=ls["uuid"], modelName=ls["model"], Hostname=ls["node"])


def test_compat_rules_give_their_names_units_and_labels(promtool: str, tmp_path: Path) -> None:
    """promtool's rule unit tests: a 910B held by a pod (its memory is HBM), an idle, unhealthy 310P (DDR),
    both on n1, and a P800 on n2 give each name in its exporter's unit (%, MB) with its label names."""
    gib = 2 ** 30
    readings = {  # card -> (utilisation ratio, °C, W, healthy, used, total)
        "npu0": (_NPU0, 0.75, 50, 90.5, 1, 16 * gib, 64 * gib),
        "npu1": (_NPU1, 0, 40, 8, 0, 1 * gib, 21 * gib),
        "xpu3": (_XPU3, 0.5, 60, 200, 1, 8 * gib, 96 * gib),
    }
    series = []
    for ls, util, temp, watts, healthy, used, total in readings.values():
        for name, value in (("xpu_cdi_card_utilization_ratio", util), ("xpu_cdi_card_temperature_celsius", temp),
                            ("xpu_cdi_card_power_watts", watts), ("xpu_cdi_card_healthy", healthy),
                            ("xpu_cdi_card_memory_used_bytes", used), ("xpu_cdi_card_memory_total_bytes", total)):
            series.append({"series": _series(name, ls), "values": f"{value}x5"})

    def expect(name: str, samples: List[Any]) -> Dict[str, Any]:
        return {"expr": name, "eval_time": "2m",
                "exp_samples": [{"labels": _series(name, ls), "value": v} for ls, v in samples]}

    npu0, npu1 = _as_npu_exporter(_NPU0), _as_npu_exporter(_NPU1)
    d0, d1, d3 = (_as_dcgm_exporter(x) for x in (_NPU0, _NPU1, _XPU3))
    tests = {"rule_files": ["compat.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [
            expect("npu_chip_info_utilization", [(npu0, 75), (npu1, 0)]),  # the XPU is not an NPU
            expect("npu_chip_info_temperature", [(npu0, 50), (npu1, 40)]),
            expect("npu_chip_info_power", [(npu0, 90.5), (npu1, 8)]),
            expect("npu_chip_info_health_status", [(npu0, 1), (npu1, 0)]),
            expect("npu_chip_info_hbm_used_memory", [(npu0, 16 * 1024)]),
            expect("npu_chip_info_hbm_total_memory", [(npu0, 64 * 1024)]),
            expect("npu_chip_info_used_memory", [(npu1, 1024)]),
            expect("npu_chip_info_total_memory", [(npu1, 21 * 1024)]),
            expect("machine_npu_nums", [({"instance": f"n1:{PORT}", "node": "n1"}, 2)]),
            expect("DCGM_FI_DEV_GPU_UTIL", [(d0, 75), (d1, 0), (d3, 50)]),
            expect("DCGM_FI_DEV_FB_USED", [(d0, 16 * 1024), (d1, 1024), (d3, 8 * 1024)]),
            expect("DCGM_FI_DEV_FB_FREE", [(d0, 48 * 1024), (d1, 20 * 1024), (d3, 88 * 1024)]),
            expect("DCGM_FI_DEV_GPU_TEMP", [(d0, 50), (d1, 40), (d3, 60)]),
            expect("DCGM_FI_DEV_POWER_USAGE", [(d0, 90.5), (d1, 8), (d3, 200)]),
        ],
    }]}
    assert {t["expr"] for t in tests["tests"][0]["promql_expr_test"]} == set(NPU_EXPORTER) | set(DCGM_EXPORTER)
    assert set(NPU_LABELS) <= set(npu0)
    shutil.copy(COMPAT, tmp_path / "compat.yaml")
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    res = promtool_run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    # and the test really tests: npu-exporter's utilisation is a percentage, not our ratio
    tests["tests"][0]["promql_expr_test"][0] = expect("npu_chip_info_utilization", [(npu0, 0.75), (npu1, 0)])
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    assert promtool_run(promtool, "test", "rules", "tests.yaml", cwd=tmp_path).returncode != 0


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
