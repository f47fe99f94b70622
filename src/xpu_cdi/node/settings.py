"""The settings every node daemon starts from: where it reads the host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..cdi import registry
from ..generate import profile as _profile

#: Seconds between the kubelet plugins' health polls.  Health is event-driven (inotify on the
#: nodes' directories, uevents): the poll only catches what no event announces (the driver's
#: state file in /proc, a PCI function gone where uevents are not heard), and each pass costs
#: about a millisecond of CPU, so a 1 s poll alone was 0.08 % of a core (issue 30).
HEALTH_INTERVAL = 10.0
#: What --health-interval and a config file's health-interval accept (bounded.seconds): under
#: 0.05 s the poll is a busy loop; over a minute a missed event goes unseen too long.
HEALTH_INTERVAL_RANGE = (0.05, 60.0)


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
