"""The exporter's HTTP(S) server: prometheus_client's WSGI app on the standard library's wsgiref.

Not prometheus_client's ``start_http_server``: before 0.17 (Debian 12 ships 0.16) it has no TLS,
no version has basic auth, its TLS handshake runs in the accepting thread (a client that never
finishes one stalls every scrape), and its listen queue is socketserver's 5 (a scrape storm of
200 lost most of them).  So the same app and server classes it uses, with:

- a listen queue of :data:`LISTEN_QUEUE` (the kernel caps it at ``net.core.somaxconn``);
- each connection's TLS handshake in its own thread, bounded by :data:`READ_TIMEOUT`, with the
  :mod:`.webconfig` in force at that moment (a renewed certificate serves the next connection);
- HTTP/1.0 and HTTP/1.1 only (``HTTP/1.9`` is 505, as any version but those);
- GET and HEAD only; basic auth and the configured headers on every answer;
- ``Accept-Encoding`` weighed by its q-values (``gzip;q=0`` is no gzip).
"""

from __future__ import annotations

import socket
import socketserver
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from .webconfig import Watched

#: seconds for a connection's TLS handshake and its request head, and for each write of the answer
READ_TIMEOUT = 10.0
#: the listen queue: a scrape storm (every Prometheus replica and a few curls at once) waits here
LISTEN_QUEUE = 1024
VERSIONS = ("HTTP/1.0", "HTTP/1.1")

Environ = Dict[str, Any]
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]


class Handler(WSGIRequestHandler):
    """One request per connection (wsgiref's), quiet, refusing HTTP versions other than 1.0 and 1.1."""

    server_version = "xpu-cdi-exporter"
    timeout = READ_TIMEOUT  # StreamRequestHandler sets it on the connection
    default_request_version = "HTTP/1.0"  # refusals carry a status line (HTTP/0.9 would have none)

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        # http.server answers 1.2 to 1.99 as 1.1, and a request line without a version as HTTP/0.9
        version = self.request_version if len(self.requestline.split()) == 3 else "HTTP/0.9"
        if version not in VERSIONS:
            self.close_connection = True
            self.request_version = "HTTP/1.0"  # the refusal's status line is written for it
            self.send_error(505, explain=f"{version} is not served: HTTP/1.0 or HTTP/1.1")
            return False
        return True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Nothing per request (a scrape every few seconds)."""


class Server(socketserver.ThreadingMixIn, WSGIServer):
    """A thread per connection (daemon threads: a stuck client never holds the exit)."""

    daemon_threads = True
    allow_reuse_address = True  # a restarted exporter binds its port while old connections linger
    request_queue_size = LISTEN_QUEUE

    def __init__(self, address: Tuple[str, int], app: App, web: Watched, family: int = socket.AF_INET,
                 dual_stack: bool = False, on_error: Optional[Callable[[str], None]] = None) -> None:
        self.address_family = family
        self.dual_stack = dual_stack
        self.web = web
        self.on_error = on_error or (lambda message: None)
        super().__init__(address, Handler)
        self.set_app(app)

    def server_bind(self) -> None:
        if self.dual_stack:  # IPv6 and IPv4 on one socket
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        # not HTTPServer's, which looks the host's name up in DNS for a CGI variable nothing reads
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])
        self.setup_environ()

    def finish_request(self, request: socket.socket, client_address: Any) -> None:
        """In the connection's thread: the TLS handshake (when configured), then the request."""
        request.settimeout(READ_TIMEOUT)
        cfg = self.web.current()
        if cfg.context is None:
            super().finish_request(request, client_address)
            return
        tls = cfg.context.wrap_socket(request, server_side=True)  # the handshake: OSError when it fails
        try:
            if cfg.peer_allowed(tls.getpeercert()):
                super().finish_request(tls, client_address)
            else:
                self.on_error(f"{client_address[0]}: client certificate has none of client_allowed_sans")
        finally:
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed handshake or a client gone: one line, never a traceback on stderr."""
        import sys

        err = sys.exc_info()[1]
        self.on_error(f"{client_address[0] if client_address else '?'}: {err}")


def listen(host: str, port: int, app: App, web: Watched,
           on_error: Optional[Callable[[str], None]] = None) -> Server:
    """A server bound to *host* (every address when empty: IPv6 and IPv4 where the host has IPv6).

    Raises:
        OSError: the address cannot be bound.
    """
    if host:
        return Server((host, port), app, web, socket.AF_INET6 if ":" in host else socket.AF_INET, on_error=on_error)
    try:
        return Server(("::", port), app, web, socket.AF_INET6, dual_stack=True, on_error=on_error)
    except OSError:
        return Server(("0.0.0.0", port), app, web, on_error=on_error)


def gzip_accepted(header: str) -> bool:
    """``Accept-Encoding`` asks for gzip with a q-value above 0 (RFC 9110 12.5.3; ``*`` counts)."""
    weights: Dict[str, float] = {}
    for part in header.split(","):
        coding, *params = part.split(";")
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        weights.setdefault(coding.strip().lower(), q)
    return weights.get("gzip", weights.get("*", 0.0)) > 0


def answer(start_response: StartResponse, status: str, headers: List[Tuple[str, str]], body: bytes,
           method: str) -> List[bytes]:
    """*body* with its length; none of it for HEAD (whose Content-Length is still GET's)."""
    start_response(status, [*headers, ("Content-Length", str(len(body)))])
    return [] if method == "HEAD" else [body]


def app(web: Watched, metrics: App, catch_up: Callable[[str], None], alive: Callable[[], bool]) -> App:
    """The exporter's paths: ``/metrics`` (prometheus_client's *metrics* app, after *catch_up* with
    Prometheus's scrape timeout), ``/healthz`` (*alive*), ``/``; basic auth and headers per *web*."""

    def serve(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        cfg = web.current()
        method, path = environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")
        headers = list(cfg.headers.items())
        plain = [*headers, ("Content-Type", "text/plain; charset=utf-8")]
        if method not in ("GET", "HEAD"):
            return answer(start_response, "405 Method Not Allowed", [*plain, ("Allow", "GET, HEAD")],
                          f"{method} is not served: GET or HEAD\n".encode(), "GET")
        if not cfg.authorized(environ.get("HTTP_AUTHORIZATION", "")):
            return answer(start_response, "401 Unauthorized",
                          [*plain, ("WWW-Authenticate", 'Basic realm="xpu-cdi exporter"')], b"Unauthorized\n", method)
        if path == "/metrics":
            catch_up(environ.get("HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS", ""))
            asked = dict(environ, REQUEST_METHOD="GET",
                         HTTP_ACCEPT_ENCODING="gzip" if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")) else "")
            got: List[Any] = []
            body = b"".join(metrics(asked, lambda status, hdrs, exc_info=None: got.extend((status, hdrs))))
            return answer(start_response, got[0], [*headers, *got[1]], body, method)
        if path == "/healthz":
            ok = alive()
            return answer(start_response, "200 OK" if ok else "503 Service Unavailable", plain,
                          b"ok\n" if ok else b"a pass has run for three intervals\n", method)
        if path == "/":
            return answer(start_response, "200 OK", plain,
                          b"xpu-cdi exporter: metrics at /metrics, liveness at /healthz\n", method)
        return answer(start_response, "404 Not Found", plain, b"not found: try /metrics\n", method)

    return serve
