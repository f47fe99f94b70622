"""``xpu-container-runtime``: an OCI runtime wrapper that applies CDI edits
to ``config.json`` and then becomes the real runtime.

On ``create`` and ``run`` it reads ``<bundle>/config.json``, works out the
requested cards (selection variables in ``process.env`` through the hook
indexes, ``cdi.k8s.io/*`` annotations), resolves them in the CDI spec dirs
(``XPU_CDI_SPEC_DIRS`` from its own environment, else ``/etc/cdi`` and
``/var/run/cdi``), writes the edited ``config.json`` back atomically and
``exec``s the real runtime (``XPU_CDI_RUNTIME``, else ``runc`` on ``PATH``)
with its arguments untouched.  Every other command is passed straight on.

Because runc itself then creates the nodes, the cgroup rules (v1 and the v2
eBPF program), the mounts and the environment, this works where a prestart
hook cannot: cgroup v2 without eBPF replacement, and env vars.

Hot path: standard library, ``errors``, ``atomic``, ``cdi.registry``,
``cdi.names``, ``hook.select`` (and ``hook.jsonload``) and this package's
``bundle``, ``ociedit`` and ``jsondump`` only, imported lazily so that
pass-through commands cost nothing but the interpreter.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs ~10 ms of start-up (re, enum...): only for type checkers
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

PROG = "xpu-container-runtime"
SPEC_DIRS_ENV = "XPU_CDI_SPEC_DIRS"
RUNTIME_ENV = "XPU_CDI_RUNTIME"
ACTIVE_ENV = "XPU_CDI_WRAPPER_ACTIVE"  # set for the real runtime: seeing it on entry means a loop
EDITING_COMMANDS = ("create", "run")
# Global options of runc and crun that take their value as the next argument.
_VALUE_OPTIONS = frozenset({"--root", "--log", "--log-format", "--criu", "--rootless",
                            "--cgroup-manager", "--log-level", "-root", "-log", "-log-format"})
_BUNDLE_OPTIONS = ("--bundle", "-bundle", "-b")
# Selection variables of the built-in, non-experimental profiles.  One of them
# set with no spec defining its kind means the container asked for cards this
# host cannot give: refuse it rather than start it without them.  A unit test
# keeps this table in step with the profiles.
KNOWN_SELECTION = {"CXPU_VISIBLE_DEVICES": "kunlunxin.com/xpu",
                   "ASCEND_VISIBLE_DEVICES": "huawei.com/npu"}
NONE_VALUES = ("", "void", "none")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def split_command(args: Sequence[str]) -> Tuple[int, Optional[str]]:
    """Index and name of the runtime subcommand in *args* (global options skipped).

    Returns ``(-1, None)`` when there is none (``--version``, ``--help``).
    """
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return (i + 1, args[i + 1]) if i + 1 < len(args) else (-1, None)
        if not arg.startswith("-"):
            return i, arg
        i += 2 if arg in _VALUE_OPTIONS else 1
    return -1, None


def option_value(args: Sequence[str], start: int, names: Sequence[str]) -> Optional[str]:
    """The value of the first option in *names* after *start* (``-b X``, ``--bundle=X``)."""
    i = start
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return None
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1:]
        i += 1
    return None


def spec_dirs(env: Mapping[str, str]) -> List[str]:
    """CDI spec dirs, lowest priority first: ``XPU_CDI_SPEC_DIRS`` or the CDI defaults."""
    raw = env.get(SPEC_DIRS_ENV, "")
    dirs = [d for d in raw.split(":") if d]
    return dirs or ["/etc/cdi", "/var/run/cdi"]


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_runtime(env: Mapping[str, str], self_path: str) -> str:
    """The real runtime: ``XPU_CDI_RUNTIME`` (a path or a name on PATH), else ``runc``.

    Copies of this wrapper on PATH are skipped, so that installing it as
    ``runc`` earlier in PATH cannot make it exec itself forever.

    Raises:
        RuntimeConfigError: nothing suitable is found.
    """
    from ..errors import RuntimeConfigError

    me = os.path.realpath(self_path)
    # exec'd by the compiled front end as <front end>.py: skip the front end as well
    mine = {me, me[:-3]} if me.endswith(".py") else {me, me + ".py"}
    name = env.get(RUNTIME_ENV) or "runc"
    if "/" in name:
        if not _executable(name):
            raise RuntimeConfigError(f"{RUNTIME_ENV}={name!r} is not an executable file: "
                                     f"point it at runc or crun")
        if os.path.realpath(name) in mine:
            raise RuntimeConfigError(f"{RUNTIME_ENV}={name!r} is this wrapper: point it at runc or crun")
        return name
    for d in (env.get("PATH") or DEFAULT_PATH).split(":"):
        cand = os.path.join(d or ".", name)
        if _executable(cand) and os.path.realpath(cand) not in mine:
            return cand
    raise RuntimeConfigError(f"no {name!r} found on PATH ({env.get('PATH') or DEFAULT_PATH}): "
                             f"install it or set {RUNTIME_ENV} to the runtime's absolute path")


def _unserved(env: List[Any], indexes: Dict[str, Dict[str, Any]]) -> Optional[Tuple[str, str, str]]:
    """A known selection variable that asks for cards of a kind no spec's index serves."""
    from ..hook.select import env_map

    values = env_map(env)
    for var, kind in KNOWN_SELECTION.items():
        if var in values and kind not in indexes and values[var].strip() not in NONE_VALUES:
            return var, values[var], kind
    return None


