"""The labels as a feature file of node-feature-discovery's local source.

nfd-worker reads every non-hidden file of ``features.d/``; each line is
``name=value`` (a name with a ``/`` prefix is a label name of its own, NFD
adds none), ``#`` starts a comment, and a ``# +expiry-time=<RFC 3339>``
directive makes NFD ignore the lines after it once that time has passed,
so the labels of a node whose labeller died go away.  The file is written
atomically (a hidden temp file, which NFD skips, then a rename) and
re-written before half its lifetime is over.  Checked against NFD's
documented format, not against a running NFD (its module is not served by
the package registries here): docs/topology.md, "Node labels".
"""

from __future__ import annotations

import datetime
import os
from typing import Dict

from .. import atomic

DEFAULT_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
DEFAULT_FILE = os.path.join(DEFAULT_DIR, "xpu-cdi")
DEFAULT_EXPIRY = 3600.0  # seconds a written file stays valid


def render(labels: Dict[str, str], now: datetime.datetime, lifetime: float) -> str:
    """The file's text: a header comment, the expiry directive, one ``name=value`` a line (sorted)."""
    expires = (now + datetime.timedelta(seconds=lifetime)).astimezone(datetime.timezone.utc)
    lines = ["# written by xpu-cdi labels: what this node's accelerators are (docs/topology.md)",
             f"# +expiry-time={expires.strftime('%Y-%m-%dT%H:%M:%SZ')}"]
    lines += [f"{k}={v}" for k, v in sorted(labels.items())]
    return "\n".join(lines) + "\n"


def write(path: str, labels: Dict[str, str], lifetime: float = DEFAULT_EXPIRY) -> None:
    """Write the feature file at *path* (its directory created); no labels: the file is removed."""
    if not labels:
        remove(path)
        return
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    text = render(labels, datetime.datetime.now(datetime.timezone.utc), lifetime)
    atomic.write_atomic(path, text.encode(), durable=False)


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
