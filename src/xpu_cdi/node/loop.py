"""The plumbing of the node daemons' loop: it sleeps until a signal, an inotify
event or its poll interval (see docs/architecture.md)."""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Set

from .. import atomic
from . import inotify
from ..log import Log


class Loop:
    """A wake-up pipe, SIGTERM/SIGINT (and SIGHUP where asked), the inotify wait,
    one-off log lines and the status file."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.logged: Set[str] = set()  # one-off lines already said (problems, waiting)
        self.stop = threading.Event()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.ino: Optional[inotify.Inotify] = None
        self.started = time.time()
        self.status_text = ""

    def wake(self) -> None:
        try:
            os.write(self.wake_w, b"x")
        except OSError:
            pass  # pipe full: the loop is awake anyway

    def install_signals(self, on_hup: Optional[Callable[[], None]] = None) -> None:
        def term(*_: Any) -> None:
            self.stop.set()
            self.wake()

        signal.signal(signal.SIGTERM, term)
        signal.signal(signal.SIGINT, term)
        if on_hup is not None:
            def hup(*_: Any) -> None:
                on_hup()
                self.wake()

            signal.signal(signal.SIGHUP, hup)

    def say_once(self, key: str, message: str) -> None:
        if key not in self.logged:
            self.logged.add(key)
            self.log(message)

    def watch(self, dirs: Iterable[str]) -> None:
        """Watch each of *dirs* that exists and is not watched yet (a re-created one needs a new watch)."""
        if self.ino is None:
            return
        have = set(self.ino.watched())
        for d in dict.fromkeys(dirs):
            if d not in have and os.path.isdir(d):
                self.ino.watch(d)

    def wait(self, timeout: float, extra: Iterable[Any] = ()) -> List[Any]:
        """Sleep until a wake-up, an inotify event or *timeout*; the pipe and the events are
        drained (the pass looks at what is there); returns which of *extra* are ready."""
        extra = list(extra)
        fds: List[Any] = [self.wake_r, *([self.ino] if self.ino is not None else []), *extra]
        try:
            ready, _w, _x = select.select(fds, [], [], max(0.0, timeout))
        except InterruptedError:
            return []
        if self.wake_r in ready:
            try:
                os.read(self.wake_r, 4096)
            except BlockingIOError:
                pass
        if self.ino is not None and self.ino in ready:
            self.ino.read()
        return [f for f in extra if f in ready]

    def publish_status(self, path: str, doc: Dict[str, Any], why: str) -> None:
        """*doc* as JSON at *path*, atomically, when it changed; a failure is said once (*why* it matters)."""
        text = json.dumps(doc, indent=1, sort_keys=True)
        if text == self.status_text:
            return
        try:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            atomic.write_atomic(path, text.encode() + b"\n", durable=False)
            self.status_text = text
        except OSError as err:
            self.say_once("status:" + str(err), f"cannot write the status file {path}: {err.strerror} ({why})")

    def close_loop(self, status_file: str) -> None:
        """The status file removed, inotify closed: the daemon's servers are stopped by then."""
        try:
            os.unlink(status_file)
        except OSError:
            pass
        if self.ino is not None:
            self.ino.close()
            self.ino = None
