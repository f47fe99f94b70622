"""The fleet of the fleet tests (support/k8s/fleet.py, docs/fleet.md): a control plane and three
nodes of different cards on a pod network, started once per pytest session by the first test that
asks for it, never by any other.

Every test here is in the xdist group ``k8s-fleet`` (tests/conftest.py's XDIST_GROUPS, from the
path), so under ``make test``'s ``-n 2 --dist loadgroup`` one worker starts the fleet, once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from support.k8s import fleetdeploy, nodekit
from support.k8s.fleet import Fleet

#: What the fleet runs: the builds (kube-proxy: the same k8s.io/kubernetes pin) and Debian's CNI plugins.
COMPONENTS = ("kubernetes", "containerd", "etcd", "kube-proxy")
CNI_PLUGINS = ("loopback", "bridge", "host-local")


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The started fleet (every node Ready); its members' logs kept in pytest's temp dir (``fleet-logs*``)."""
    nodekit.check_machine(COMPONENTS, CNI_PLUGINS)  # the builds first: the cold start is timed without them
    f = Fleet(tmp_path_factory.mktemp("fleet"), feature_gates=nodekit.FEATURE_GATES)
    for member in f.members:
        member.record()
    f.start()
    print(f"the fleet started in {f.timings['total']:.1f} s "
          f"(control plane {f.timings['control plane']:.1f} s, nodes {f.timings['nodes']:.1f} s)")
    try:
        yield f
    finally:
        f.stop(keep_logs=tmp_path_factory.mktemp("fleet-logs"))


@pytest.fixture(scope="session")
def image(fleet: Fleet) -> str:
    """The checkout's image (make image's build, cached), imported into every node's containerd."""
    return fleetdeploy.import_image(fleet)


@pytest.fixture(scope="session")
def labelled(fleet: Fleet, image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """deploy/labels applied: the labeller on every node, each node labelled; the overlays' dir."""
    base = tmp_path_factory.mktemp("fleet-overlays")
    d = base / "labels"
    try:
        fleetdeploy.apply_labels(fleet, image, base)
        yield base
    finally:
        fleetdeploy.delete(fleet, d)


@pytest.fixture(scope="session")
def deployed(fleet: Fleet, image: str, labelled: Path) -> Iterator[None]:
    """deploy/ applied (specs, device plugin, exporter) on the nodes labelled present; every node's
    cards allocatable."""
    try:
        fleetdeploy.apply_deploy(fleet, image, labelled)
        yield None
    finally:
        fleetdeploy.delete(fleet, labelled / "deploy")
