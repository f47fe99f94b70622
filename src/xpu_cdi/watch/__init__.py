"""``xpu-cdi watch``: keep the CDI specs in step with the cards and the driver.

Three things make a spec stale: cards appearing or disappearing, the driver
module being (re)loaded (device majors are dynamic, so node numbers move),
and a driver update (new version file, new ``modules.dep``).  The first two
are kernel uevents, read through pyudev's monitor; the last is a file change,
found by polling a few ``stat`` results (no inotify in the standard library,
and the files often do not exist yet when the watch starts).

Events only mark a refresh as pending; the refresh runs once things have
been quiet for ``debounce`` seconds (a driver load sends one event per node),
so a burst costs one run.  A run (:mod:`.refresh`) goes through the
same pipeline as ``generate`` and writes a spec only when its bytes differ
from the file on disk, so runtimes watching the spec directory see no
churn.  ``--once`` is a single run: the systemd refresh unit and the
package scripts use it.
"""

from __future__ import annotations

import fnmatch
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ..errors import XpuCdiError
from ..log import ERROR, INFO, WARNING
from ..model import Profile
from ..node import uevents
from . import refresh as _refresh  # not its function: xpu_cdi.watch.refresh stays the module
from .refresh import Log, Target

# A kernel or DKMS module install rewrites this (relative to --driver-root;
# %v is the running kernel).  The vendors' own version files are profile
# facts (``watch_files``), read by :func:`watch_files`.
KERNEL_WATCH_FILES = ("/lib/modules/%v/modules.dep",)
PCI_ACTIONS = ("add", "remove", "bind", "unbind")


def expand(path: str) -> str:
    """Replace ``%v`` by the running kernel's release, as systemd does in units."""
    return path.replace("%v", os.uname().release)


def watch_files(profiles: Sequence[Profile], extra: Sequence[str] = ()) -> List[str]:
    """The files whose change means a driver update: the kernel's module list,
    every profile's ``watch_files``, then *extra* (``--watch-file``); unexpanded, no repeats."""
    files = list(KERNEL_WATCH_FILES) + [f for p in profiles for f in p.watch_files] + list(extra)
    return list(dict.fromkeys(files))


def driver_modules(profiles: Sequence[Profile], extra: Sequence[str] = ()) -> List[str]:
    """Kernel modules whose (re)load triggers a refresh: the profiles' ``modules`` and *extra*."""
    return list(dict.fromkeys([m for p in profiles for m in p.modules] + list(extra)))


@dataclass(frozen=True)
class Matchers:
    """What makes a uevent relevant, derived from the profiles."""

    node_globs: Tuple[str, ...]
    pci_vendors: FrozenSet[str]  # upper-case hex without 0x, as in PCI_ID
    modules: FrozenSet[str]  # empty: any module

    @classmethod
    def of(cls, profiles: Sequence[Profile], modules: Sequence[str] = ()) -> "Matchers":
        """Node globs from the card rules, companions and control nodes; PCI vendors and
        driver modules from the profiles (plus *modules*)."""
        globs: List[str] = []
        for p in profiles:
            globs.extend(r.glob for r in p.cards)
            globs.extend(c.path.replace("{index}", "*") for r in p.cards for c in r.companions if not c.sysfs)
            for rule in p.control_nodes:
                globs.extend(rule.paths)
        vendors = {p.pci_vendor.lower().replace("0x", "").upper() for p in profiles if p.pci_vendor}
        return cls(tuple(globs), frozenset(vendors), frozenset(driver_modules(profiles, modules)))


def classify(action: Optional[str], props: Mapping[str, str], m: Matchers) -> Optional[str]:
    """Why a uevent needs a refresh (``"add /dev/xpu3"``), or None when it does not."""
    action = action or props.get("ACTION") or "?"
    devname = props.get("DEVNAME")
    if devname:
        node = devname if devname.startswith("/") else "/dev/" + devname
        if any(fnmatch.fnmatchcase(node, g) for g in m.node_globs):
            return f"{action} {node}"
    subsystem = props.get("SUBSYSTEM")
    if subsystem == "pci" and action in PCI_ACTIONS:
        vendor = (props.get("PCI_ID") or "").split(":")[0].upper()
        if vendor and vendor in m.pci_vendors:
            return f"{action} pci {props.get('PCI_SLOT_NAME') or props.get('DEVPATH', '?')}"
    if subsystem == "module" and action in ("add", "remove"):
        name = os.path.basename(props.get("DEVPATH") or "")
        if name and (not m.modules or name in m.modules):
            return f"{action} module {name}"
    return None


