"""A node daemon serves from a fresh interpreter (issue 30; docs/performance.md).

``xpu-cdi device-plugin``, ``exporter`` and ``dra-driver`` parse and check
their flags and files with click, then :func:`replace_with` this process by
the same interpreter started again, which imports the daemon's module and
calls its ``serve`` with the settings (pickled through a memfd): click and
the command line's modules (0.8-1.4 MiB resident, every daemon of every
node) stay behind.  The pid, the descriptors (stdout, stderr, the journal's
socket), the environment, the namespaces and the cgroup are the same, so
kubelet, systemd and the tests see one process; a bad flag or file is still
refused before the exec, and an error while serving is one line and an exit
code as the command line words it (:func:`main`).
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
from typing import Any, List, NoReturn, Optional, Sequence

from .. import errors

#: what the new interpreter runs (one line: ps shows it): never the working directory's modules
#: (``-c`` puts it first on sys.path), then :func:`main`
CODE = "import sys; sys.path[:1] == [''] and sys.path.pop(0); from xpu_cdi.node.fresh import main; main()"
COMM = b"xpu-cdi"  # the process name ps, top and pgrep show, as the console script's was


def interpreter_flags() -> List[str]:
    """The options this interpreter was started with that decide what it imports from where."""
    f = sys.flags
    if f.isolated:  # -I: -E, -s and -P with it
        out = ["-I"]
    else:
        out = (["-E"] if f.ignore_environment else []) + (["-s"] if f.no_user_site else [])
        out += ["-P"] if getattr(f, "safe_path", False) else []  # 3.11+
    out += ["-S"] if f.no_site else []
    for key, value in sys._xoptions.items():
        out += ["-X", key if value is True else f"{key}={value}"]
    return out


def missing(modules: Sequence[str]) -> Optional[str]:
    """The first of *modules* that cannot be imported here, found without importing it (None: all can)."""
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except ImportError:  # its parent package is missing
            return name
    return None


def replace_with(target: str, name: str, **kwargs: Any) -> NoReturn:
    """Replace this process by this interpreter running ``module:function`` *target* with *kwargs*
    (they pickle: settings dataclasses, tuples, strings), its result the exit code.

    *target*'s module imports no click; *name* is the daemon's (``xpu-cdi device-plugin``), for its
    messages.
    """
    payload = pickle.dumps(kwargs, protocol=pickle.HIGHEST_PROTOCOL)
    fd = -1
    try:
        fd = os.memfd_create("xpu-cdi-settings")  # no pipe's capacity to mind; gone with the last descriptor
        os.write(fd, payload)  # a memfd takes all of it at once
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *interpreter_flags(), "-c", CODE, name, target, str(fd)])
    except OSError as err:  # the interpreter can't be started again: nothing has changed yet
        if fd >= 0:
            os.close(fd)
        raise errors.ConfigError(f"cannot start {sys.executable} for {name}: {err}") from None


def main() -> NoReturn:
    """The new interpreter: the daemon's serve function called, its errors worded and mapped."""
    name, target, fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _set_comm()
    sys.argv = name.split()
    module, _, function = target.partition(":")
    try:
        with os.fdopen(fd, "rb") as f:
            # as the import statement does it (importlib's own path is invisible to -X importtime)
            serve = getattr(__import__(module, fromlist=[function]), function)
            kwargs = pickle.load(f)
        code = serve(**kwargs)
    except errors.XpuCdiError as err:
        code = errors.report(err)
    except ImportError as err:  # the command line found the packages: one broke since, or half-installed
        print(f"xpu-cdi: {name} cannot import {err.name or err} ({err}): reinstall xpu-cdi and its dependencies",
              file=sys.stderr, flush=True)
        code = 1
    except KeyboardInterrupt:  # before the daemon took SIGINT over: as click ends on it
        print("Aborted!", file=sys.stderr, flush=True)
        code = 1
    sys.exit(code)


def _set_comm() -> None:
    """Name the process as the console script was named (``python3`` otherwise)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(15, COMM, 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):  # not Linux's libc: the interpreter's name stays
        pass
