"""The exporter's server (exporter/server.py: prometheus_client's WSGI app on wsgiref) on loopback,
spoken to over raw sockets, urllib and ssl as scrapers speak: the HTTP versions and methods it
answers, a scrape storm held by its listen queue, gzip by q-value, and TLS with client certificates,
basic auth and headers as a --web-config-file says, reloaded without dropping the last good one."""

from __future__ import annotations

import base64
import gzip
import select
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from prometheus_client import make_wsgi_app
from prometheus_client.parser import text_string_to_metric_families

from support import HANG
from support.k8s.pki import PKI, Pair
from xpu_cdi.exporter import metrics, server, webconfig

# bcrypt of "s3cret" (cost 4: the check is what is tested, not the cost)
S3CRET = "$2b$04$4s8QjvsUYEL4./9lWzsTsOk4JbGT9ReEweEwq9rQ48bqdrHbG/LQm"


class Running:
    """A server on 127.0.0.1 over the exporter's collector; what it logged in :attr:`errors`."""

    def __init__(self, web: webconfig.Watched) -> None:
        self.errors: List[str] = []
        self.scrapes = 0
        reg = metrics.registry(metrics.SnapshotCollector())

        def catch_up(timeout: str) -> None:
            self.scrapes += 1

        self.srv = server.listen("127.0.0.1", 0, server.app(web, make_wsgi_app(reg), catch_up, lambda: True), web,
                                 on_error=self.errors.append)
        self.port = self.srv.server_address[1]
        self.thread: Optional[threading.Thread] = None

    def start(self) -> "Running":
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread:
            self.srv.shutdown()
            self.thread.join(HANG)
        self.srv.server_close()


@pytest.fixture
def plain() -> Iterator[Running]:
    r = Running(webconfig.Watched("", lambda message, bad: None)).start()
    yield r
    r.stop()