def _extra_edits(devices: Sequence[Any]) -> List[int]:
    """``additionalGids`` of the devices' edits (``merge_edits`` leaves them out);
    edits the wrapper cannot apply are refused rather than dropped."""
    from ..errors import SpecError

    gids: List[int] = []
    for dev in devices:
        for edits in (dev.spec.get("containerEdits") or {}, dev.edits):
            for key in ("intelRdt", "netDevices"):
                if edits.get(key):
                    raise SpecError(f"CDI device {dev.qualified!r} ({dev.path!r}) needs {key!r}, which "
                                    f"{PROG} does not apply: use a CDI-enabled runtime for it")
            gids.extend(g for g in edits.get("additionalGids") or [] if g not in gids)
    return gids


def prepare(bundle: str, env: Mapping[str, str]) -> List[str]:
    """Apply the requested devices' CDI edits to ``<bundle>/config.json``.

    Args:
        bundle: the bundle directory.
        env: the wrapper's own environment (spec dirs), never the container's.

    Returns:
        The qualified devices applied; empty when nothing was asked for, in
        which case ``config.json`` is left untouched.

    Raises:
        XpuCdiError: the config cannot be read or written, a request is
            malformed or names a device no spec defines.
    """
    from . import bundle as _bundle

    path = os.path.join(bundle, "config.json")
    dirs = spec_dirs(env)
    data, mode = _bundle.read_bytes(path)
    if not _bundle.may_request(data, dirs, KNOWN_SELECTION):
        return []  # the common case on a default runtime: no JSON, no regexes
    from ..atomic import write_atomic
    from ..cdi import registry
    from ..errors import RuntimeConfigError, SelectionError
    from ..hook import select
    from . import jsondump, ociedit

    config = _bundle.parse_config(data, path)
    where = ":".join(dirs)
    process = config.get("process") if isinstance(config.get("process"), dict) else {}
    container_env = process.get("env") if isinstance(process.get("env"), list) else []
    annotations = config.get("annotations") if isinstance(config.get("annotations"), dict) else {}
    indexes = select.load_indexes(dirs)
    try:
        wanted = select.requested(container_env, annotations, indexes)
    except SelectionError as err:
        raise SelectionError(f"{err} (spec dirs searched: {where})") from None
    unserved = _unserved(container_env, indexes)
    if unserved:
        var, value, kind = unserved
        raise SelectionError(f"{var}={value!r} asks for {kind} devices but no spec in {where} defines "
                             f"that kind (with its .xpu-cdi index): run `xpu-cdi generate` on this node")
    if not wanted:
        return []
    reg = registry.load(dirs)
    devices = [reg.lookup(q) for q in wanted]
    edits: Dict[str, Any] = dict(registry.merge_edits(devices))
    edits["additionalGids"] = _extra_edits(devices)
    ociedit.apply(config, edits)
    try:
        text = jsondump.dumps(config)
    except (RecursionError, TypeError, ValueError) as err:
        raise RuntimeConfigError(f"{path!r}: cannot write the edited config: {err}") from None
    try:
        # config.json keeps its mode; not durable: the bundle does not outlive a crash (see write_atomic)
        write_atomic(path, text.encode(), mode, durable=False)
    except OSError as err:
        raise RuntimeConfigError(f"cannot write {path!r}: {err.strerror}") from None
    return wanted


def _log_error(args: Sequence[str], message: str) -> None:
    """Also write the error to the runtime's ``--log`` file: containerd's shim
    reports the last error found there ("OCI runtime create failed: ...")."""
    log = option_value(args, 0, ("--log", "-log"))
    if not log:
        return
    fmt = option_value(args, 0, ("--log-format", "-log-format")) or "text"
    try:
        import json
        import time

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = (json.dumps({"level": "error", "msg": message, "time": now}) if fmt == "json"
                else f'time="{now}" level=error msg={json.dumps(message)}')
        with open(log, "a") as f:
            f.write(line + "\n")
    except OSError:
        pass  # the message is on stderr as well


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``xpu-container-runtime``: edit on create/run, then exec.

    Returns:
        1 (with one line on stderr) when the container must not be created;
        otherwise it does not return: the process becomes the real runtime.
    """
    argv = list(sys.argv if argv is None else argv)
    args = argv[1:]
    from ..errors import XpuCdiError

    try:
        if os.environ.get(ACTIVE_ENV):
            from ..errors import RuntimeConfigError

            raise RuntimeConfigError(f"started by itself ({RUNTIME_ENV} or PATH names another copy of the "
                                     f"wrapper as the real runtime): point {RUNTIME_ENV} at runc or crun")
        real = find_runtime(os.environ, argv[0] if argv else PROG)
        i, command = split_command(args)
        if command in EDITING_COMMANDS:
            prepare(option_value(args, i + 1, _BUNDLE_OPTIONS) or os.getcwd(), os.environ)
    except XpuCdiError as err:
        message = " ".join(str(err).split())
        sys.stderr.write(f"{PROG}: {message}\n")
        _log_error(args, f"{PROG}: {message}")
        return 1
    sys.stdout.flush()
    try:
        os.execve(real, [real, *args], dict(os.environ, **{ACTIVE_ENV: "1"}))
    except OSError as err:
        sys.stderr.write(f"{PROG}: cannot execute {real!r}: {err.strerror}\n")
        return 1
    return 1  # pragma: no cover - execv does not return
