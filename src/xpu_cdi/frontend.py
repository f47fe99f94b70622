"""Installing the compiled front end of ``xpu-cdi-hook`` and
``xpu-container-runtime``.

Each is a small C program (``_native/fast/``, built into ``_native/bin/``
by setup.py) that handles the common container start itself and execs
the Python implementation for everything else.  It finds that
implementation as ``<its own real path>.py``, so the two are always
installed as a pair: the binary at PATH and a Python launcher at PATH.py
(``python -I -S`` with an explicit ``sys.path``, runnable on its own).
"""

from __future__ import annotations

import os

from . import atomic


def packaged_binary(name: str) -> str:
    """Path of the compiled front end *name* built with this installation.

    Raises:
        FileNotFoundError: it was not built (an installation without a C compiler).
    """
    from . import _native

    path = os.path.join(os.path.dirname(os.path.abspath(_native.__file__)), "bin", name)
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path}: the compiled front end was not built with this installation "
                                f"(reinstall xpu-cdi with a C compiler present)")
    return path


def install_pair(path: str, name: str, python_launcher: str, binary: "str | None" = None) -> str:
    """Copy the front end *name* (or *binary*) to *path* and write the
    Python launcher text to ``path.py``, both atomically with mode 0755.

    The launcher goes first: a binary without its ``.py`` would fail every
    container start that needs the Python path.

    Returns:
        A one-line description of what was written.
    """
    path = os.path.abspath(path)
    source = binary or packaged_binary(name)
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    atomic.write_atomic(path + ".py", python_launcher.encode(), mode=0o755)
    with open(source, "rb") as f:
        atomic.write_atomic(path, f.read(), mode=0o755)
    return f"wrote {path} (compiled front end) and {path}.py (its Python implementation)"