def exchange(port: int, data: bytes, wrap: Optional[ssl.SSLContext] = None) -> Tuple[int, Dict[str, str], bytes]:
    """Send *data*, read until the server closes: (status, headers by lower-case name, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG) as raw:
        s = wrap.wrap_socket(raw, server_hostname="localhost") if wrap else raw
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    head, _, body = out.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    return int(status_line.split(" ")[1]), headers, body


@pytest.mark.parametrize("version, code", [("HTTP/1.0", 200), ("HTTP/1.1", 200), ("HTTP/1.9", 505),
                                           ("HTTP/1.10", 505), ("HTTP/2.0", 505), ("HTTP/0.9", 505), ("", 505)])
def test_only_http_1_0_and_1_1_are_answered(plain: Running, version: str, code: int) -> None:
    got, _headers, body = exchange(plain.port, f"GET /metrics {version}".strip().encode() + b"\r\nHost: x\r\n\r\n")
    assert got == code
    if code == 200:
        assert any(f.name == "xpu_cdi_card_healthy" for f in text_string_to_metric_families(body.decode()))


def test_methods_paths_and_head(plain: Running) -> None:
    code, headers, body = exchange(plain.port, b"GET /metrics HTTP/1.1\r\n\r\n")
    assert code == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    assert int(headers["content-length"]) == len(body) and plain.scrapes == 1
    code, head_headers, empty = exchange(plain.port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert (code, empty) == (200, b"") and int(head_headers["content-length"]) > 0
    for method in (b"POST", b"PUT", b"DELETE", b"OPTIONS"):
        code, headers, _ = exchange(plain.port, method + b" /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        assert (code, headers["allow"]) == (405, "GET, HEAD"), method
    assert exchange(plain.port, b"GET /healthz HTTP/1.1\r\n\r\n")[0::2] == (200, b"ok\n")
    assert exchange(plain.port, b"GET /nothing HTTP/1.1\r\n\r\n")[0] == 404
    assert exchange(plain.port, b"GARBAGE\r\n\r\n")[0] == 400
    assert exchange(plain.port, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n")[0] == 414


def test_gzip_by_q_value(plain: Running) -> None:
    def get(encoding: str) -> Tuple[Dict[str, str], bytes]:
        req = urllib.request.Request(f"http://127.0.0.1:{plain.port}/metrics", headers={"Accept-Encoding": encoding})
        with urllib.request.urlopen(req, timeout=HANG) as r:
            return dict(r.headers), r.read()

    headers, body = get("gzip")
    assert headers["Content-Encoding"] == "gzip" and b"xpu_cdi_card_healthy" in gzip.decompress(body)
    for refused in ("gzip;q=0", "gzip; q=0.0, identity", "identity"):
        headers, body = get(refused)
        assert "Content-Encoding" not in headers and body.startswith(b"# HELP"), refused


def test_a_scrape_storm_is_held_by_the_listen_queue() -> None:
    """200 connections made while the server accepts none (all its threads busy, say) all complete
    their handshake in the kernel's queue (socketserver's default of 5 left the rest retrying SYNs
    for seconds each), then every one is answered."""
    r = Running(webconfig.Watched("", lambda message, bad: None))
    socks: List[socket.socket] = []
    try:
        for _ in range(200):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", r.port))
            socks.append(s)
        pending, deadline = list(socks), time.monotonic() + HANG
        while pending:  # connected = writable; with a queue of 5 the rest wait for SYN retries
            assert time.monotonic() < deadline, f"{len(pending)} of 200 connections not queued"
            _, ready, _ = select.select([], pending, [], 1.0)
            pending = [s for s in pending if s not in ready]
        for s in socks:
            s.setblocking(True)
            s.settimeout(HANG)
            s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        r.start()
        answered = 0
        for s in socks:
            first = s.recv(64)
            answered += first.startswith(b"HTTP/1.0 200 ")
        assert answered == 200 and r.scrapes == 200
    finally:
        for s in socks:
            s.close()
        r.stop()


# ---------------------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, object]:
    d = tmp_path_factory.mktemp("pki")
    ca, rogue = PKI(d / "ca"), PKI(d / "rogue")
    return {"ca": ca, "server": ca.issue("server", "xpu-cdi-exporter", dns=["localhost"], ips=["127.0.0.1"],
                                         server=True, client=False),
            "prometheus": ca.issue("prometheus", "prometheus", dns=["prometheus.monitoring"]),
            "other": ca.issue("other", "other", dns=["other.example"]),
            "rogue": rogue.issue("rogue", "prometheus", dns=["prometheus.monitoring"])}


def write_config(path: Path, pki: Dict[str, object], extra: str = "", auth: str = "RequireAndVerifyClientCert") -> Path:
    server_pair: Pair = pki["server"]  # type: ignore[assignment]
    ca: PKI = pki["ca"]  # type: ignore[assignment]
    path.write_text(f"tls_server_config:\n  cert_file: {server_pair.cert}\n  key_file: {server_pair.key}\n"
                    f"  client_auth_type: {auth}\n  client_ca_file: {ca.ca.cert}\n{extra}")
    return path


def client(pki: Dict[str, object], pair: Optional[str]) -> ssl.SSLContext:
    ca: PKI = pki["ca"]  # type: ignore[assignment]
    ctx = ssl.create_default_context(cafile=str(ca.ca.cert))
    if pair:
        p: Pair = pki[pair]  # type: ignore[assignment]
        ctx.load_cert_chain(str(p.cert), str(p.key))
    return ctx


def tls_get(port: int, ctx: ssl.SSLContext, auth: str = "") -> int:
    """The status of GET /metrics over TLS; 0 when the handshake or the connection was refused."""
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    req = urllib.request.Request(f"https://localhost:{port}/metrics", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=HANG, context=ctx) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ssl.SSLError, ConnectionError):
        return 0


@pytest.fixture
def tls_server(tmp_path: Path, pki: Dict[str, object]) -> Iterator[Tuple[Running, Path, List[str]]]:
    cfg = write_config(tmp_path / "web.yml", pki)
    said: List[str] = []
    r = Running(webconfig.Watched(str(cfg), lambda message, bad: said.append(message), every=0)).start()
    yield r, cfg, said
    r.stop()


def test_tls_with_a_verified_client_certificate(tls_server: Tuple[Running, Path, List[str]],
                                                pki: Dict[str, object]) -> None:
    r, _cfg, _said = tls_server
    assert tls_get(r.port, client(pki, "prometheus")) == 200
    assert tls_get(r.port, client(pki, None)) == 0  # no certificate: the handshake fails
    assert tls_get(r.port, client(pki, "rogue")) == 0  # signed by another CA
    with socket.create_connection(("127.0.0.1", r.port), timeout=HANG) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        try:
            got = s.recv(65536)
        except ConnectionResetError:  # the failed handshake's close, with our request unread
            got = b""
        assert not got.startswith(b"HTTP/")  # no plain answer on the TLS port
    assert tls_get(r.port, client(pki, "prometheus")) == 200 and r.scrapes == 2


def test_a_silent_client_does_not_hold_up_the_handshakes_of_others(tls_server: Tuple[Running, Path, List[str]],
                                                                   pki: Dict[str, object]) -> None:
    r, _cfg, _said = tls_server
    with socket.create_connection(("127.0.0.1", r.port), timeout=HANG):  # connected, says nothing
        assert tls_get(r.port, client(pki, "prometheus")) == 200


def test_basic_auth_headers_and_allowed_sans(tmp_path: Path, pki: Dict[str, object]) -> None:
    cfg = write_config(tmp_path / "web.yml", pki, extra=(
        "  client_allowed_sans: [prometheus.monitoring]\n"
        "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=60\n"
        f"basic_auth_users:\n  prometheus: '{S3CRET}'\n"))
    r = Running(webconfig.Watched(str(cfg), lambda message, bad: None)).start()
    try:
        ok = client(pki, "prometheus")
        assert tls_get(r.port, ok, "prometheus:s3cret") == 200
        assert tls_get(r.port, ok, "prometheus:wrong") == 401
        assert tls_get(r.port, ok, "nobody:s3cret") == 401
        assert tls_get(r.port, ok, "prometheus:" + "x" * 100) == 401  # over bcrypt's 72 bytes
        assert tls_get(r.port, ok) == 401
        assert tls_get(r.port, client(pki, "other"), "prometheus:s3cret") == 0  # its SAN is not allowed
        assert r.scrapes == 1
        code, headers, body = exchange(r.port, b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " +
                                       base64.b64encode(b"prometheus:wrong") + b"\r\n\r\n", wrap=ok)
        assert code == 401 and headers["www-authenticate"].startswith("Basic") and headers["x-frame-options"] == "deny"
        code, headers, _ = exchange(r.port, b"GET /metrics HTTP/1.1\r\nAuthorization: Basic " +
                                    base64.b64encode(b"prometheus:s3cret") + b"\r\n\r\n", wrap=ok)
        assert code == 200 and headers["strict-transport-security"] == "max-age=60"
    finally:
        r.stop()


def test_a_reload_keeps_the_last_good_config(tls_server: Tuple[Running, Path, List[str]],
                                             pki: Dict[str, object]) -> None:
    r, cfg, said = tls_server
    ok = client(pki, "prometheus")
    cfg.write_text(cfg.read_text() + "basic_auth_users: [not, a, mapping]\n")
    assert tls_get(r.port, ok) == 200  # served with the last good config
    assert len(said) == 1 and "basic_auth_users must be a mapping" in said[0] and "last good" in said[0]
    write_config(cfg, pki, extra=f"basic_auth_users:\n  prometheus: '{S3CRET}'\n")
    assert tls_get(r.port, ok) == 401  # the good change is in force
    assert tls_get(r.port, ok, "prometheus:s3cret") == 200
    assert said[-1].endswith("loaded")
