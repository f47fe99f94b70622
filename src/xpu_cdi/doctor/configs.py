"""containerd, CRI-O and Docker configs in one shape for the checks: is CDI
on, which spec dirs, which runtime handlers run which binary.

Where each runtime keeps these settings, and its defaults for keys that are
absent, is known only to the readers of ``xpu_cdi.runtime`` (which
``xpu-cdi runtime configure`` uses too); this module asks them and turns a
file they cannot read into ``RuntimeConfig.error``, a check result.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..cdi import registry
from ..runtime import containerd, crio, docker, tomlconf
from .context import Version
from .runtimes import has_cdi


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
    """containerd's config.toml (config version 1 to 4) and its ``imports``."""
    cfg = RuntimeConfig("containerd", path, os.path.exists(path))
    data, cfg.error = tomlconf.tolerant(path, lambda: containerd.load_merged(path))
    if data is None:
        return cfg
    cfg.cdi_table = f"[plugins.{json.dumps(containerd.cri_keys(data)[1])}]"
    if release is None or has_cdi("containerd", release):  # unknown: assume CDI, as a version 3 or 4 file means 2.x
        cfg.cdi = containerd.cdi_enabled(data, release)
    cfg.spec_dirs = containerd.cdi_spec_dirs(data)
    found = containerd.handlers(data)
    for name, binary in containerd.binaries(data).items():
        cfg.handlers[name] = Handler(name, binary, str(found.get(name, {}).get("base_runtime_spec") or ""))
    return cfg


def read_crio(path: str) -> RuntimeConfig:
    """crio.conf plus the drop-ins in ``crio.conf.d`` beside it (later files win)."""
    drop_ins = os.path.join(os.path.dirname(path), "crio.conf.d")
    cfg = RuntimeConfig("crio", path, os.path.exists(path), cdi=True, cdi_table="[crio.runtime]")
    data, cfg.error = tomlconf.tolerant(path, lambda: crio.load_effective(path, drop_ins))
    if data is None:
        return cfg
    cfg.exists = bool(crio.sources(path, drop_ins))
    cfg.spec_dirs = crio.cdi_spec_dirs(data)
    cfg.handlers = {name: Handler(name, binary) for name, binary in crio.binaries(data).items()}
    return cfg


def read_docker(path: str, release: Optional[Version]) -> RuntimeConfig:
    """Docker's daemon.json: ``runtimes``, ``features.cdi``, ``cdi-spec-dirs``."""
    cfg = RuntimeConfig("docker", path, os.path.exists(path), cdi_table='"features": {"cdi": true}')
    data, cfg.error = tomlconf.tolerant(path, lambda: docker.load(path))
    if data is None:
        return cfg
    if release is None or has_cdi("docker", release):
        cfg.cdi = docker.cdi_enabled(data, release)
    cfg.spec_dirs = docker.cdi_spec_dirs(data)
    cfg.handlers = {name: Handler(name, binary) for name, binary in docker.binaries(data).items()}
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
