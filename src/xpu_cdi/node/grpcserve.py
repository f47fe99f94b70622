"""The gRPC server the kubelet plugins (device plugin, DRA driver) run on a unix socket,
and their services built from the method tables of :mod:`.protobuild`.

kubelet dials plugins on unix sockets in its own directories; a plugin killed
before it could clean up leaves its socket behind, which is replaced, while a
socket another live process serves on is left alone (two plugins would
otherwise delete each other's sockets for ever).
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from concurrent import futures
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

import grpc

from .protobuild import Method

# A socket file, not a name: (st_dev, st_ino, st_ctime_ns).  kubelet deletes
# and re-creates sockets under the same names, and ext4 hands the freed inode
# number to the new file; the creation time tells them apart (to a tick of
# the kernel's file clock, a few ms before Linux 6.13: far less than a
# kubelet takes to restart).
Identity = Tuple[int, int, int]


def socket_identity(path: str) -> Optional[Identity]:
    """The identity of the socket at *path*, or None when there is none (or another kind of file)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns) if stat.S_ISSOCK(st.st_mode) else None


def same_inode(path: str, identity: Optional[Identity]) -> bool:
    """The socket at *path* is the file *identity* was taken of (by inode: its ctime may have moved)."""
    now = socket_identity(path)
    return identity is not None and now is not None and now[:2] == identity[:2]


MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with the terminating NUL


def serve_unix(path: str, handlers: Sequence[Any], workers: int, name: str,
               dir_option: str) -> Tuple[grpc.Server, futures.ThreadPoolExecutor]:
    """A started gRPC server on the unix socket *path* (a stale socket there replaced).

    Raises:
        OSError: the path is too long, or cannot be listened on (the message names *dir_option*).
    """
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise OSError(f"socket path {path} is {len(os.fsencode(path))} bytes, over the {MAX_SOCKET_PATH}-byte "
                      f"limit of unix sockets: use a shorter {dir_option}")
    remove_stale_socket(path)
    pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
    server = grpc.server(pool)
    server.add_generic_rpc_handlers(tuple(handlers))
    try:
        port = server.add_insecure_port("unix:" + path)
    except RuntimeError:  # newer grpcio raises where older ones return 0
        port = 0
    if port == 0:
        pool.shutdown(wait=False)
        raise OSError(f"cannot listen on {path}: is {dir_option} there, and writable?")
    server.start()
    return server, pool


def remove_stale_socket(path: str) -> None:
    """Remove *path* if it is a socket nobody serves on (a plugin killed before it could clean up).

    Raises:
        OSError: another process serves there (a second plugin for the kind?): its socket is left alone,
            or the two would delete each other's sockets for ever.
    """
    if socket_identity(path) is None:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    except OSError as err:
        if err.errno == errno.ENOENT:
            return
        raise
    finally:
        probe.close()
    raise OSError(f"another process serves on {path} (a second device plugin for this kind?): stop it")


def service_handler(name: str, methods: Sequence[Method], classes: Mapping[str, Any],
                    implementations: Mapping[str, Callable[[Any, Any], Any]]) -> Any:
    """gRPC's generic handler of the service *name* (``package.Service``): one callable per method of
    its table *methods*, the messages' classes from *classes* (what :func:`.protobuild.build` made)."""
    out = {}
    for method, req, resp, streams in methods:
        make = grpc.unary_stream_rpc_method_handler if streams else grpc.unary_unary_rpc_method_handler
        out[method] = make(implementations[method], request_deserializer=classes[req].FromString,
                           response_serializer=classes[resp].SerializeToString)
    return grpc.method_handlers_generic_handler(name, out)
