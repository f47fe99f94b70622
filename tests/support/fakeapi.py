"""An in-memory stand-in for the few API server calls the driver's kubelet half makes (unit tests only:
the real API server, scheduler and kubelet are the one-node cluster's, tests/k8s).

Claims by namespace/name, slices by name with resourceVersions (a PUT with a
stale one is a 409, as the API server answers), Events recorded, a watch that
sends DELETED events for deleted slices.  :class:`HttpFront` serves it over
plain HTTP, for a driver in its own process and for kube/client.py's client.
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import parse_qsl, urlsplit

from xpu_cdi.kube.client import ApiError


class FakeKube:
    host = "https://fake"
    insecure = False

    def __init__(self) -> None:
        self.claims: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.pods: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.slices: Dict[str, Dict[str, Any]] = {}
        self.events: List[Tuple[str, str]] = []
        self.about: List[Tuple[str, Dict[str, Any], str, str, str]] = []  # (namespace, involved, reason, type, host)
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
            if path.endswith("/resourceclaims"):
                ns = parts[parts.index("namespaces") + 1]
                return {"items": copy.deepcopy([c for (n, _), c in sorted(self.claims.items()) if n == ns])}
            if parts[-1] == "status" and "resourceclaims" in parts and method == "PATCH":
                return self._apply_status(parts[parts.index("namespaces") + 1], parts[-2], body)
            if parts[:3] == ["api", "v1", "namespaces"] and parts[-2:-1] == ["pods"]:
                if (parts[3], parts[-1]) not in self.pods:
                    raise ApiError(404, f"GET {path}: 404 not found", "NotFound")
                return copy.deepcopy(self.pods[(parts[3], parts[-1])])
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

    def _apply_status(self, ns: str, name: str, body: Any) -> Dict[str, Any]:
        """A server-side apply of status.devices: entries merged by (driver, pool, device), as the list's map keys."""
        claim = self.claims.get((ns, name))
        if claim is None:
            raise ApiError(404, "not found", "NotFound")
        status = claim.setdefault("status", {})
        key = lambda d: (d.get("driver"), d.get("pool"), d.get("device"))  # noqa: E731
        mine = {key(d): copy.deepcopy(d) for d in body["status"]["devices"]}
        status["devices"] = [mine.pop(key(d), d) for d in status.get("devices") or []] + list(mine.values())
        return copy.deepcopy(claim)

    def delete_slices(self) -> None:
        """What kubelet does when it starts."""
        for name in list(self.slices):
            self.request("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{name}")

    def watch(self, path: str, query: Mapping[str, Any], timeout_seconds: int) -> Iterator[Tuple[str, Any]]:
        if path.endswith("/resourceclaims"):  # MODIFIED when a test changes a claim (the slices have their feed)
            import time

            before = json.dumps(sorted(self.claims.items()), sort_keys=True, default=str)
            for _ in range(6):
                time.sleep(0.05)
                if json.dumps(sorted(self.claims.items()), sort_keys=True, default=str) != before:
                    yield "MODIFIED", {}
                    return
            return
        with self.cond:
            if not self.feed:
                self.cond.wait(0.3)
            feed, self.feed = self.feed, []
        yield from feed

    def event(self, namespace: str, involved: Mapping[str, Any], reason: str, message: str,
              kind: str = "Warning", host: str = "") -> None:
        self.about.append((namespace, dict(involved), reason, kind, host))
        self.request("POST", f"/api/v1/namespaces/{namespace}/events", {"reason": reason, "message": message})


class HttpFront:
    """*kube* behind plain HTTP on loopback: calls answered from its tables, watches held open until
    their timeout (an idle cluster) or :meth:`close`.

    :attr:`throttle` holds answers given before the tables answer, first first: ``(status,
    headers)``, as an API server's priority and fairness answers 429 with ``Retry-After``.  A
    request in absolute form (``GET http://host/path``, what a client sends its HTTP proxy) is
    answered the same: the front is its own proxy stand-in.  :attr:`seen` logs ``(method, path,
    through a proxy)``."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube
        self.quiet = threading.Event()  # set at close: held watches return
        self.throttle: List[Tuple[int, Dict[str, str]]] = []
        self.seen: List[Tuple[str, str, bool]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self) -> type:
        front = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def handle(self) -> None:
                try:
                    super().handle()
                except (BrokenPipeError, ConnectionResetError):  # the client stopped mid-watch
                    pass

            def _answer(self, status: int, doc: object, headers: Mapping[str, str] = {}) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def _call(self) -> None:
                url = urlsplit(self.path)
                query = dict(parse_qsl(url.query))
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size)) if size else None
                with front.lock:
                    front.seen.append((self.command, url.path, bool(url.scheme)))
                    throttled = front.throttle.pop(0) if front.throttle else None
                if throttled is not None:
                    return self._answer(throttled[0], {"message": "throttled", "reason": "TooManyRequests"},
                                        throttled[1])
                if query.get("watch"):
                    front.quiet.wait(float(query.get("timeoutSeconds", "60")))
                    return self._answer(200, {})  # no newline: no event, the watch just ends
                try:
                    self._answer(200, front.kube.request(self.command, url.path, body, query))
                except ApiError as err:
                    self._answer(err.status or 500, {"message": str(err), "reason": err.reason})

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _call

        return Handler

    def close(self) -> None:
        self.quiet.set()
        self.server.shutdown()
        self.server.server_close()
