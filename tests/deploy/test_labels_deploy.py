"""deploy/labels/: the labeller's manifests against the API's models, its command line against
the CLI, and the node selectors of deploy/'s other DaemonSets against the labels it sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from support import fakehost
from test_deploy import api_problems, cli_accepts
from xpu_cdi.labels.daemon import Labeller, Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
LABELS = DEPLOY / "labels"
MODELS = {"DaemonSet": "V1DaemonSet", "ServiceAccount": "V1ServiceAccount", "ClusterRole": "V1ClusterRole",
          "ClusterRoleBinding": "V1ClusterRoleBinding",
          "ValidatingAdmissionPolicy": "V1ValidatingAdmissionPolicy",
          "ValidatingAdmissionPolicyBinding": "V1ValidatingAdmissionPolicyBinding"}


def docs(where: Path) -> List[Dict[str, Any]]:
    out = []
    for name in yaml.safe_load((where / "kustomization.yaml").read_text())["resources"]:
        out += [d for d in yaml.safe_load_all((where / name).read_text()) if d]
    return out


@pytest.mark.parametrize("doc", docs(LABELS), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_field_is_an_api_field(doc: Dict[str, Any]) -> None:
    assert api_problems(doc, MODELS[doc["kind"]]) == []


def test_the_labeller_runs_everywhere_as_its_service_account() -> None:
    (ds,) = [d for d in docs(LABELS) if d["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    ctx = cli_accepts(c["args"])
    assert ctx.params["daemon"] and ctx.info_name == "labels"
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]
    assert spec["serviceAccountName"] == "xpu-cdi-labeller" and {"operator": "Exists"} in spec["tolerations"]
    assert "xpu-cdi.io/present" not in spec.get("nodeSelector", {})  # it makes that label: it cannot need it


def test_the_daemonsets_select_what_the_labeller_sets(tmp_path: Path) -> None:
    """Each DaemonSet of deploy/ (and runtime-wiring) selects on labels a card node gets from
    `xpu-cdi labels`, none set by hand."""
    host = fakehost.kunlunxin(tmp_path / "h", 2)
    r = str(host.root)
    got = Labeller(Settings(profiles=("kunlunxin",), profiles_dir=("/nonexistent",), dev_root=r, driver_root=r,
                            sysfs_root=r, uevents="none"), log=lambda _m: None).wanted()
    sets = [d for d in docs(DEPLOY) + docs(DEPLOY / "runtime-wiring") if d["kind"] == "DaemonSet"]
    assert len(sets) >= 3
    for ds in sets:
        selector = ds["spec"]["template"]["spec"]["nodeSelector"]
        assert selector.items() <= got.items(), (ds["metadata"]["name"], selector)
    (dra,) = [d for d in docs(DEPLOY / "dra") if d["kind"] == "DaemonSet"]
    selector = dra["spec"]["template"]["spec"]["nodeSelector"]  # beside the admin's choice of the way
    assert {k: v for k, v in selector.items() if k != "xpu-cdi.io/kubernetes-allocation"}.items() <= got.items()
    assert selector["xpu-cdi.io/present"] == "true"
