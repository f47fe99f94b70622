"""Read containerd, CRI-O and Docker configs (read-only) into one shape:
is CDI on, which spec dirs, which runtime handlers run which binary.

``xpu-cdi runtime configure`` (issue 4) writes these files; the doctor only
reads them, with the same libraries (tomlkit, json), and applies the
runtimes' own defaults for keys that are absent.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..cdi import registry
from .context import Version
from .runtimes import has_cdi

CONTAINERD_CRI = {1: ("cri",), 2: ("io.containerd.grpc.v1.cri",), 3: ("io.containerd.cri.v1.runtime",)}


@dataclass
class Handler:
    """A runtime handler (the name a RuntimeClass refers to)."""

    name: str
    binary: str  # what it executes; "" = the runtime's default (runc)
    base_spec: str = ""  # containerd base_runtime_spec: an OCI spec whose hooks every container gets


@dataclass
class RuntimeConfig:
    """What one runtime's configuration says about CDI and handlers."""

    runtime: str
    path: str
    exists: bool
    error: str = ""
    cdi: Optional[bool] = None  # None: the release has no CDI
    cdi_table: str = ""  # where enable_cdi / cdi_spec_dirs live, for fix messages
    spec_dirs: List[str] = field(default_factory=lambda: list(registry.DEFAULT_DIRS))
    handlers: Dict[str, Handler] = field(default_factory=dict)


def merge(base: Dict[str, Any], top: Dict[str, Any]) -> Dict[str, Any]:
    """Deep-merge *top* over *base* (tables merge, everything else is replaced)."""
    out = dict(base)
    for k, v in top.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _toml(path: str) -> Dict[str, Any]:
    import tomlkit

    with open(path, encoding="utf-8") as f:
        data: Dict[str, Any] = tomlkit.parse(f.read()).unwrap()
    return data


def _dig(data: Dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(k)  # type: ignore[assignment]
    return data


def binary_problem(binary: str) -> str:
    """Why *binary* cannot be executed (``""`` when it can); bare names are looked up on PATH."""
    if not os.path.isabs(binary):
        return "" if shutil.which(binary) else f"{binary!r} is not on PATH"
    if not os.path.exists(binary):
        return f"{binary!r} does not exist"
    if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        return f"{binary!r} is not an executable file"
    return ""


def read_containerd(path: str, release: Optional[Version]) -> RuntimeConfig:
    """containerd's config.toml (config version 1, 2 or 3) and its ``imports``."""
    cfg = RuntimeConfig("containerd", path, os.path.exists(path))
    data: Dict[str, Any] = {}
    try:
        if cfg.exists:
            data = _toml(path)
            for pattern in data.get("imports") or []:
                pattern = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(path), pattern)
                for extra in sorted(_glob.glob(pattern)):
                    data = merge(data, _toml(extra))
    except Exception as err:  # noqa: BLE001 - any TOML or I/O error makes the file unusable
        cfg.error = " ".join(str(err).split())
        return cfg
    version = int(data.get("version", 1) or 1)
    if release is None and version == 3:
        release = (2, 0, 0)  # only containerd 2 reads version 3 configs
    plugin = CONTAINERD_CRI.get(version, CONTAINERD_CRI[2])[0]
    cri = _dig(data, "plugins", plugin) or {}
    cfg.cdi_table = f"[plugins.{json.dumps(plugin)}]"
    supports = has_cdi("containerd", release) if release else True
    if supports:
        cfg.cdi = bool(cri.get("enable_cdi", release is not None and release >= (2, 0, 0)))
    cfg.spec_dirs = list(cri.get("cdi_spec_dirs") or registry.DEFAULT_DIRS)
    for name, rt in (_dig(cri, "containerd", "runtimes") or {}).items():
        if isinstance(rt, dict):
            cfg.handlers[name] = Handler(name, str(_dig(rt, "options", "BinaryName") or ""),
                                         str(rt.get("base_runtime_spec") or ""))
    cfg.handlers.setdefault("runc", Handler("runc", ""))  # the file overlays containerd's defaults
    return cfg


def read_crio(path: str) -> RuntimeConfig:
    """crio.conf plus the drop-ins in ``crio.conf.d`` beside it (later files win)."""
    cfg = RuntimeConfig("crio", path, os.path.exists(path), cdi=True, cdi_table="[crio.runtime]")
    files = ([path] if cfg.exists else []) + sorted(_glob.glob(os.path.join(os.path.dirname(path),
                                                                            "crio.conf.d", "*.conf")))
    data: Dict[str, Any] = {}
    try:
        for f in files:
            data = merge(data, _toml(f))
    except Exception as err:  # noqa: BLE001
        cfg.error = " ".join(str(err).split())
        return cfg
    cfg.exists = bool(files)
    rt = _dig(data, "crio", "runtime") or {}
    cfg.spec_dirs = list(rt.get("cdi_spec_dirs") or registry.DEFAULT_DIRS)
    for name, h in (rt.get("runtimes") or {}).items():
        if isinstance(h, dict):
            cfg.handlers[name] = Handler(name, str(h.get("runtime_path") or name))
    cfg.handlers.setdefault("runc", Handler("runc", "runc"))  # CRI-O's built-in default
    return cfg


def read_docker(path: str, release: Optional[Version]) -> RuntimeConfig:
    """Docker's daemon.json: ``runtimes``, ``features.cdi``, ``cdi-spec-dirs``."""
    cfg = RuntimeConfig("docker", path, os.path.exists(path), cdi_table='"features": {"cdi": true}')
    data: Dict[str, Any] = {}
    try:
        if cfg.exists:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if not isinstance(data, dict):
                raise ValueError("expected an object at the top")
    except (OSError, ValueError) as err:
        cfg.error = " ".join(str(err).split())
        return cfg
    if release is None or has_cdi("docker", release):
        # CDI is on by default from 28.2; before that it needs the feature flag
        default = release is not None and release >= (28, 2, 0)
        cfg.cdi = bool(_dig(data, "features", "cdi")) if _dig(data, "features", "cdi") is not None else default
    cfg.spec_dirs = list(data.get("cdi-spec-dirs") or registry.DEFAULT_DIRS)
    cfg.handlers["runc"] = Handler("runc", "")
    for name, h in (data.get("runtimes") or {}).items():
        if isinstance(h, dict):
            cfg.handlers[name] = Handler(name, str(h.get("path") or ""))
    return cfg


def load(ctx: Any, runtime: str) -> RuntimeConfig:
    """The config of *runtime* for this doctor run (read once, cached on the context)."""
    key = f"config:{runtime}"
    if key not in ctx.cache:
        release = ctx.versions.get(runtime)
        if runtime == "containerd":
            ctx.cache[key] = read_containerd(ctx.opts.containerd_config, release)
        elif runtime == "crio":
            ctx.cache[key] = read_crio(ctx.opts.crio_config)
        else:
            ctx.cache[key] = read_docker(ctx.opts.docker_config, release)
    cfg: RuntimeConfig = ctx.cache[key]
    return cfg
