"""One node, one way: a kind's cards go to Kubernetes through the device plugin or the DRA driver, never both.

Both would hand the same card to two pods (the scheduler counts the device
plugin's resource and the DRA pool apart).  Two rules, checked by both
daemons before they serve a kind and by ``doctor``:

1. the node config's ``kubernetes-allocation`` (:mod:`xpu_cdi.nodeconfig`),
   when it names a way for the kind, is obeyed;
2. otherwise the first daemon to serve the kind holds it: each serving
   daemon keeps a shared ``flock`` on ``<run dir>/<kind>.<way>.lock`` for as
   long as it runs (the kernel drops it when the process dies, however it
   dies), and a daemon of the other way that finds that lock held refuses.
   Shared, so that two DRA driver pods of a rolling update both serve; the
   check and the take happen under an exclusive lock on ``<kind>.lock``, so
   two daemons starting together cannot both win.

The run dir (``/run/xpu-cdi``) is the host's, mounted into both DaemonSets.
"""

from __future__ import annotations

import fcntl
import os
from typing import Dict, Optional

from .. import nodeconfig
from ..errors import ConfigError

RUN_DIR = "/run/xpu-cdi"
DEVICE_PLUGIN, DRA = nodeconfig.WAYS
_HELD: Dict[str, int] = {}  # lock path -> fd, kept open while serving


def _base(run_dir: str, kind: str) -> str:
    return os.path.join(run_dir, "serve-" + kind.replace("/", "_"))


def _open(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def held_by_other(run_dir: str, kind: str, way: str) -> bool:
    """Whether a daemon of the other way serves *kind* now (its lock is held)."""
    other = DRA if way == DEVICE_PLUGIN else DEVICE_PLUGIN
    try:
        fd = os.open(f"{_base(run_dir, kind)}.{other}.lock", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock
    return False


def refusal(kind: str, way: str, cfg: nodeconfig.NodeConfig, run_dir: str = RUN_DIR) -> str:
    """Why *way* must not serve *kind* on this node (one line with the fix), or ``""``."""
    chosen = nodeconfig.way_for(cfg, kind)
    if chosen is not None and chosen != way:
        return (f"{kind}: not served: the node config {cfg.path} gives it to the {chosen} "
                f"({nodeconfig.ALLOCATION}); to serve it by the {way}, set `{nodeconfig.ALLOCATION}: {way}` there "
                f"and stop the {chosen}")
    if chosen is None and held_by_other(run_dir, kind, way):
        other = DRA if way == DEVICE_PLUGIN else DEVICE_PLUGIN
        return (f"{kind}: not served: the {other} on this node serves it already (one way per kind, or two "
                f"pods could get the same card); stop it, or choose in {cfg.path} with "
                f"`{nodeconfig.ALLOCATION}: {{{kind}: {way}}}`")
    return ""


def claim(kind: str, way: str, cfg: nodeconfig.NodeConfig, run_dir: str = RUN_DIR) -> str:
    """Take *kind* for *way*: ``""`` when this process may serve it (and holds it until it exits or
    :func:`release`), else the refusal line."""
    try:
        os.makedirs(run_dir, mode=0o755, exist_ok=True)
        guard = _open(_base(run_dir, kind) + ".lock")
    except OSError as err:
        raise ConfigError(f"cannot use {run_dir} to keep one way per kind: {err.strerror} (mount the host's "
                          f"{RUN_DIR} there)") from None
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        why = refusal(kind, way, cfg, run_dir)
        if why:
            return why
        path = f"{_base(run_dir, kind)}.{way}.lock"
        if path not in _HELD:
            fd = _open(path)
            fcntl.flock(fd, fcntl.LOCK_SH)
            _HELD[path] = fd
        return ""
    finally:
        os.close(guard)


def claim_for(kind: str, way: str, node_config: str, run_dir: str = RUN_DIR) -> str:
    """:func:`claim` with the node config read from *node_config* (an unreadable one refuses, saying why)."""
    try:
        cfg = nodeconfig.read(node_config)
    except ConfigError as err:
        return f"{kind}: not served: {err}"
    return claim(kind, way, cfg, run_dir)


def release(kind: str, way: str, run_dir: str = RUN_DIR) -> None:
    """Stop holding *kind* (the daemon stopped serving it)."""
    fd: Optional[int] = _HELD.pop(f"{_base(run_dir, kind)}.{way}.lock", None)
    if fd is not None:
        os.close(fd)


def release_last(kind: str, way: str, run_dir: str = RUN_DIR) -> bool:
    """Stop holding *kind*; True when no other daemon of *way* holds it (the last one out withdraws
    what the way published: during a rolling update the new pod keeps the node's slices)."""
    path = f"{_base(run_dir, kind)}.{way}.lock"
    release(kind, way, run_dir)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def serving(run_dir: str, kind: str, way: str) -> bool:
    """Whether some daemon of *way* serves *kind* now (for doctor)."""
    return held_by_other(run_dir, kind, DRA if way == DEVICE_PLUGIN else DEVICE_PLUGIN)
