"""The ``Register`` call to kubelet, its backoff, and what identifies a socket.

Order matters: the plugin serves on its socket first and registers after,
because kubelet dials the plugin back while handling ``Register`` and gives
up after 10 s; registering first is the classic "context deadline
exceeded".  And the connection to kubelet comes before the last look at our
socket: a starting kubelet deletes every socket in its directory before it
listens, so once we are connected to a kubelet its clean-up is behind us,
and a socket of ours that is there then is one it will find.  Checked the
other way round, a kubelet starting in between deletes the socket we just
checked and then waits its 10 s for it.  When to register (once per
kubelet, whatever woke us) is :mod:`.restart`'s.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import grpc

from . import api

BACKOFF_FIRST, BACKOFF_MAX = 0.1, 10.0
REGISTER_TIMEOUT = 5.0
# A fresh connection per attempt: gRPC shares subchannels between channels
# and keeps a failed one in its own reconnect backoff (1 s and up), so an
# attempt made while kubelet was restarting would delay the next ones by a
# second or more after kubelet is back.
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1), ("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000))

NO_SUCH_METHOD = api.method_path("Registration", "XpuCdiNoSuchMethod")  # see _connect


def kubelet_socket(plugin_dir: str) -> str:
    return os.path.join(plugin_dir, api.KUBELET_SOCKET)


def register(plugin_dir: str, endpoint: str, resource: str, options: Any, ours: Callable[[], bool] = lambda: True,
             serve: Callable[[], bool] = lambda: True, timeout: float = REGISTER_TIMEOUT) -> str:
    """One ``Register`` call to ``<plugin_dir>/kubelet.sock``; ``""`` on success, else kubelet's error.

    Once connected, *ours()* says whether our socket is still the one we serve
    (the module docstring says why then); if not, *serve()* serves a new one
    and the connection is made again: serving takes a while, and the kubelet
    we were connected to may be gone by then.
    """
    request = api.RegisterRequest(version=api.VERSION, endpoint=endpoint, resource_name=resource, options=options)
    channel = grpc.insecure_channel("unix:" + kubelet_socket(plugin_dir), options=CHANNEL_OPTIONS)
    try:
        for _round in range(3):
            err = _connect(channel, timeout)
            if err:
                return err
            if ours():
                break
            if not serve():
                return "not sent: our socket could not be served"
        else:
            return "not sent: our socket was deleted three times while we connected"
        api.call(channel, "Registration", "Register")(request, timeout=timeout, wait_for_ready=False)
        return ""
    except grpc.RpcError as err:
        code = err.code() if hasattr(err, "code") else None
        details = err.details() if hasattr(err, "details") else str(err)
        return f"{getattr(code, 'name', code)}: {details}"
    finally:
        channel.close()


def _connect(channel: Any, timeout: float) -> str:
    """Connect *channel*: ``""`` once kubelet has answered on it, else why not (a dead kubelet.sock).

    The proof is a call to a method kubelet does not have: its ``UNIMPLEMENTED``
    comes back over the connection, and kubelet does nothing.  (gRPC's
    connectivity callbacks are polled: a connection that is up and cut again
    between two polls is never reported, and an idle channel stays idle.)
    """
    probe = channel.unary_unary(NO_SUCH_METHOD, request_serializer=api.Empty.SerializeToString,
                                response_deserializer=api.Empty.FromString)
    try:
        probe(api.Empty(), timeout=timeout, wait_for_ready=False)
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.UNIMPLEMENTED:
            return f"{err.code().name}: {err.details()}"
    return ""


def backoff(attempts: int) -> float:
    """Seconds before retry number *attempts* (1-based)."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * (2 ** max(0, attempts - 1)))
