"""The OCI state the runtime writes to the hook's stdin, and what the hook
needs from the bundle's ``config.json``: the container's init pid, its
rootfs, its ``process.env`` and annotations.

Both are read with a size limit and parsed as data only; nothing from the
container's environment reaches the hook's own process.
"""

from __future__ import annotations

import os

from ..errors import HookError
from .jsonload import loads

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of import on the hot path
    from typing import Any, Dict, List, Optional

MAX_STATE_BYTES = 1 << 20  # runc's state is ~300 bytes plus annotations
MAX_CONFIG_BYTES = 32 << 20  # config.json with a large env or many mounts


class Container:
    """What the hook knows about the container being created."""

    __slots__ = ("id", "pid", "bundle", "rootfs", "env", "annotations", "status")

    def __init__(self, id: str, pid: int, bundle: str, rootfs: str, env: "List[str]",
                 annotations: "Dict[str, str]", status: str) -> None:
        self.id, self.pid, self.bundle, self.rootfs = id, pid, bundle, rootfs
        self.env, self.annotations, self.status = env, annotations, status


def read_limited(fd: int, limit: int, what: str) -> bytes:
    """All of *fd* up to *limit* bytes.

    Raises:
        HookError: more than *limit* bytes, or the read fails.
    """
    chunks = []
    total = 0
    while True:
        try:
            chunk = os.read(fd, min(65536, limit + 1 - total))
        except OSError as err:
            raise HookError(f"cannot read {what}: {err.strerror}") from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise HookError(f"{what} is larger than {limit} bytes: refusing to parse it")
    return b"".join(chunks)


def parse_state(data: bytes) -> "Dict[str, Any]":
    """The OCI state object, checked for the fields the hook uses.

    Raises:
        HookError: not JSON, not an object, or ``id``/``bundle``/``pid`` unusable.
    """
    if not data.strip():
        raise HookError("no OCI state on stdin: the hook must be run by a container runtime "
                        "(prestart or createRuntime hook)")
    try:
        state = loads(data)
    except ValueError as err:
        raise HookError(f"OCI state on stdin is not valid JSON ({err}): is the runtime OCI compliant?") from None
    except RecursionError:
        raise HookError("OCI state on stdin is nested too deeply to be a runtime's state") from None
    if not isinstance(state, dict):
        raise HookError(f"OCI state on stdin must be a JSON object, got {type(state).__name__}")
    cid = state.get("id")
    if not isinstance(cid, str) or not cid:
        raise HookError(f"OCI state: 'id' must be a non-empty string, got {cid!r}")
    bundle = state.get("bundle")
    if not isinstance(bundle, str) or not os.path.isabs(bundle):
        raise HookError(f"OCI state of {cid!r}: 'bundle' must be an absolute path, got {bundle!r}")
    pid = state.get("pid", 0)
    if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
        raise HookError(f"OCI state of {cid!r}: 'pid' must be a non-negative integer, got {pid!r}")
    ann = state.get("annotations")
    if ann is not None and not isinstance(ann, dict):
        raise HookError(f"OCI state of {cid!r}: 'annotations' must be an object")
    return state


def read_config(bundle: str) -> "Dict[str, Any]":
    """``<bundle>/config.json`` as a dict.

    Raises:
        HookError: missing, too large, not JSON or not an object.
    """
    path = os.path.join(bundle, "config.json")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        raise HookError(f"bundle {bundle!r}: cannot open config.json: {err.strerror}") from None
    try:
        data = read_limited(fd, MAX_CONFIG_BYTES, f"{path!r}")
    finally:
        os.close(fd)
    try:
        config = loads(data)
    except ValueError as err:
        raise HookError(f"{path!r} is not valid JSON: {err}") from None
    except RecursionError:
        raise HookError(f"{path!r} is nested too deeply to be a runtime config") from None
    if not isinstance(config, dict):
        raise HookError(f"{path!r} must hold a JSON object")
    return config


def rootfs_of(config: "Dict[str, Any]", state: "Dict[str, Any]", bundle: str) -> str:
    """The rootfs: ``root.path`` of config.json (relative to the bundle or
    absolute), else crun's ``root`` in the state.

    Raises:
        HookError: neither gives a path.
    """
    root = config.get("root")
    path: "Optional[Any]" = root.get("path") if isinstance(root, dict) else None
    if path is None and isinstance(state.get("root"), str):
        path = state["root"]
    if not isinstance(path, str) or not path:
        raise HookError(f"{os.path.join(bundle, 'config.json')!r} has no root.path: cannot find the "
                        f"container's rootfs")
    return os.path.normpath(os.path.join(bundle, path))


def container(state: "Dict[str, Any]", config: "Dict[str, Any]") -> Container:
    """A :class:`Container` from a parsed state and config.json.

    Raises:
        HookError: no rootfs, or a malformed ``process.env`` / annotations.
    """
    bundle = state["bundle"]
    rootfs = rootfs_of(config, state, bundle)
    process = config.get("process") or {}
    env = process.get("env") if isinstance(process, dict) else None
    if env is None:
        env = []
    if not isinstance(env, list):
        raise HookError(f"config.json of {state['id']!r}: process.env must be a list")
    annotations: "Dict[str, str]" = {}
    for source in (state.get("annotations"), config.get("annotations")):
        if source is None:
            continue
        if not isinstance(source, dict):
            raise HookError(f"config.json of {state['id']!r}: annotations must be an object")
        for k, v in source.items():
            annotations[str(k)] = v if isinstance(v, str) else str(v)
    return Container(state["id"], state.get("pid", 0), bundle, rootfs, env, annotations,
                     str(state.get("status", "")))


def load(fd: int = 0) -> Container:
    """Read the state from *fd* (stdin) and the bundle's config.json.

    Raises:
        HookError: any of the inputs is unusable.
    """
    state = parse_state(read_limited(fd, MAX_STATE_BYTES, "the OCI state on stdin"))
    return container(state, read_config(state["bundle"]))
