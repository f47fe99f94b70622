"""``--web-config-file``: TLS, client certificates and basic auth for /metrics, in the format of
Prometheus's exporter-toolkit (node_exporter's and dcgm-exporter's ``--web.config.file``).

What the file may hold (docs/monitoring.md): ``tls_server_config`` (``cert_file``, ``key_file``,
``client_ca_file`` or an inline ``client_ca``, ``client_auth_type``, ``client_allowed_sans``,
``min_version``, ``max_version``), ``http_server_config`` (``headers``; ``http2`` is read and has
no effect: the server speaks HTTP/1.1) and ``basic_auth_users`` (bcrypt hashes).  A key this
version cannot honour (``cipher_suites``, ``curve_preferences``, ``rate_limit``, an inline
``cert``/``key``, the two client auth types that take a certificate without verifying it) is
refused rather than ignored: a file that asks for more security than is given fails closed.

:class:`Watched` holds the last good configuration: the file and the files it names are checked
for changes (a renewed certificate, a new user) at most once a second as connections come, and
on SIGHUP; a change that does not load is one line in the log, and the last good one serves on.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import ssl
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import ConfigError

MAX_BYTES = 1 << 20
#: exporter-toolkit's names (Go's crypto/tls ClientAuthType) -> OpenSSL's verify mode; the two
#: that accept a certificate nobody verified have no OpenSSL equivalent and are refused
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
UNVERIFIED_AUTH = ("RequestClientCert", "RequireAnyClientCert")
VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
            "TLS13": ssl.TLSVersion.TLSv1_3}
#: the response headers exporter-toolkit lets the file set, and the values it accepts (None: any)
HEADERS = {"Content-Security-Policy": None, "X-Frame-Options": ("deny", "sameorigin"),
           "X-Content-Type-Options": ("nosniff",), "X-XSS-Protection": None, "Strict-Transport-Security": None}
TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_ca", "client_auth_type", "client_allowed_sans",
            "min_version", "max_version", "prefer_server_cipher_suites"}
UNSUPPORTED = {"cert": "an inline cert: name the file with cert_file",
               "key": "an inline key: name the file with key_file",
               "cipher_suites": "cipher_suites: OpenSSL's defaults for TLS 1.2 are used (TLS 1.3 has no choice)",
               "curve_preferences": "curve_preferences: OpenSSL's defaults are used",
               "rate_limit": "rate_limit"}
#: a bcrypt hash checked when the user is unknown, so that a wrong name takes as long as a wrong password
_DUMMY_HASH = b"$2b$10$HqvQ0WF6CIVKb/cw2QWcBu3Vnm2E9d2X7flkqf1kXw19hH0NZ8seS"
BCRYPT = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
_CACHE_MAX = 64


@dataclass
class WebConfig:
    """One loaded file: *context* None means plain HTTP; *users* empty means no basic auth."""

    path: str = ""
    context: Optional[ssl.SSLContext] = None
    allowed_sans: Tuple[str, ...] = ()
    users: Dict[str, bytes] = field(default_factory=dict)
    headers: Dict[str, str] = field(default_factory=dict)
    files: Tuple[str, ...] = ()  # the file and those it names: a change to any is a reload
    _verified: Dict[bytes, bool] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def peer_allowed(self, cert: Optional[Dict[str, Any]]) -> bool:
        """True when no SANs are required, or the verified client certificate has one of them."""
        if not self.allowed_sans:
            return True
        names = {value for _kind, value in (cert or {}).get("subjectAltName", ())}
        return bool(names & set(self.allowed_sans))

    def authorized(self, header: str) -> bool:
        """True when no users are configured, or *header* (``Authorization``) is Basic with a user's
        password.  A success is remembered (bcrypt costs ~70 ms at cost 10; Prometheus scrapes every
        few seconds) under a digest of the user, hash and password, as exporter-toolkit caches it."""
        if not self.users:
            return True
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, colon, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        if not colon:
            return False
        hashed = self.users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), hashed or b"", password.encode()))).digest()
        with self._lock:
            if self._verified.get(key):
                return True
        import bcrypt

        try:
            ok = bcrypt.checkpw(password.encode(), hashed or _DUMMY_HASH) and hashed is not None
        except ValueError:  # bcrypt 5 refuses passwords over 72 bytes: no hash here has one
            ok = False
        if ok:
            with self._lock:
                if len(self._verified) >= _CACHE_MAX:
                    self._verified.clear()
                self._verified[key] = True
        return ok


def load(path: str) -> WebConfig:
    """The web config at *path*, its certificates and keys loaded.

    Raises:
        ConfigError: unreadable, not YAML, an unknown or unsupported key, a value of the wrong
            kind, or a certificate, key or CA that OpenSSL cannot load; one line naming the file.
    """
    def bad(message: str) -> ConfigError:
        return ConfigError(f"web config {path!r}: {message}")

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang the open
    except OSError as err:
        raise bad(f"cannot read: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            os.close(fd)
            raise bad(f"not a regular file of at most {MAX_BYTES} bytes")
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as err:
        raise bad(f"cannot read: {err.strerror}") from None
    import yaml

    from ..cdi import yamlload

    try:
        doc = yamlload.load(raw)
    except yaml.YAMLError as err:
        raise bad(f"not valid YAML: {' '.join(str(err).split())}") from None
    doc = {} if doc is None else doc
    _mapping(doc, "the file", bad)
    _known(doc, {"tls_server_config", "http_server_config", "basic_auth_users"}, "", bad)
    base = os.path.dirname(os.path.abspath(path))
    cfg = WebConfig(path=path)
    files = [path]
    tls = doc.get("tls_server_config")
    if tls is not None:
        _mapping(tls, "tls_server_config", bad)
        cfg.context, cfg.allowed_sans, named = _tls(tls, base, bad)
        files += named
    http = doc.get("http_server_config")
    if http is not None:
        _mapping(http, "http_server_config", bad)
        _known(http, {"http2", "headers"}, "http_server_config.", bad)
        if not isinstance(http.get("http2", True), bool):
            raise bad("http_server_config.http2 must be true or false")
        headers = http.get("headers") or {}
        _mapping(headers, "http_server_config.headers", bad)
        for name, value in headers.items():
            if name not in HEADERS:
                raise bad(f"http_server_config.headers: {name!r} is not one of {', '.join(HEADERS)}")
            if not isinstance(value, str):
                raise bad(f"http_server_config.headers.{name} must be a string")
            allowed = HEADERS[name]
            if value and allowed is not None and value.lower() not in allowed:
                raise bad(f"http_server_config.headers.{name} must be {' or '.join(allowed)}, not {value!r}")
            if value:
                cfg.headers[name] = value
    users = doc.get("basic_auth_users")
    if users is not None:
        _mapping(users, "basic_auth_users", bad)
        for user, hashed in users.items():
            if not isinstance(user, str) or not user or ":" in user:
                raise bad(f"basic_auth_users: {user!r} is not a user name (a string without ':')")
            if not isinstance(hashed, str) or not BCRYPT.fullmatch(hashed):
                raise bad(f"basic_auth_users.{user}: not a bcrypt hash (make one with htpasswd -nBC 10 \"\" "
                          f"| tr -d ':\\n')")
            cfg.users[user] = hashed.encode()
        try:
            import bcrypt  # noqa: F401 - refused now, not at the first scrape
        except ImportError:
            raise bad("basic_auth_users need the bcrypt package: pip install bcrypt, or apt install "
                      "python3-bcrypt") from None
    cfg.files = tuple(files)
    return cfg


def _mapping(value: Any, what: str, bad: Callable[[str], ConfigError]) -> None:
    if not isinstance(value, dict):
        raise bad(f"{what} must be a mapping")


def _known(doc: Dict[Any, Any], keys: "set[str]", prefix: str, bad: Callable[[str], ConfigError]) -> None:
    for key in doc:
        if key in UNSUPPORTED:
            raise bad(f"{prefix}{key} is not supported by xpu-cdi exporter ({UNSUPPORTED[key]})")
        if key not in keys:
            raise bad(f"unknown key {prefix}{key} (exporter-toolkit's format: {', '.join(sorted(keys))})")


def _tls(tls: Dict[str, Any], base: str,
         bad: Callable[[str], ConfigError]) -> Tuple[ssl.SSLContext, Tuple[str, ...], List[str]]:
    _known(tls, TLS_KEYS, "tls_server_config.", bad)

    def text(key: str, default: str = "") -> str:
        value = tls.get(key, default)
        if value is None:
            return default
        if not isinstance(value, str):
            raise bad(f"tls_server_config.{key} must be a string")
        return value

    def file(key: str) -> str:
        value = text(key)
        return os.path.join(base, value) if value else ""  # relative to the config file, as exporter-toolkit

    cert, key = file("cert_file"), file("key_file")
    if not cert or not key:
        raise bad("tls_server_config needs cert_file and key_file")
    auth = text("client_auth_type", "NoClientCert")
    if auth in UNVERIFIED_AUTH:
        raise bad(f"client_auth_type {auth} takes a client certificate without verifying it, which OpenSSL does not "
                  f"offer: use RequireAndVerifyClientCert (or VerifyClientCertIfGiven) with client_ca_file")
    if auth not in CLIENT_AUTH:
        raise bad(f"client_auth_type {auth!r} is not one of {', '.join([*CLIENT_AUTH, *UNVERIFIED_AUTH])}")
    ca_file, ca_inline = file("client_ca_file"), text("client_ca")
    if ca_file and ca_inline:
        raise bad("tls_server_config: client_ca_file and client_ca both given (one of them)")
    if (ca_file or ca_inline) and auth == "NoClientCert":
        raise bad("tls_server_config: a client CA without client_auth_type (RequireAndVerifyClientCert verifies "
                  "clients against it)")
    if auth != "NoClientCert" and not (ca_file or ca_inline):
        raise bad(f"client_auth_type {auth} needs client_ca_file (the CA that signs the clients' certificates)")
    sans = tls.get("client_allowed_sans") or []
    if not isinstance(sans, list) or not all(isinstance(s, str) for s in sans):
        raise bad("tls_server_config.client_allowed_sans must be a list of strings")
    if sans and auth != "RequireAndVerifyClientCert":
        raise bad("client_allowed_sans needs client_auth_type RequireAndVerifyClientCert")
    if not isinstance(tls.get("prefer_server_cipher_suites", True), bool):
        raise bad("tls_server_config.prefer_server_cipher_suites must be true or false")
    versions = []
    for which, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = text(which, default)
        if name not in VERSIONS:
            raise bad(f"tls_server_config.{which} {name!r} is not one of {', '.join(VERSIONS)}")
        versions.append(VERSIONS[name])
    if versions[0] > versions[1]:
        raise bad("tls_server_config: min_version is above max_version")
    for named in (cert, key, ca_file):
        try:
            regular = not named or stat.S_ISREG(os.stat(named).st_mode)
        except OSError:
            regular = True  # missing: load_cert_chain says so below
        if not regular:  # a FIFO would hang OpenSSL's read
            raise bad(f"{named!r} is not a regular file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.minimum_version, ctx.maximum_version = versions
    except ValueError as err:  # a version this OpenSSL was built without
        raise bad(f"tls_server_config: {err}") from None
    try:
        ctx.load_cert_chain(cert, key)
    except OSError as err:  # FileNotFoundError, ssl.SSLError
        raise bad(f"cannot load cert_file {cert!r} with key_file {key!r}: {_why(err)}") from None
    ctx.verify_mode = CLIENT_AUTH[auth]
    if ca_file or ca_inline:
        try:
            ctx.load_verify_locations(cafile=ca_file or None, cadata=ca_inline or None)
        except (OSError, ValueError) as err:
            raise bad(f"cannot load the client CA {ca_file or '(client_ca)'}: {_why(err)}") from None
    return ctx, tuple(sans), [f for f in (cert, key, ca_file) if f]


def _why(err: Exception) -> str:
    if isinstance(err, ssl.SSLError):
        return err.reason or str(err)
    return getattr(err, "strerror", None) or str(err)


def _signature(paths: Tuple[str, ...]) -> Tuple[Tuple[int, int, int], ...]:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((0, -1, 0))
    return tuple(out)


class Watched:
    """The configuration in force: :meth:`current` reloads when the file or one it names changed
    (checked at most every *every* seconds), keeping the last good one when the change is bad."""

    def __init__(self, path: str, log: Callable[[str, bool], None], every: float = 1.0) -> None:
        """*log(message, bad)*; raises :class:`ConfigError` when *path* is bad now."""
        self.path, self.log, self.every = path, log, every
        self.config = load(path) if path else WebConfig()
        self.signature = _signature(self.config.files)
        self.checked = time.monotonic()
        self.lock = threading.Lock()

    def current(self, force: bool = False) -> WebConfig:
        if not self.path:
            return self.config
        now = time.monotonic()
        if not force and now - self.checked < self.every:
            return self.config
        with self.lock:
            self.checked = now
            sig = _signature(self.config.files)
            if sig == self.signature and not force:
                return self.config
            self.signature = sig
            try:
                self.config = load(self.path)
            except ConfigError as err:
                self.log(f"{err} (serving on with the last good web config)", True)
            else:
                self.signature = _signature(self.config.files)
                self.log(f"web config {self.path!r} loaded", False)
            return self.config
