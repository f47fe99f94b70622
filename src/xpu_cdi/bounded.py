"""Bounded reading of what comes from outside: files, JSON and YAML trees, numbers of seconds.

Every loader of a file a user, an admin or another process can write (checkpoints, config
files, CDI specs, profiles, status files) reads through here, so no input ends in a hang, a
traceback or a memory blow-up (issue 41):

* :func:`read` opens regular files only, without blocking: a FIFO at a checkpoint's path hung
  its reader in ``open``; a device or ``/dev/zero`` would be endless.  At most *limit* bytes.
* :func:`check_tree` bounds a parsed document's depth and its node count counted as a tree
  (YAML aliases share subtrees: a few hundred bytes expand to millions of nodes, and any walk
  or error message over them follows), and refuses a tree that contains itself.
* :func:`json_loads` is ``json.loads`` with that check (the C parser recurses: 1,000 levels of
  ``[`` raise RecursionError, not ValueError); YAML goes through ``cdi/yamlload.py``.
* :func:`seconds` is the one range check of a number of seconds, for flags and config files
  alike: finite, not a bool, within the range.

Each refusal is an :class:`~xpu_cdi.errors.InputError` (a ValueError) whose message is one short line; the
caller words it into its own error (ConfigError, SpecError, ...) with the path.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any, Dict, List, Set, Tuple

from .errors import InputError

MAX_DEPTH = 100  # the hook's too (hotpath/lib/json.h FJ_MAX_DEPTH); our deepest document has under 10
MAX_NODES = 2_000_000  # the hook's too (lib/yaml.h FY_MAX_NODES); a 4096-card spec is ~150,000
MAX_SETTINGS_NODES = 10_000  # a settings file has tens of nodes: its error lines stay short


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a special file"


def read(path: str, limit: int) -> bytes:
    """At most *limit* bytes of the regular file *path* (symlinks followed, as a ConfigMap mount needs).

    Raises:
        OSError: absent or unreadable (FileNotFoundError: absent).
        InputError: not a regular file, or over *limit* bytes.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:  # refused unread
            raise InputError(f"{st.st_size} bytes is over the {limit}-byte limit")
        chunks, left = [], limit + 1  # a file growing meanwhile: one byte more tells
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise InputError(f"over the {limit}-byte limit")
    return data


def check_tree(doc: Any, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> int:
    """The node count of *doc* as a tree (a shared subtree counted at each use), without recursion.

    Raises:
        InputError: deeper than *max_depth*, over *max_nodes* nodes, or *doc* contains itself.
    """
    sizes: Dict[int, Tuple[int, int]] = {}  # id -> (nodes, levels) of a finished subtree
    in_progress: Set[int] = set()
    stack: List[Tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (list, dict)):
            continue
        key = id(node)
        kids = list(node.values()) if isinstance(node, dict) else node
        if done:
            in_progress.discard(key)
            below = [sizes.get(id(k), (1, 0)) for k in kids]
            total, levels = 1 + sum(n for n, _ in below), 1 + max((d for _, d in below), default=0)
            if total > max_nodes:
                raise InputError(f"more than {max_nodes} nodes (YAML aliases expand at each use)")
            if levels > max_depth:
                raise InputError(f"nested deeper than {max_depth} levels")
            sizes[key] = (total, levels)
            continue
        if key in sizes:
            continue
        if key in in_progress:
            raise InputError("it contains itself (a YAML anchor used inside itself)")
        in_progress.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids)
    return sizes.get(id(doc), (1, 0))[0]


def json_loads(data: "bytes | str", max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """``json.loads`` with :func:`check_tree`'s bounds.

    Raises:
        ValueError: not JSON (json.JSONDecodeError, UnicodeDecodeError) or an :class:`InputError`.
    """
    try:
        doc = json.loads(data)
    except RecursionError:
        raise InputError(f"nested deeper than {max_depth} levels") from None
    check_tree(doc, max_depth, max_nodes)
    return doc


def seconds(value: Any, low: float, high: float) -> float:
    """*value* as a number of seconds in ``[low, high]``.

    Raises:
        InputError: not a number (a bool is not one), nan or infinite, or out of the range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise InputError(f"must be a number of seconds between {low:g} and {high:g}")
    return float(value)


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to *limit* characters, for an error line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_json(path: str, limit: int, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`json_loads` of :func:`read` (raises OSError or ValueError, as they do)."""
    return json_loads(read(path, limit), max_depth)
