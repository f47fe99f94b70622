"""Python stubs of kubelet's and CRI's protos, compiled at test time from the upstream Go
modules k8s.io/kubelet and k8s.io/cri-api (tests/support/upstream.py: ``go mod download`` at
the versions tests/support/gomod pins; never copied into the project).

Tests that play kubelet (device-plugin registration, ListAndWatch, Allocate) or call a
runtime the way kubelet does (CRI) get their message classes and gRPC stubs from here::

    pb2, grpc_pb2 = kubeproto.stubs("deviceplugin/v1beta1/api.proto")

Names are relative to kubelet's ``pkg/apis`` (deviceplugin/v1beta1, pluginregistration/v1,
dra/v1, dra/v1beta1, dra-health/v1alpha1, dra-health/v1, podresources/v1), and
``cri/runtime/v1/api.proto`` for cri-api's ``pkg/apis/runtime/v1``.  Each proto is compiled
once per test process with whatever ``grpc_tools`` the test environment has (PyPI's
grpcio-tools, or Debian's python3-grpc-tools), so the stubs match the protobuf runtime that
runs them.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Dict, Optional, Tuple

from . import upstream

_CACHE: Dict[str, Tuple[ModuleType, ModuleType]] = {}
_OUT: Optional[Path] = None  # one output dir per process


def source(relpath: str) -> Path:
    """The upstream file behind *relpath* (downloading its module when needed)."""
    if relpath.startswith("cri/"):
        return upstream.module_dir("k8s.io/cri-api") / "pkg" / "apis" / relpath[len("cri/"):]
    return upstream.module_dir("k8s.io/kubelet") / "pkg" / "apis" / relpath


def _package_of(relpath: str) -> str:
    """``deviceplugin/v1beta1/api.proto`` -> ``kubeproto_deviceplugin_v1beta1``: a
    unique importable package per proto (every upstream file is named api.proto)."""
    return "kubeproto_" + re.sub(r"\W", "_", "_".join(Path(relpath).parent.parts))


def stubs(relpath: str) -> Tuple[ModuleType, ModuleType]:
    """The ``(api_pb2, api_pb2_grpc)`` modules of one upstream proto (see the module doc
    for the names); skips the calling test, saying why, when it cannot be had."""
    global _OUT
    if relpath in _CACHE:
        return _CACHE[relpath]
    src = source(relpath)
    if not src.is_file():
        raise AssertionError(f"{relpath}: no {src} in the pinned module (moved upstream?)")
    try:
        import grpc_tools  # noqa: F401 - only whether it is there
    except ImportError:
        upstream.unavailable("grpc_tools cannot compile the protos (pip install grpcio-tools, "
                             "or apt install python3-grpc-tools)")
    if _OUT is None:
        _OUT = Path(tempfile.mkdtemp(prefix="kubeproto-"))
        atexit.register(shutil.rmtree, _OUT, True)
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
    # the package registered by hand (not through sys.path): api_pb2_grpc imports "<pkg>.api_pb2"
    spec = importlib.util.spec_from_file_location(pkg, pkg_dir / "__init__.py",
                                                  submodule_search_locations=[str(pkg_dir)])
    assert spec is not None and spec.loader is not None
    sys.modules[pkg] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[pkg])
    pair = (importlib.import_module(f"{pkg}.api_pb2"), importlib.import_module(f"{pkg}.api_pb2_grpc"))
    _CACHE[relpath] = pair
    return pair
