"""Installing the hook for runtimes: the compiled front end at PATH and the
Python launcher below at PATH.py (see ``xpu_cdi.frontend``).

The front end handles a container start in about a millisecond when the
container asks for nothing, and injects the common case itself; it execs
the Python launcher for the rest.  Why the launcher is not pip's console
script: pip's console script starts the interpreter with ``site`` (venv set-up,
``.pth`` files, the editable-install finder): about 30 ms on the reference
machine before the hook runs a line.  The launcher names the real
interpreter with ``-I -S`` (no ``PYTHON*`` variables, no user site, no
``site``) and puts exactly the package's directory (and cffi's, for the
compiled resolver) on ``sys.path``: about 10 ms.  Runtimes exec it
directly, so it must be an absolute path in the hook entry.
"""

from __future__ import annotations

import os
import sys

TEMPLATE = """#!{python} -IS
# xpu-cdi-hook's Python implementation, exec'd by the compiled front end beside
# it; written by `xpu-cdi-hook install-launcher`: rerun that
# after moving or upgrading the installation.  -I: no PYTHON* variables, no user
# site; -S: no site.py (no .pth processing); sys.path set here, explicitly.
import sys
sys.path[0:0] = {front!r}
sys.path.extend({back!r})
from xpu_cdi.hook.main import main
sys.exit(main())
"""


def text() -> str:
    """The launcher for the running installation."""
    import xpu_cdi

    front = [os.path.dirname(os.path.dirname(os.path.abspath(xpu_cdi.__file__)))]
    back = []
    try:
        import _cffi_backend  # the compiled resolver imports it

        cffi_dir = os.path.dirname(os.path.abspath(_cffi_backend.__file__))
        if cffi_dir not in front:
            back.append(cffi_dir)  # after the stdlib: it must not shadow anything
    except ImportError:
        pass
    return TEMPLATE.format(python=os.path.realpath(sys.executable), front=front, back=back)


def install(path: str, binary: "str | None" = None) -> str:
    """Install the compiled hook (or *binary*) at *path* and the launcher at
    ``path.py`` (atomically, mode 0755).

    Returns:
        A one-line confirmation.
    """
    from ..frontend import install_pair

    return install_pair(path, "xpu-cdi-hook", text(), binary) + ": register the first as the hook's path"
