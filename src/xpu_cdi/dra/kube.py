"""The API server, through the official Kubernetes client's configuration and connections.

The client library (``kubernetes``: PyPI's, or Debian's python3-kubernetes,
22.6 on Debian 12) does what is easy to get wrong: in-cluster config (the
service account token, re-read as it rotates), kubeconfig files (client
certificates, tokens, exec plugins), TLS.  Requests go through its
configured urllib3 pool with JSON bodies as plain dicts, not through its
generated typed API: that API changed shape between the releases Debian and
PyPI ship, and its models lag behind fields such as device taints.  Why this
library and not lightkube or kr8s: docs/dra.md ("The API client").

Every failure is an :class:`ApiError` carrying the HTTP status (0 when the
server was not reached) and the server's own message.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple
from urllib.parse import quote, urlencode

from ..errors import ApiError, ConfigError

RESOURCE = "/apis/resource.k8s.io/v1"
DEFAULT_TIMEOUT = 10.0


def slices_path(name: str = "") -> str:
    return f"{RESOURCE}/resourceslices" + (f"/{quote(name)}" if name else "")


def claim_path(namespace: str, name: str) -> str:
    return f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaims/{quote(name)}"


class Kube:
    """A connection to the API server: in-cluster, or from *kubeconfig*."""

    def __init__(self, kubeconfig: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        try:
            from kubernetes import client, config
        except ImportError as err:
            raise ConfigError(f"the DRA driver needs the Kubernetes client ({err}): pip install kubernetes, or "
                              f"apt install python3-kubernetes") from None
        cfg = client.Configuration()
        try:
            if kubeconfig:
                config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config(client_configuration=cfg)
            else:
                config.load_kube_config(client_configuration=cfg, persist_config=False)
        except (config.ConfigException, OSError, ValueError, TypeError) as err:
            where = f"--kubeconfig {kubeconfig}" if kubeconfig else "the in-cluster service account or ~/.kube/config"
            raise ConfigError(f"cannot configure the API client from {where}: {' '.join(str(err).split())}") \
                from None
        self.cfg = cfg
        self.api = client.ApiClient(cfg)
        self.pool = self.api.rest_client.pool_manager
        self.host = cfg.host.rstrip("/")
        self.timeout = timeout
        import urllib3

        self._urllib3 = urllib3
        self.insecure = not cfg.verify_ssl
        if self.insecure:  # said once by the daemon, not a warning per request
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    def _headers(self, content_type: str = "application/json") -> Dict[str, str]:
        hook = self.cfg.refresh_api_key_hook  # in-cluster: re-reads a rotated token
        if hook is not None:
            hook(self.cfg)
        token = self.cfg.api_key.get("BearerToken") or self.cfg.api_key.get("authorization")  # 37.x / 22.x
        headers = {"Accept": "application/json", "Content-Type": content_type, "User-Agent": "xpu-cdi-dra-driver"}
        if token:
            headers["Authorization"] = token if " " in token else f"Bearer {token}"
        return headers

    def _send(self, method: str, path: str, query: Optional[Mapping[str, Any]], body: Any, timeout: Any,
              stream: bool, content_type: str = "application/json") -> Any:
        url = self.host + path + ("?" + urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        try:
            return self.pool.request(method, url, body=data, headers=self._headers(content_type),
                                     preload_content=not stream, timeout=timeout, retries=False)
        except self._urllib3.exceptions.HTTPError as err:
            raise ApiError(0, f"API server {self.host} not reached: {' '.join(str(err).split())[:300]}") from None

    def request(self, method: str, path: str, body: Any = None, query: Optional[Mapping[str, Any]] = None,
                timeout: Optional[float] = None, content_type: str = "application/json") -> Dict[str, Any]:
        """One call; the decoded JSON answer.  Raises :class:`ApiError`."""
        r = self._send(method, path, query, body, timeout or self.timeout, False, content_type)
        text = r.data.decode("utf-8", "replace")
        try:
            doc = json.loads(text) if text else {}
        except ValueError:
            doc = {"message": text[:300]}
        if r.status >= 400:
            raise ApiError(r.status, f"{method} {path}: {r.status} {doc.get('message') or r.reason}",
                           str(doc.get("reason", "")))
        return doc

    def get(self, path: str, query: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        return self.request("GET", path, query=query)

    def watch(self, path: str, query: Mapping[str, Any], timeout_seconds: int) -> Iterator[Tuple[str, Any]]:
        """``(type, object)`` events of a watch from ``query["resourceVersion"]``, until the server ends it.

        ``ERROR`` events (410 Gone: the version is too old) come through as
        they are: the caller lists again.
        """
        q = dict(query, watch="1", allowWatchBookmarks="true", timeoutSeconds=str(timeout_seconds))
        timeout = self._urllib3.Timeout(connect=self.timeout, read=timeout_seconds + 10)
        r = self._send("GET", path, q, None, timeout, True)
        try:
            if r.status >= 400:
                raise ApiError(r.status, f"watch {path}: {r.status} {r.data[:300]!r}")
            buf = b""
            for chunk in r.stream(64 << 10, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        ev = json.loads(line)
                        yield ev.get("type", ""), ev.get("object") or {}
        except (self._urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiError(0, f"watch {path} broke: {' '.join(str(err).split())[:300]}") from None
        finally:
            r.release_conn()

    def event(self, namespace: str, involved: Mapping[str, Any], reason: str, message: str,
              kind: str = "Warning") -> None:
        """Record a core/v1 Event about *involved* (a best effort: failures are the caller's to log)."""
        import datetime
        import uuid

        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{involved.get('name', 'xpu-cdi')}.{uuid.uuid4().hex[:16]}",
                             "namespace": namespace},
                "involvedObject": dict(involved), "reason": reason, "message": message[:1024], "type": kind,
                "source": {"component": "xpu-cdi-dra-driver"}, "firstTimestamp": now, "lastTimestamp": now,
                "count": 1}
        self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/events", body)

    def close(self) -> None:
        self.pool.clear()
