"""The node daemons' loop: it sleeps until a signal, an inotify event, a uevent or its poll
interval (:meth:`Loop.wait`, the one wait of the device plugin, the DRA driver, the exporter
and the labeller), and re-reads the CDI specs when a file changed (:meth:`Loop.refresh`;
see docs/architecture.md)."""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from .. import atomic
from ..generate import profile as _profile
from ..log import DEBUG, INFO, WARNING, Log
from ..model import Profile
from . import carved, inotify, inventory, uevents
from .settings import NodeSettings


BLIND_POLL = 1.0  # seconds: the poll where no inotify event can wake the loop


class Loop:
    """A wake-up pipe, SIGTERM/SIGINT (and SIGHUP where asked), the inotify and uevent wait,
    one-off log lines, the status file, and the cards the specs define (:meth:`refresh`)."""

    #: the end of the line said while no spec defines cards: what the daemon holds back
    waiting_for_specs = "nothing is served until a spec appears"

    def __init__(self, log: Log, settings: NodeSettings) -> None:
        self.log = log
        self.s = settings
        self.profiles: List[Profile] = []
        self.ours: Dict[str, str] = {}  # kind -> profile name, of every profile served
        self.kinds: Dict[str, inventory.KindSet] = {}  # what the specs define now
        self.sig: Optional[Tuple[Any, ...]] = None  # the spec files' stats when last read
        self.logged: Set[str] = set()  # one-off lines already said (problems, waiting)
        self.said: Dict[str, str] = {}  # state lines: key -> the last one said
        self.stop = threading.Event()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.ino: Optional[inotify.Inotify] = None
        self.monitor: Any = None  # the uevent monitor (pyudev), where the daemon listens to uevents
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
        # a signal the kernel hands to a gRPC thread runs its handler only once the main thread
        # leaves select: the byte the C handler writes here wakes it at once, not at the poll
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        if on_hup is not None:
            def hup(*_: Any) -> None:
                on_hup()
                self.wake()

            signal.signal(signal.SIGHUP, hup)

    def say_once(self, key: str, message: str, level: int = INFO) -> None:
        if key not in self.logged:
            self.logged.add(key)
            self.log(message, level)

    def say_changed(self, key: str, message: str, level: int = INFO) -> None:
        """*message* when it is not what was last said under *key* (a state: up, down, ...)."""
        if self.said.get(key) != message:
            self.said[key] = message
            self.log(message, level)

    # -- the cards the specs define ------------------------------------------------------------------------

    def load_profiles(self) -> None:
        self.profiles = _profile.select(list(self.s.profiles) or None, self.s.profiles_dir)
        self.ours = {p.kind: p.name for p in self.profiles}

    def profile_named(self, name: Optional[str]) -> Optional[Profile]:
        """The loaded profile called *name* (its health source, metrics, selection), or None."""
        return next((p for p in self.profiles if p.name == name), None)

    def refresh(self, force: bool = False) -> bool:
        """Re-read the specs when a file changed (a few stats decide); True when they were.

        Broken files and a host with no cards of ours are said once; a kind whose cards
        changed is said; then :meth:`specs_changed` gets the kinds as they were before.
        """
        sig = inventory.signature(self.s.spec_dirs)
        if sig == self.sig and not force:
            return False
        self.log(f"reading the specs in {', '.join(self.s.spec_dirs)}"
                 + (": a file changed" if self.sig is not None and not force else ""), DEBUG)
        kinds, problems = inventory.load(self.s.spec_dirs, self.ours, self.s.sysfs_root)
        if self.offers_cards:
            kinds, withheld = carved.withhold_all(kinds, self.own_vnpus())
            for line in withheld:
                self.say_once("carved:" + line, line)
        kinds = self.arrange(kinds)
        for p in problems:
            self.say_once("problem:" + p, p, WARNING)
        if not kinds:
            self.say_once("nospec:" + repr(sig), f"no CDI spec in {', '.join(self.s.spec_dirs)} defines cards "
                                                 f"of {', '.join(sorted(self.ours)) or 'any profile'}: run "
                                                 f"`xpu-cdi generate` (or `xpu-cdi watch`); {self.waiting_for_specs}",
                          WARNING)
        for kind, ks in kinds.items():
            old = self.kinds.get(kind)
            if old is None or list(old.cards) != list(ks.cards):
                self.log(f"{kind}: {len(ks.cards)} card(s) from {', '.join(ks.spec_paths)}: {', '.join(ks.cards)}")
        for kind in sorted(set(self.kinds) - set(kinds)):
            self.log(f"{kind}: no spec defines its cards any more")
        before, self.kinds, self.sig = self.kinds, kinds, sig
        self.specs_changed(before)
        return True

    #: hands cards out (device plugin, DRA driver): a chip with a vNPU carved is not offered whole
    offers_cards = True

    def own_vnpus(self) -> Set[int]:
        """The ids of the vNPUs this daemon made for claims (the DRA driver's): not cards of their own."""
        return set()

    def arrange(self, kinds: Dict[str, inventory.KindSet]) -> Dict[str, inventory.KindSet]:
        """The units a daemon serves of the kinds the specs define (default: the kinds themselves)."""
        return kinds

    def specs_changed(self, before: Dict[str, inventory.KindSet]) -> None:
        """What a daemon does when the specs changed (:attr:`kinds` is new, *before* the old)."""

    def watch(self, dirs: Iterable[str]) -> None:
        """Watch each of *dirs* that exists and is not watched yet (a re-created one needs a new watch)."""
        if self.ino is None:
            return
        have = set(self.ino.watched())
        for d in dict.fromkeys(dirs):
            if d not in have and os.path.isdir(d):
                self.ino.watch(d)

    def poll_interval(self, interval: float) -> float:
        """*interval*, or at most :data:`BLIND_POLL` seconds while inotify is unavailable: then only
        the poll sees a spec, a node or a socket change (kubelet's restart included)."""
        return interval if self.ino is not None else min(interval, BLIND_POLL)

    def open_events(self, poll: float, source: str = "none") -> None:
        """inotify, and the uevent monitor of *source* (:data:`.uevents.SOURCES`); without
        inotify the daemon wakes every *poll* seconds only, which is said."""
        self.ino = inotify.open_inotify()
        if self.ino is None:
            self.log(f"inotify unavailable: polling every {self.poll_interval(poll):g}s only", WARNING)
        self.monitor = uevents.open_source(source, self.log)

    def wait(self, timeout: float) -> None:
        """Sleep until a wake-up, an inotify event, a uevent or *timeout*; what came is read
        and dropped: the pass that follows looks at what is there."""
        fds: List[Any] = [self.wake_r, *(f for f in (self.ino, self.monitor) if f is not None)]
        try:
            ready, _w, _x = select.select(fds, [], [], max(0.0, timeout))
        except InterruptedError:
            return
        if self.wake_r in ready:
            try:
                os.read(self.wake_r, 4096)
            except BlockingIOError:
                pass
        if self.ino is not None and self.ino in ready:
            self.ino.read()
        if self.monitor is not None and self.monitor in ready:
            while True:
                device, lost = uevents.receive(self.monitor, 0)
                if lost:  # the pass that follows re-reads everything anyway
                    self.log(f"uevents lost ({lost}): re-checking everything", WARNING)
                if device is None:
                    break

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
            self.say_once("status:" + str(err), f"cannot write the status file {path}: {err.strerror} ({why})", WARNING)

    def close_loop(self, status_file: str) -> None:
        """The status file removed, the event sources closed: the daemon's servers are stopped by then."""
        try:
            os.unlink(status_file)
        except OSError:
            pass
        self.close_events()

    def close_events(self) -> None:
        if self.ino is not None:
            self.ino.close()
            self.ino = None
        self.monitor = None  # pyudev closes its socket when the monitor is freed
