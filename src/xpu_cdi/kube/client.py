"""The API server over a urllib3 pool, with JSON bodies as plain dicts.

The pod's service account (its token re-read as it rotates) and plain
kubeconfigs (a server, a CA, a token or a client certificate) are set up
here with urllib3 alone; anything else (exec plugins, auth providers) by the
official client's loaders (``kubernetes``: PyPI's, or Debian's
python3-kubernetes), whose import alone is ~15 MiB of the driver's memory.
Never its generated typed API: that changed shape between the releases
Debian and PyPI ship, and its models lag behind fields such as device
taints.  docs/dra.md ("The API client").

Every failure is an :class:`ApiError` carrying the HTTP status (0 when the
server was not reached) and the server's own message.  As client-go does, the
client keeps to a rate of its own (:class:`RateLimit`, client-go's QPS and
burst), waits as a 429 or 5xx answer's ``Retry-After`` says before trying
again, and goes through the proxy ``HTTPS_PROXY``/``HTTP_PROXY`` name unless
``NO_PROXY`` excludes the server (:func:`proxy_for`).
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import quote, urlencode, urlsplit

from ..errors import ApiError, ConfigError

RESOURCE = "/apis/resource.k8s.io/v1"
DEFAULT_TIMEOUT = 10.0
API_POOL = 4  # keep-alive connections to the API server at most, opened as concurrent calls ask
QPS, BURST = 5.0, 10  # client-go's defaults (rest.Config): calls a second, and at once
MAX_RETRIES = 10  # answers with Retry-After waited out before the call fails (client-go's maxRetries)
MAX_RETRY_AFTER = 60.0  # the longest one Retry-After is waited, in seconds
MAX_KUBECONFIG = 4 << 20  # bytes of one kubeconfig file


class RateLimit:
    """A token bucket: *burst* calls at once, then *qps* a second (client-go's token-bucket limiter).

    Each caller takes its slot at once and sleeps until it comes, so concurrent
    callers queue in order."""

    def __init__(self, qps: float = QPS, burst: int = BURST, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.qps, self.burst, self.clock, self.sleep = qps, burst, clock, sleep
        self.tokens, self.stamp = float(burst), clock()
        self.lock = threading.Lock()

    def wait(self) -> float:
        """Take a slot; sleep until it comes.  The seconds slept."""
        with self.lock:
            now = self.clock()
            self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.qps) - 1
            self.stamp = now
            delay = -self.tokens / self.qps if self.tokens < 0 else 0.0
        if delay > 0:
            self.sleep(delay)
        return delay


def retry_after(status: int, headers: Mapping[str, str]) -> Optional[float]:
    """Seconds to wait before calling again, when a 429 or 5xx answer says so in ``Retry-After``
    (whole seconds, as the API server writes it; client-go retries only then), else None."""
    if status != 429 and status // 100 != 5:
        return None
    value = (headers.get("Retry-After") or "").strip()
    if not value.isdigit():
        return None
    return min(float(value), MAX_RETRY_AFTER)


def slices_path(name: str = "") -> str:
    return f"{RESOURCE}/resourceslices" + (f"/{quote(name)}" if name else "")


def claim_path(namespace: str, name: str) -> str:
    return f"{RESOURCE}/namespaces/{quote(namespace)}/resourceclaims/{quote(name)}"


SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class Kube:
    """A connection to the API server: in-cluster, or from *kubeconfig*.

    The common cases -- the pod's service account (its token re-read as
    kubelet rotates it, its CA), and a kubeconfig naming a server, a CA
    and a token or a client certificate -- need only urllib3 (:func:`_plain`);
    anything else (exec plugins, auth providers, merged KUBECONFIG lists)
    goes through the official client's loaders (:func:`_library`), which
    cost the driver ~15 MiB of memory for its generated models.
    """

    def __init__(self, kubeconfig: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT,
                 limit: Optional[RateLimit] = None, sleep: Callable[[float], None] = time.sleep) -> None:
        import urllib3

        self._urllib3 = urllib3
        self.timeout = timeout
        self.limit = limit or RateLimit()
        self._sleep = sleep
        self._cleanup: List[str] = []
        plain = _plain(kubeconfig, self._cleanup)
        if plain is None:
            self.host, self.pool, self._token, self.insecure = _library(kubeconfig)
        else:
            self.host, self.pool, self._token, self.insecure = plain
        if self.insecure:  # said once by the daemon, not a warning per request
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    def _headers(self, content_type: str = "application/json") -> Dict[str, str]:
        token = self._token()
        headers = {"Accept": "application/json", "Content-Type": content_type, "User-Agent": "xpu-cdi-dra-driver"}
        if token:
            headers["Authorization"] = token if " " in token else f"Bearer {token}"
        return headers

    def _send(self, method: str, path: str, query: Optional[Mapping[str, Any]], body: Any, timeout: Any,
              stream: bool, content_type: str = "application/json") -> Any:
        url = self.host + path + ("?" + urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        retries = 0
        while True:
            self.limit.wait()
            try:
                r = self.pool.request(method, url, body=data, headers=self._headers(content_type),
                                      preload_content=not stream, timeout=timeout, retries=False)
            except self._urllib3.exceptions.HTTPError as err:
                raise ApiError(0, f"API server {self.host} not reached: "
                                  f"{' '.join(str(err).split())[:300]}") from None
            wait = retry_after(r.status, r.headers)
            if wait is None or retries == MAX_RETRIES:
                return r
            if stream:
                r.drain_conn()  # the connection goes back to the pool for the next try
            r.release_conn()
            retries += 1
            self._sleep(wait)

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
              kind: str = "Warning", host: str = "") -> None:
        """Record a core/v1 Event about *involved* (a best effort: failures are the caller's to log); *host*:
        the node it comes from (``source.host``, which the driver's admission policy holds to its own)."""
        import datetime
        import uuid

        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{involved.get('name', 'xpu-cdi')}.{uuid.uuid4().hex[:16]}",
                             "namespace": namespace},
                "involvedObject": dict(involved), "reason": reason, "message": message[:1024], "type": kind,
                "source": {"component": "xpu-cdi-dra-driver", **({"host": host} if host else {})},
                "firstTimestamp": now, "lastTimestamp": now,
                "count": 1}
        self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/events", body)

    def close(self) -> None:
        self.pool.clear()
        for path in self._cleanup:
            with contextlib.suppress(OSError):
                os.unlink(path)


