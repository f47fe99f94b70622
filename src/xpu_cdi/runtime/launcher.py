"""Installing ``xpu-container-runtime``: the compiled front end at PATH and
the Python launcher below at PATH.py (see ``xpu_cdi.frontend``).

The front end passes every command but create/run straight to the real
runtime, and applies the common requests itself; it execs the Python
launcher for the rest.  Why the launcher is not pip's console script:
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

TEMPLATE = """#!{python} -IS
# xpu-container-runtime's Python implementation, exec'd by the compiled front
# end beside it; written by `xpu-cdi runtime install-launcher`:
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


def install(path: str, binary: "str | None" = None) -> str:
    """Install the compiled wrapper (or *binary*) at *path* and the launcher
    at ``path.py`` (atomically, mode 0755).

    Returns:
        A one-line confirmation.

    Raises:
        OSError: the directory is not writable.
    """
    from ..frontend import install_pair

    return install_pair(path, "xpu-container-runtime", text(), binary) + \
        ": pass the first to `xpu-cdi runtime configure --wrapper-path`"
