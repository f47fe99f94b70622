"""Install the oci-hooks.d file that makes podman and CRI-O run
``xpu-cdi-hook`` (env-based selection without the wrapper).

The file shipped in the repository's ``hooks/oci-hooks.d/xpu-cdi.json`` is
the template; its ``hook.path`` is replaced by the installed hook's absolute
path.  Without the repository (an installed wheel) the same content is
built here, following oci-hooks(5): ``when`` cannot test environment
variables, so the hook runs for every container and returns at once when
nothing was requested.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..errors import RuntimeConfigError
from .tomlconf import read_text

FILE_NAME = "xpu-cdi.json"
HOOK_NAME = "xpu-cdi-hook"  # a hooks.d file under another name is ours when it names the hook
DEFAULT_HOOKS_DIR = "/usr/share/containers/oci/hooks.d"  # read by podman and CRI-O by default
READ_HOOKS_DIRS = (DEFAULT_HOOKS_DIR, "/etc/containers/oci/hooks.d")  # every dir podman reads by default
TEMPLATE = Path(__file__).resolve().parents[3] / "hooks" / "oci-hooks.d" / FILE_NAME
STAGES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


def builtin(hook_path: str) -> Dict[str, Any]:
    """The hook file built without the repository's template."""
    return {"version": "1.0.0",
            "hook": {"path": hook_path, "args": ["xpu-cdi-hook", "prestart"],
                     "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "timeout": 10},
            "when": {"always": True},
            "stages": ["prestart"]}


def problem(doc: Any) -> str:
    """Why podman/CRI-O would reject the hook file *doc* or never run it (``""``: they would not).

    Wrong version, no hook path, no ``when`` condition, or a bad stage.
    """
    if not isinstance(doc, dict) or doc.get("version") != "1.0.0":
        return "'version' must be \"1.0.0\""
    if not isinstance(doc.get("hook"), dict) or not isinstance(doc["hook"].get("path"), str):
        return "'hook.path' is required"
    if not isinstance(doc.get("when"), dict) or not any(doc["when"].values()):
        return "'when' needs at least one condition, else the hook never runs"
    if not isinstance(doc.get("stages"), list) or not doc["stages"] or any(s not in STAGES for s in doc["stages"]):
        return f"'stages' must list some of {', '.join(STAGES)}"
    return ""


def check(doc: Any, source: str) -> None:
    """Refuse a hook file podman/CRI-O would reject or never run.

    Raises:
        RuntimeConfigError: :func:`problem` found one.
    """
    why = problem(doc)
    if why:
        raise RuntimeConfigError(f"oci hook file {source!r}: {why}")


def render(hook_path: str, template: Optional[Path] = None) -> str:
    """The hook file's text for the hook at *hook_path*.

    Raises:
        RuntimeConfigError: *hook_path* is relative, or the template is broken.
    """
    if not os.path.isabs(hook_path):
        raise RuntimeConfigError(f"--hook-path {hook_path!r} must be absolute: runtimes do not search PATH")
    template = template or TEMPLATE
    text = read_text(str(template))
    if text is None:
        doc = builtin(hook_path)
    else:
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise RuntimeConfigError(f"oci hook file {str(template)!r}: not valid JSON: {err}") from None
        check(doc, str(template))
        doc["hook"]["path"] = hook_path
    check(doc, str(template))
    return json.dumps(doc, indent=2) + "\n"


def inspect(hooks_dirs: List[str]) -> Dict[str, Tuple[Any, str]]:
    """Our hook files in *hooks_dirs*, for doctor: path -> (parsed content,
    why podman/CRI-O would reject it or ``""``).

    Ours are ``xpu-cdi.json`` and any other ``*.json`` whose text names
    ``xpu-cdi-hook`` (podman and CRI-O run every ``*.json`` of the dirs).
    An unreadable or non-JSON file is ``({}, why)``.
    """
    out: Dict[str, Tuple[Any, str]] = {}
    for d in hooks_dirs:
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".json"))
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            try:
                text = read_text(path)
            except RuntimeConfigError as err:
                if name == FILE_NAME:
                    out[path] = ({}, err.reason)
                continue
            if text is None or (name != FILE_NAME and HOOK_NAME not in text):
                continue
            try:
                doc = json.loads(text)
            except ValueError as err:
                out[path] = ({}, f"not valid JSON: {err}")
                continue
            out[path] = (doc, problem(doc))
    return out


def installed(hooks_dirs: List[str]) -> Dict[str, Dict[str, Any]]:
    """Our hook files found in *hooks_dirs* (path -> parsed content; ``{}`` when
    unreadable or not JSON), as :func:`inspect` finds them."""
    return {path: doc if isinstance(doc, dict) else {} for path, (doc, _why) in inspect(hooks_dirs).items()}
