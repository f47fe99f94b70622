"""Running a vendor's tool for its readings: fixed argv, no shell, no inherited environment.

The tool runs in its own session with stdin from ``/dev/null``, a fixed
``PATH`` and ``LC_ALL=C`` plus what the profile names (never the exporter's
own environment, which a pod spec or a unit file sets), and is killed --
its whole process group -- when it outlives its timeout or writes more than
its output cap.  Either way the caller gets one line saying what happened,
never a hang: a tool stuck in the driver must not stop the scrape.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from typing import Sequence

from ..errors import ToolError

TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STDERR_CAP = 4096


def _kill(proc: "subprocess.Popen[bytes]") -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL of an uninterruptible (D-state) process
        pass


def _first_line(data: bytes) -> str:
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return " ".join(lines[0].split())[:200] if lines else ""


def run(argv: Sequence[str], env: Sequence[str] = (), timeout: float = 5.0, max_output: int = 1 << 20) -> str:
    """The tool's standard output (UTF-8, undecodable bytes replaced).

    Raises:
        ToolError: it cannot be started, ran past *timeout* seconds, wrote
            more than *max_output* bytes, or exited non-zero (with the first
            line it wrote on stderr).
    """
    environ = {"PATH": TOOL_PATH, "LC_ALL": "C"}
    environ.update(e.partition("=")[::2] for e in env)
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=environ, cwd="/", close_fds=True,
                                start_new_session=True)
    except OSError as err:
        raise ToolError(f"cannot run {argv[0]}: {err.strerror or err}") from None
    out, errs = bytearray(), bytearray()
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    for stream in (proc.stdout, proc.stderr):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(proc)
                raise ToolError(f"{argv[0]} did not finish within {timeout:g}s: killed")
            for key, _ev in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.fileobj is proc.stdout:
                    out += chunk
                    if len(out) > max_output:
                        _kill(proc)
                        raise ToolError(f"{argv[0]} wrote more than {max_output} bytes: killed")
                elif len(errs) < STDERR_CAP:
                    errs += chunk[:STDERR_CAP - len(errs)]
        try:
            code = proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:  # closed its output but keeps running
            _kill(proc)
            raise ToolError(f"{argv[0]} did not finish within {timeout:g}s: killed") from None
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
        if proc.returncode is None:
            _kill(proc)
    if code != 0:
        why = _first_line(bytes(errs)) or _first_line(bytes(out))
        status = f"exit status {code}" if code > 0 else f"killed by signal {-code}"
        raise ToolError(f"{argv[0]} failed ({status})" + (f": {why}" if why else ""))
    return out.decode("utf-8", "replace")
