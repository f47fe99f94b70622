"""The settings every node daemon starts from: where it reads the host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..cdi import registry
from ..generate import profile as _profile


@dataclass(frozen=True)
class NodeSettings:
    """Where a node daemon reads the host: the CDI spec directories, the roots, the profiles
    (each daemon's settings extend it; :class:`xpu_cdi.model.HostView` is what ``generate`` found)."""

    spec_dirs: Tuple[str, ...] = registry.DEFAULT_DIRS
    dev_root: str = "/"
    driver_root: str = "/"
    sysfs_root: str = "/"
    proc_root: Optional[str] = None  # default: sysfs_root (both are the kernel's)
    profiles: Tuple[str, ...] = ()  # () = every profile
    profiles_dir: Tuple[str, ...] = _profile.DEFAULT_PROFILE_DIRS

    @property
    def proc(self) -> str:
        return self.proc_root or self.sysfs_root