def _signature(path: str) -> Any:
    """What changes when a file is rewritten (or a directory's *.yaml set changes)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if os.path.isdir(path):
        try:
            names = os.listdir(path)
        except OSError:
            return None
        return tuple(sorted((n, _signature(os.path.join(path, n))) for n in names if n.endswith(".yaml")))
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Watcher:
    """The watch loop's state: pending triggers, file signatures, counters.

    A class because it carries state across events; ``source`` is anything
    with pyudev's ``Monitor.poll(timeout)`` (None: files only).
    """

    def __init__(self, target: Target, files: Sequence[str], log: Log, modules: Sequence[str] = (),
                 debounce: float = 2.0, max_delay: float = 10.0, poll_interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.target, self.log, self.clock = target, log, clock
        self.modules = tuple(modules)
        self.debounce, self.max_delay, self.poll_interval = debounce, max_delay, poll_interval
        self.files = {f: _signature(f) for f in files}
        self.matchers = Matchers.of(target.select(), self.modules)
        self.runs = 0  # pipeline runs, counted for tests and the exit log
        self.first: Optional[float] = None  # when the pending refresh was first asked for
        self.last: Optional[float] = None
        self.reasons: List[str] = []
        self.stop = threading.Event()

    def trigger(self, reason: str) -> None:
        """Ask for a refresh (debounced)."""
        now = self.clock()
        self.first = self.first if self.first is not None else now
        self.last = now
        if reason not in self.reasons:
            self.reasons.append(reason)

    def on_event(self, device: Any) -> None:
        """Handle one pyudev device (or anything with ``.action`` and ``.properties``)."""
        reason = classify(getattr(device, "action", None), device.properties, self.matchers)
        if reason:
            self.trigger(reason)

    def check_files(self) -> None:
        """Trigger for every watched file whose stat signature changed."""
        for path, old in self.files.items():
            new = _signature(path)
            if new != old:
                self.files[path] = new
                self.trigger(f"changed {path}")

    def due(self) -> bool:
        """A refresh is pending and things have been quiet long enough (or waited too long)."""
        if self.first is None or self.last is None:
            return False
        now = self.clock()
        return now - self.last >= self.debounce or now - self.first >= self.max_delay

    def run_once(self) -> int:
        """One refresh now; errors are logged, not raised (the watch keeps going)."""
        reasons, self.reasons, self.first, self.last = self.reasons, [], None, None
        why = f" [{', '.join(reasons)}]" if reasons else ""
        try:
            # each change says its cause
            changes = _refresh.refresh(self.target, lambda line, level=INFO: self.log(line + why, level))
            self.matchers = Matchers.of(self.target.select(), self.modules)  # profiles.d may have changed
        except XpuCdiError as err:
            self.log(f"refresh failed ({', '.join(reasons) or 'start'}): {err}", ERROR)
            return 0
        finally:
            self.runs += 1  # counted when done, so a test waiting for a run sees its result
        if not changes and reasons:
            self.log(f"checked ({', '.join(reasons)}): specs up to date")
        return changes

    def loop(self, source: Any) -> None:
        """Refresh at start, then on events and file changes until :attr:`stop` is set."""
        self.run_once()
        next_poll = self.clock() + self.poll_interval
        while not self.stop.is_set():
            now = self.clock()
            wait = max(0.0, next_poll - now)
            if self.first is not None and self.last is not None:
                wait = min(wait, max(0.0, min(self.last + self.debounce, self.first + self.max_delay) - now))
            wait = min(wait, 1.0)  # see a stop request within a second
            if source is not None:
                device, lost = uevents.receive(source, wait)
                if lost:
                    self.log(f"uevents lost ({lost}): refreshing to be safe", WARNING)
                    self.trigger("lost uevents")
                if device is not None:
                    self.on_event(device)
            else:
                self.stop.wait(wait)
            if self.clock() >= next_poll:
                self.check_files()
                next_poll = self.clock() + self.poll_interval
            if self.due():
                self.run_once()
