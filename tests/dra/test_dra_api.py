"""The DRA driver's message tables against kubelet's protos, field by field, and on both Python stacks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support import kubeproto
from xpu_cdi.dra import api

REPO = Path(__file__).resolve().parents[2]


def _shape(desc: object) -> dict:
    out = {}
    for f in desc.fields:  # type: ignore[attr-defined]
        sub = f.message_type
        target = None
        if sub is not None:
            target = ("map", _shape(sub)) if sub.GetOptions().map_entry else sub.name
        elif f.enum_type is not None:
            target = ("enum", [(v.name, v.number) for v in f.enum_type.values])
        repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
        optional = getattr(f, "has_presence", False) and f.containing_oneof is not None
        out[f.name] = (f.number, f.type, repeated, target, optional)
    return out


@pytest.mark.parametrize("proto, table, methods", [
    ("dra/v1/api.proto", api.DRA_MESSAGES, api.DRA_METHODS),
    ("pluginregistration/v1/api.proto", api.REGISTRATION_MESSAGES, api.REGISTRATION_METHODS),
    ("dra-health/v1alpha1/api.proto", api.HEALTH_MESSAGES, api.HEALTH_METHODS),
])
def test_table_matches_upstream(proto: str, table: dict, methods: dict) -> None:
    pb2, _grpc = kubeproto.stubs(proto)
    upstream = pb2.DESCRIPTOR
    assert sorted(upstream.message_types_by_name) == sorted(table)
    which = {"dra/v1/api.proto": "dra", "pluginregistration/v1/api.proto": "registration"}.get(proto, "health")
    for name in table:
        assert _shape(api.message(which, name).DESCRIPTOR) == _shape(upstream.message_types_by_name[name]), name
    for svc, ms in methods.items():
        up = upstream.services_by_name[svc]
        assert [(m.name, m.input_type.name, m.output_type.name, m.server_streaming) for m in up.methods] == \
            [tuple(m) for m in ms]


def test_service_names_are_what_kubelet_calls() -> None:
    pb2, _g = kubeproto.stubs("dra/v1/api.proto")
    assert pb2.DESCRIPTOR.services_by_name["DRAPlugin"].full_name == api.DRA_SERVICES[0]
    reg, _g = kubeproto.stubs("pluginregistration/v1/api.proto")
    assert reg.DESCRIPTOR.services_by_name["Registration"].full_name == api.REGISTRATION_SERVICE


def test_bytes_cross_both_ways() -> None:
    pb2, _g = kubeproto.stubs("dra/v1/api.proto")
    ours = api.NodePrepareResourcesResponse()
    ours.claims["u"].devices.add(request_names=["r"], pool_name="n", device_name="0", cdi_device_ids=["k.com/x=0"])
    theirs = pb2.NodePrepareResourcesResponse.FromString(ours.SerializeToString())
    dev = theirs.claims["u"].devices[0]
    assert (dev.pool_name, list(dev.cdi_device_ids), dev.HasField("share_id")) == ("n", ["k.com/x=0"], False)
    req = pb2.NodePrepareResourcesRequest(claims=[pb2.Claim(namespace="ns", uid="u", name="c")])
    back = api.NodePrepareResourcesRequest.FromString(req.SerializeToString())
    assert [(c.namespace, c.uid, c.name) for c in back.claims] == [("ns", "u", "c")]


@pytest.mark.parametrize("stack", ["pypi", "debian"])
def test_messages_build_on_the_stack(stack: str) -> None:
    """The tables load on each stack's protobuf (enum and proto3 optional included), and the
    Kubernetes client the driver talks to the API server with imports there."""
    from support import kubeletkit

    python, env = kubeletkit.stack_python(stack)
    code = ("from xpu_cdi.dra import api; from xpu_cdi.kube import client; import kubernetes.config; "
            "h = api.NodeWatchResourcesResponse(devices=[api.DeviceHealth(health=api.UNHEALTHY)]); "
            "assert api.NodeWatchResourcesResponse.FromString(h.SerializeToString()) == h; "
            "d = api.Device(share_id=''); assert d.HasField('share_id'); print(kubernetes.__version__)")
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert res.returncode == 0, res.stderr