Connection = Tuple[str, Any, Callable[[], Optional[str]], bool]  # (host, urllib3 pool, token, insecure)


def _library(kubeconfig: Optional[str]) -> Connection:
    """The official client's configuration loaders and urllib3 pool."""
    try:
        from kubernetes import client, config
    except ImportError as err:
        raise ConfigError(f"the DRA driver needs the Kubernetes client for this kubeconfig ({err}): pip install "
                          f"kubernetes, or apt install python3-kubernetes") from None
    if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):  # the library's default list below
        _check_files(kubeconfig or os.environ.get("KUBECONFIG", "~/.kube/config"), kubeconfig)
    cfg = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(client_configuration=cfg, persist_config=False)
    except (config.ConfigException, OSError, ValueError, TypeError) as err:
        why = " ".join(str(err).split())
        raise ConfigError(f"cannot configure the API client from {_where(kubeconfig)}: {why}") from None

    def token() -> Optional[str]:
        hook = cfg.refresh_api_key_hook  # in-cluster: re-reads a rotated token
        if hook is not None:
            hook(cfg)
        return cfg.api_key.get("BearerToken") or cfg.api_key.get("authorization")  # 37.x / 22.x

    import ssl  # urllib3 has it loaded already

    pool = client.ApiClient(cfg).rest_client.pool_manager
    # insecure-skip-tls-verify, as the library's pool applies it: certificates not required
    return cfg.host.rstrip("/"), pool, token, pool.connection_pool_kw.get("cert_reqs") == ssl.CERT_NONE


def _check_files(paths: str, kubeconfig: Optional[str]) -> None:
    """Each kubeconfig the library is about to read (a ``KUBECONFIG`` list names several; it skips
    the absent) through :mod:`xpu_cdi.bounded` first: a regular file of at most 4 MiB whose YAML
    is bounded in depth and aliases.  The library's loader reads a file unbounded: a FIFO there
    would hang the daemon, an alias bomb fill its memory.

    Raises:
        ConfigError: one line naming the file.
    """
    import yaml

    from .. import bounded
    from ..cdi import yamlload

    for path in (os.path.expanduser(p) for p in paths.split(os.pathsep) if p):
        if not os.path.exists(path):
            continue
        try:
            yamlload.load(bounded.read(path, MAX_KUBECONFIG), max_nodes=bounded.MAX_SETTINGS_NODES)
        except (OSError, ValueError, yaml.YAMLError) as err:
            why = " ".join(str(getattr(err, "strerror", None) or err).split())
            raise ConfigError(f"cannot configure the API client from {_where(kubeconfig)}: {path}: "
                              f"{why if len(why) <= 300 else why[:297] + '...'}") from None


def _where(kubeconfig: Optional[str]) -> str:
    return f"--kubeconfig {kubeconfig}" if kubeconfig else "the in-cluster service account or ~/.kube/config"


