"""The one-node cluster of the Kubernetes tests, once per pytest session.

Every test here is in one xdist group (``k8s-cluster``): under ``make test``'s ``-n 2 --dist
loadgroup`` they all run on one worker, in one session there, so the cluster starts once; the
other worker never starts one.  The group is made by tests/conftest.py's scheduler (from the
path: xdist 3.8's own marks group nothing under pytest 9.2); the marks are set here too, for an
xdist that reads them again.  (Without ``--dist loadgroup`` each worker that gets one of these
tests starts its own cluster: slower, still correct, the clusters share nothing.)

The fixtures the modules share are here too (``node``, ``cards``, ``plugin``, ``identity``,
``driver``, ``pods``), each module-scoped but ``pods``: a module's own fixture of the same name
replaces one, and ``KUBELETS`` in a module runs it on the older kubelet's node as well.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest
from support.dpnode import short_dir
from support.dranode import DraDriver, Identity
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards, DevicePlugin

HERE = Path(__file__).resolve().parent

GROUP = "k8s-cluster"


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers the marker; a run without it (-p no:xdist) must accept it too
    config.addinivalue_line("markers", "xdist_group(name): run in one xdist worker with the group's other tests")


#: A module's ``KUBELETS = ("kubernetes", "kubelet-compat")`` runs its tests on both nodes (``node``).
KUBELET_IDS = {"kubernetes": "kubelet-pinned", "kubelet-compat": "kubelet-older"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    kubelets = getattr(metafunc.module, "KUBELETS", None)
    if kubelets and "node" in metafunc.fixturenames:
        metafunc.parametrize("node", kubelets, ids=[KUBELET_IDS[k] for k in kubelets], indirect=True, scope="module")


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the marker to group the items
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(HERE):
            item.add_marker(pytest.mark.xdist_group(GROUP))


def start(kubelet: str = "kubernetes", feature_gates: Optional[Dict[str, bool]] = None) -> Cluster:
    nodekit.check_machine(["kubernetes", "containerd", "etcd", kubelet])
    c = nodekit.xpu_cluster(kubelet, feature_gates).start()
    c.record()  # tests/test_leaves_no_traces.py, support/leaks.py: which cluster ran
    return c


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The session's cluster: control plane and kubelet of the pinned release, containerd 2.x
    configured by `xpu-cdi runtime configure` (CDI on, reading ``cluster.cdi_dir``; the ``xpu``
    handler runs the wrapper).  Its daemons' logs are kept in pytest's temp dir (``cluster-logs*``)."""
    c = start(feature_gates=nodekit.FEATURE_GATES)
    try:
        yield c
    finally:
        c.stop(keep_logs=tmp_path_factory.mktemp("cluster-logs"))


@pytest.fixture(scope="session")
def compat_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A second cluster whose node runs the older kubelet (builds.py's ``kubelet-compat``) against
    the pinned control plane; started when first asked for."""
    c = start("kubelet-compat")
    try:
        yield c
    finally:
        c.stop(keep_logs=tmp_path_factory.mktemp("compat-cluster-logs"))



# What the modules run on the node: the node (a cluster), fake cards, the device plugin, the DRA
# driver, the pods a test made.  A module's own fixture of the same name replaces one of these.

@pytest.fixture(scope="module")
def node(request: pytest.FixtureRequest) -> Cluster:
    """The session's cluster, or (a module's KUBELETS) the one whose kubelet is the older release."""
    kubelet = getattr(request, "param", "kubernetes")
    return request.getfixturevalue("cluster" if kubelet == "kubernetes" else "compat_cluster")


@pytest.fixture(scope="module")
def cards(node: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cards]:
    """Eight fake cards of the node's profile, their spec in its CDI dir."""
    c = Cards(node, tmp_path_factory.mktemp("xpu"))
    yield c
    c.close()


@pytest.fixture(scope="module")
def plugin(node: Cluster, cards: Cards, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevicePlugin]:
    """The device plugin with its default strategies (cdi_devices and the cdi.k8s.io/ annotation),
    served; stopped afterwards, and the node's allocatable back to 0."""
    p = DevicePlugin(node, cards, tmp_path_factory.mktemp("dp"))
    try:
        p.wait_served()
        yield p
    finally:
        p.stop()
        node.wait_allocatable(XPU, 0, timeout=60)


@pytest.fixture(scope="module")
def identity(node: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identity]:
    """The DRA driver's credentials: deploy/dra's service account."""
    i = Identity(node, tmp_path_factory.mktemp("dra-id"))
    try:
        yield i
    finally:
        i.close()


@pytest.fixture(scope="module")
def driver(request: pytest.FixtureRequest, node: Cluster, cards: Cards, identity: Identity) -> Iterator[DraDriver]:
    """`xpu-cdi dra-driver` for the cards (with the module's ``DRIVER_ARGS``), registered with
    kubelet, its ResourceSlice published (a module's ``DRA_DEVICES``: that many devices, partitions
    included); afterwards stopped and its slices withdrawn."""
    work = short_dir()
    d = DraDriver(node, cards, work, identity, *getattr(request.module, "DRIVER_ARGS", ()))
    d.expected = getattr(request.module, "DRA_DEVICES", cards.count)
    try:
        d.wait_served()
        yield d
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)
        node.wait(lambda: not d.slices(), 30, "the driver's slices withdrawn")


@pytest.fixture
def pods(node: Cluster) -> Iterator[List[str]]:
    """Names of the pods a test made: deleted (and waited for) afterwards."""
    names: List[str] = []
    yield names
    if names:
        nodekit.wait_gone(node, *names)
