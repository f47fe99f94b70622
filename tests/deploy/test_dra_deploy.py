"""deploy/dra/: the DRA driver's manifests, field by field against the API's models, and
consistent with the package (a DeviceClass per shipped kind, commands the CLI accepts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from test_deploy import api_problems, cli_accepts
from xpu_cdi.generate import profile as _profile

DRA = Path(__file__).resolve().parents[2] / "deploy" / "dra"
MODELS = {"DaemonSet": "V1DaemonSet", "ServiceAccount": "V1ServiceAccount", "ClusterRole": "V1ClusterRole",
          "ClusterRoleBinding": "V1ClusterRoleBinding", "ConfigMap": "V1ConfigMap",
          "ValidatingAdmissionPolicy": "V1ValidatingAdmissionPolicy",
          "ValidatingAdmissionPolicyBinding": "V1ValidatingAdmissionPolicyBinding", "DeviceClass": "V1DeviceClass"}


def docs() -> List[Dict[str, Any]]:
    out = []
    for name in yaml.safe_load((DRA / "kustomization.yaml").read_text())["resources"]:
        out += [d for d in yaml.safe_load_all((DRA / name).read_text()) if d]
    return out


def one(kind: str, name: str = "") -> Dict[str, Any]:
    (d,) = [d for d in docs() if d["kind"] == kind and name in ("", d["metadata"]["name"])]
    return d


@pytest.mark.parametrize("doc", docs(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_field_is_an_api_field(doc: Dict[str, Any]) -> None:
    assert api_problems(doc, MODELS[doc["kind"]]) == []


def test_a_device_class_per_supported_kind() -> None:
    """deploy/dra: the classes of the vendors xpu-cdi supports; the experimental ones' are the chart's,
    off by default (dra.deviceClasses)."""
    classes = {d["spec"]["extendedResourceName"]: d for d in docs() if d["kind"] == "DeviceClass"}
    kinds = {p.kind: p for p in _profile.load_all().values() if not p.experimental}
    assert set(classes) == set(kinds)
    for kind, d in classes.items():
        vendor, cls = kind.split("/")
        assert d["metadata"]["name"] == f"{cls}.{vendor}"
        assert d["spec"]["selectors"] == [{"cel": {"expression": f'device.driver == "{vendor}"'}}]


def test_daemonset_rolls_with_surge_and_runs_the_driver() -> None:
    ds = one("DaemonSet")
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    spec = ds["spec"]["template"]["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] == "dra-driver"]
    assert c["command"] == ["/usr/bin/xpu-cdi"]
    cli_accepts(c["args"])
    assert c["readinessProbe"]["timeoutSeconds"] >= 5  # a Python start; kubelet's 1 s fails on a busy node
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "POD_UID": "metadata.uid"}
    writable = {m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/run/xpu-cdi",
                        "/var/run/cdi"}  # the last for claim-scoped specs (shares, vNPUs)
    assert spec["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]
    cfg = yaml.safe_load(one("ConfigMap", "xpu-cdi-dra-node-config")["data"]["config.yaml"])
    # the node label alone chooses the way (docs/dra.md): a `dra` here kept the plugin off the node after a switch back
    assert cfg == {"accept-env-selection-when-unprivileged": False}


def test_driver_config_file_is_the_defaults_mounted_where_args_say() -> None:
    """The driver's config file (dra.remediation): `{}` (no eviction: today's NoSchedule taint only),
    mounted read-only outside the host's /etc/xpu-cdi, named by --config; its checksum rolls the pods."""
    ds = one("DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] == "dra-driver"]
    path = c["args"][c["args"].index("--config") + 1]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "dra-driver-config"]
    assert path == mount["mountPath"] + "/config.yaml" and mount["readOnly"]
    assert not mount["mountPath"].startswith("/etc/xpu-cdi/")
    (vol,) = [v for v in spec["volumes"] if v["name"] == "dra-driver-config"]
    cm = one("ConfigMap", vol["configMap"]["name"])
    assert yaml.safe_load(cm["data"]["config.yaml"]) == {}
    assert ds["spec"]["template"]["metadata"]["annotations"]["xpu-cdi.io/dra-driver-config"]


def test_rbac_is_what_the_driver_calls() -> None:
    rules = {(g, r): set(rule["verbs"]) for rule in one("ClusterRole")["rules"] for g in rule["apiGroups"]
             for r in rule["resources"]}
    assert rules[("resource.k8s.io", "resourceslices")] >= {"list", "watch", "create", "update", "delete"}
    assert rules[("resource.k8s.io", "resourceclaims")] == {"get", "list", "watch"}
    assert rules[("", "nodes")] == {"get"} and rules[("", "events")] == {"create"}  # Kube.event: a POST
    # training domains (dra/domain.py): the member facts by server-side apply of the status, the pod read
    assert rules[("resource.k8s.io", "resourceclaims/status")] == {"patch"}
    assert rules[("resource.k8s.io", "resourceclaims/driver")] == {"associated-node:patch"}  # never arbitrary-node
    assert rules[("", "pods")] == {"get"}
    (driver_rule,) = [r for r in one("ClusterRole")["rules"] if r["resources"] == ["resourceclaims/driver"]]
    classes = sorted(d["spec"]["selectors"][0]["cel"]["expression"].split('"')[1] for d in docs()
                     if d["kind"] == "DeviceClass")
    assert driver_rule["resourceNames"] == sorted(set(classes))  # its own drivers' entries only


def test_admission_policies_bind_the_node_to_the_slice_and_events() -> None:
    """One policy per resource the driver writes, each bound, each reading the node its token names
    (tests/k8s/test_policies_node.py shows what they refuse)."""
    policies = {d["metadata"]["name"]: d for d in docs() if d["kind"] == "ValidatingAdmissionPolicy"}
    bound = {d["spec"]["policyName"] for d in docs() if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert sorted(policies) == sorted(bound) == ["xpu-cdi-dra-driver-claim-status",
                                                 "xpu-cdi-dra-driver-own-node-events",
                                                 "xpu-cdi-dra-driver-own-node-slices"]
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    rules = {r for rule in one("ClusterRole")["rules"] for r in rule["resources"] if writes & set(rule["verbs"])}
    covered = {r for p in policies.values() for rule in p["spec"]["matchConstraints"]["resourceRules"]
               for r in rule["resources"]}
    assert rules <= covered, rules - covered  # every resource the role lets it write is under a policy
    for vap in policies.values():
        assert "authentication.kubernetes.io/node-name" in vap["spec"]["variables"][0]["expression"]
        assert "system:serviceaccount:kube-system:xpu-cdi-dra-driver" in vap["spec"]["matchConditions"][0]["expression"]


def test_the_slice_policy_names_the_charts_drivers() -> None:
    (vap,) = [d for d in docs() if d["kind"] == "ValidatingAdmissionPolicy"
              and d["metadata"]["name"] == "xpu-cdi-dra-driver-own-node-slices"]
    (drivers,) = [v["expression"] for v in vap["spec"]["variables"] if v["name"] == "drivers"]
    classes = sorted(d["spec"]["selectors"][0]["cel"]["expression"].split('"')[1] for d in docs()
                     if d["kind"] == "DeviceClass")
    assert sorted(yaml.safe_load(drivers)) == classes
