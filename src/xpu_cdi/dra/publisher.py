"""Keeps one driver's ResourceSlices on the API server equal to what the node has.

* :meth:`Publisher.set` takes the cards and their health; a change of what
  the pool says bumps ``pool.generation`` (every slice of the pool carries
  it: consumers take the highest) and marks the pool dirty;
* :meth:`Publisher.sync` (the daemon's loop) reads the node's slices of this
  driver and writes what differs: a replace of an existing slice (its
  ``resourceVersion``, so a concurrent writer is a conflict, then a retry),
  a create of a missing one, a delete of one too many;
* :meth:`Publisher.watch` (a thread) follows those slices from the listed
  ``resourceVersion``: kubelet deletes its node's slices when it starts, and
  a deleted slice is republished at once.  Only deletions wake it: another
  writer's content (the other pod of a rolling update) is not fought over;
  a broken watch is resumed after a backoff (0.2 s doubling to 5 s), from a
  new list when the server says the version is gone (410);
* :meth:`Publisher.withdraw` deletes them on shutdown, so the scheduler
  stops placing pods on a node whose driver is gone.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Collection, Dict, FrozenSet, List, Mapping, Optional, Sequence

from ..log import WARNING, Log
from . import slices
from ..kube.client import ApiError, Kube, slices_path

BACKOFF_FIRST, BACKOFF_MAX = 0.2, 5.0
WATCH_SECONDS = 300


class Publisher:
    """The pool of one driver on one node."""

    def __init__(self, kube: Kube, driver: str, node: str, log: Log, wake: Callable[[], None]) -> None:
        self.kube, self.driver, self.node, self.log, self.wake = kube, driver, node, log, wake
        self.lock = threading.Lock()
        self.devices: List[slices.DeviceInfo] = []
        self.unhealthy: Dict[str, str] = {}
        self.evicting: FrozenSet[str] = frozenset()  # unhealthy cards tainted NoExecute (remedy)
        self.generation = 0
        self.content: Optional[str] = None  # what the pool says at self.generation
        self.dirty = True
        self.node_uid = ""
        self.published = False  # the last sync wrote (or found) every slice
        self.last_error = ""
        self.withdrawn = False

    @property
    def selector(self) -> str:
        return f"spec.nodeName={self.node},spec.driver={self.driver}"

    def set(self, devices: Sequence[slices.DeviceInfo], unhealthy: Mapping[str, str],
            evicting: Collection[str] = ()) -> bool:
        """New inventory (*evicting*: the unhealthy cards whose taint is NoExecute); True when the pool's
        content changed (and a sync is due)."""
        text = slices.content(devices, self.driver, unhealthy, evicting)
        with self.lock:
            self.devices, self.unhealthy, self.evicting = list(devices), dict(unhealthy), frozenset(evicting)
            if text == self.content:
                return False
            self.content = text
            self.generation += 1
            self.dirty = True
        self.wake()
        return True

    def _list(self) -> Dict[str, Any]:
        return self.kube.get(slices_path(), {"fieldSelector": self.selector})

    def _node_uid(self) -> str:
        if not self.node_uid:
            try:
                self.node_uid = self.kube.get(f"/api/v1/nodes/{self.node}")["metadata"]["uid"]
            except (ApiError, KeyError) as err:
                self.log(f"{self.driver}: node {self.node} not read ({err}): slices published without an owner "
                         f"(they are not removed with the node)", WARNING)
        return self.node_uid

    def sync(self) -> bool:
        """Write what differs; True when the API server has the pool as wanted (else retried later)."""
        with self.lock:
            if not self.dirty or self.withdrawn:
                return self.published
            self.dirty = False
            devices, unhealthy, evicting = list(self.devices), dict(self.unhealthy), self.evicting
        try:
            have = {s["metadata"]["name"]: s for s in self._list().get("items") or []}
            mine = [s for s in have.values() if s["spec"].get("pool", {}).get("name") == self.node]
            gens = [s["spec"]["pool"].get("generation", 0) for s in mine]
            with self.lock:
                if gens and max(gens) >= self.generation:  # a restart, or the other pod of a rolling update
                    if slices.published_content(mine) == self.content and len(mine) == \
                            mine[0]["spec"]["pool"].get("resourceSliceCount"):
                        self.generation = max(gens)
                        self.published, self.last_error = True, ""
                        return True
                    self.generation = max(gens) + 1
                generation = self.generation
            want = slices.build(self.driver, self.node, devices, unhealthy, generation, self._node_uid(), evicting)
            slices.keep_time_added(want, have)
            for s in want:
                name = s["metadata"]["name"]
                old = have.pop(name, None)
                if old is None:
                    self.kube.request("POST", slices_path(), s)
                else:
                    s["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                    self.kube.request("PUT", slices_path(name), s)
            for name in have:  # left over from a pool that had more slices
                self._delete(name)
        except ApiError as err:
            with self.lock:
                self.dirty, self.published = True, False
            if str(err) != self.last_error:
                self.log(f"{self.driver}: publishing the slices failed: {err} (retrying)", WARNING)
            self.last_error = str(err)
            return False
        with self.lock:
            self.published = True
        if self.last_error:
            self.log(f"{self.driver}: slices published again")
        self.last_error = ""
        return True

    def _delete(self, name: str) -> None:
        try:
            self.kube.request("DELETE", slices_path(name))
        except ApiError as err:
            if err.status != 404:
                raise

    def withdraw(self) -> None:
        """Delete every slice of this driver on this node."""
        with self.lock:
            self.withdrawn = True
        try:
            for s in self._list().get("items") or []:
                self._delete(s["metadata"]["name"])
            self.log(f"{self.driver}: slices withdrawn")
        except ApiError as err:
            self.log(f"{self.driver}: withdrawing the slices failed: {err} (kubelet removes them when the "
                     f"driver stays unregistered)", WARNING)

    def mark_dirty(self) -> None:
        with self.lock:
            self.dirty = True
        self.wake()

    def watch(self, stop: threading.Event) -> None:
        """Until *stop*: a deleted slice (kubelet's start, an admin) makes the pool dirty."""
        delay = BACKOFF_FIRST
        version = ""
        while not stop.is_set():
            try:
                if not version:
                    listed = self._list()
                    version = listed.get("metadata", {}).get("resourceVersion", "")
                    if not self.withdrawn and self.published and not listed.get("items"):
                        self.mark_dirty()  # gone while we were not watching
                for kind, obj in self.kube.watch(slices_path(), {"fieldSelector": self.selector,
                                                                 "resourceVersion": version}, WATCH_SECONDS):
                    if stop.is_set():
                        return
                    if kind == "ERROR":  # 410 Gone: list again
                        version = ""
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion", version)
                    if kind == "DELETED" and not self.withdrawn:
                        self.log(f"{self.driver}: slice {obj.get('metadata', {}).get('name')} was deleted "
                                 f"(kubelet restarted?): publishing again")
                        self.mark_dirty()
                delay = BACKOFF_FIRST
            except ApiError as err:
                if not stop.is_set():
                    self.log(f"{self.driver}: watching the slices: {err}; again in {delay:.1f}s", WARNING)
                    stop.wait(delay)
                    delay = min(BACKOFF_MAX, delay * 2)
                    version = ""
                    self.mark_dirty()  # the server may have lost them (an API server restart on fresh storage)
            except ValueError as err:  # a line that is not JSON
                self.log(f"{self.driver}: watch sent something unreadable ({err}): listing again", WARNING)
                version = ""
                time.sleep(0)
