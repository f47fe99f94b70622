"""A fast launcher for the hook.

pip's console script starts the interpreter with ``site`` (venv set-up,
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
# xpu-cdi-hook launcher, written by `xpu-cdi-hook install-launcher`: rerun that
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


def install(path: str) -> str:
    """Write the launcher to *path* (atomically, mode 0755).

    Returns:
        A one-line confirmation.
    """
    path = os.path.abspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o755)
    try:
        os.write(fd, text().encode())
        os.fchmod(fd, 0o755)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return f"wrote {path}: register it as the hook's path"
