"""A fast launcher for ``xpu-container-runtime``.

containerd's shim runs the runtime binary five or more times per container
(create, start, state, kill, delete), so interpreter start-up is paid each
time.  pip's console script starts Python with ``site`` (venv set-up,
``.pth`` files, the editable-install finder): about 25 ms more than
needed here.  The launcher runs the real interpreter with ``-I -S`` (no
``PYTHON*`` variables, no user site, no ``site``) and puts exactly the
package's directory on ``sys.path``.  The same idea as the hook's launcher
(``xpu_cdi.hook.launcher``); the wrapper needs no compiled module.
"""

from __future__ import annotations

import os
import sys

from .. import atomic

TEMPLATE = """#!{python} -IS
# xpu-container-runtime launcher, written by `xpu-cdi runtime install-launcher`:
# run that again after moving or upgrading the installation.  -I: no PYTHON*
# variables, no user site; -S: no site.py (no .pth processing).
import sys
sys.path[0:0] = {front!r}
from xpu_cdi.runtime.wrapper import main
sys.exit(main())
"""


def text() -> str:
    """The launcher for the running installation."""
    import xpu_cdi

    front = [os.path.dirname(os.path.dirname(os.path.abspath(xpu_cdi.__file__)))]
    return TEMPLATE.format(python=os.path.realpath(sys.executable), front=front)


def install(path: str) -> str:
    """Write the launcher to *path* (atomically, mode 0755).

    Returns:
        A one-line confirmation.

    Raises:
        OSError: the directory is not writable.
    """
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    atomic.write_atomic(path, text().encode(), mode=0o755)
    return f"wrote {path}: pass it to `xpu-cdi runtime configure --wrapper-path`"
