"""The README's "Quick start on a cluster", line by line, on the suite's node.

The commands are read from the section's code block, not copied here: a README edit is what the
test runs.  Each line runs as written, against the session's cluster, with only what this machine
must change: `make image` is the suite's cached build by make image's own code
(tests/support/imagebuild.py) and the archive the README names is checked to be the path make
image writes; ctr, kubectl and helm are the cluster's (its containerd socket, its kubeconfig);
``<node>`` is the node's name; helm's installs go through the post-renderer that moves the host
paths the session keeps private (tests/support/k8s/helmnode.py).  A line ending in a comment
``# <value>`` must print that value.  The block runs twice: as written, and with the README's
``kubectl apply -k deploy/`` in place of its ``helm install`` line (deploy/'s kustomize output through
the same overlay), and the lines after it must hold for both: the same namespace either way.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from support import helmchart, imagebuild
from support.k8s.cluster import Cluster
from support.k8s.helmnode import PLUGIN, HelmNode

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]

README = helmchart.REPO / "README.md"
SECTION = "## Quick start on a cluster"
KUSTOMIZE = "kubectl apply -k deploy/"
NS = "kube-system"  # where the README installs, either way


def quick_start() -> List[Tuple[List[str], str]]:
    """(argv, expected output or "") of each line of the section's first code block."""
    text = README.read_text().split(SECTION, 1)[1]
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block, f"no ```sh block under {SECTION!r} in README.md"
    out = []
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        code, _, comment = line.partition("   #")
        out.append((shlex.split(code), comment.strip()))
    return out


def image_path() -> Path:
    """The archive `make image` writes (packaging/image/build.py's default --out)."""
    b = imagebuild.builder()
    return helmchart.REPO / "packaging" / "image" / "out" / f"xpu-cdi_{b.version()}_{b.arch()}.oci.tar"


@pytest.fixture
def node(cluster: Cluster, tmp_path: Path) -> Iterator[HelmNode]:
    n = HelmNode(cluster, tmp_path)
    ns: List[str] = []
    n.namespaces = ns  # type: ignore[attr-defined]
    try:
        yield n
    finally:
        if (n.overlay / "kustomized").exists():  # what `kubectl apply -k deploy/` made
            cluster.kubectl("delete", "-k", str(n.overlay), "--ignore-not-found", "--wait=true", check=False,
                            timeout=180)
        n.clean(ns[0] if ns else NS)
        for namespace in ns:
            if namespace != NS:  # one the README would have made: never kube-system
                cluster.kubectl("delete", "namespace", namespace, "--wait=true", check=False, timeout=180)


def kustomize_apply(node: HelmNode) -> subprocess.CompletedProcess:
    """`kubectl apply -k deploy/` on the node: deploy/'s kustomize output through the overlay that moves
    the session's private host paths (the one helm's post-renderer uses), applied."""
    cluster = node.cluster
    out = cluster.kubectl("kustomize", str(helmchart.REPO / "deploy"))
    (node.overlay / "chart.yaml").write_text(out.stdout)
    (node.overlay / "kustomized").touch()
    return cluster.kubectl("apply", "-k", str(node.overlay), check=False, timeout=300)


@pytest.mark.parametrize("way", ["helm", "kustomize"])
def test_the_cluster_quick_start_as_written(node: HelmNode, way: str) -> None:
    cluster = node.cluster
    lines = quick_start()
    assert [argv[0] for argv, _ in lines][:2] == ["make", "ctr"] and any(a[0] == "helm" for a, _ in lines)
    if way == "kustomize":
        text = README.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
        assert f"`{KUSTOMIZE}` in place of the `helm install` line" in " ".join(text.split()), \
            "the README no longer offers kubectl apply -k deploy/ for the helm line"
        lines = [(KUSTOMIZE.split(), "") if argv[0] == "helm" else (argv, want) for argv, want in lines]
    archive = None
    for argv, want in lines:
        argv = [a.replace("<node>", cluster.node_name) for a in argv]
        if argv == ["make", "image"]:
            archive = imagebuild.image()["archive"]
            continue
        if argv[0] == "ctr":
            assert archive is not None, "the README imports the image before building it"
            assert argv[-1] == str(image_path().relative_to(helmchart.REPO)), argv
            r = cluster.ctr(*[a for a in argv[1:-1] if a not in ("-n", "k8s.io")], str(archive))
        elif argv == KUSTOMIZE.split():
            node.namespaces.append(NS)  # type: ignore[attr-defined]  # deploy/'s, rendered in kube-system
            r = kustomize_apply(node)
        elif argv[0] == "kubectl":
            r = cluster.kubectl(*argv[1:], check=False, timeout=300)
        elif argv[0] == "helm":
            assert argv[1] == "install" and argv[3] == "deploy/chart/xpu-cdi", argv
            argv[3] = str(helmchart.CHART)
            if "--namespace" in argv:
                node.namespaces.append(argv[argv.index("--namespace") + 1])  # type: ignore[attr-defined]
            r = node.helm(*argv[1:], "--post-renderer", PLUGIN, check=False)
        else:
            pytest.fail(f"the README's cluster quick start runs {argv[0]!r}: teach this test what it is")
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
        if want:
            assert r.stdout.strip() == want.replace("<node>", cluster.node_name), (argv, r.stdout)
    # either way into kube-system, which the rollout line names: the chart's device plugin, Ready there
    assert node.namespaces == [NS], node.namespaces  # type: ignore[attr-defined]
    assert any(argv[:3] == ["kubectl", "-n", NS] for argv, _ in lines), lines
    ds = cluster.get("daemonset", "xpu-cdi", "-n", NS)
    assert ds["status"].get("numberReady") == 1, ds["status"]
