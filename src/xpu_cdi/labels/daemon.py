"""``xpu-cdi labels --daemon``: keep the labels current.

The loop of the node daemons (:class:`xpu_cdi.node.loop.Loop`): it sleeps
on inotify (the card nodes' directories, the driver's version files'),
uevents and a wake-up pipe, at most ``--interval`` seconds, and each pass
discovers the host again and applies the labels where they changed: the
feature file (re-written before half its expiry), the Node (one merge
patch, and a read of the node every ``--resync`` seconds to put back what
someone else changed: idle, one request a minute).  A kind whose cards
have all gone keeps its labels for ``--removal-grace`` seconds (a driver
reload must not make the DaemonSets that select on them leave the node).
Stopping leaves the labels: the next labeller takes over from them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..errors import DiscoveryError, XpuCdiError
from ..generate import profile as _profile
from ..generate.options import plan, roots_of
from ..log import WARNING, Log, to_stderr
from ..node.loop import Loop
from ..node.settings import NodeSettings
from . import PREFIX, Roots, compute, nfd, ours
from .node import NodeLabels


@dataclass(frozen=True)
class Settings(NodeSettings):
    """The host as the other node daemons read it (spec_dirs unused), and where the labels go."""

    nfd_file: Optional[str] = None
    node: Optional[str] = None
    kubeconfig: Optional[str] = None
    interval: float = 5.0
    resync: float = 60.0
    expiry: float = nfd.DEFAULT_EXPIRY
    removal_grace: float = 300.0
    uevents: str = "auto"

    @property
    def roots(self) -> Roots:
        return Roots(self.sysfs_root, self.proc, self.driver_root)


def group_of(key: str) -> str:
    """The kind part of a key of ours (``xpu-cdi.io/npu.count`` -> ``npu``; the node-wide ones: ``""``)."""
    rest = key[len(PREFIX):]
    return rest.partition(".")[0] if "." in rest else ""


class Labeller(Loop):
    """The labels of one node, computed and applied."""

    offers_cards = False  # reports what the host has, carved chips too

    def __init__(self, s: Settings, log: Optional[Log] = None, kube: Any = None) -> None:
        super().__init__(log or to_stderr("xpu-cdi labels"), s)
        self.s: Settings = s
        self.target = NodeLabels(kube, s.node) if kube is not None and s.node else None
        self.applied: Optional[Dict[str, str]] = None  # what the node had of ours after our last patch
        self.synced = 0.0
        self.file_labels: Optional[Dict[str, str]] = None
        self.file_written = 0.0
        self.last: Dict[str, str] = {}  # the labels of the previous pass (a vanished kind's are kept from it)
        self.gone_since: Dict[str, float] = {}  # kind group -> when its cards were last seen

    def discover(self) -> Dict[str, str]:
        """The labels of the host now; a failed profile is said once."""
        roots = roots_of(self.s.dev_root, self.s.driver_root, self.s.sysfs_root)
        try:
            found = plan(self.s.profiles, self.s.profiles_dir, roots)
        except DiscoveryError as err:
            self.say_once("none:" + str(err), f"no cards: {err}", WARNING)
            return {}
        for name, failure in found.failures:
            self.say_once(f"fail:{name}:{failure}", f"{name}: skipped: {failure}", WARNING)
        labels, notes = compute(found.views, self.s.roots)
        for note in notes:
            self.say_once("note:" + note, f"note: {note}")
        return labels

    def wanted(self) -> Dict[str, str]:
        """The host's labels, plus those of a kind gone for less than the removal grace."""
        now = time.monotonic()
        labels = self.discover()
        present = {group_of(k) for k in labels}
        for group in {group_of(k) for k in self.last} - present - {""}:
            since = self.gone_since.setdefault(group, now)
            if now - since < self.s.removal_grace:
                labels.update({k: v for k, v in self.last.items() if group_of(k) == group})
                labels[PREFIX + "present"] = "true"
            else:
                del self.gone_since[group]
                self.log(f"{group}: no card for {self.s.removal_grace:g}s: its labels removed")
        for group in present:
            self.gone_since.pop(group, None)
        self.last = labels
        return labels

    def apply_file(self, labels: Dict[str, str]) -> None:
        path = self.s.nfd_file
        if path is None:
            return
        due = time.monotonic() - self.file_written >= self.s.expiry / 2
        if labels == self.file_labels and not due:
            return
        try:
            nfd.write(path, labels, self.s.expiry)
        except OSError as err:
            self.say_once("nfd:" + str(err), f"cannot write the feature file {path}: {err.strerror}")
            return
        if labels != self.file_labels:
            self.log(f"{path}: {len(labels)} label(s)")
        self.file_labels, self.file_written = labels, time.monotonic()

    def apply_node(self, labels: Dict[str, str]) -> None:
        """Patch the node when the labels changed, or read it (and put ours back) every --resync seconds."""
        if self.target is None:
            return
        if labels == self.applied and time.monotonic() - self.synced < self.s.resync:
            return
        try:
            patch = self.target.apply(labels)
        except XpuCdiError as err:
            self.applied = None  # tried again on the next pass
            self.say_once("api:" + str(err), f"node {self.s.node}: labels not applied: {err}")
            return
        self.logged = {k for k in self.logged if not k.startswith("api:")}
        if patch:
            self.log(f"node {self.s.node}: " + ", ".join(f"{k}={v}" if v is not None else f"-{k}"
                                                          for k, v in sorted(patch.items())))
        self.applied, self.synced = labels, time.monotonic()

    def step(self) -> None:
        labels = self.wanted()
        self.apply_file(labels)
        self.apply_node(labels)
        self.watch(self.watch_dirs())

    def watch_dirs(self) -> List[str]:
        """The card nodes' and the driver's version files' directories (not /proc: inotify sees nothing there)."""
        try:
            chosen = _profile.select(list(self.s.profiles) or None, self.s.profiles_dir)
        except XpuCdiError:
            return []
        out: List[str] = []
        for p in chosen:
            out += [os.path.join(self.s.dev_root, os.path.dirname(r.glob).lstrip("/")) for r in p.cards]
            for f in (*p.watch_files, p.driver_version_file):
                if f and not f.startswith("/proc/") and "%" not in f:
                    out.append(os.path.join(self.s.driver_root, os.path.dirname(f).lstrip("/")))
        return out

    def run(self, once: bool = False) -> int:
        """One pass (*once*), or until SIGTERM."""
        if once:
            self.step()
            return 0
        self.install_signals()
        if self.target is not None:  # a restart in a driver reload: the node's labels of ours get the grace too
            try:
                self.last = {k: v for k, v in self.target.current().items() if ours(k)}
            except XpuCdiError as err:
                self.log(f"node {self.s.node}: labels not read at start: {err}", WARNING)
        self.open_events(self.s.interval, self.s.uevents)
        self.log(f"starting: node {self.s.node or '-'}, feature file {self.s.nfd_file or '-'}, "
                 f"every {self.s.interval:g}s at most")
        while not self.stop.is_set():
            self.step()
            self.wait(self.s.interval)
        self.close_events()
        self.log("stopped (the labels stay)")
        return 0
