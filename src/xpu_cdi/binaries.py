"""Where the compiled ``xpu-cdi-hook`` and ``xpu-container-runtime`` are
installed, for the tooling that writes their paths into specs and runtime
configs (``generate --hook-path``, ``runtime configure``) or runs them
(``xpu-cdi hook``).

``make install`` and the distribution packages put them beside the
interpreter's scripts (a venv's ``bin/``, ``/usr/bin``); a plain
``pip install`` leaves them only in the package's ``_native/bin/``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, List, Tuple

from .errors import InstallError

NAMES = ("xpu-cdi-hook", "xpu-container-runtime")


def scripts_path(name: str) -> str:
    """*name* beside the running interpreter's scripts (whether it is there or not)."""
    return os.path.join(os.path.dirname(os.path.abspath(sys.executable)), name)


def packaged_path(name: str) -> str:
    """*name* as built into this package (``xpu_cdi/_native/bin/``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "bin", name)


def installed(name: str) -> str:
    """The installed binary *name*: beside the scripts when it is there, else
    the package's own copy, else (neither executable) the scripts path, which
    the callers name in their notes."""
    for path in (scripts_path(name), packaged_path(name)):
        if os.access(path, os.X_OK):
            return path
    return scripts_path(name)


def exec_binary(name: str, args: List[str]) -> None:
    """Replace this process by the installed binary *name* with *args*
    (its exit code is then the command's).

    Raises:
        InstallError: it is not installed or cannot be executed.
    """
    path = installed(name)
    try:
        os.execv(path, [path, *args])
    except OSError as err:
        raise InstallError(f"cannot run {path!r}: {err.strerror or err}: reinstall xpu-cdi "
                           f"(`make install`, or the distribution package)") from None


def hook_command() -> Any:
    """``xpu-cdi hook ...``, which execs the installed hook (``cli`` builds it on first use)."""
    import click

    @click.command("hook", add_help_option=False,
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def hook(args: Tuple[str, ...]) -> None:
        """Run the OCI hook (execs the compiled xpu-cdi-hook): prestart, update-ldcache, create-symlinks."""
        exec_binary("xpu-cdi-hook", list(args))

    return hook
