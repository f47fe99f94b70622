"""The exporter's PodResources table against kubelet's proto: every field it reads has the
upstream number and type, and bytes the upstream stubs write read back the same."""

from __future__ import annotations

from support.podresourceskit import stubs
from xpu_cdi.node import podresources


def _shape(desc: object) -> dict:
    out = {}
    for f in desc.fields:  # type: ignore[attr-defined]
        repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
        out[f.name] = (f.number, f.type, repeated, f.message_type.name if f.message_type else None)
    return out


def test_table_is_a_subset_of_upstream() -> None:
    pb2, _grpc = stubs()
    upstream = pb2.DESCRIPTOR.message_types_by_name
    for name in podresources.MESSAGES:
        ours, theirs = _shape(podresources.message(name).DESCRIPTOR), _shape(upstream[name])
        assert ours.items() <= theirs.items(), name
    svc = pb2.DESCRIPTOR.services_by_name[podresources.SERVICE]
    up = {m.name: (m.input_type.name, m.output_type.name, m.server_streaming) for m in svc.methods}
    for method, req, resp, streams in podresources.SERVICES[podresources.SERVICE]:
        assert up[method] == (req, resp, streams)


def test_upstream_bytes_read_back() -> None:
    pb2, _grpc = stubs()
    msg = pb2.ListPodResourcesResponse()
    pod = msg.pod_resources.add(name="p", namespace="ns")
    c = pod.containers.add(name="c", cpu_ids=[1, 2])
    c.devices.add(resource_name="kunlunxin.com/xpu", device_ids=["0", "3"])
    c.memory.add(memory_type="memory", size=1 << 30)
    claim = c.dynamic_resources.add(claim_name="cl", claim_namespace="ns")
    res = claim.claim_resources.add(driver_name="d", pool_name="pool", device_name="dev3", share_id="s")
    res.cdi_devices.add(name="kunlunxin.com/xpu=3")
    back = podresources.message("ListPodResourcesResponse").FromString(msg.SerializeToString())
    (p,) = back.pod_resources
    (cb,) = p.containers
    assert (p.name, p.namespace, cb.name) == ("p", "ns", "c")
    assert [(d.resource_name, list(d.device_ids)) for d in cb.devices] == [("kunlunxin.com/xpu", ["0", "3"])]
    (dyn,) = cb.dynamic_resources
    assert [cdi.name for r in dyn.claim_resources for cdi in r.cdi_devices] == ["kunlunxin.com/xpu=3"]