def _plain(kubeconfig: Optional[str], cleanup: List[str]) -> Optional[Connection]:
    """The connection of the common cases with urllib3 alone, or None for :func:`_library` to make."""
    if not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        token_file = os.path.join(SERVICE_ACCOUNT, "token")
        if not os.path.exists(token_file):
            return None  # the library says what is missing
        pool = _pool(server, cert_reqs="CERT_REQUIRED", ca_certs=os.path.join(SERVICE_ACCOUNT, "ca.crt"))
        return server, pool, lambda: _read_token(token_file), False
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if os.pathsep in path:
        return None  # a merged list
    import yaml  # here: in a pod (the service account above) no YAML is read, ~1.1 MiB (issue 30)

    from .. import bounded
    from ..cdi import yamlload

    try:
        doc = yamlload.load(bounded.read(path, MAX_KUBECONFIG), max_nodes=bounded.MAX_SETTINGS_NODES)
        ctx = _named(doc, "contexts", doc["current-context"])["context"]
        cluster = _named(doc, "clusters", ctx["cluster"])["cluster"]
        user = _named(doc, "users", ctx["user"]).get("user") or {}
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        return None  # unreadable or unusual: the library's loader gives its own message
    if set(user) - {"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key",
                    "client-key-data"} or set(cluster) - {"server", "certificate-authority",
                                                          "certificate-authority-data", "insecure-skip-tls-verify",
                                                          "tls-server-name"}:
        return None  # exec plugins, auth providers, basic auth, proxies: the library's
    base = os.path.dirname(os.path.abspath(path))
    insecure = bool(cluster.get("insecure-skip-tls-verify"))
    tls: Dict[str, Any] = {"cert_reqs": "CERT_NONE" if insecure else "CERT_REQUIRED"}
    if cluster.get("tls-server-name"):
        tls["server_hostname"] = cluster["tls-server-name"]
    try:
        if cluster.get("certificate-authority-data"):
            tls["ca_cert_data"] = base64.b64decode(cluster["certificate-authority-data"]).decode()
        elif cluster.get("certificate-authority"):
            tls["ca_certs"] = os.path.join(base, cluster["certificate-authority"])
        for key, field in (("cert_file", "client-certificate"), ("key_file", "client-key")):
            if user.get(field + "-data"):  # ssl loads a certificate chain from files only
                tls[key] = _private_file(base64.b64decode(user[field + "-data"]), cleanup)
            elif user.get(field):
                tls[key] = os.path.join(base, user[field])
    except (ValueError, OSError) as err:
        raise ConfigError(f"cannot configure the API client from {_where(kubeconfig)}: {err}") from None
    if "token" in user:
        token = str(user["token"])
        get_token: Callable[[], Optional[str]] = lambda: token  # noqa: E731
    elif "tokenFile" in user:
        token_file = os.path.join(base, user["tokenFile"])
        get_token = lambda: _read_token(token_file)  # noqa: E731
    else:
        get_token = lambda: None  # noqa: E731
    server = str(cluster["server"]).rstrip("/")
    return server, _pool(server, **tls), get_token, insecure


def proxy_for(server: str, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The proxy URL for *server* from the environment, by the rules of Go's
    golang.org/x/net/http/httpproxy, which client-go follows: ``HTTPS_PROXY`` for an https server
    (``HTTP_PROXY`` for http; the uppercase name first), none for localhost and loopback
    addresses or when ``NO_PROXY`` names the server: ``*``, an address or CIDR block, a domain
    (``foo.com``: it and its subdomains; ``.foo.com``: subdomains only), each maybe with
    ``:port``.  (Python's urllib knows no CIDR block, the usual way to exclude a cluster's
    service network.)  None: connect directly."""
    env = os.environ if env is None else env
    url = urlsplit(server)
    host = (url.hostname or "").lower()
    if host == "localhost" or _loopback(host):
        return None
    name = "HTTPS_PROXY" if url.scheme == "https" else "HTTP_PROXY"
    proxy = env.get(name) or env.get(name.lower()) or ""
    if not proxy:
        return None
    port = str(url.port or (443 if url.scheme == "https" else 80))
    for entry in (env.get("NO_PROXY") or env.get("no_proxy") or "").lower().split(","):
        entry = entry.strip()
        if entry == "*":
            return None
        if entry.count(":") == 1:  # host:port (an IPv6 address has more)
            entry, _, want = entry.partition(":")
            if want != port:
                continue
        entry = entry.strip("[]")
        if not entry:
            continue
        if entry.startswith("."):
            if host.endswith(entry):
                return None
        elif host == entry or host.endswith("." + entry) or _in_net(host, entry):
            return None
    return proxy if "://" in proxy else "http://" + proxy


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _in_net(host: str, entry: str) -> bool:
    """*host* is the address, or in the CIDR block, *entry* names."""
    try:
        return ipaddress.ip_address(host.strip("[]")) in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False


def _pool(server: str, **tls: Any) -> Any:
    """urllib3's pool for *server*: through the proxy :func:`proxy_for` names, else direct."""
    import urllib3

    proxy = proxy_for(server)
    if proxy:
        return urllib3.ProxyManager(proxy, maxsize=API_POOL, **tls)
    return urllib3.PoolManager(maxsize=API_POOL, **tls)


def _named(doc: Mapping[str, Any], section: str, name: str) -> Dict[str, Any]:
    return next(e for e in doc[section] if e.get("name") == name)


def _read_token(path: str) -> str:
    """The token in *path*, read at each request: kubelet rotates a projected token in place."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as err:
        raise ApiError(0, f"cannot read the API token {path}: {err.strerror}") from None


def _private_file(data: bytes, cleanup: List[str]) -> str:
    import tempfile  # here: only a kubeconfig with inline certificates needs it (tempfile, shutil,
    # random, bz2 and lzma are ~0.5 MiB of the driver; issue 30)

    fd, path = tempfile.mkstemp(prefix="xpu-cdi-kube-")  # mode 0600
    cleanup.append(path)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path
