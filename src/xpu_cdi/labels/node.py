"""The labels on the Node object, through the API server (:mod:`xpu_cdi.kube.client`, the DRA driver's too).

One JSON merge patch of ``metadata.labels`` per change: ours that differ
set, ours no longer wanted set to null (removed); a label outside the
``xpu-cdi.io/`` prefix is never in a patch.  deploy/labels' admission
policy holds the token to that: its own node, our prefix only.
"""

from __future__ import annotations

from typing import Any, Dict, Optional
from urllib.parse import quote

from . import changes


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{quote(name)}"


class NodeLabels:
    """The labels of one Node: read, and brought to what is wanted."""

    def __init__(self, kube: Any, node: str) -> None:
        self.kube, self.node = kube, node

    def current(self) -> Dict[str, str]:
        """The node's labels now (every label: the patch is computed against them)."""
        doc = self.kube.get(node_path(self.node))
        return dict((doc.get("metadata") or {}).get("labels") or {})

    def apply(self, wanted: Dict[str, str], current: Optional[Dict[str, str]] = None) -> Dict[str, Optional[str]]:
        """Patch the node's labels of ours to *wanted*; the patch sent (``{}``: nothing to change).

        Raises:
            ApiError: the node cannot be read or the patch was refused (RBAC, the admission policy).
        """
        patch = changes(self.current() if current is None else current, wanted)
        if patch:
            self.kube.request("PATCH", node_path(self.node), {"metadata": {"labels": patch}},
                              content_type="application/merge-patch+json")
        return patch
