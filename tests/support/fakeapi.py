"""An in-memory stand-in for the few API server calls the driver's kubelet half makes (unit tests only:
the real API server, scheduler and kubelet are the one-node cluster's, tests/k8s).

Claims by namespace/name, slices by name with resourceVersions (a PUT with a
stale one is a 409, as the API server answers), Events recorded, a watch that
sends DELETED events for deleted slices.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from xpu_cdi.dra.kube import ApiError


class FakeKube:
    host = "https://fake"
    insecure = False

    def __init__(self) -> None:
        self.claims: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.slices: Dict[str, Dict[str, Any]] = {}
        self.events: List[Tuple[str, str]] = []
        self.calls: List[Tuple[str, str]] = []
        self.version = 0
        self.cond = threading.Condition()
        self.feed: List[Tuple[str, Any]] = []
        self.down = False

    def add_claim(self, ns: str, name: str, uid: str, results: List[Dict[str, Any]],
                  reserved: bool = True) -> None:
        status: Dict[str, Any] = {"allocation": {"devices": {"results": results}}} if results else {}
        if reserved and results:
            status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-" + uid}]
        self.claims[(ns, name)] = {"metadata": {"namespace": ns, "name": name, "uid": uid}, "status": status}

    def _bump(self) -> str:
        self.version += 1
        return str(self.version)

    def get(self, path: str, query: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        return self.request("GET", path, query=query)

    def request(self, method: str, path: str, body: Any = None, query: Any = None, **_: Any) -> Dict[str, Any]:
        self.calls.append((method, path))
        if self.down:
            raise ApiError(0, "API server not reached")
        parts = path.strip("/").split("/")
        with self.cond:
            if path.startswith("/api/v1/nodes/"):
                return {"metadata": {"name": parts[-1], "uid": "node-uid"}}
            if path.endswith("/resourceclaims") and "namespaces" not in parts:
                return {"items": copy.deepcopy(list(self.claims.values()))}
            if "resourceclaims" in parts:
                ns, name = parts[parts.index("namespaces") + 1], parts[-1]
                if (ns, name) not in self.claims:
                    raise ApiError(404, f"GET {path}: 404 not found", "NotFound")
                return copy.deepcopy(self.claims[(ns, name)])
            if parts[-1] == "resourceslices":
                if method == "POST":
                    obj = copy.deepcopy(body)
                    obj["metadata"]["resourceVersion"] = self._bump()
                    self.slices[obj["metadata"]["name"]] = obj
                    return obj
                return {"metadata": {"resourceVersion": str(self.version)},
                        "items": copy.deepcopy(list(self.slices.values()))}
            if "resourceslices" in parts:
                name = parts[-1]
                if method == "DELETE":
                    gone = self.slices.pop(name, None)
                    if gone is None:
                        raise ApiError(404, "not found")
                    self.feed.append(("DELETED", gone))
                    self.cond.notify_all()
                    return {}
                if method == "PUT":
                    old = self.slices.get(name)
                    if old is None or old["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
                        raise ApiError(409, "conflict", "Conflict")
                    obj = copy.deepcopy(body)
                    obj["metadata"]["resourceVersion"] = self._bump()
                    self.slices[name] = obj
                    return obj
            if path.endswith("/events"):
                self.events.append((body["reason"], body["message"]))
                return body
        raise ApiError(404, f"{method} {path}: not served by the fake")

    def delete_slices(self) -> None:
        """What kubelet does when it starts."""
        for name in list(self.slices):
            self.request("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{name}")

    def watch(self, path: str, query: Mapping[str, Any], timeout_seconds: int) -> Iterator[Tuple[str, Any]]:
        with self.cond:
            if not self.feed:
                self.cond.wait(0.3)
            feed, self.feed = self.feed, []
        yield from feed

    def event(self, namespace: str, involved: Mapping[str, Any], reason: str, message: str,
              kind: str = "Warning") -> None:
        self.request("POST", f"/api/v1/namespaces/{namespace}/events", {"reason": reason, "message": message})
