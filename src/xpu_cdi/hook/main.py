"""Entry point of ``xpu-cdi-hook`` (``xpu-cdi hook`` runs the same code).

Subcommands:

* ``prestart``: the OCI hook (register it as ``prestart`` or
  ``createRuntime``): read the state on stdin, find the devices the
  container asked for, inject them;
* ``update-ldcache --folder DIR...`` and ``create-symlinks --link
  TARGET::LINK...``: the spec's ``createContainer`` hooks, for runtimes
  that apply CDI specs themselves (``prestart`` runs the same code
  in-process);
* ``install-launcher PATH``: install the compiled front end at PATH and
  this implementation's launcher at PATH.py (``hook/launcher.py``).

Options anywhere on the line: ``--spec-dir DIR`` (repeatable; else the
colon-separated ``XPU_CDI_SPEC_DIRS`` of the hook's *own* environment,
else ``/etc/cdi:/var/run/cdi``) and ``--log FILE``.

This module is the hot path of every container start: it imports only the
standard library's cheapest modules and our own hook modules; argparse,
json, re and typing are avoided on purpose (tests/hook/test_imports.py).
"""

from __future__ import annotations

import os
import sys

from ..errors import HookError, XpuCdiError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

PROG = "xpu-cdi-hook"
DEFAULT_DIRS = ("/etc/cdi", "/var/run/cdi")  # as cdi.registry.DEFAULT_DIRS (a test keeps them equal)
SPEC_DIRS_ENV = "XPU_CDI_SPEC_DIRS"
USAGE = f"""usage: {PROG} [--spec-dir DIR]... [--log FILE] [--config FILE] prestart
       {PROG} [--log FILE] update-ldcache --folder DIR...
       {PROG} [--log FILE] create-symlinks --link TARGET::LINK...
       {PROG} install-launcher PATH"""
# --config: the node config file, read by the compiled front end only (it
# answers alone when the file's setting restricts env selection, so this
# code is reached only when the setting is at its default)
_GLOBAL = {"--spec-dir": "spec_dir", "--log": "log", "--config": "config"}
_TOOL = {"update-ldcache": {"--folder": "folder"}, "create-symlinks": {"--link": "link"}}


def _split(argv: "List[str]", known: "Dict[str, str]") -> "Tuple[Dict[str, List[str]], List[str]]":
    """Pull ``--opt VALUE`` / ``--opt=VALUE`` of *known* out of *argv*."""
    opts: "Dict[str, List[str]]" = {v: [] for v in known.values()}
    rest: "List[str]" = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in known:
            if not eq:
                if i + 1 >= len(argv):
                    raise HookError(f"option {name} needs a value\n{USAGE}")
                i += 1
                value = argv[i]
            opts[known[name]].append(value)
        else:
            rest.append(arg)
        i += 1
    return opts, rest


def parse_tool_args(sub: str, args: "List[str]") -> "Dict[str, List[str]]":
    """Options of ``update-ldcache`` / ``create-symlinks`` (also used for the
    spec's hook args when they are run in-process).

    Raises:
        HookError: an unknown option or argument, or none of the required option.
    """
    opts, rest = _split(args, _TOOL[sub])
    if rest:
        raise HookError(f"{sub}: unexpected argument {rest[0]!r}\n{USAGE}")
    (key,) = _TOOL[sub].values()
    if not opts[key]:
        raise HookError(f"{sub}: needs at least one --{key}\n{USAGE}")
    return opts


def spec_dirs(opts: "Dict[str, List[str]]") -> "List[str]":
    """--spec-dir values, else $XPU_CDI_SPEC_DIRS (the hook's own env), else the defaults."""
    if opts["spec_dir"]:
        return opts["spec_dir"]
    env = os.environ.get(SPEC_DIRS_ENV, "")
    dirs = [d for d in env.split(":") if d]
    return dirs or list(DEFAULT_DIRS)


class Log:
    """One line per event to ``--log FILE`` (appended); nothing without it."""

    def __init__(self, path: "Optional[str]") -> None:
        self.path = path
        self.container = "-"

    def write(self, message: str) -> None:
        """Append ``<time> xpu-cdi-hook[<pid>] <container>: <message>``."""
        if not self.path:
            return
        import time

        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {PROG}[{os.getpid()}] {self.container}: {message}\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
            try:
                os.write(fd, line.encode(errors="replace"))
            finally:
                os.close(fd)
        except OSError as err:
            sys.stderr.write(f"{PROG}: warning: cannot write log {self.path!r}: {err.strerror}\n")


