"""Python stubs of kubelet's and CRI's protos, compiled at test time from
``../shared/reference/kubelet`` (upstream data, never copied into the project).

Tests that play kubelet (device-plugin registration, ListAndWatch, Allocate)
or call a runtime the way kubelet does (CRI) get their message classes and
gRPC stubs from here::

    pb2, grpc_pb2 = kubeproto.stubs("deviceplugin/v1beta1/api.proto")

Each proto is compiled once per test process into a cache directory with
whatever ``grpc_tools`` the test environment has (PyPI's grpcio-tools, or
Debian's python3-grpc-tools), so the stubs match the protobuf runtime that
runs them.  Where the reference or the compiler is absent the calling test
is skipped, saying why.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Dict, Optional, Tuple

import pytest

KUBELET_REFERENCE = Path(__file__).resolve().parent.parent.parent / "shared" / "reference" / "kubelet"
_CACHE: Dict[str, Tuple[ModuleType, ModuleType]] = {}
_OUT = None  # one output dir per process, on sys.path


def _package_of(relpath: str) -> str:
    """``deviceplugin/v1beta1/api.proto`` -> ``kubeproto_deviceplugin_v1beta1``: a
    unique importable package per proto (every upstream file is named api.proto)."""
    return "kubeproto_" + "_".join(Path(relpath).parent.parts)


def stubs(relpath: str, source: Optional[Path] = None) -> Tuple[ModuleType, ModuleType]:
    """The ``(api_pb2, api_pb2_grpc)`` modules of one reference proto.

    Args:
        relpath: the proto's path below ``../shared/reference/kubelet``.
        source: the proto file to compile instead (e.g. from the k8s.io/kubelet Go module
            tests/k8s/builds.py downloads); *relpath* still names the package.

    Skips the calling test when the reference or ``grpc_tools`` is absent.
    """
    global _OUT
    if relpath in _CACHE:
        return _CACHE[relpath]
    src = source if source is not None else KUBELET_REFERENCE / relpath
    if not src.is_file():
        pytest.skip(f"kubelet reference proto not available at {src} "
                    "(../shared is absent outside the dev/CI setup)")
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        pytest.skip("grpc_tools is not installed (pip install grpcio-tools, or apt install python3-grpc-tools)")
    if _OUT is None:
        _OUT = Path(tempfile.mkdtemp(prefix="kubeproto-"))
        sys.path.insert(0, str(_OUT))
    pkg = _package_of(relpath)
    pkg_dir = _OUT / pkg
    pkg_dir.mkdir(exist_ok=True)
    (pkg_dir / "__init__.py").write_text("")
    (pkg_dir / "api.proto").write_bytes(src.read_bytes())
    # compiled relative to _OUT so that the grpc module imports "<pkg>.api_pb2"
    proc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{_OUT}",
                           f"--python_out={_OUT}", f"--grpc_python_out={_OUT}", f"{pkg}/api.proto"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"protoc failed on {src}: {proc.stderr.strip()}")
    importlib.invalidate_caches()
    pair = (importlib.import_module(f"{pkg}.api_pb2"), importlib.import_module(f"{pkg}.api_pb2_grpc"))
    _CACHE[relpath] = pair
    return pair
