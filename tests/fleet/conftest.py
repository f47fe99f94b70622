"""The fleet of the fleet tests (support/k8s/fleet.py, docs/fleet.md): a control plane and three
nodes of different cards on a pod network, started once per pytest session by the first test that
asks for it, never by any other.

Every test here is in the xdist group ``k8s-fleet`` (tests/conftest.py's XDIST_GROUPS, from the
path), so under ``make test``'s ``-n 2 --dist loadgroup`` one worker starts the fleet, once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Tuple

import pytest
from support import fakehost
from support.k8s import fleetdeploy, fleetdrill, nodekit
from support.k8s.fleet import CNI_PLUGINS, COMPONENTS, NODES, Fleet, NodeSpec


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


#: The nodes the DRA tests give to DRA: B (4 x 310P) and C (8 x 910B); A's P800 stay with the plugin.
DRA_NODES = NODES[1:]


@pytest.fixture(scope="module")
def dra_nodes(fleet: Fleet, image: str, deployed: None,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[NodeSpec, ...]]:
    """Nodes B and C switched from deploy/'s device plugin to deploy/dra's driver as an admin does
    it (deploy/dra applied, the nodes labelled ``xpu-cdi.io/kubernetes-allocation=dra``): the plugin's
    pods gone from them, the driver's Ready there, every card in the node's pool, no NPU allocatable
    by the plugin.  Switched back at the module's end (the plugin serving again, the slices gone,
    deploy/dra deleted): module-scoped, so a module that does not ask for it sees the plugin."""
    with fleetdeploy.on_dra(fleet, image, tmp_path_factory.mktemp("fleet-dra"), DRA_NODES) as took:
        print(f"nodes B and C switched to DRA in {took:.1f} s; load {open('/proc/loadavg').read().split()[:3]}")
        yield DRA_NODES


@pytest.fixture
def old_driver(fleet: Fleet) -> Iterator[fakehost.FakeHost]:
    """Node C's driver as it was, put back afterwards (the other fleet tests see the 24.1 one)."""
    with fleetdrill.driver_kept(fleet.hosts[NODES[2].name]) as host:
        yield host
