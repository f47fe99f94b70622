#!/usr/bin/python3
"""Render the kustomize trees of deploy/ from the Helm chart, deploy/chart/xpu-cdi/.

The chart is the one source of the manifests: deploy/, deploy/dra/, deploy/runtime-wiring/, deploy/labels/ and
deploy/monitoring/ (for ``kubectl apply -k`` without Helm) are ``helm template`` of it with the
fixed values of :data:`TREES`, in kube-system.  The chart's schema takes the device plugin's
``sharing.timeSlicing`` from schemas/sharing.schema.json (:data:`SCHEMA_PARTS`), the plugin's own
check of its config file.  Edit the chart (or that schema), then run

    .venv/bin/python scripts/render-deploy.py [--helm PATH] [--check]

--check writes nothing and exits 1 naming the files that differ (tests/deploy/test_chart.py
does the same comparison).  The kustomization.yaml files are not rendered: they only list the
files.  helm is --helm, else ``helm`` on PATH, else the suite's pinned build (the venv's python:
the suite's helpers need pytest).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "chart" / "xpu-cdi"
NAMESPACE = "kube-system"
HEADER = ("# Rendered from deploy/chart/xpu-cdi by scripts/render-deploy.py: edit the chart and run it,\n"
          "# never this file (tests/deploy/test_chart.py compares them).\n")

#: tree -> (values, [(template under templates/, file in the tree)])
TREES: Dict[str, Tuple[dict, List[Tuple[str, str]]]] = {
    "deploy": ({}, [("daemonset.yaml", "daemonset.yaml"), ("device-plugin-config.yaml", "device-plugin-config.yaml"),
                    ("exporter.yaml", "exporter.yaml"), ("node-config.yaml", "node-config.yaml"),
                    ("runtimeclass.yaml", "runtimeclass.yaml"), ("serviceaccounts.yaml", "serviceaccounts.yaml")]),
    "deploy/dra": ({"devicePlugin": {"enabled": False}, "dra": {"enabled": True}},
                   [("dra/rbac.yaml", "rbac.yaml"), ("dra/deviceclasses.yaml", "deviceclasses.yaml"),
                    ("dra/daemonset.yaml", "daemonset.yaml")]),
    "deploy/runtime-wiring": ({"runtimeWiring": {"enabled": True}},
                              [("runtime-wiring/serviceaccount.yaml", "serviceaccount.yaml"),
                               ("runtime-wiring/daemonset.yaml", "daemonset.yaml"),
                               ("node-config.yaml", "node-config.yaml")]),
    "deploy/labels": ({"labels": {"enabled": True}},
                      [("labels/rbac.yaml", "rbac.yaml"), ("labels/daemonset.yaml", "daemonset.yaml")]),
    "deploy/device-plugin-evict": ({"devicePlugin": {"evict": ["kunlunxin.com/xpu"]}},
                                   [("device-plugin-evict.yaml", "rbac.yaml")]),
    "deploy/monitoring": ({"monitoring": {"serviceMonitor": {"enabled": True}}},
                          [("monitoring/servicemonitor.yaml", "servicemonitor.yaml")]),
}
#: chart files copied as they are (for a Prometheus without the operator)
COPIES = {"files/xpu-cdi.rules.yaml": "deploy/monitoring/xpu-cdi.rules.yaml"}
#: values.schema.json's place <- (a schema of schemas/, the part of it), $refs inlined
SCHEMA_PARTS = {("devicePlugin", "sharing", "timeSlicing"): ("sharing.schema.json", ("timeSlicing",))}
VALUES_SCHEMA = CHART / "values.schema.json"


def inline_refs(node: object, defs: Dict[str, object]) -> object:
    """*node* with every ``{"$ref": "#/$defs/x"}`` replaced by ``defs[x]`` (helm reads one file)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            merged = dict(defs[ref.rsplit("/", 1)[1]])  # type: ignore[arg-type]
            merged.update({k: v for k, v in node.items() if k != "$ref"})
            return inline_refs(merged, defs)
        return {k: inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [inline_refs(v, defs) for v in node]
    return node


def values_schema() -> str:
    """values.schema.json with the parts of :data:`SCHEMA_PARTS` as schemas/ has them now."""
    schema = json.loads(VALUES_SCHEMA.read_text())
    for place, (source, part) in SCHEMA_PARTS.items():
        src = json.loads((REPO / "schemas" / source).read_text())
        node = src
        for key in part:
            node = node["properties"][key]
        target = schema
        for key in place[:-1]:
            target = target["properties"][key]
        target["properties"][place[-1]] = inline_refs(node, src.get("$defs", {}))
    return json.dumps(schema, indent=2) + "\n"


def find_helm() -> str:
    found = shutil.which("helm")
    if found:
        return found
    try:
        from support.k8s import builds  # the suite's pinned build, cached (needs the venv: make install)
    except ImportError as err:
        raise SystemExit(f"render-deploy: no helm on PATH and no suite to build it ({err}): pass --helm, or run "
                         ".venv/bin/python scripts/render-deploy.py after `make install`")
    return str(builds.ensure("helm") / "helm")


def template(helm: str, values: dict, templates: Sequence[str]) -> Dict[str, str]:
    """``helm template`` of *templates* with *values*: template path -> its rendered text."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(values, f)
        f.flush()
        cmd = [helm, "template", "xpu-cdi", str(CHART), "--namespace", NAMESPACE, "--values", f.name,
               *(a for t in templates for a in ("--show-only", f"templates/{t}"))]
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"render-deploy: {' '.join(cmd)} failed: {r.stderr.strip()}")
    # helm prints each object with the template it came from, in install order (by kind)
    docs: Dict[str, List[str]] = {}
    for part in re.split(r"(?m)^---\n(?=# Source: )", r.stdout):
        m = re.match(r"# Source: [^/]+/templates/(\S+)\n", part)
        if m:
            docs.setdefault(m.group(1), []).append(part[m.end():].strip("\n") + "\n")
    return {t: "---\n".join(d) for t, d in docs.items()}


def render(helm: str) -> Dict[Path, str]:
    """Every rendered file of the trees: path -> content."""
    files: Dict[Path, str] = {}
    for tree, (values, pairs) in TREES.items():
        got = template(helm, values, [t for t, _ in pairs])
        for t, name in pairs:
            if t not in got:
                raise SystemExit(f"render-deploy: templates/{t} rendered nothing for {tree}/ (is it enabled?)")
            files[REPO / tree / name] = HEADER + got[t]
    for src, dest in COPIES.items():
        files[REPO / dest] = (CHART / src).read_text()
    files[VALUES_SCHEMA] = values_schema()
    return files


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--helm", default=os.environ.get("HELM"))
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a file differs")
    args = parser.parse_args(argv)
    files = render(args.helm or find_helm())
    stale = [p for p, text in files.items() if not p.is_file() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"render-deploy: {p.relative_to(REPO)} differs from the chart: run scripts/render-deploy.py",
                  file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(files[p])
        print(f"wrote {p.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
