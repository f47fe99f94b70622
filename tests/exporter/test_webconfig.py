"""--web-config-file (exporter/webconfig.py): exporter-toolkit's format loaded, every bad file refused
with one line naming it (the command exits non-zero before serving), and what cannot be honoured
refused rather than ignored."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Dict

import pytest

from support.k8s.pki import PKI, Pair
from xpu_cdi.errors import ConfigError
from xpu_cdi.exporter import webconfig

HASH = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"  # exporter-toolkit's docs' example


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca = PKI(d)
    srv: Pair = ca.issue("server", "exporter", ips=["127.0.0.1"], server=True)
    (d / "garbage.pem").write_text("not a certificate\n")
    return {"cert": srv.cert, "key": srv.key, "ca": ca.ca.cert, "dir": d}


def tls(pairs: Dict[str, Path], extra: str = "") -> str:
    return f"tls_server_config:\n  cert_file: {pairs['cert']}\n  key_file: {pairs['key']}\n{extra}"


def test_the_full_format(tmp_path: Path, pairs: Dict[str, Path]) -> None:
    f = tmp_path / "web.yml"
    f.write_text(tls(pairs, f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pairs['ca']}\n"
                            "  client_allowed_sans: [prometheus]\n  min_version: TLS13\n"
                            "  prefer_server_cipher_suites: true\n") +
                 "http_server_config:\n  http2: false\n  headers:\n    X-Content-Type-Options: nosniff\n"
                 "    Content-Security-Policy: ''\n"
                 f"basic_auth_users:\n  alice: '{HASH}'\n")
    cfg = webconfig.load(str(f))
    assert cfg.context is not None and cfg.context.verify_mode == ssl.CERT_REQUIRED
    assert cfg.context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert cfg.allowed_sans == ("prometheus",) and cfg.headers == {"X-Content-Type-Options": "nosniff"}
    assert set(cfg.users) == {"alice"} and str(pairs["ca"]) in cfg.files


def test_paths_are_relative_to_the_file(pairs: Dict[str, Path]) -> None:
    f = pairs["dir"] / "relative.yml"
    f.write_text(f"tls_server_config:\n  cert_file: {pairs['cert'].name}\n  key_file: {pairs['key'].name}\n")
    assert webconfig.load(str(f)).context is not None


def test_empty_file_is_plain_http(tmp_path: Path) -> None:
    f = tmp_path / "web.yml"
    f.write_text("")
    cfg = webconfig.load(str(f))
    assert cfg.context is None and cfg.users == {} and cfg.authorized("")


@pytest.mark.parametrize("text, says", [
    ("- a list\n", "the file must be a mapping"),
    ("tls_server_config: {cert_file: x}\n", "needs cert_file and key_file"),
    ("tls_server_config: yes\n", "tls_server_config must be a mapping"),
    ("tls_config: {}\n", "unknown key tls_config"),
    ("{TLS}  client_auth_type: RequireAnyClientCert\n  client_ca_file: {CA}\n", "without verifying it"),
    ("{TLS}  client_auth_type: RequestClientCert\n", "without verifying it"),
    ("{TLS}  client_auth_type: Bogus\n", "'Bogus' is not one of"),
    ("{TLS}  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
    ("{TLS}  client_ca_file: {CA}\n", "a client CA without client_auth_type"),
    ("{TLS}  client_allowed_sans: [x]\n", "client_allowed_sans needs client_auth_type"),
    ("{TLS}  min_version: TLS14\n", "min_version 'TLS14' is not one of"),
    ("{TLS}  min_version: TLS13\n  max_version: TLS12\n", "min_version is above max_version"),
    ("{TLS}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "cipher_suites is not supported"),
    ("{TLS}  cert: inline\n", "inline cert"),
    ("tls_server_config:\n  cert_file: {CA}\n  key_file: {DIR}/garbage.pem\n", "cannot load cert_file"),
    ("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n", "cannot load cert_file"),
    ("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {DIR}/garbage.pem\n",
     "cannot load the client CA"),
    ("basic_auth_users:\n  alice: plaintext\n", "basic_auth_users.alice: not a bcrypt hash"),
    ("basic_auth_users:\n  'a:b': '" + HASH + "'\n", "is not a user name"),
    ("basic_auth_users: [alice]\n", "basic_auth_users must be a mapping"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "must be deny or sameorigin"),
    ("http_server_config:\n  headers:\n    Set-Cookie: x\n", "'Set-Cookie' is not one of"),
    ("http_server_config:\n  http2: maybe\n", "http2 must be true or false"),
    ("rate_limit:\n  interval: 1s\n", "rate_limit is not supported"),
    ("a: [\n", "not valid YAML"),
    ("a: &a [*a, *a]\n", "not valid YAML"),
    ("[" * 5000 + "]" * 5000, "not valid YAML"),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path: Path, pairs: Dict[str, Path], text: str, says: str) -> None:
    f = tmp_path / "web.yml"
    f.write_text(text.replace("{TLS}", tls(pairs)).replace("{CA}", str(pairs["ca"])).replace("{DIR}",
                                                                                              str(pairs["dir"])))
    with pytest.raises(ConfigError) as info:
        webconfig.load(str(f))
    message = str(info.value)
    assert message.startswith(f"web config {str(f)!r}: ") and says in message and "\n" not in message


def test_not_a_regular_file_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        webconfig.load(str(fifo))
    with pytest.raises(ConfigError, match="not a regular file"):
        webconfig.load(str(tmp_path))
    with pytest.raises(ConfigError, match="cannot read"):
        webconfig.load(str(tmp_path / "missing.yml"))
    named = tmp_path / "web.yml"
    named.write_text(f"tls_server_config:\n  cert_file: {fifo}\n  key_file: {fifo}\n")
    with pytest.raises(ConfigError, match="is not a regular file"):  # OpenSSL would wait on it
        webconfig.load(str(named))


def test_the_command_refuses_a_bad_file_before_serving(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from xpu_cdi.cli import main

    f = tmp_path / "web.yml"
    f.write_text("basic_auth_users:\n  alice: plaintext\n")
    res = CliRunner().invoke(main, ["exporter", "--listen", "127.0.0.1:0", "--web-config-file", str(f)])
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "basic_auth_users.alice: not a bcrypt hash" in lines[0]


def test_basic_auth_checks_and_remembers(tmp_path: Path) -> None:
    import base64

    import bcrypt

    cfg = webconfig.WebConfig(users={"alice": bcrypt.hashpw(b"pw", bcrypt.gensalt(4))})

    def basic(s: str) -> str:
        return "Basic " + base64.b64encode(s.encode()).decode()

    assert cfg.authorized(basic("alice:pw")) and cfg.authorized(basic("alice:pw"))
    assert len(cfg._verified) == 1  # the second was the cache's
    for bad in (basic("alice:PW"), basic("bob:pw"), basic("alice"), "Bearer x", "Basic !!!", basic("alice:pw")[:-2],
                ""):
        assert not cfg.authorized(bad), bad
