"""The fleet-scale harness (support/k8s/scale.py, issue 45) at a small N: its shapes are what our
driver publishes, its checks catch what they are for, and a run of every workload on the real
control plane binds every pod with no card given twice and no counter over.

`make bench --only scale` runs the same harness at 100 and 1,000 nodes for its figures; here
nothing is timed.  The tests are in their own xdist group (``k8s-scale``, tests/conftest.py): one
worker starts this control plane, apart from the one-node cluster's and the fleet's.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Dict, Iterator

import pytest
from support import HANG, fakehost
from support.k8s import nodekit, scale

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]

NODES = 10  # by weight 3 + 3 + 2 + 1 + 1: every shape, two nodes for the 8-card claims


@pytest.fixture(scope="module")
def shapes() -> Iterator[Dict[str, scale.Shape]]:
    work = Path(tempfile.mkdtemp(prefix="scale-shapes-"))
    try:
        yield scale.build_shapes(work)
    finally:
        for d in work.iterdir():
            if (d / "host").exists():
                fakehost.remove_tree(d / "host")
        fakehost.remove_tree(work)


def test_slices_are_what_the_driver_publishes(shapes: Dict[str, scale.Shape]) -> None:
    """Each DRA shape's slices for a node are what the driver itself published for its own node."""
    for name, shape in shapes.items():
        if not shape.spec.dra:
            assert shape.published == [] and shape.slices(name, "node-uid") == []
            continue
        key = lambda s: s["metadata"]["name"]  # noqa: E731
        assert sorted(shape.slices(name, "node-uid"), key=key) == sorted(shape.published, key=key), name
    # the shapes the issue names: a 310P chip whole and, per template, as many as its budgets let one
    # chip hold (7 vir01 by its 7 AI CPUs, 3 vir02, 4 vir02_1c, 1 vir04, 2 vir04_3c, 2 vir04_3c_ndvpp,
    # 1 vir04_4c_dvpp): 21; a 910B3 chip and its partitions; P800 shares
    assert len(shapes["310p"].devices) == 4 * 21
    assert {d.template for d in shapes["910b"].devices} == {"", "vir05_1c_16g", "vir10_3c_32g"}
    assert all(d.share is not None for d in shapes["p800-share"].devices)
    assert shapes["p800-dp"].allocatable == {nodekit.XPU: "8"}
    assert shapes["p800"].labels["xpu-cdi.io/xpu.model"] == "P800"


def allocation(driver: str, pool: str, device: str, share: str = "", memory: str = "") -> Dict[str, object]:
    r: Dict[str, object] = {"request": "dev", "driver": driver, "pool": pool, "device": device}
    if share:
        r.update(shareID=share, consumedCapacity={"memory": memory})
    return {"metadata": {"name": f"c-{device}-{share}"}, "status": {"allocation": {"devices": {"results": [r]}}}}


def test_problems_are_found(shapes: Dict[str, scale.Shape]) -> None:
    """The checks find a pod unbound, a card given twice, shares over a card, a counter set over; the
    vendor's recommended vir04 + vir02 + vir02_1c on one 310P chip is within its counters."""
    nodes = {"a": "p800", "s": "p800-share", "n": "310p"}
    devices, sets = {}, {}
    for node, shape in nodes.items():
        for s in shapes[shape].slices(node, "uid"):
            devices.update({(s["spec"]["driver"], node, d["name"]): d for d in s["spec"].get("devices") or []})
            sets.update({(s["spec"]["driver"], node, c["name"]): {k: scale.quantity(v["value"])
                                                                    for k, v in c["counters"].items()}
                         for c in s["spec"].get("sharedCounters") or []})
    w = scale.WORKLOADS[1]
    bound = scale.pod(w, "p1", "b")
    bound["spec"]["nodeName"] = "a"
    good = [allocation("kunlunxin.com", "a", "0"), allocation("kunlunxin.com", "s", "0", "x1", "32Gi"),
            allocation("kunlunxin.com", "s", "0", "x2", "64Gi"), allocation("huawei.com", "n", "0-vir04-0"),
            allocation("huawei.com", "n", "0-vir02-0"), allocation("huawei.com", "n", "0-vir02-1c-0")]
    assert scale.problems([bound], good, 1, nodes, shapes, devices, sets) == []
    unbound = copy.deepcopy(bound)
    del unbound["spec"]["nodeName"]
    bad = good + [allocation("kunlunxin.com", "a", "0"), allocation("kunlunxin.com", "s", "0", "x3", "32Gi"),
                  allocation("huawei.com", "n", "0-vir01-0")]
    pair = allocation("kunlunxin.com", "a", "1")
    results = pair["status"]["allocation"]["devices"]["results"]  # type: ignore[index]
    results.append(dict(results[0], device="7"))  # cards 1 and 7: NUMA nodes 0 and 1
    pair["spec"] = {"devices": {"constraints": [{"requests": ["dev"],
                                                 "matchAttribute": "resource.kubernetes.io/numaNode"}]}}
    bad.append(pair)
    found = scale.problems([unbound], bad, 1, nodes, shapes, devices, sets)
    assert any("unbound: ['p1']" in p for p in found), found
    assert any("('kunlunxin.com', 'a', '0') given 2 times" in p for p in found), found
    assert any("shares of 137438953472 bytes, the card has 103079215104" in p for p in found), found
    assert any("counter set ('huawei.com', 'n', 'chip-0') over: {'aicore': (9, 8)" in p for p in found), found
    assert any("resource.kubernetes.io/numaNode differs across its devices: ['0', '1']" in p for p in found), found


@pytest.fixture(scope="module")
def control_plane() -> Iterator[object]:
    nodekit.check_machine(("kubernetes", "etcd"), ())
    cluster = scale.control_plane()
    cluster.record()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_every_workload_binds_without_overcommit(control_plane: object, shapes: Dict[str, scale.Shape],
                                                tmp_path: Path) -> None:
    """Every workload's batch and the churn on 10 simulated nodes: every pod bound by the real scheduler
    to a node of its shape, no card twice, no share or counter set over (checked while all are bound)."""
    plan = scale.Plan(nodes=NODES, shapes=shapes, device_classes=scale.device_classes(), kubeconfig=str(
        control_plane.kubeconfig), pids=scale.daemon_pids(control_plane), rounds=1, churn_seconds=6, churn_rate=5)
    got = scale.run(control_plane, plan, tmp_path, timeout=10 * HANG)
    assert got["counts"] == {"p800-dp": 3, "p800": 3, "p800-share": 2, "310p": 1, "910b": 1}
    assert [b["workload"] for b in got["batches"]] and {b["workload"] for b in got["batches"]} == \
        {w.name for w in scale.WORKLOADS}
    for b in got["batches"]:
        assert b["problems"] == [], b
        assert b["pods"] == min(NODES, got["counts"][next(w.shape for w in scale.WORKLOADS
                                                          if w.name == b["workload"])] *
                                next(w.per_node for w in scale.WORKLOADS if w.name == b["workload"]) // 2), b
    assert got["churn"]["pods"] > 0 and got["churn"]["problems"] == []  # each bound, or run() raised
    assert got["slices"] == sum(len(shapes[s].slices("n", "u")) * n for s, n in got["counts"].items())
