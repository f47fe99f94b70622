"""The plugin's message table against kubelet's proto, and the import boundary.

The table in ``xpu_cdi.deviceplugin.api`` is the wire contract: it is
compared field by field with stubs compiled from the upstream
``api.proto`` (skipped, saying why, where ../shared is absent), and bytes
written by either side are read by the other.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kubeletkit

from xpu_cdi.deviceplugin import api

REPO = Path(__file__).resolve().parent.parent.parent


def _shape(desc: object) -> dict:
    out = {}
    for f in desc.fields:  # type: ignore[attr-defined]
        sub = f.message_type
        target = None
        if sub is not None:
            target = ("map", _shape(sub)) if sub.GetOptions().map_entry else sub.name
        # protobuf 7 dropped label
        repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
        out[f.name] = (f.number, f.type, repeated, target)
    return out


def test_table_matches_upstream() -> None:
    pb2, _grpc = kubeletkit.stubs()
    upstream = pb2.DESCRIPTOR
    assert sorted(upstream.message_types_by_name) == sorted(api.MESSAGES)
    for name in api.MESSAGES:
        assert _shape(api.message(name).DESCRIPTOR) == _shape(upstream.message_types_by_name[name]), name
    for svc, methods in api.SERVICES.items():
        up = upstream.services_by_name[svc]
        assert [(m.name, m.input_type.name, m.output_type.name, m.server_streaming) for m in up.methods] == \
            [tuple(m) for m in methods]


def test_bytes_cross_both_ways() -> None:
    pb2, _grpc = kubeletkit.stubs()
    ours = api.ContainerAllocateResponse(envs={"A": "1"}, annotations={"cdi.k8s.io/x_1": "k.com/x=1"},
                                         cdi_devices=[api.CDIDevice(name="k.com/x=1")])
    theirs = pb2.ContainerAllocateResponse.FromString(ours.SerializeToString())
    assert dict(theirs.envs) == {"A": "1"} and [d.name for d in theirs.cdi_devices] == ["k.com/x=1"]
    dev = pb2.Device(ID="3", health="Unhealthy", topology=pb2.TopologyInfo(nodes=[pb2.NUMANode(ID=1)]))
    back = api.Device.FromString(dev.SerializeToString())
    assert (back.ID, back.health, [n.ID for n in back.topology.nodes]) == ("3", "Unhealthy", [1])


def test_method_paths() -> None:
    assert api.method_path("Registration", "Register") == "/v1beta1.Registration/Register"
    assert api.method_path("DevicePlugin", "ListAndWatch") == "/v1beta1.DevicePlugin/ListAndWatch"


@pytest.mark.parametrize("stack", ["pypi", "debian"])
def test_messages_build_on_the_stack(stack: str) -> None:
    """The table loads on each stack's protobuf (no generated code involved)."""
    python, env = kubeletkit.stack_python(stack)
    code = ("from xpu_cdi.deviceplugin import api; import google.protobuf, grpc; "
            "d = api.Device(ID='0', health=api.HEALTHY); d.topology.nodes.add(ID=1); "
            "r = api.ListAndWatchResponse(devices=[d]); "
            "assert api.ListAndWatchResponse.FromString(r.SerializeToString()) == r; "
            "print(grpc.__version__, google.protobuf.__version__)")
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("entry", [
    "from xpu_cdi.cli import main; main(['generate', '--help'], standalone_mode=False)",
    "from xpu_cdi import deviceplugin; deviceplugin.cdi_devices('a.com/b', ['0'])",
    "from xpu_cdi.cli import main; main(['device-plugin', '--probe', '--status-file', '/nonexistent'], "
    "standalone_mode=False)",
])
def test_grpc_stays_off_other_paths(entry: str) -> None:
    """generate, the helper API and the readiness probe never import gRPC or protobuf."""
    code = (f"import sys\ntry:\n    {entry}\nexcept SystemExit:\n    pass\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google'))\n"
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
