"""CDI names as the reference library and kubelet check them.

The compiled hook and wrapper apply the same rules in C; the shared vectors
(tests/data/vectors/annotations.json) hold both to them.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from ..errors import SelectionError

# \Z, not $: Python's $ also matches before a trailing newline, Go's (the
# reference library's) does not, so "0\n" must be refused as it is there
VENDOR_CLASS_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")  # both halves of a kind
NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?\Z")
ANNOTATION_PREFIX = "cdi.k8s.io/"
# Kubernetes' rule for an annotation key's name part and for a label value (the API server's)
K8S_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
MAX_K8S_NAME = 63


def kind_problem(kind: str) -> str:
    """Why *kind* (``vendor/class``) is not a valid CDI kind, or ``""``."""
    vendor, sep, cls = kind.partition("/")
    if not sep:
        return f"kind {_short(kind)} must be 'vendor/class'"
    for what, part in (("vendor", vendor), ("class", cls)):
        if not VENDOR_CLASS_RE.match(part):
            return (f"{what} {_short(part)} must start with a letter, end with a letter or digit, and use only "
                    f"[A-Za-z0-9_.-]")
    return ""


def name_problem(name: str) -> str:
    """Why *name* is not a valid CDI device name, or ``""``."""
    if not NAME_RE.match(name):
        return (f"device name {_short(name)} must start and end with a letter or digit and use "
                f"only [A-Za-z0-9_.:-]")
    return ""


def parse_qualified(device: str) -> Tuple[str, str]:
    """Split ``vendor/class=name`` into ``(kind, name)``.

    Raises:
        SelectionError: the string is not a fully qualified CDI device name.
    """
    kind, sep, name = device.partition("=")
    if not sep:
        raise SelectionError(f"CDI device {_short(device)} is not fully qualified: write it as vendor/class=name, "
                             f"e.g. kunlunxin.com/xpu=0")
    problem = kind_problem(kind) or name_problem(name)
    if problem:
        raise SelectionError(f"CDI device {_short(device)}: {problem}")
    return kind, name


def qualified(kind: str, name: str) -> str:
    """The fully qualified name ``vendor/class=name``, validated.

    Raises:
        SelectionError: kind or name is invalid.
    """
    device = f"{kind}={name}"
    parse_qualified(device)
    return device


def k8s_name_problem(what: str, value: str) -> str:
    """Why *value* breaks Kubernetes' name rule (K8S_NAME_RE), worded about *what*, or ``""``."""
    if len(value) > MAX_K8S_NAME:
        return f"{what} is longer than {MAX_K8S_NAME} characters"
    if not K8S_NAME_RE.match(value):
        return f"{what} must start and end with a letter or digit and use only [A-Za-z0-9_.-]"
    return ""


def annotation_key_problem(key: str) -> str:
    """Why *key* is not a valid ``cdi.k8s.io/`` annotation key, or ``""``."""
    if not key.startswith(ANNOTATION_PREFIX):
        return f"annotation key {_short(key)} must start with {ANNOTATION_PREFIX!r}"
    return k8s_name_problem(f"annotation key {_short(key)}: the part after the prefix", key[len(ANNOTATION_PREFIX):])


# What the binaries strip around a name (lib/strings.c): str.strip() would also take
# \x1c-\x1f and Unicode spaces, which the hook and the wrapper refuse.
ASCII_SPACE = " \t\n\v\f\r"


def parse_annotation_value(key: str, value: str) -> List[str]:
    """The qualified devices named by one ``cdi.k8s.io/`` annotation.

    Raises:
        SelectionError: a bad key, an empty value or a bad device name.
    """
    problem = annotation_key_problem(key)
    if problem:
        raise SelectionError(problem)
    devices = [d.strip(ASCII_SPACE) for d in value.split(",")]
    if not value.strip(ASCII_SPACE) or any(not d for d in devices):
        raise SelectionError(f"annotation {_short(key)}: value {_short(value)} must be a comma-separated list of "
                             f"CDI devices such as kunlunxin.com/xpu=0")
    for d in devices:
        try:
            parse_qualified(d)
        except SelectionError as err:
            raise SelectionError(f"annotation {_short(key)}: {err}") from None
    return devices


def _short(value: str) -> str:
    """*value* quoted for a message, cut short: annotation values come from users."""
    return repr(value) if len(value) <= 100 else f"{value[:60]!r}... ({len(value)} characters)"


def devices_from_annotations(annotations: Dict[str, str]) -> List[str]:
    """All qualified devices named by ``cdi.k8s.io/*`` annotations, in key order.

    Raises:
        SelectionError: any ``cdi.k8s.io/`` annotation is malformed.
    """
    out: Dict[str, None] = {}  # an ordered set: a value may list many devices
    for key in sorted(annotations):
        if key.startswith(ANNOTATION_PREFIX):
            for d in parse_annotation_value(key, str(annotations[key])):
                out[d] = None
    return list(out)
