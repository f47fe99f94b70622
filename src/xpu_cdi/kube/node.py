"""The node a daemon runs on, as kubelet names it: what the DRA driver, the device plugin's
evictions and the labeller act on (and nothing else)."""

from __future__ import annotations

import os
import re
import socket
from typing import Optional

from ..errors import ConfigError

_NODE = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def node_name(given: Optional[str]) -> str:
    """--node-name, else $NODE_NAME (the DaemonSet's downward API), else the host name as kubelet defaults to it."""
    name = given or os.environ.get("NODE_NAME") or socket.gethostname().lower()
    if not _NODE.match(name):
        raise ConfigError(f"node name {name!r} is not a DNS subdomain: give kubelet's node name with --node-name "
                          f"(or NODE_NAME from the downward API, spec.nodeName)")
    return name
