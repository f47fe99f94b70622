"""The training fleet (support/k8s/fleet.py's ``training``, docs/training.md): a control plane and
three 8 x 910B nodes, each with its /etc/hccn.conf, all served by deploy/dra's driver, with
Kubernetes 1.37's Workload API on.  Started once per pytest session by the first test that asks,
never by any other.

Every test here is in the xdist group ``k8s-training`` (tests/conftest.py's XDIST_GROUPS, from the
path): one worker starts this fleet, once; it has its own names and addresses
(:data:`~support.k8s.fleet.TRAINING`), so tests/fleet/'s fleet may run beside it on another worker.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from support.k8s import fleet as fleets
from support.k8s import fleetdeploy, nodekit
from support.k8s.fleet import Fleet


@pytest.fixture(scope="session")
def training_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The started training fleet: every node Ready, the checkout's image in every node's
    containerd, deploy/labels and deploy/dra applied and every node on DRA (every NPU in its
    node's pool, no device plugin).  Stopped at the session's end, its members' logs kept in
    pytest's temp dir (``training-logs*``); after a failed start too."""
    nodekit.check_machine(fleets.COMPONENTS, fleets.CNI_PLUGINS)
    f = fleets.training(tmp_path_factory.mktemp("training"))
    for member in f.members:
        member.record()
    try:
        f.start()  # stops what it started when it fails
        tag = fleetdeploy.import_image(f)
        took = fleetdeploy.dra_only(f, tag, tmp_path_factory.mktemp("training-overlays"))
        print(f"the training fleet started in {f.timings['total']:.1f} s, on DRA {took:.1f} s later; "
              f"load {open('/proc/loadavg').read().split()[:3]}")
        yield f
    finally:
        f.stop(keep_logs=tmp_path_factory.mktemp("training-logs"))
