"""The Helm chart, deploy/chart/xpu-cdi: `helm lint` clean, the kustomize trees of deploy/ the same
bytes as scripts/render-deploy.py renders from it, every values combination of
support.helmchart.COMBINATIONS rendered into API objects whose fields are the API's, the schema
and the chart's own checks refusing wrong values with a line naming them, and the values reaching
the objects (namespace, image, scheduling, the node config's allocation).  The same combinations go
to the real API server as a dry run in tests/k8s/test_helm_node.py."""

from __future__ import annotations

import tempfile
from typing import Any, Dict, List

import pytest
import yaml

from support import helmchart
from test_deploy import api_problems, cli_accepts
from test_dra_deploy import MODELS as DRA_MODELS
from xpu_cdi import nodeconfig
from xpu_cdi.deviceplugin import config as dpconfig
from xpu_cdi._version import VERSION

MODELS = dict(DRA_MODELS, Service="V1Service", RuntimeClass="V1RuntimeClass", NetworkPolicy="V1NetworkPolicy")
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}  # the Prometheus operator's, no model in the client


def by_kind(objs: List[Dict[str, Any]], kind: str) -> List[Dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def node_config(objs: List[Dict[str, Any]], name: str) -> nodeconfig.NodeConfig:
    (cm,) = [o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"] == name]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(cm["data"]["config.yaml"])
        f.flush()
        return nodeconfig.read(f.name)


@pytest.mark.parametrize("name", helmchart.COMBINATIONS)
def test_lint_clean(name: str) -> None:
    """`helm lint --strict` (warnings fail too) with each combination's values."""
    import json

    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(helmchart.COMBINATIONS[name], f)
        f.flush()
        r = helmchart.run("lint", "--strict", str(helmchart.CHART), "--values", f.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in r.stdout
    assert not [ln for ln in r.stdout.splitlines() if ln.startswith(("[WARNING]", "[ERROR]"))], r.stdout


def test_rendered_trees_are_the_chart() -> None:
    """deploy/, deploy/dra/, deploy/runtime-wiring/, deploy/monitoring/: byte for byte what
    scripts/render-deploy.py renders now (edit the chart, then run the script)."""
    rd = helmchart.render_deploy()
    files = rd.render(helmchart.helm())
    assert len(files) >= 10
    stale = [str(p.relative_to(helmchart.REPO)) for p, text in files.items()
             if not p.is_file() or p.read_text() != text]
    assert stale == [], f"{stale}: run scripts/render-deploy.py"
    # and the kustomizations list exactly the rendered files (and what is not the chart's)
    for tree in rd.TREES:
        k = yaml.safe_load((helmchart.REPO / tree / "kustomization.yaml").read_text()) \
            if (helmchart.REPO / tree / "kustomization.yaml").is_file() else None
        if k is not None:
            rendered = {name for _, name in rd.TREES[tree][1]}
            listed = set(k.get("resources", [])) | {p["path"] for p in k.get("patches", [])}
            assert listed == rendered, (tree, listed ^ rendered)


@pytest.mark.parametrize("name", helmchart.COMBINATIONS)
def test_every_field_is_an_api_field(name: str) -> None:
    objs = helmchart.objects(helmchart.COMBINATIONS[name])
    assert objs
    for o in objs:
        if o["kind"] in OPERATOR_KINDS:
            assert o["apiVersion"] == "monitoring.coreos.com/v1" and o["spec"]
            continue
        assert api_problems(o, MODELS[o["kind"]]) == [], (o["kind"], o["metadata"]["name"])


def test_what_each_combination_renders() -> None:
    """The parts follow their switches: the device plugin's DaemonSet, the DRA driver's with its
    RBAC and classes, the exporter, the wiring, the operator's objects."""
    def kinds(name: str) -> Dict[str, List[str]]:
        out: Dict[str, List[str]] = {}
        for o in helmchart.objects(helmchart.COMBINATIONS[name]):
            out.setdefault(o["kind"], []).append(o["metadata"]["name"])
        return out

    assert sorted(kinds("defaults")["DaemonSet"]) == ["xpu-cdi", "xpu-cdi-exporter"]
    dra = kinds("dra")
    assert sorted(dra["DaemonSet"]) == ["xpu-cdi-dra-driver", "xpu-cdi-exporter"]
    assert sorted(dra["DeviceClass"]) == ["npu.huawei.com", "xpu.kunlunxin.com"]  # experimental vendors' off
    assert "ValidatingAdmissionPolicy" in dra and "RuntimeClass" in dra
    every = kinds("everything")
    assert sorted(every["DaemonSet"]) == ["xpu-cdi", "xpu-cdi-dra-driver", "xpu-cdi-exporter",
                                          "xpu-cdi-runtime-wiring"]
    assert every["ServiceMonitor"] == ["xpu-cdi-exporter"] and every["PrometheusRule"] == ["xpu-cdi"]
    minimal = kinds("minimal")
    assert minimal["DaemonSet"] == ["xpu-cdi"] and "Service" not in minimal and "RuntimeClass" not in minimal


def test_allocation_reaches_the_node_config() -> None:
    """allocation.kinds is the node config's per-kind mapping on every DaemonSet's nodes; when
    allocation names no way, neither DaemonSet's node config names one (the node label alone
    chooses: a node that started on DRA can switch back) and both write the same file."""
    per_kind = helmchart.objects(helmchart.COMBINATIONS["per-kind"])
    want = {"kunlunxin.com/xpu": "dra", "huawei.com/npu": "device-plugin"}
    for cm in ("xpu-cdi-node-config", "xpu-cdi-dra-node-config"):
        cfg = node_config(per_kind, cm)
        assert cfg.accept_env_selection_when_unprivileged is False
        assert {k: nodeconfig.way_for(cfg, k) for k in want} == want
    both = helmchart.objects({"dra": {"enabled": True}})
    assert nodeconfig.way_for(node_config(both, "xpu-cdi-node-config"), "kunlunxin.com/xpu") is None
    assert nodeconfig.way_for(node_config(both, "xpu-cdi-dra-node-config"), "kunlunxin.com/xpu") is None
    texts = {o["metadata"]["name"]: o["data"]["config.yaml"] for o in by_kind(both, "ConfigMap")}
    assert texts["xpu-cdi-node-config"] == texts["xpu-cdi-dra-node-config"]
    wired = node_config(helmchart.objects({"runtimeWiring": {"enabled": True}}), "xpu-cdi-node-config")
    assert (wired.configure_containerd, wired.restart_containerd) == (True, True)


def test_values_reach_the_objects() -> None:
    """Another namespace everywhere a namespace is named (objects, the DRA user the admission policy
    matches, the binding's subject, the ServiceMonitor's selector); image, nodeSelector, tolerations,
    priority class and resources."""
    ns = "xpu-ns"
    objs = helmchart.objects(dict(helmchart.COMBINATIONS["everything"], image={"repository": "reg.example/x/xpu-cdi"},
                                  resources={"watch": {"requests": {"cpu": "50m"}}}), namespace=ns)
    namespaced = [o for o in objs if o["kind"] in ("DaemonSet", "Service", "ConfigMap", "ServiceAccount",
                                                   "ServiceMonitor", "PrometheusRule")]
    assert namespaced and {o["metadata"]["namespace"] for o in namespaced} == {ns}
    vaps = by_kind(objs, "ValidatingAdmissionPolicy")
    assert len(vaps) == 3  # the driver's slices, events and claim status
    for vap in vaps:
        assert f"system:serviceaccount:{ns}:xpu-cdi-dra-driver" in vap["spec"]["matchConditions"][0]["expression"]
    (crb,) = by_kind(objs, "ClusterRoleBinding")
    assert crb["subjects"][0]["namespace"] == ns
    (sm,) = by_kind(objs, "ServiceMonitor")
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [ns] and sm["metadata"]["labels"]["release"] == "prom"
    for ds in by_kind(objs, "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        for c in spec.get("initContainers", []) + spec["containers"]:
            assert c["image"] == f"reg.example/x/xpu-cdi:{VERSION}"
            if c["name"] == "watch":
                assert c["resources"]["requests"]["cpu"] == "50m"  # merged into the defaults
    other = helmchart.objects(helmchart.COMBINATIONS["elsewhere"])
    for ds in by_kind(other, "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        assert spec["nodeSelector"] == {"node-role.example/npu": "yes"} and spec["tolerations"] == []
        assert spec["priorityClassName"] == "system-cluster-critical"
        assert ds["metadata"]["namespace"] == "xpu-cdi-test"
        assert {c["image"] for c in spec["containers"]} == {"registry.example:5000/ai/xpu-cdi:0.1.0-custom"}


def test_secure_metrics_reach_the_exporter_and_the_service_monitor() -> None:
    """exporter.webConfig: the Secret mounted read-only, --web-config-file naming its key, probes on
    the port (kubelet has no client certificate); the ServiceMonitor scrapes https with its
    tlsConfig; the NetworkPolicy lets only the named peers reach the metrics port."""
    objs = helmchart.objects(helmchart.COMBINATIONS["everything"])
    (ds,) = [d for d in by_kind(objs, "DaemonSet") if d["metadata"]["name"] == "xpu-cdi-exporter"]
    spec = ds["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["args"][-2:] == ["--web-config-file", "/etc/xpu-cdi/web/web-config.yml"]
    assert {"name": "web-config", "mountPath": "/etc/xpu-cdi/web", "readOnly": True} in c["volumeMounts"]
    assert {"name": "web-config", "secret": {"secretName": "xpu-cdi-exporter-tls", "defaultMode": 0o400}} in \
        spec["volumes"]
    assert c["livenessProbe"]["tcpSocket"] == {"port": "metrics"} and "httpGet" not in c["readinessProbe"]
    (sm,) = by_kind(objs, "ServiceMonitor")
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"]["keySecret"]["key"] == "tls.key"
    (np,) = by_kind(objs, "NetworkPolicy")
    assert np["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "xpu-cdi-exporter"}
    (rule,) = np["spec"]["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    plain = helmchart.objects({})  # the defaults: plain HTTP, /healthz probes, no policy
    (ds,) = [d for d in by_kind(plain, "DaemonSet") if d["metadata"]["name"] == "xpu-cdi-exporter"]
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert "--web-config-file" not in c["args"] and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert by_kind(plain, "NetworkPolicy") == []


def test_share_capacity_reaches_the_driver() -> None:
    """dra.shareCapacity becomes the driver's --share-capacity flags (which it accepts); the exporter
    reads the drivers' checkpoints (kubelet's plugins dir, read-only)."""
    share = "kunlunxin.com/xpu:default=32Gi,step=32Gi,memory=96Gi"
    values = dict(helmchart.COMBINATIONS["everything"], dra={"enabled": True, "shareCapacity": [share]})
    containers = {c["name"]: c for ds in by_kind(helmchart.objects(values), "DaemonSet")
                  for c in ds["spec"]["template"]["spec"]["containers"]}
    assert containers["dra-driver"]["args"][-2:] == ["--share-capacity", share]
    cli_accepts(containers["dra-driver"]["args"])
    mounts = {m["mountPath"]: m for m in containers["exporter"]["volumeMounts"]}
    assert mounts["/var/lib/kubelet/plugins"].get("readOnly") is True


def test_remediation_reaches_the_drivers_config_file(tmp_path) -> None:
    """dra.remediation is the driver's config file (the ConfigMap it reads through --config), read as the
    driver reads it; the pods' checksum annotation follows it, so a change rolls them."""
    from xpu_cdi.dra import config as draconfig
    from xpu_cdi.remedy import Policy

    def driver(values: Dict[str, Any]) -> Any:
        objs = helmchart.objects(dict(helmchart.COMBINATIONS["everything"], dra=dict(values, enabled=True)))
        (cm,) = [o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"] == "xpu-cdi-dra-driver"]
        (ds,) = [o for o in by_kind(objs, "DaemonSet") if o["metadata"]["name"] == "xpu-cdi-dra-driver"]
        f = tmp_path / "config.yaml"
        f.write_text(cm["data"]["config.yaml"])
        return draconfig.read_config(str(f), True), ds["spec"]["template"]["metadata"]["annotations"]

    off, off_pod = driver({})
    on, on_pod = driver({"remediation": {"kunlunxin.com/xpu": {"grace": 20, "holdDown": 120},
                                         "huawei.com/npu": {}}})
    assert off == {}
    assert on == {"kunlunxin.com/xpu": Policy(True, 20.0, 120.0), "huawei.com/npu": Policy(True)}
    key = "xpu-cdi.io/dra-driver-config"
    assert off_pod[key] != on_pod[key]


def plugin_config(objs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The device plugin's settings from the chart's config file, as the plugin reads them."""
    (cm,) = [o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"] == "xpu-cdi-device-plugin"]
    warned: List[str] = []  # the chart writes the shape of now: no deprecation line
    got = dpconfig.from_mapping(yaml.safe_load(cm["data"]["config.yaml"]), "the chart's config file", warned.append)
    assert warned == []
    return got


def plugin_pod(objs: List[Dict[str, Any]]) -> Dict[str, Any]:
    (ds,) = [o for o in by_kind(objs, "DaemonSet") if o["metadata"]["name"] == "xpu-cdi"]
    return ds["spec"]["template"]


def test_device_plugin_values_reach_its_config_file() -> None:
    """devicePlugin.resourceNaming, .resourceNames and .sharing are the plugin's config file (the
    ConfigMap it reads through --config, mounted where the flag says); the defaults are the plugin's
    (an empty file); the pods' checksum annotation follows the file, so a change rolls them."""
    defaults, shared = helmchart.objects({}), helmchart.objects(helmchart.COMBINATIONS["shared"])
    assert plugin_config(defaults) == {}
    got = plugin_config(shared)
    assert got["resource_naming"] == "model"
    assert got["resource_names"] == {"huawei.com/npu": "huawei.com/Ascend910"}
    ts = got["sharing"]
    assert [(r.name, r.replicas, r.rename, r.fail_requests_greater_than_one) for r in ts.resources] == [
        ("kunlunxin.com/xpu", 4, None, True), ("huawei.com/Ascend310P", 2, "huawei.com/310p-shared", True)]
    pod = plugin_pod(shared)
    (dp,) = [c for c in pod["spec"]["containers"] if c["name"] == "device-plugin"]
    config = dp["args"][dp["args"].index("--config") + 1]
    (mount,) = [m for m in dp["volumeMounts"] if m["name"] == "device-plugin-config"]
    (vol,) = [v for v in pod["spec"]["volumes"] if v["name"] == "device-plugin-config"]
    assert config == f"{mount['mountPath']}/config.yaml" and vol["configMap"]["name"] == "xpu-cdi-device-plugin"
    key = "xpu-cdi.io/device-plugin-config"
    sums = {plugin_pod(objs)["metadata"]["annotations"][key] for objs in (defaults, shared, helmchart.objects(
        {"devicePlugin": {"resourceNaming": "model"}}))}
    assert len(sums) == 3
    assert plugin_pod(helmchart.objects({"image": {"tag": "other"}}))["metadata"]["annotations"][key] == \
        plugin_pod(defaults)["metadata"]["annotations"][key]


def test_time_slicing_schema_is_the_plugins() -> None:
    """values.schema.json checks devicePlugin.sharing.timeSlicing with schemas/sharing.schema.json's rules
    (scripts/render-deploy.py copies them): what the plugin refuses, the chart refuses before install."""
    import json

    chart = json.loads((helmchart.CHART / "values.schema.json").read_text())
    part = chart["properties"]["devicePlugin"]["properties"]["sharing"]["properties"]["timeSlicing"]
    plugin = json.loads((helmchart.REPO / "schemas" / "sharing.schema.json").read_text())
    assert part["properties"]["resources"]["items"]["properties"]["replicas"] == \
        plugin["properties"]["timeSlicing"]["properties"]["resources"]["items"]["properties"]["replicas"]
    assert "$ref" not in json.dumps(part)


def test_prometheusrule_is_the_rules_file() -> None:
    objs = helmchart.objects(helmchart.COMBINATIONS["everything"])
    (rule,) = by_kind(objs, "PrometheusRule")
    rules = yaml.safe_load((helmchart.REPO / "deploy" / "monitoring" / "xpu-cdi.rules.yaml").read_text())
    assert rule["spec"] == rules and rules["groups"][0]["rules"]


@pytest.mark.parametrize("values, says", [
    ({"logLevel": "trace"}, "/logLevel"),
    ({"devicePlugin": {"logLevel": "verbose"}}, "/devicePlugin/logLevel"),
    ({"updateStrategy": {"type": "Recreate"}}, "/updateStrategy/type"),
    ({"exporter": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "a lot"}}}},
     "/exporter/updateStrategy/rollingUpdate/maxUnavailable"),
    ({"imagePullSecrets": [{"secret": "regcred"}]}, "/imagePullSecrets/0"),
    ({"global": {"imageRegistry": "https://registry.example"}}, "/global/imageRegistry"),
    ({"affinity": {"nodeAfinity": {}}}, "additional properties 'nodeAfinity'"),
    ({"devicePlugin": {"podAnnotation": {"a": "b"}}}, "additional properties 'podAnnotation'"),
    ({"podLabels": {"pool": 1}}, "/podLabels/pool"),
    ({"exporter": {"extraArgs": {"--interval": 5}}}, "/exporter/extraArgs"),
    ({"runtimeWiring": {"logLevel": "debug"}}, "additional properties 'logLevel'"),
    ({"labels": {"enabled": True, "priorityClassName": "Not A Name"}}, "/labels/priorityClassName"),
    # the list of earlier releases: now a map by class name, each with its enabled
    ({"dra": {"deviceClasses": [{"name": "xpu.kunlunxin.com", "driver": "kunlunxin.com"}]}}, "/dra/deviceClasses"),
    ({"dra": {"deviceClasses": {"xpu.kunlunxin.com": {"enabled": "yes"}}}},
     "/dra/deviceClasses/xpu.kunlunxin.com/enabled"),
    ({"allocation": {"default": "gpu-operator"}}, "/allocation/default"),
    ({"allocation": {"kinds": {"kunlunxin.com/xpu": "both"}}}, "/allocation/kinds/kunlunxin.com~1xpu"),
    ({"allocation": {"kinds": {"not a kind": "dra"}}}, "at '/allocation/kinds': additional properties 'not a kind'"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"image": {"repository": ""}}, "/image/repository"),
    ({"exporter": {"port": 70000}}, "/exporter/port"),
    ({"exporter": {"enable": True}}, "enable"),
    ({"tolerations": [{"key": "x", "operator": "Maybe"}]}, "/tolerations/0/operator"),
    ({"resources": {"watch": {"request": {"cpu": "1"}}}}, "request"),
    ({"namespaceOverride": "Kube_System"}, "/namespaceOverride"),
    ({"devicePlugin": {"sharing": {"timeSlicing": {"resources": [{"name": "kunlunxin.com/xpu", "replicas": 1}]}}}},
     "/devicePlugin/sharing/timeSlicing/resources/0/replicas"),
    ({"devicePlugin": {"sharing": {"timeSlicing": {"replicas": 4}}}}, "/devicePlugin/sharing/timeSlicing"),
    ({"devicePlugin": {"sharing": {"vnpu": {"templates": ["vir02"]}}}}, "additional properties 'vnpu'"),
    ({"devicePlugin": {"resourceNaming": "vendor"}}, "/devicePlugin/resourceNaming"),
    ({"devicePlugin": {"resourceNames": {"huawei.com/npu": "Ascend910"}}},
     "/devicePlugin/resourceNames/huawei.com~1npu"),
    ({"sharing": {"timeSlicing": {"resources": [{"name": "kunlunxin.com/xpu", "replicas": 4}]}}},
     "additional properties 'sharing'"),
    ({"devicePlugins": {"enabled": False}}, "devicePlugins"),
    # a config's name is a node label's value: 63 characters, alphanumerics at both ends
    ({"devicePlugin": {"config": {"map": {"-shared": {}}}}}, "'-shared' does not match pattern"),
    ({"devicePlugin": {"config": {"map": {"a": 4}}}}, "/devicePlugin/config/map/a"),
    ({"devicePlugin": {"config": {"default": "x" * 64}}}, "/devicePlugin/config/default"),
    ({"dra": {"shareCapacity": ["kunlunxin.com/xpu:step=1Gi"]}}, "/dra/shareCapacity/0"),
    ({"dra": {"remediation": {"kunlunxin.com/xpu": {"grace": -1}}}}, "/dra/remediation/kunlunxin.com~1xpu/grace"),
    ({"dra": {"remediation": {"kunlunxin.com/xpu": {"hold-down": 5}}}}, "additional properties 'hold-down'"),
    ({"dra": {"remediation": {"xpu": {}}}}, "'xpu' does not match pattern"),
    # the device plugin keeps off the nodes labelled for DRA: the driver must select that label
    ({"dra": {"nodeSelector": {"xpu-cdi.io/kubernetes-allocation": "yes"}}},
     "/dra/nodeSelector/xpu-cdi.io~1kubernetes-allocation"),
    ({"dra": {"nodeSelector": {"xpu-cdi.io/kubernetes-allocation": None, "pool": "training"}}},
     "xpu-cdi.io/kubernetes-allocation"),
    # an ingress rule without peers lets every source in: the policy must name who scrapes
    ({"exporter": {"networkPolicy": {"enabled": True}}}, "/exporter/networkPolicy"),
    ({"exporter": {"networkPolicy": {"enabled": True, "from": []}}}, "/exporter/networkPolicy/from"),
    ({"monitoring": {"serviceMonitor": {"scheme": "HTTPS"}}}, "/monitoring/serviceMonitor/scheme"),
    ({"exporter": {"webConfig": {"secretName": "Bad_Name"}}}, "/exporter/webConfig/secretName"),
])
def test_schema_refuses_bad_values(values: Dict[str, Any], says: str) -> None:
    """values.schema.json: a wrong value fails the render with the path of the value."""
    r = helmchart.template(values)
    assert r.returncode != 0 and r.stdout == ""
    assert "values don't meet the specifications of the schema" in r.stderr and says in r.stderr, r.stderr


@pytest.mark.parametrize("values, says", [
    ({"allocation": {"default": "dra", "kinds": {"huawei.com/npu": "dra"}}, "dra": {"enabled": True}},
     "allocation: set default (one way for every kind) or kinds (a way per kind), not both"),
    ({"allocation": {"kinds": {"huawei.com/npu": "dra"}}},
     "allocation.kinds gives huawei.com/npu to dra, but dra.enabled is false"),
    ({"allocation": {"default": "dra"}}, "allocation.default is dra, but dra.enabled is false"),
    ({"devicePlugin": {"enabled": False}, "allocation": {"kinds": {"huawei.com/npu": "device-plugin"}},
      "dra": {"enabled": True}}, "allocation.kinds gives huawei.com/npu to device-plugin"),
    ({"devicePlugin": {"sharing": {"timeSlicing": {"resources": [{"name": "kunlunxin.com/xpu", "replicas": 4},
                                                                 {"name": "kunlunxin.com/xpu", "replicas": 2}]}}}},
     "devicePlugin.sharing.timeSlicing.resources names kunlunxin.com/xpu twice"),
    ({"devicePlugin": {"enabled": False, "resourceNaming": "model"}, "dra": {"enabled": True}},
     "devicePlugin.sharing, .resourceNames and .resourceNaming are the device plugin's settings, but "
     "devicePlugin.enabled is false"),
    ({"exporter": {"enabled": False}, "monitoring": {"serviceMonitor": {"enabled": True}}},
     "monitoring.serviceMonitor.enabled needs exporter.enabled"),
    ({"devicePlugin": {"config": {"map": {"shared-4": {}}, "default": "shared4"}}},
     "devicePlugin.config.default is shared4, which devicePlugin.config.map does not name: give one of shared-4, "
     "or default"),
])
def test_chart_refuses_what_the_schema_cannot_see(values: Dict[str, Any], says: str) -> None:
    """Checks across values (and the reserved shapes): one line saying what to change."""
    r = helmchart.template(values)
    assert r.returncode != 0 and says in r.stderr, r.stderr


def test_chart_version_is_the_package_version() -> None:
    """The chart's version and appVersion (the image tag by default) are the package's."""
    chart = yaml.safe_load((helmchart.CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)


def pods(objs: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """DaemonSet name -> the DaemonSet."""
    return {ds["metadata"]["name"]: ds for ds in by_kind(objs, "DaemonSet")}


def test_the_users_pod_values_reach_every_daemonset() -> None:
    """The values NVIDIA's and HAMi's charts have (helmchart.COMBINATIONS["conventions"]), global and per
    DaemonSet, each where it belongs: a DaemonSet's own value over the global one, our selector labels
    and checksum over the user's, the DRA keep-off appended to each of the user's required node terms,
    the log level to every daemon, extra args to the component's daemon (which the CLI accepts)."""
    ds = pods(helmchart.objects(helmchart.COMBINATIONS["conventions"]))
    assert sorted(ds) == ["xpu-cdi", "xpu-cdi-dra-driver", "xpu-cdi-exporter", "xpu-cdi-labeller",
                          "xpu-cdi-runtime-wiring"]
    keep_off = {"key": "xpu-cdi.io/kubernetes-allocation", "operator": "NotIn", "values": ["dra"]}
    containers = {}
    for name, d in ds.items():
        spec, meta = d["spec"]["template"]["spec"], d["spec"]["template"]["metadata"]
        # global.imagePullSecrets and imagePullSecrets (a name alone or {name}), each once
        assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "global-cred"}], name
        for c in spec.get("initContainers", []) + spec["containers"]:
            assert c["image"] == f"registry.example:5000/ai/xpu-cdi:{VERSION}", name
            containers[c["name"]] = c
        assert meta["labels"]["app.kubernetes.io/name"] == d["spec"]["selector"]["matchLabels"][
            "app.kubernetes.io/name"]
        assert meta["annotations"]["example.com/team"] == "ai", name
        assert meta["labels"]["example.com/pool"] == ("plugin" if name == "xpu-cdi" else "npu"), name
    plugin, exporter = ds["xpu-cdi"]["spec"], ds["xpu-cdi-exporter"]["spec"]
    terms = plugin["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}, keep_off]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["npu-0"]}],
         "matchExpressions": [keep_off]}]
    assert "xpu-cdi.io/device-plugin-config" in plugin["template"]["metadata"]["annotations"]
    assert plugin["template"]["spec"]["tolerations"] == [
        {"key": "example.com/npu", "operator": "Exists", "effect": "NoSchedule"}]
    assert plugin["template"]["spec"]["nodeSelector"] == {"xpu-cdi.io/present": "true"}  # the global one
    assert plugin["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "20%"}}
    assert exporter["updateStrategy"] == {"type": "OnDelete"}
    assert exporter["template"]["spec"]["affinity"] == {"podAntiAffinity": {}}
    assert exporter["template"]["spec"]["nodeSelector"] == {"example.com/metrics": "yes"}
    assert exporter["template"]["spec"]["priorityClassName"] == "system-cluster-critical"
    assert exporter["template"]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert plugin["template"]["spec"]["priorityClassName"] == "system-node-critical"
    dra, labeller = ds["xpu-cdi-dra-driver"]["spec"], ds["xpu-cdi-labeller"]["spec"]
    assert dra["template"]["spec"]["nodeSelector"]["xpu-cdi.io/kubernetes-allocation"] == "dra"  # its own
    assert dra["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": "20%"}  # the global one
    # a map merges with the default, as Helm merges values (null drops a key)
    assert labeller["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux", "example.com/labelled": "yes"}
    assert labeller["template"]["spec"]["tolerations"] == []
    assert ds["xpu-cdi-runtime-wiring"]["spec"]["template"]["spec"]["priorityClassName"] == "wiring"

    def level(c: Dict[str, Any]) -> str:
        return c["args"][c["args"].index("--log-level") + 1]

    assert {n: level(containers[n]) for n in ("device-plugin", "exporter", "dra-driver", "labeller")} == {
        "device-plugin": "debug", "exporter": "warning", "dra-driver": "info", "labeller": "warning"}
    assert containers["device-plugin"]["args"][-2:] == ["--health-interval", "5"]
    assert containers["exporter"]["args"][-2:] == ["--interval", "5"]
    assert containers["dra-driver"]["args"][-2:] == ["--share-capacity", "kunlunxin.com/xpu:default=32Gi"]
    assert containers["wire-runtime"]["args"][-2:] == ["--timeout", "120"]
    assert "--log-level" not in containers["wire-runtime"]["args"]  # `host wire-runtime` has none
    for c in containers.values():
        if c["command"] == ["/usr/bin/xpu-cdi"]:
            cli_accepts(c["args"])


def test_the_defaults_render_no_new_field() -> None:
    """Without the new values the pods are as before: no pull secrets, annotations or log level, each
    DaemonSet's own update strategy, the device plugin's one required term keeping off DRA nodes."""
    ds = pods(helmchart.objects(helmchart.COMBINATIONS["everything"]))
    for name, d in ds.items():
        spec = d["spec"]["template"]["spec"]
        assert "imagePullSecrets" not in spec and all("--log-level" not in c.get("args", [])
                                                       for c in spec["containers"]), name
    assert ds["xpu-cdi-dra-driver"]["spec"]["updateStrategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert ds["xpu-cdi"]["spec"]["template"]["spec"]["affinity"] == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "xpu-cdi.io/kubernetes-allocation", "operator": "NotIn", "values": ["dra"]}]}]}}}
    assert set(ds["xpu-cdi"]["spec"]["template"]["metadata"]["annotations"]) == {"xpu-cdi.io/device-plugin-config"}


def test_device_classes_for_the_enabled_kinds() -> None:
    """A DeviceClass per enabled kind: Kunlunxin's and Ascend's by default; an experimental vendor's once
    enabled; all of them the shipped profiles' kinds; a class turned off is gone."""
    from xpu_cdi.generate import profile as _profile

    def classes(dc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
        objs = helmchart.objects({"dra": {"enabled": True, "deviceClasses": dc}})
        return {o["metadata"]["name"]: o["spec"] for o in by_kind(objs, "DeviceClass")}

    profiles = _profile.load_all().values()
    stable = {p.kind for p in profiles if not p.experimental}
    assert {c["extendedResourceName"] for c in classes({}).values()} == stable
    more = classes({"mlu.cambricon.com": {"enabled": True}, "npu.huawei.com": {"enabled": False}})
    assert sorted(more) == ["mlu.cambricon.com", "xpu.kunlunxin.com"]
    assert more["mlu.cambricon.com"]["selectors"] == [{"cel": {"expression": 'device.driver == "cambricon.com"'}}]
    values = yaml.safe_load((helmchart.CHART / "values.yaml").read_text())
    every = classes({name: {"enabled": True} for name in values["dra"]["deviceClasses"]})
    assert {c["extendedResourceName"] for c in every.values()} == {p.kind for p in profiles}


@pytest.mark.parametrize("kube, values, says", [
    ("1.28", {"dra": {"enabled": True}}, "dra.enabled needs Kubernetes 1.34 or later"),
    ("1.33.5", {"dra": {"enabled": True}, "devicePlugin": {"enabled": False}},
     "dra.enabled needs Kubernetes 1.34 or later"),
    ("1.29", {"labels": {"enabled": True}}, "labels.enabled needs Kubernetes 1.30 or later"),
    ("1.27", {}, "chart requires kubeVersion: >=1.28.0-0"),
])
def test_older_kubernetes_refused_in_one_line(kube: str, values: Dict[str, Any], says: str) -> None:
    """Below what a part needs, `helm template --kube-version` fails with one line saying what to do."""
    r = helmchart.template(values, extra=["--kube-version", kube])
    assert r.returncode != 0 and r.stdout == "", r.stderr
    (error,) = [ln for ln in r.stderr.splitlines() if ln.startswith("Error:")]  # helm adds a --debug hint
    assert says in error, r.stderr


def test_kubernetes_1_28_renders_the_device_plugin_path() -> None:
    """`helm template --kube-version 1.28` of the defaults: the device plugin and the exporter, no DRA
    object; DRA and the labeller render from their own minimum versions."""
    r = helmchart.template({}, extra=["--kube-version", "1.28"])
    assert r.returncode == 0, r.stderr
    objs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert sorted(pods(objs)) == ["xpu-cdi", "xpu-cdi-exporter"]
    assert not [o for o in objs if o["apiVersion"].startswith(("resource.k8s.io", "admissionregistration"))]
    assert helmchart.template({"labels": {"enabled": True}}, extra=["--kube-version", "1.30"]).returncode == 0
    assert helmchart.template({"dra": {"enabled": True}}, extra=["--kube-version", "1.34.0"]).returncode == 0


def configs_map(objs: List[Dict[str, Any]]) -> Dict[str, str]:
    (cm,) = [o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"] == "xpu-cdi-device-plugin-configs"]
    return cm["data"]


def test_a_config_per_node() -> None:
    """devicePlugin.config.map: a ConfigMap of named configs (each one the plugin reads; "default" the
    chart's own settings unless the map has it), the device-plugin-config init container and sidecar
    writing the chosen one where the plugin's --config points (an emptyDir then), their own account's
    token mounted in them alone, and a role to read Nodes; the checksum follows the map.  Without the
    map, none of it."""
    values = helmchart.COMBINATIONS["per-node"]
    objs = helmchart.objects(values)
    data = configs_map(objs)
    assert sorted(data) == ["by-model", "default", "shared-4"]
    read = {name: dpconfig.from_mapping(yaml.safe_load(text), name) for name, text in data.items()}
    assert read["default"] == {} and read["by-model"]["resource_naming"] == "model"
    assert read["shared-4"]["sharing"].resources[0].replicas == 4
    pod = plugin_pod(objs)
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "xpu-cdi-device-plugin-config"
    assert spec["automountServiceAccountToken"] is False
    inits = {c["name"]: c for c in spec["initContainers"]}
    mains = {c["name"]: c for c in spec["containers"]}
    init, sidecar, dp = inits["device-plugin-config-init"], mains["device-plugin-config"], mains["device-plugin"]
    plugin_file = dp["args"][dp["args"].index("--config") + 1]
    for c, once in ((init, True), (sidecar, False)):
        args = c["args"]
        assert args[0] == "device-plugin-config" and ("--once" in args) == once
        assert args[args.index("--output") + 1] == plugin_file
        assert args[args.index("--default-config") + 1] == "by-model"
        assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        assert mounts["device-plugin-config-token"]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
        assert plugin_file.startswith(mounts["device-plugin-config"]["mountPath"] + "/")
        configs_dir = args[args.index("--configs-dir") + 1]
        assert mounts["device-plugin-configs"]["mountPath"] == configs_dir
    holders = [c["name"] for c in spec["initContainers"] + spec["containers"]
               if any(m["name"] == "device-plugin-config-token" for m in c.get("volumeMounts", []))]
    assert sorted(holders) == ["device-plugin-config", "device-plugin-config-init"]
    vols = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in vols["device-plugin-config"] and "configMap" not in vols["device-plugin-config"]
    assert vols["device-plugin-configs"]["configMap"]["name"] == "xpu-cdi-device-plugin-configs"
    (role,) = [o for o in by_kind(objs, "ClusterRole") if o["metadata"]["name"] == "xpu-cdi-device-plugin-config"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    (binding,) = [o for o in by_kind(objs, "ClusterRoleBinding")
                  if o["metadata"]["name"] == "xpu-cdi-device-plugin-config"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "xpu-cdi-device-plugin-config",
                                    "namespace": "kube-system"}]
    key = "xpu-cdi.io/device-plugin-config"
    other = dict(values, devicePlugin={"config": dict(values["devicePlugin"]["config"], map=dict(
        values["devicePlugin"]["config"]["map"], extra={"version": "v1"}))})
    assert plugin_pod(helmchart.objects(other))["metadata"]["annotations"][key] != pod["metadata"]["annotations"][key]
    defaults = helmchart.objects({})
    assert not [o for o in defaults if "device-plugin-config" in o["metadata"]["name"]]
    assert plugin_pod(defaults)["spec"]["serviceAccountName"] == "xpu-cdi"


def test_evict_is_opt_in() -> None:
    """devicePlugin.evict (issue 43): the rights, the token, NODE_NAME, kubelet's pod-resources and the
    config's flags.evict come with it; without it none of them (today's RBAC-free plugin)."""
    def plugin_parts(objs: List[Dict[str, Any]]) -> Any:
        ds = next(o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "xpu-cdi")
        spec = ds["spec"]["template"]["spec"]
        c = next(c for c in spec["containers"] if c["name"] == "device-plugin")
        cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "xpu-cdi-device-plugin")
        evict_objs = sorted(o["metadata"]["name"] for o in objs if "device-plugin-evict" in o["metadata"]["name"]
                            or o["metadata"]["name"] == "xpu-cdi-device-plugin-events")
        return spec["automountServiceAccountToken"], c.get("env", []), \
            [m["mountPath"] for m in c["volumeMounts"]], yaml.safe_load(cm["data"]["config.yaml"]), evict_objs

    token, env, mounts, cfg, rbac = plugin_parts(helmchart.objects(helmchart.COMBINATIONS["evict"]))
    assert token is True and [e["name"] for e in env] == ["NODE_NAME"]
    assert "/var/lib/kubelet/pod-resources" in mounts
    assert cfg["flags"]["evict"] == ["kunlunxin.com/xpu:grace=30,hold-down=600", "huawei.com/npu"]
    assert dpconfig.from_mapping(cfg, "chart")["evict"]["kunlunxin.com/xpu"].hold_down == 600.0
    assert rbac == ["xpu-cdi-device-plugin-events", "xpu-cdi-device-plugin-events", "xpu-cdi-device-plugin-evict",
                    "xpu-cdi-device-plugin-evict"]
    token, env, mounts, cfg, rbac = plugin_parts(helmchart.objects({}))
    assert token is False and env == [] and "/var/lib/kubelet/pod-resources" not in mounts
    assert "evict" not in (cfg or {}).get("flags", {}) and rbac == []


def test_evict_with_a_config_per_node_binds_the_account_the_plugin_runs_as() -> None:
    """devicePlugin.evict beside devicePlugin.config.map: the pod runs as the config reader's account,
    so the eviction rights and the Events policy name that account, and the plugin gets its token."""
    values = {"devicePlugin": dict(helmchart.COMBINATIONS["per-node"]["devicePlugin"],
                                   evict=helmchart.COMBINATIONS["evict"]["devicePlugin"]["evict"])}
    objs = helmchart.objects(values)
    spec = plugin_pod(objs)["spec"]
    account = spec["serviceAccountName"]
    assert account == "xpu-cdi-device-plugin-config" and spec["automountServiceAccountToken"] is True
    (binding,) = [o for o in by_kind(objs, "ClusterRoleBinding")
                  if o["metadata"]["name"] == "xpu-cdi-device-plugin-evict"]
    assert [s["name"] for s in binding["subjects"]] == [account]
    (policy,) = [o for o in by_kind(objs, "ValidatingAdmissionPolicy")
                 if o["metadata"]["name"] == "xpu-cdi-device-plugin-events"]
    match = policy["spec"]["matchConditions"][0]["expression"]
    assert f'"system:serviceaccount:kube-system:{account}"' in match
    alone = helmchart.objects(helmchart.COMBINATIONS["evict"])
    (binding,) = [o for o in by_kind(alone, "ClusterRoleBinding")
                  if o["metadata"]["name"] == "xpu-cdi-device-plugin-evict"]
    assert [s["name"] for s in binding["subjects"]] == ["xpu-cdi"]
