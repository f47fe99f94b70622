"""Registering with kubelet, and noticing when kubelet forgot us.

Order matters: the plugin serves on its socket first and registers after,
because kubelet dials the plugin back while (or right after) handling
``Register`` and gives up after 10 s; registering first is the classic
"context deadline exceeded".  A failed attempt is retried with backoff
(0.1 s doubling to 10 s), and the log quotes kubelet's own error.

kubelet, when it restarts, deletes every socket in its directory and
creates ``kubelet.sock`` anew; until a plugin registers again, pods asking
for its resource fail admission (``UnexpectedAdmissionError``).  The daemon
sees both events through inotify (:mod:`.inotify`) and re-registers at once;
:func:`restart_events` says which of them an event batch holds.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Iterable, Optional, Set, Tuple

import grpc

from . import api, inotify

BACKOFF_FIRST, BACKOFF_MAX = 0.1, 10.0
REGISTER_TIMEOUT = 5.0
# A fresh connection per attempt: gRPC shares subchannels between channels
# and keeps a failed one in its own reconnect backoff (1 s and up), so an
# attempt made while kubelet was restarting would delay the next ones by a
# second or more after kubelet is back.
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1), ("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000))


def register(plugin_dir: str, endpoint: str, resource: str, options: Any, timeout: float = REGISTER_TIMEOUT) -> str:
    """One ``Register`` call to ``<plugin_dir>/kubelet.sock``; ``""`` on success, else kubelet's error."""
    target = "unix:" + os.path.join(plugin_dir, api.KUBELET_SOCKET)
    request = api.RegisterRequest(version=api.VERSION, endpoint=endpoint, resource_name=resource, options=options)
    channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
    try:
        api.call(channel, "Registration", "Register")(request, timeout=timeout, wait_for_ready=False)
        return ""
    except grpc.RpcError as err:
        code = err.code() if hasattr(err, "code") else None
        details = err.details() if hasattr(err, "details") else str(err)
        return f"{getattr(code, 'name', code)}: {details}"
    finally:
        channel.close()


def backoff(attempts: int) -> float:
    """Seconds before retry number *attempts* (1-based)."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * (2 ** max(0, attempts - 1)))


def kubelet_socket(plugin_dir: str) -> Optional[Tuple[int, int]]:
    """``(device, inode)`` of kubelet.sock when it is a socket, else None."""
    try:
        st = os.lstat(os.path.join(plugin_dir, api.KUBELET_SOCKET))
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISSOCK(st.st_mode) else None


def restart_events(events: Iterable[inotify.Event], plugin_dir: str, sockets: Set[str]) -> Tuple[bool, Set[str]]:
    """``(kubelet.sock created, our socket names deleted)`` among inotify *events*."""
    created, deleted = False, set()
    for directory, name, mask in events:
        if os.path.normpath(directory) != os.path.normpath(plugin_dir):
            continue
        if name == api.KUBELET_SOCKET and mask & (inotify.IN_CREATE | inotify.IN_MOVED_TO):
            created = True
        if name in sockets and mask & (inotify.IN_DELETE | inotify.IN_MOVED_FROM):
            deleted.add(name)
    return created, deleted
