"""The DaemonSet's optional runtime wiring: ``xpu-cdi host wire-runtime``.

Off unless the node config (``/etc/xpu-cdi/config.yaml``) says
``configure-containerd: true``.  Then it does what an admin would on a host:
``runtime configure --runtime containerd --enable-cdi`` into a drop-in (CDI
on for containerd 1.7, the ``xpu`` handler running the installed wrapper),
and, unless ``restart-containerd: false``, restarts containerd when the files
it manages are newer than the running daemon, so that it reads them.

The restart is a SIGTERM to the containerd process whose ``--config`` is the
file configured, found in the host's process table (the pod needs
``hostPID``).  containerd shuts down cleanly; the containers keep running,
because each one's shim is its own process, which the new containerd finds
again; the supervisor (systemd's ``Restart=always`` in containerd's unit, as
shipped upstream and by the distributions) starts it again.  The wiring then
waits until a new containerd answers on its socket, and fails (the pod shows
``Init:Error``) when none does within the timeout: a host whose containerd
has no supervisor is left without one, which is why this is off by default
(docs/operations.md, "Runtime wiring").
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from typing import Any, List, Optional

from .. import nodeconfig
from ..node import protobuild
from ..errors import RuntimeConfigError
from ..runtime import configure as _configure

DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_DROP_IN = "/etc/containerd/conf.d/99-xpu-cdi.toml"
DEFAULT_SOCKET = "/run/containerd/containerd.sock"


@dataclass(frozen=True)
class Process:
    pid: int
    started: float  # seconds since the epoch


def _cmdline(proc: str, pid: str) -> List[str]:
    with open(f"{proc}/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]


def config_of(args: List[str]) -> str:
    """The config file a containerd command line names (its default when none)."""
    for i, a in enumerate(args[1:], 1):
        if a in ("-c", "--config") and i + 1 < len(args):
            return args[i + 1]
        m = re.match(r"--?c(?:onfig)?=(.+)$", a)
        if m:
            return m.group(1)
    return DEFAULT_CONFIG


def start_time(pid: int, proc: str = "/proc") -> float:
    """When *pid* started, in seconds since the epoch (from its stat and the boot time)."""
    with open(f"{proc}/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open(f"{proc}/stat") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def find_containerd(config: str, proc: str = "/proc") -> List[Process]:
    """The running containerd daemons whose config file is *config* (not shims, not ctr)."""
    found = []
    want = os.path.normpath(config)
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        try:
            with open(f"{proc}/{pid}/comm") as f:
                if f.read().strip() != "containerd":
                    continue
            args = _cmdline(proc, pid)
            if not args or os.path.basename(args[0]) != "containerd":
                continue
            if os.path.normpath(config_of(args)) == want:
                found.append(Process(int(pid), start_time(int(pid), proc)))
        except (OSError, StopIteration, IndexError, ValueError):
            continue  # exited meanwhile, or not ours to read
    return found


# containerd's version service (api/services/version/v1/version.proto): Version(Empty) -> VersionResponse
VERSION_PACKAGE = "containerd.services.version.v1"
VERSION_MESSAGES = {"Empty": [], "VersionResponse": [("version", 1, protobuild.STRING, protobuild.ONE),
                                                     ("revision", 2, protobuild.STRING, protobuild.ONE)]}
VERSION_SERVICES = {"Version": [("Version", "Empty", "VersionResponse", False)]}


def server_version(socket: str, timeout: float = 5.0) -> Optional[str]:
    """containerd's release as its Version API reports it (``1.6.20``, ``2.4.2``), None when nothing
    answers on *socket*."""
    import grpc

    if not os.path.exists(socket):
        return None
    classes = protobuild.build(VERSION_PACKAGE, VERSION_MESSAGES, VERSION_SERVICES)
    channel = grpc.insecure_channel(f"unix://{socket}")
    try:
        call = channel.unary_unary(protobuild.method_path(VERSION_PACKAGE, "Version", "Version"),
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=classes["VersionResponse"].FromString)
        raw = call(classes["Empty"](), timeout=timeout).version
    except grpc.RpcError:
        return None
    finally:
        channel.close()
    m = re.match(r"v?(\d+\.\d+\.\d+)", raw)
    return m.group(1) if m else raw or None


@dataclass(frozen=True)
class Options:
    node_config: str = nodeconfig.DEFAULT_PATH
    # read when node_config does not exist (the DaemonSet's ConfigMap: what the node-config init
    # container installs there, which may not have happened yet on a new node)
    fallback_config: Optional[str] = None
    config: str = DEFAULT_CONFIG
    drop_in: str = DEFAULT_DROP_IN
    socket: str = DEFAULT_SOCKET
    wrapper: str = "/usr/local/xpu-cdi/bin/xpu-container-runtime"
    hook: str = "/usr/local/xpu-cdi/bin/xpu-cdi-hook"
    spec_dirs: tuple = ("/var/run/cdi",)  # that containerd must read (the DaemonSet writes there)
    timeout: float = 60.0
    proc: str = "/proc"


def wire(opts: Options, say: Any = print) -> None:
    """Configure containerd and restart it as the node config says (see the module doc).

    Raises:
        ConfigError: the node config is unusable.
        RuntimeConfigError: containerd's config cannot be read or written, there is not exactly
            one containerd to restart, or it did not come back.
    """
    cfg = nodeconfig.read(opts.node_config)
    if not cfg.exists and opts.fallback_config:
        cfg = nodeconfig.read(opts.fallback_config)
    if not cfg.configure_containerd:
        say(f"runtime wiring off: {nodeconfig.CONFIGURE_CONTAINERD} is not true in {cfg.path}"
            f"{'' if cfg.exists else ' (no such file)'}; nothing changed")
        return
    release = server_version(opts.socket)
    plan = _configure.plan(_configure.Options(
        runtime="containerd", config=opts.config, drop_in=opts.drop_in, enable_cdi=True, wrapper=opts.wrapper,
        hook_path=opts.hook, spec_dirs=spec_dirs(opts), oci_hook=False, release=release))
    for note in plan.notes:
        say(f"note: {note}")
    for line in _configure.apply(plan):
        say(line)
    running = find_containerd(opts.config, opts.proc)
    if len(running) != 1:
        what = "no containerd" if not running else f"{len(running)} containerd daemons " \
                                                   f"({', '.join(str(p.pid) for p in running)})"
        if not cfg.restart_containerd:
            say(f"restart-containerd is false: restart containerd yourself to apply ({what} found)")
            return
        raise RuntimeConfigError(f"{what} running with config {opts.config}: cannot restart it (the pod needs "
                                 f"hostPID: true; or set {nodeconfig.RESTART_CONTAINERD}: false and restart it "
                                 f"yourself)")
    daemon = running[0]
    newest = max((os.stat(c.path).st_mtime for c in plan.changes if os.path.exists(c.path)), default=0.0)
    # written now, or by an earlier run that did not get to the restart; the start time is known to the
    # second only (the boot time in /proc/stat is whole seconds), so files written in the second before
    # it started (by the run that restarted it) count as read
    if not any(c.changed for c in plan.changes) and newest <= daemon.started + 1.0:
        say(f"containerd {release or '(version unknown)'} (pid {daemon.pid}) runs with this configuration "
            f"already: no restart")
        return
    if not cfg.restart_containerd:
        say(f"{nodeconfig.RESTART_CONTAINERD} is false: restart containerd (pid {daemon.pid}) yourself to apply")
        return
    restart(daemon, opts, say)


def spec_dirs(opts: Options) -> tuple:
    """The cdi_spec_dirs to write: the ones containerd reads now (an admin's own kept; containerd's
    default where none are set), then those of *opts* it does not read yet."""
    from ..runtime import containerd

    current = containerd.cdi_spec_dirs(containerd.load_merged(opts.config)) if os.path.exists(opts.config) \
        else list(containerd.DEFAULT_SPEC_DIRS)
    return tuple(dict.fromkeys([*current, *opts.spec_dirs]))


def restart(daemon: Process, opts: Options, say: Any = print) -> None:
    """SIGTERM *daemon* and wait until a new containerd with the same config answers on the socket."""
    t0 = time.monotonic()
    say(f"restarting containerd (pid {daemon.pid}): SIGTERM; its supervisor starts it again, running "
        f"containers keep their shims")
    try:
        os.kill(daemon.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = t0 + opts.timeout
    while True:
        now = [p for p in find_containerd(opts.config, opts.proc) if p != daemon]
        if now:
            version = server_version(opts.socket, timeout=2)
            if version:
                say(f"containerd {version} is back (pid {daemon.pid} -> {now[0].pid}) after "
                    f"{time.monotonic() - t0:.1f} s")
                return
        if time.monotonic() > deadline:
            state = f"a new one (pid {now[0].pid}) does not answer on {opts.socket}" if now else \
                "no new one started (is containerd supervised? systemd's containerd.service has Restart=always)"
            raise RuntimeConfigError(f"containerd did not come back within {opts.timeout:.0f} s of the restart: "
                                     f"{state}; start it on the host (systemctl start containerd)")
        time.sleep(0.2)
