"""The exporter's HTTP server (exporter/httpd.py) on loopback, spoken to over raw sockets: GET and
HEAD answered, every other method 405, malformed heads 400/414/431/505, slow and silent clients cut
off at the read timeout without holding anyone else up, and the headers the exporter reads passed
on; urllib (as a scraper) reads its answers."""

from __future__ import annotations

import select
import socket
import threading
import time
import urllib.request
from typing import Dict, Iterator, List, Tuple

import pytest

from support import HANG
from xpu_cdi.exporter import httpd

Seen = List[Tuple[str, Dict[str, str]]]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[int, Seen]]:
    """A server whose answer echoes the path; what each request handed to it is in the list."""
    monkeypatch.setattr(httpd, "READ_TIMEOUT", 1.0)
    seen: Seen = []

    def respond(path: str, headers: Dict[str, str]) -> httpd.Answer:
        seen.append((path, headers))
        if path == "/missing":
            return 404, b"not found\n", {}
        return 200, f"path {path}\n".encode(), {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}

    srv = httpd.serve("127.0.0.1", 0, respond)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()
    try:
        yield srv.server_address[1], seen
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(HANG)


def exchange(port: int, data: bytes) -> Tuple[int, Dict[str, str], bytes]:
    """Send *data*, read until the server closes: (status, headers by lower-case name, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG) as s:
        s.sendall(data)
        return parse(read_all(s))


def read_all(s: socket.socket) -> bytes:
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk


def parse(raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, code, _reason = status_line.split(" ", 2)
    assert version == "HTTP/1.1"
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    return int(code), headers, body


def test_get_and_head(server: Tuple[int, Seen]) -> None:
    port, seen = server
    code, headers, body = exchange(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\n"
                                         b"ACCEPT-ENCODING: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n"
                                         b"Cookie: skipped\r\n\r\n")
    assert (code, body) == (200, b"path /metrics\n")
    assert headers["content-length"] == str(len(body)) and headers["connection"] == "close"
    assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8" and "date" in headers
    assert seen[-1] == ("/metrics", {"accept": "text/plain", "accept-encoding": "gzip",
                                     "x-prometheus-scrape-timeout-seconds": "10"})
    code, head_headers, body = exchange(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
    assert (code, body) == (200, b"") and head_headers["content-length"] == headers["content-length"]
    assert exchange(port, b"GET /missing HTTP/1.1\r\n\r\n")[0] == 404


def test_what_a_scraper_sends(server: Tuple[int, Seen]) -> None:
    port, seen = server
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": "application/x"})
    with urllib.request.urlopen(req, timeout=HANG) as r:
        assert (r.status, r.read()) == (200, b"path /metrics\n")
    assert seen[-1][1] == {"accept": "application/x", "accept-encoding": "identity"}
    exchange(port, b"GET / HTTP/1.1\r\nAccept: first\r\nAccept: second\r\n\r\n")
    assert seen[-1][1] == {"accept": "first"}  # the first of repeated fields, as http.server read them


@pytest.mark.parametrize("request_head, code", [
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 405),
    (b"DELETE / HTTP/1.1\r\n\r\n", 405),
    (b"get /metrics HTTP/1.1\r\n\r\n", 405),  # methods are case-sensitive
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /metrics\r\n\r\n", 400),  # HTTP/0.9
    (b"GET  /metrics HTTP/1.1\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1 extra\r\n\r\n", 400),
    (b"GET /metrics FTP/1.0\r\n\r\n", 400),
    (b"GET /metrics HTTP/2.0\r\n\r\n", 505),
    (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nAccept : x\r\n\r\n", 400),  # whitespace before the colon
    (b"GET /metrics HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400),  # obsolete line folding
    (b"GET /" + b"a" * (9 * 1024) + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /metrics HTTP/1.1\r\n" + b"X-Big: " + b"b" * (40 * 1024) + b"\r\n\r\n", 431),
    (b"\xff\xfe /metrics HTTP/1.1\r\n\r\n", 405),
])
def test_bad_requests(server: Tuple[int, Seen], request_head: bytes, code: int) -> None:
    port, seen = server
    got, headers, body = exchange(port, request_head)
    assert got == code and body.endswith(b"\n") and len(body) == int(headers["content-length"])
    assert (headers.get("allow") == "GET, HEAD") == (code == 405)
    assert seen == []  # nothing reached the exporter


def test_bare_lf_and_leading_blank_lines(server: Tuple[int, Seen]) -> None:
    port, seen = server
    assert exchange(port, b"\r\nGET /healthz HTTP/1.1\nAccept: x\n\n")[:3:2] == (200, b"path /healthz\n")
    assert seen == [("/healthz", {"accept": "x"})]


def test_a_silent_client_is_cut_off_and_holds_nobody_up(server: Tuple[int, Seen]) -> None:
    port, seen = server
    with socket.create_connection(("127.0.0.1", port), timeout=HANG) as silent:
        assert exchange(port, b"GET /metrics HTTP/1.1\r\n\r\n")[0] == 200  # answered meanwhile
        code, _h, body = parse(read_all(silent))  # the server's answer at READ_TIMEOUT, then its close
    assert code == 408 and b"in time" in body and len(seen) == 1


def test_a_slow_client_is_cut_off_at_the_deadline_of_the_whole_head(server: Tuple[int, Seen]) -> None:
    """A byte every 0.1 s (each recv well inside the timeout): the server still cuts the connection
    after about READ_TIMEOUT (1 s here) of dribbling, long before the head would have ended."""
    port, seen = server
    head = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"s" * 3000
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG) as s:
        sent = 0
        while sent < len(head) and not select.select([s], [], [], 0)[0]:  # until the server answers or closes
            try:
                s.sendall(head[sent:sent + 1])
            except OSError:  # closed under us
                break
            sent += 1
            time.sleep(0.1)
        try:
            got = read_all(s)
        except ConnectionResetError:  # our byte after its close: the 408 may be lost to the reset
            pass
    assert sent < len(head) // 10, sent  # cut off while dribbling
    assert got == b"" or parse(got)[0] == 408
    assert seen == []


def test_a_client_that_closes_early_leaves_the_server_serving(server: Tuple[int, Seen]) -> None:
    port, _seen = server
    for partial in (b"", b"GET /met", b"GET /metrics HTTP/1.1\r\nAccept: x"):
        s = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        s.sendall(partial)
        s.close()
    # a client that asks and leaves before the answer: the server's write fails quietly
    s = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
    s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
    s.close()
    assert exchange(port, b"GET /metrics HTTP/1.1\r\n\r\n")[0] == 200


def test_every_address_takes_ipv4(monkeypatch: pytest.MonkeyPatch) -> None:
    """--listen :PORT: one socket for IPv6 and IPv4 where the host has IPv6, else IPv4 alone."""
    srv = httpd.serve("", 0, lambda path, headers: (200, b"ok\n", {}))
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()
    try:
        port = srv.server_address[1]
        assert exchange(port, b"GET / HTTP/1.1\r\n\r\n")[0::2] == (200, b"ok\n")
        if srv.address_family == socket.AF_INET6:
            with socket.create_connection(("::1", port), timeout=HANG) as s:
                s.sendall(b"GET / HTTP/1.1\r\n\r\n")
                assert parse(read_all(s))[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_date_header_is_imf_fixdate() -> None:
    assert httpd.http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT"
    assert httpd.http_date(1_780_000_000) == "Thu, 28 May 2026 20:26:40 GMT"
