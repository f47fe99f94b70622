"""The minimum ``cdiVersion`` a spec's content needs, and what runtimes accept.

A runtime whose CDI library is older than a file's version silently ignores
the file, so we always write the lowest version the content allows.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

KNOWN = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")


def parse(version: str) -> Tuple[int, ...]:
    """``"0.5.0"`` -> ``(0, 5, 0)``; raises ValueError on anything else."""
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(p) for p in parts)


def _edits(spec: Dict[str, Any]) -> List[Dict[str, Any]]:
    out = [spec.get("containerEdits") or {}]
    out += [d.get("containerEdits") or {} for d in spec.get("devices") or []]
    return out


def minimum(spec: Dict[str, Any]) -> str:
    """The lowest cdiVersion that can express *spec* (first matching rule wins)."""
    edits = _edits(spec)
    devices = spec.get("devices") or []
    if any(e.get("netDevices") for e in edits) or any(
            (e.get("intelRdt") or {}).get("schemata") or (e.get("intelRdt") or {}).get("enableMonitoring")
            for e in edits):
        return "1.1.0"
    if any("intelRdt" in e for e in edits) or any(e.get("additionalGids") for e in edits):
        return "0.7.0"
    cls = str(spec.get("kind", "")).partition("/")[2]
    if spec.get("annotations") or any(d.get("annotations") for d in devices) or "." in cls:
        return "0.6.0"
    if any(str(d.get("name", ""))[:1].isdigit() for d in devices) or any(
            n.get("hostPath") for e in edits for n in e.get("deviceNodes") or []):
        return "0.5.0"
    if any(m.get("type") for e in edits for m in e.get("mounts") or []):
        return "0.4.0"
    return "0.3.0"


# Highest cdiVersion the CDI library bundled with each runtime release accepts.
RUNTIME_MAX: Dict[str, Iterable[Tuple[Tuple[int, ...], str]]] = {
    # (first release with this library, highest cdiVersion), newest first
    # podman: 4.3.1 (Debian 12) and 5.4.2 (Debian 13) measured live (tests/e2e/test_matrix_podman.py);
    # releases between them are assumed no better than 4.3.
    "podman": (((5, 4, 0), "0.8.0"), ((4, 3, 0), "0.5.0")),
    "containerd": (((2, 2, 1), "1.1.0"), ((2, 0, 5), "1.0.0"), ((1, 7, 27), "0.8.0"),
                   ((1, 7, 16), "0.7.0"), ((1, 7, 12), "0.6.0"), ((1, 7, 0), "0.5.0")),
    "crio": (((1, 31, 0), "0.8.0"), ((1, 30, 0), "0.7.0"), ((1, 28, 0), "0.6.0"), ((1, 26, 0), "0.5.0")),
    "docker": (((28, 1, 0), "1.0.0"), ((28, 0, 0), "0.8.0"), ((27, 0, 0), "0.7.0"), ((25, 0, 0), "0.6.0")),
}


def runtime_max(runtime: str, release: Tuple[int, ...]) -> str:
    """Highest cdiVersion *runtime* at *release* loads; ``""`` when it has no CDI."""
    for first, highest in RUNTIME_MAX.get(runtime, ()):
        if release >= first:
            return highest
    return ""
