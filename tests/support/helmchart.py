"""The Helm chart, deploy/chart/xpu-cdi, for the tests: the suite's helm (built from its pinned
module, tests/support/k8s/builds.py), ``helm template`` of a set of values, and the values
combinations every test of the chart goes through (tests/deploy/test_chart.py renders and
checks them; tests/k8s/test_helm_node.py sends each to the real API server as a dry run)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml

from support.k8s import builds

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "chart" / "xpu-cdi"
RELEASE = "xpu-cdi"

#: name -> values: each way, both ways per kind, every optional part, another namespace
COMBINATIONS: Dict[str, Dict[str, Any]] = {
    "defaults": {},
    "dra": {"devicePlugin": {"enabled": False}, "dra": {"enabled": True}, "allocation": {"default": "dra"}},
    "per-kind": {"dra": {"enabled": True},
                 "allocation": {"kinds": {"kunlunxin.com/xpu": "dra", "huawei.com/npu": "device-plugin"}}},
    "everything": {"dra": {"enabled": True}, "runtimeWiring": {"enabled": True},
                   "exporter": {"webConfig": {"secretName": "xpu-cdi-exporter-tls"},
                                "networkPolicy": {"enabled": True, "from": [{"namespaceSelector": {"matchLabels": {
                                    "kubernetes.io/metadata.name": "monitoring"}}}]}},
                   "monitoring": {"serviceMonitor": {
                       "enabled": True, "labels": {"release": "prom"}, "scheme": "https",
                       "tlsConfig": {"ca": {"secret": {"name": "xpu-cdi-scrape", "key": "ca.crt"}},
                                     "cert": {"secret": {"name": "xpu-cdi-scrape", "key": "tls.crt"}},
                                     "keySecret": {"name": "xpu-cdi-scrape", "key": "tls.key"}}},
                                  "prometheusRule": {"enabled": True}}},
    "minimal": {"exporter": {"enabled": False}, "runtimeClass": {"enabled": False}},
    "evict": {"devicePlugin": {"evict": ["kunlunxin.com/xpu:grace=30,hold-down=600", "huawei.com/npu"]}},
    "shared": {"devicePlugin": {"resourceNaming": "model", "resourceNames": {"huawei.com/npu": "huawei.com/Ascend910"},
                                "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [
                                    {"name": "kunlunxin.com/xpu", "replicas": 4},
                                    {"name": "huawei.com/Ascend310P", "replicas": 2,
                                     "rename": "huawei.com/310p-shared"}]}}}},
    "elsewhere": {"namespaceOverride": "xpu-cdi-test", "image": {"repository": "registry.example:5000/ai/xpu-cdi",
                                                                 "tag": "0.1.0-custom"},
                  # maps merge with the defaults: null drops a default key
                  "nodeSelector": {"xpu-cdi.io/present": None, "node-role.example/npu": "yes"}, "tolerations": [],
                  "priorityClassName": "system-cluster-critical"},
    # a config per node (NVIDIA's config.map): one given as a mapping, one as YAML text
    "per-node": {"devicePlugin": {"config": {"default": "by-model", "map": {
        "shared-4": {"version": "v1", "sharing": {"timeSlicing": {"resources": [
            {"name": "kunlunxin.com/xpu", "replicas": 4}]}}},
        "by-model": "version: v1\nflags: {resourceNaming: model}\n"}}}},
    # the values users bring from NVIDIA's and HAMi's charts, global and per DaemonSet
    "conventions": {
        "global": {"imageRegistry": "registry.example:5000", "imagePullSecrets": [{"name": "global-cred"}]},
        "image": {"repository": "ai/xpu-cdi"}, "imagePullSecrets": ["regcred", {"name": "global-cred"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["npu-0"]}]}]}}},
        "podAnnotations": {"example.com/team": "ai"}, "podLabels": {"example.com/pool": "npu"},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "20%"}},
        "logLevel": "warning",
        "devicePlugin": {"logLevel": "debug", "extraArgs": ["--health-interval", "5"],
                         "podLabels": {"example.com/pool": "plugin", "app.kubernetes.io/name": "not-ours"},
                         "tolerations": [{"key": "example.com/npu", "operator": "Exists", "effect": "NoSchedule"}]},
        "exporter": {"updateStrategy": {"type": "OnDelete"}, "priorityClassName": "system-cluster-critical",
                     "nodeSelector": {"example.com/metrics": "yes"}, "extraArgs": ["--interval", "5"],
                     "podAnnotations": {"prometheus.io/scrape": "true"},
                     "affinity": {"podAntiAffinity": {}}},
        "dra": {"enabled": True, "logLevel": "info", "extraArgs": ["--share-capacity",
                                                                   "kunlunxin.com/xpu:default=32Gi"],
                "updateStrategy": {}, "deviceClasses": {"mlu.cambricon.com": {"enabled": True}}},
        "labels": {"enabled": True, "tolerations": [], "nodeSelector": {"example.com/labelled": "yes"}},
        "runtimeWiring": {"enabled": True, "priorityClassName": "wiring", "extraArgs": ["--timeout", 120]},
    },
}


def helm() -> str:
    """The suite's helm (built once per pin into the test cache)."""
    return str(builds.ensure_or_skip("helm") / "helm")


def run(*args: str, check: bool = False, input: Optional[str] = None) -> subprocess.CompletedProcess:
    return subprocess.run([helm(), *args], capture_output=True, text=True, check=check, input=input, timeout=120)


def template(values: Dict[str, Any], namespace: str = "kube-system", extra: Sequence[str] = ()) -> \
        subprocess.CompletedProcess:
    """``helm template`` of the chart with *values* (not checked: the schema tests read the error)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(values, f)
        f.flush()
        return run("template", RELEASE, str(CHART), "--namespace", namespace, "--values", f.name, *extra)


def objects(values: Dict[str, Any], namespace: str = "kube-system") -> List[Dict[str, Any]]:
    """The objects the chart renders with *values*."""
    r = template(values, namespace)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def render_deploy() -> Any:
    """scripts/render-deploy.py as a module (it is a script, not a package module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_deploy", REPO / "scripts" / "render-deploy.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules.setdefault("render_deploy", mod)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod
