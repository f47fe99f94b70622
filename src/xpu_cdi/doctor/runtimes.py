"""Which container runtimes are installed, at which release, and what
that means for CDI (the release decides the highest cdiVersion it loads)."""

from __future__ import annotations

import re
import shutil
from typing import Callable, Dict, Iterable, List, Optional

from ..cdi import version as _version
from ..errors import XpuCdiError
from ..runtime import release as _release
from ..runtime.release import parse as parse_release
from .context import RUNTIMES, Context, Version
from .result import Result, ok, warn

# CDI arrived in these releases; older ones need the hook or the wrapper runtime
FIRST_CDI: Dict[str, Version] = {"containerd": (1, 7, 0), "docker": (25, 0, 0), "crio": (1, 23, 0),
                                 "podman": (4, 1, 0)}


# The binary that proves a runtime is installed: a docker *client* without
# dockerd (a stray download, a remote-daemon setup) is no Docker on this node.
DAEMONS: Dict[str, str] = {"docker": "dockerd"}


def detect(which: Callable[[str], Optional[str]] = shutil.which,
           names: Iterable[str] = RUNTIMES) -> Dict[str, Optional[Version]]:
    """Runtimes installed on PATH and their releases (None when ``--version`` says nothing usable)."""
    out: Dict[str, Optional[Version]] = {}
    for name in names:
        path = which(DAEMONS.get(name, name))
        if path:
            out[name] = _release.probe(path)
    return out


def parse_option(values: Iterable[str]) -> Dict[str, Optional[Version]]:
    """``--runtime-version containerd=1.7.20`` values (``none``: nothing installed).

    Raises:
        XpuCdiError: an unknown runtime or a release that is not X.Y[.Z].
    """
    out: Dict[str, Optional[Version]] = {}
    for value in values:
        if value == "none":
            continue
        name, sep, release = value.partition("=")
        if not sep or name not in RUNTIMES:
            raise XpuCdiError(f"--runtime-version {value!r}: write NAME=X.Y.Z with NAME one of "
                              f"{', '.join(RUNTIMES)}, or 'none'")
        parsed = parse_release(release)
        if parsed is None or not re.fullmatch(r"v?\d+\.\d+(\.\d+)?", release.strip()):
            raise XpuCdiError(f"--runtime-version {value!r}: release {release!r} is not X.Y[.Z]")
        out[name] = parsed
    return out


def show(release: Optional[Version]) -> str:
    """``(1, 7, 20)`` -> ``1.7.20``; None -> ``(unknown release)``."""
    return ".".join(map(str, release)) if release else "(unknown release)"


def has_cdi(name: str, release: Optional[Version]) -> Optional[bool]:
    """Whether this release of *name* reads CDI specs at all; None when the release is unknown."""
    if release is None:
        return None
    return release >= FIRST_CDI[name]


def highest(name: str, release: Optional[Version]) -> str:
    """The highest cdiVersion the release loads (``""``: no CDI or unknown)."""
    if release is None:
        return ""
    return _version.runtime_max(name, release)


def first_release_for(name: str, cdi_version: str) -> str:
    """The first release of *name* that loads *cdi_version* (``""`` if none known)."""
    need = _version.parse(cdi_version)
    for first, top in reversed(list(_version.RUNTIME_MAX.get(name, ()))):
        if _version.parse(top) >= need:
            return ".".join(map(str, first))
    return ""


def check_runtimes(ctx: Context) -> List[Result]:
    """runtimes: what is installed, and the highest cdiVersion each loads."""
    if not ctx.versions:
        return [warn("runtimes", "no containerd, CRI-O, Docker or podman found on PATH",
                     "install the container runtime the node uses, or pass --runtime-version NAME=X.Y.Z "
                     "when it lives outside PATH")]
    parts = []
    for name in sorted(ctx.versions):
        release = ctx.versions[name]
        cdi = has_cdi(name, release)
        what = "CDI unknown" if cdi is None else \
            (f"CDI up to {highest(name, release)}" if cdi and highest(name, release) else
             "CDI" if cdi else "no CDI")
        parts.append(f"{name} {show(release)} ({what})")
    return [ok("runtimes", ", ".join(parts))]
