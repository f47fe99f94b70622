"""A container runtime's release from its ``--version`` output: for
``runtime configure`` (the config version containerd reads) and for
``doctor`` (what each installed release supports)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import List, Optional, Tuple

Version = Tuple[int, ...]
# not inside a word or a dotted name: "containerd/v2 v2.0.5" -> 2.0.5, "1.6.20~ds1" -> 1.6.20
_RELEASE = re.compile(r"(?<![\w.])v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse(text: str) -> Optional[Version]:
    """The first ``X.Y[.Z]`` in a ``--version`` output (``containerd ... 1.6.20~ds1`` -> (1, 6, 20))."""
    m = _RELEASE.search(text)
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def _ask(argv: List[str], must_succeed: bool = True) -> Optional[Version]:
    """The release *argv* prints (a failed ``docker version`` prints the client's: ignored)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse(proc.stdout + proc.stderr) if proc.returncode == 0 or not must_succeed else None


def probe(binary: str) -> Optional[Version]:
    """The runtime's release; None when nothing says a usable one.

    Docker's ``docker`` is only the client, whose release says nothing about the daemon's
    (a newer client talks to an older dockerd): the running daemon's release
    (``docker version``, which follows ``DOCKER_HOST``) comes first, then the installed
    ``dockerd --version``, then the client's.  Every other runtime: ``binary --version``.
    """
    if os.path.basename(binary) == "docker":
        running = _ask([binary, "version", "--format", "{{.Server.Version}}"])
        if running:
            return running
        dockerd = shutil.which("dockerd")
        installed = _ask([dockerd, "--version"]) if dockerd else None
        if installed:
            return installed
    return _ask([binary, "--version"], must_succeed=False)
