"""The exporter's HTTP server: GET and HEAD, one request per connection, bounded reads.

Not ``http.server``, whose imports (email's parser and header machinery,
http.client, html, mimetypes, shutil's archives) were ~3.7 MiB of the
exporter's resident memory (issue 30) for three read-only paths.  What a
scraper needs and nothing more: the request line and the header lines are
split, only the headers the exporter reads are kept (``Accept``,
``Accept-Encoding``, Prometheus's scrape timeout), the whole request head
must arrive within :data:`READ_TIMEOUT` and fit :data:`MAX_HEAD` bytes, and
the answer closes the connection (as ``http.server``'s HTTP/1.0 default did).
A request with a body is refused by its method (only GET and HEAD exist).
"""

from __future__ import annotations

import socket
import socketserver
import time
from typing import Callable, Dict, Optional, Tuple

from ..errors import HttpRequestError

#: the request line and every header line together (a proxy's bearer token fits many times)
MAX_HEAD = 32 * 1024
MAX_REQUEST_LINE = 8 * 1024
#: seconds for the whole request head to arrive, and for each write of the answer
READ_TIMEOUT = 10.0
#: the header fields passed on, lower-case; every other field is skipped unread
WANTED = ("accept", "accept-encoding", "x-prometheus-scrape-timeout-seconds")

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           414: "URI Too Long", 431: "Request Header Fields Too Large", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

#: (path without its query, the wanted headers by lower-case name) -> (status, body, extra headers)
Answer = Tuple[int, bytes, Dict[str, str]]
Respond = Callable[[str, Dict[str, str]], Answer]


def http_date(now: Optional[float] = None) -> str:
    """RFC 9110's IMF-fixdate, without the locale ``strftime`` would use."""
    t = time.gmtime(now)
    return (f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


def read_head(sock: socket.socket, deadline: float) -> bytes:
    """Bytes up to the blank line that ends a request head (its end included).

    Raises:
        HttpRequestError: 408 when it has not all come by *deadline* (a slow or silent client), 431 when
            longer than :data:`MAX_HEAD`, 400 when the client closed first.
    """
    buf = b""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0 and buf.find(b"\n\n") >= 0:  # bare LF line ends, which RFC 9112 lets a server accept
            end = buf.find(b"\n\n")
        if end >= 0:
            return buf[:end]
        if len(buf) > MAX_HEAD:
            raise HttpRequestError(431, f"request head over {MAX_HEAD} bytes")
        left = deadline - time.monotonic()
        if left <= 0:
            raise HttpRequestError(408, "request head not complete in time")
        sock.settimeout(left)
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            raise HttpRequestError(408, "request head not complete in time") from None
        if not chunk:
            raise HttpRequestError(400, "connection closed inside the request head")
        buf += chunk


def parse_head(head: bytes) -> Tuple[str, str, Dict[str, str]]:
    """``(method, target, wanted headers)`` of a request head.

    Raises:
        HttpRequestError: 414 for an over-long request line, 400 for a malformed one or a header line
            without a colon, 505 for a version other than HTTP/1.x.
    """
    lines = head.decode("latin-1").lstrip("\r\n").replace("\r\n", "\n").split("\n")  # blank lines first: allowed
    request_line = lines[0]
    if len(request_line) > MAX_REQUEST_LINE:
        raise HttpRequestError(414, f"request line over {MAX_REQUEST_LINE} bytes")
    parts = request_line.split(" ")
    if len(parts) != 3 or not all(parts) or not parts[2].startswith("HTTP/"):
        raise HttpRequestError(400, "malformed request line")
    method, target, version = parts
    if not version.startswith("HTTP/1."):
        raise HttpRequestError(505, f"{version} is not served (HTTP/1.x only)")
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():  # RFC 9112: no space before the colon
            raise HttpRequestError(400, "malformed header line")
        key = name.lower()
        if key in WANTED and key not in headers:  # the first of repeated fields, as http.server read them
            headers[key] = value.strip(" \t")
    return method, target, headers


def answer_bytes(status: int, body: bytes, extra: Dict[str, str], with_body: bool = True) -> bytes:
    head = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}", "Server: xpu-cdi-exporter",
            f"Date: {http_date()}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in extra.items()]
    if "Content-Type" not in extra:
        head.append("Content-Type: text/plain; charset=utf-8")
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body if with_body else b"")


def drain(sock: socket.socket, limit: int = 64 * 1024, seconds: float = 1.0) -> None:
    """After refusing a request whose rest (a body, an over-long head) is still unread: our side
    closed for writing, read and drop what the client still sends, up to *limit* bytes and
    *seconds*.  Closing with unread input would send a reset, which can destroy the refusal in
    the client's receive queue before it reads it."""
    sock.shutdown(socket.SHUT_WR)
    deadline, got = time.monotonic() + seconds, 0
    while got < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        sock.settimeout(left)
        try:
            chunk = sock.recv(16384)
        except socket.timeout:
            return
        if not chunk:
            return
        got += len(chunk)


class Handler(socketserver.BaseRequestHandler):
    """One connection: read the head, answer, close (the server's :attr:`Server.respond` decides)."""

    server: "Server"

    def handle(self) -> None:
        sock: socket.socket = self.request
        method, refused = "GET", False
        try:
            try:
                method, target, headers = parse_head(read_head(sock, time.monotonic() + READ_TIMEOUT))
                if method not in ("GET", "HEAD"):
                    raise HttpRequestError(405, f"{method} is not served: GET or HEAD")
                status, body, extra = self.server.respond(target.split("?", 1)[0], headers)
            except HttpRequestError as err:
                status, body, refused = err.status, f"{err}\n".encode(), True
                extra = {"Allow": "GET, HEAD"} if err.status == 405 else {}
            sock.settimeout(READ_TIMEOUT)
            sock.sendall(answer_bytes(status, body, extra, with_body=method != "HEAD"))
            if refused:
                drain(sock)
        except OSError:  # the client went away, or stopped reading the answer: nothing to tell it
            pass


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A thread per connection (daemon threads: a stuck client never holds the exit)."""

    daemon_threads = True
    allow_reuse_address = True  # a restarted exporter binds its port while old connections linger

    def __init__(self, address: Tuple[str, int], respond: Respond, family: int = socket.AF_INET,
                 dual_stack: bool = False) -> None:
        self.address_family = family
        self.dual_stack = dual_stack
        self.respond = respond
        super().__init__(address, Handler)

    def server_bind(self) -> None:
        if self.dual_stack:  # IPv6 and IPv4 on one socket
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def serve(host: str, port: int, respond: Respond) -> Server:
    """A server bound to *host* (every address when empty: IPv6 and IPv4 where the host has IPv6).

    Raises:
        OSError: the address cannot be bound.
    """
    if host:
        return Server((host, port), respond, socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        return Server(("::", port), respond, socket.AF_INET6, dual_stack=True)
    except OSError:
        return Server(("0.0.0.0", port), respond)
