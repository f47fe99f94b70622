"""A container runtime's release from its ``--version`` output: for
``runtime configure`` (the config version containerd reads) and for
``doctor`` (what each installed release supports)."""

from __future__ import annotations

import re
import subprocess
from typing import Optional, Tuple

Version = Tuple[int, ...]
# not inside a word or a dotted name: "containerd/v2 v2.0.5" -> 2.0.5, "1.6.20~ds1" -> 1.6.20
_RELEASE = re.compile(r"(?<![\w.])v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse(text: str) -> Optional[Version]:
    """The first ``X.Y[.Z]`` in a ``--version`` output (``containerd ... 1.6.20~ds1`` -> (1, 6, 20))."""
    m = _RELEASE.search(text)
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def probe(binary: str) -> Optional[Version]:
    """``binary --version``'s release; None when it cannot run or says nothing usable."""
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse(proc.stdout + proc.stderr)