def prestart(opts: "Dict[str, List[str]]", log: Log) -> int:
    """The OCI hook: inject the devices the container asked for.

    Raises:
        XpuCdiError: bad input, unknown devices, or a failed injection.
    """
    from . import select, state

    c = state.load(0)
    log.container = c.id
    dirs = spec_dirs(opts)
    wanted = select.requested(c.env, c.annotations, select.load_indexes(dirs))
    if not wanted:
        return 0  # nothing asked for: touch nothing
    from ..cdi import registry
    from ..errors import SelectionError
    from . import inject

    reg = registry.load(dirs)
    for problem in reg.problems:
        log.write(f"warning: {problem}")
    devices = []
    for q in wanted:
        try:
            devices.append(reg.lookup(q))
        except SelectionError as err:
            if reg.problems:  # the device may be in a file we had to skip: say which
                raise SelectionError(f"{err}; skipped: {'; '.join(reg.problems)}") from None
            raise
    notes = inject.inject(c, registry.merge_edits(devices))
    log.write(f"injected {', '.join(wanted)}: {'; '.join(notes)}")
    return 0


def tool(sub: str, args: "List[str]", log: Log) -> int:
    """``update-ldcache`` / ``create-symlinks`` as a spec hook of their own.

    Run by a CDI runtime as a ``createContainer`` hook (already inside the
    container's namespaces, state pid 0 or 1); registered as ``prestart``
    instead (a host pid in another mount namespace), it joins them first.
    """
    opts = parse_tool_args(sub, args)
    from . import inject, ldcache, links, state
    from .rootfs import Root, Undo

    c = state.load(0)
    log.container = c.id
    namespaces: "List[Tuple[int, int]]" = []
    if c.pid > 1 and not inject.same_ns(c.pid, "mnt"):
        namespaces = inject.open_namespaces(c.pid)
        from .. import resolver

        resolver.setns(f"/proc/{c.pid}/ns/mnt", inject.CLONE["mnt"])
    undo = Undo()
    try:
        root = Root(c.rootfs, undo)
        try:
            if sub == "update-ldcache":
                note = ldcache.update(root, opts["folder"], namespaces)
            else:
                note = f"{links.create(root, links.parse(opts['link']))} link(s) created"
        finally:
            root.close()
    except BaseException:
        undo.rollback()
        raise
    finally:
        for fd, _ in namespaces:
            os.close(fd)
    undo.close()
    log.write(f"{sub}: {note}")
    return 0


def _report(message: str, log: Log) -> None:
    line = " ".join(message.split("\n", 1)[0].split())  # one line: runc shows it to the user
    sys.stderr.write(f"{PROG}: {line}\n")
    log.write(f"error: {line}")


def main(argv: "Optional[List[str]]" = None) -> int:
    """Run the hook; return the exit code (0 ok, 1 error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    log = Log(None)
    try:
        opts, rest = _split(args, _GLOBAL)
        log = Log(opts["log"][-1] if opts["log"] else None)
        sub, sub_args = (rest[0], rest[1:]) if rest else ("", [])
        if sub in ("-h", "--help", "help"):
            print(USAGE)
            return 0
        if sub == "prestart":
            if sub_args:
                raise HookError(f"prestart: unexpected argument {sub_args[0]!r}\n{USAGE}")
            return prestart(opts, log)
        if sub in _TOOL:
            return tool(sub, sub_args, log)
        if sub == "install-launcher":
            from .launcher import install

            if sub_args in (["-h"], ["--help"]):
                print(USAGE)
                return 0
            if len(sub_args) != 1 or sub_args[0].startswith("-"):
                raise HookError(f"install-launcher: needs exactly one PATH\n{USAGE}")
            print(install(sub_args[0]))
            return 0
        if not sub:
            raise HookError(f"no subcommand given\n{USAGE}")
        if sub.startswith("-"):
            raise HookError(f"unknown option {sub!r}\n{USAGE}")
        # Unknown subcommand: warn and succeed.  Specs written by a newer
        # xpu-cdi may name hooks this binary does not know; failing would
        # stop every such container from starting (nvidia-cdi-hook does the same).
        sys.stderr.write(f"{PROG}: warning: unknown subcommand {sub!r} ignored (this is xpu-cdi-hook "
                         f"from an older release?)\n")
        log.write(f"warning: unknown subcommand {sub!r} ignored")
        return 0
    except XpuCdiError as err:
        _report(str(err), log)
        return 1
    except Exception as err:  # noqa: BLE001 - a bug: still one line for runc, the trace to the log
        _report(f"internal error: {type(err).__name__}: {err}", log)
        if log.path:
            import traceback

            log.write("".join(traceback.format_exception(err)).replace("\n", "\n    "))
        return 1
