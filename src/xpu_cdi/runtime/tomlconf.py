"""Read and edit TOML runtime configs (containerd, CRI-O, podman) with
tomlkit, so that everything we do not touch, comments included, stays as
it was, and what we add is indented like its neighbours."""

from __future__ import annotations

import copy
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import tomlkit
from tomlkit.items import AoT, Comment, String, Table, Whitespace
from tomlkit.toml_document import TOMLDocument

from ..errors import RuntimeConfigError

MAX_BYTES = 8 << 20
T = TypeVar("T")


def read_text(path: str) -> Optional[str]:
    """The file's text, or None when it does not exist.

    Raises:
        RuntimeConfigError: it exists but cannot be read.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise RuntimeConfigError(f"cannot read {path!r}: {err.strerror}", path, str(err.strerror)) from None
    if len(data) > MAX_BYTES:
        raise RuntimeConfigError(f"{path!r} is over {MAX_BYTES} bytes: not a runtime config", path,
                                 f"over {MAX_BYTES} bytes: not a runtime config")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise RuntimeConfigError(f"cannot parse {path!r}: not UTF-8 text; fix the file or pass "
                                 f"another --config", path, "not UTF-8 text") from None


def parse(text: str, path: str) -> TOMLDocument:
    """Parse TOML text.

    Raises:
        RuntimeConfigError: not valid TOML (one line, with tomlkit's position).
    """
    try:
        return tomlkit.parse(text)
    except Exception as err:  # noqa: BLE001 - tomlkit raises several unrelated classes
        reason = " ".join(str(err).split())
        raise RuntimeConfigError(f"cannot parse {path!r}: {reason}; fix the file (nothing was "
                                 f"changed) or pass another --config", path, reason) from None


def load(path: str) -> TOMLDocument:
    """The TOML document at *path*; an empty one when the file does not exist.

    Raises:
        RuntimeConfigError: unreadable or not valid TOML.
    """
    text = read_text(path)
    return parse(text, path) if text is not None else tomlkit.document()


def tolerant(path: str, read: Callable[[], T]) -> Tuple[Optional[T], str]:
    """Call a reader of this package without letting a broken file stop the caller.

    For ``doctor``, which reports an unreadable or unparseable config as a
    check result and goes on with the other checks, where ``runtime
    configure`` stops.  An OSError counts too (a drop-in dir that cannot be
    listed).

    Args:
        path: the main file *read* reads.
        read: the reader, e.g. ``lambda: containerd.load_merged(path)``.

    Returns:
        ``(result, "")``, or ``(None, why)``: the bare reason, naming the
        file when it is another than *path* (an import or a drop-in).
    """
    try:
        return read(), ""
    except RuntimeConfigError as err:
        reason, other = err.reason, err.path
    except OSError as err:
        reason, other = str(err.strerror or err), str(err.filename or "")
    where = f" (in {other!r})" if other and os.path.abspath(other) != os.path.abspath(path) else ""
    return None, " ".join(reason.split()) + where


def merge(into: Dict[str, Any], other: Dict[str, Any]) -> None:
    """Merge the plain dict *other* into *into* in place, as drop-ins are:
    tables merge key by key, anything else is replaced (by a copy)."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def empty() -> TOMLDocument:
    """A new, empty document."""
    return tomlkit.document()


def get(doc: Any, keys: Sequence[str], default: Any = None) -> Any:
    """The value at *keys* (plain Python, not tomlkit items), or *default*."""
    node = doc
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node.unwrap() if hasattr(node, "unwrap") else node


def _body(container: Any) -> List[Any]:
    return list(container.value.body if isinstance(container, Table) else container.body)


def _indent(item: Any) -> str:
    """An item's indentation (tomlkit keeps blank lines before it in the same string)."""
    return str(item.trivia.indent).rsplit("\n", 1)[-1]


def _key_indent(table: Any) -> Optional[str]:
    for key, item in _body(table):
        if key is not None and not isinstance(item, (Table, AoT, Whitespace)):
            return _indent(item)
    return None


def _sub_tables(table: Any) -> List[Table]:
    return [item for _key, item in _body(table) if isinstance(item, Table)]


def _ends_blank(container: Any) -> bool:
    body = _body(container)
    if not body:
        return False
    last = body[-1][1]
    if isinstance(last, Whitespace):
        return "\n" in last.as_string()
    return _ends_blank(last) if isinstance(last, Table) else False


def _step(table: Any) -> int:
    header = len(_indent(table)) if isinstance(table, Table) else 0
    keys = _key_indent(table)
    if keys is not None:
        return max(0, len(keys) - header)
    subs = [t for t in _sub_tables(table) if not t.is_super_table()]
    if subs:
        return max(0, len(_indent(subs[0])) - header)
    return 2 if header else 0  # a new, empty table: indent its keys if the file indents at all


def ensure_table(doc: Any, keys: Sequence[str], explicit: bool = True) -> Any:
    """The table at *keys*, created where missing: parents as implicit
    (header-less) tables, the last one with a header unless *explicit* is
    false (for a table that will only hold sub-tables).

    Raises:
        RuntimeConfigError: something on the way is not a table.
    """
    node = doc
    for i, key in enumerate(keys):
        if key not in node:
            if explicit and i == len(keys) - 1:
                add_table(node, key, {})
            else:
                node.add(key, tomlkit.table(is_super_table=True))
        node = node[key]
        if not isinstance(node, dict):
            raise RuntimeConfigError(f"{'.'.join(keys[:i + 1])!r} is a {type(node).__name__}, not a table: "
                                     f"fix the file")
    return node


def set_value(table: Any, key: str, value: Any) -> bool:
    """Set ``table[key] = value`` unless it already is; new keys are indented
    like their siblings.  Returns whether anything changed."""
    if key in table:
        if get(table, [key]) == value:
            return False
        old = (table.value if isinstance(table, Table) else table).item(key)
        if isinstance(value, str) and isinstance(old, String) and old._t.is_literal() and "'" not in value:
            value = tomlkit.string(value, literal=True)  # keep the file's 'quoting'
        table[key] = value
        return True
    indent = _key_indent(table)
    if indent is None:
        indent = (_indent(table) if isinstance(table, Table) else "") + " " * _step(table)
    table.add(key, value)
    (table.value if isinstance(table, Table) else table).item(key).trivia.indent = indent
    return True


def _restyle(table: Table, indent: int, step: int, blank: bool = True) -> None:
    table.trivia.indent = ("\n" if blank else "") + " " * indent
    for key, item in table.value.body:
        if key is None or isinstance(item, Whitespace):
            continue
        if isinstance(item, Table):
            _restyle(item, indent + step, step)
        else:
            item.trivia.indent = " " * (indent + step)


def _build(plain: Dict[str, Any]) -> Table:
    table = tomlkit.table()
    subs = []
    for key, value in plain.items():
        if isinstance(value, dict):
            subs.append((key, value))
        else:
            table.add(key, value)
    for key, value in subs:
        table.add(key, _build(value))
    return table


def _last_table(container: Any) -> Any:
    """The innermost last table of *container* (itself if it ends with something else)."""
    body = [item for key, item in _body(container) if key is not None]
    last = body[-1] if body else None
    return _last_table(last) if isinstance(last, Table) else container


def _take_trailing(container: Any) -> List[Any]:
    """Remove and return the blank lines and comments that end *container*:
    tomlkit keeps there what belongs above the next table header."""
    body = container.value.body if isinstance(container, Table) else container.body
    tail: List[Any] = []
    while body and body[-1][0] is None and isinstance(body[-1][1], (Whitespace, Comment)):
        tail.insert(0, body.pop()[1])
    return tail


def add_table(parent: Any, key: str, plain: Dict[str, Any]) -> None:
    """Add a new table ``parent[key]`` built from a plain dict, indented like
    the parent's other sub-tables; comments that stood above the next header
    stay above it."""
    siblings = [t for t in _sub_tables(parent) if not t.is_super_table()]
    if siblings:
        indent, step = len(_indent(siblings[0])), _step(siblings[0])
    else:
        step = _step(parent)
        indent = (len(_indent(parent)) if isinstance(parent, Table) else 0) + step
        if isinstance(parent, Table) and parent.is_super_table():
            indent = len(_indent(parent))
    blank = bool(_body(parent))
    tail = _take_trailing(_last_table(parent))
    parent.add(key, _build(plain))
    _restyle(parent[key], indent, step, blank)
    end = _last_table(parent[key])
    for item in tail:
        indent = None if isinstance(item, Whitespace) else item.trivia.indent
        end.add(item)
        if indent is not None:
            item.trivia.indent = indent  # tomlkit re-indents what it adds


def merge_into(table: Any, plain: Dict[str, Any]) -> bool:
    """Set every key of *plain* in *table* (recursively), keeping keys and
    comments that are only in *table*.  Returns whether anything changed."""
    changed = False
    for key, value in plain.items():
        if isinstance(value, dict):
            if key in table and isinstance(table[key], dict):
                changed |= merge_into(table[key], value)
            else:
                if key in table:
                    del table[key]
                add_table(table, key, value)
                changed = True
        else:
            changed |= set_value(table, key, value)
    return changed


def dumps(doc: Any) -> str:
    """The document's text (unchanged parts byte for byte)."""
    return tomlkit.dumps(doc)

