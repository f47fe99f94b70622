"""Properties of the exporter's --web-config-file (exporter/webconfig.py): any file gives a
WebConfig or a ConfigError naming the file, in one line; never another exception, never a hang."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fuzzcontract import FUZZ, file_contents, mutated, ours
from hypothesis import example, given
from test_registry_properties import BILLION_LAUGHS

from xpu_cdi.errors import ConfigError
from xpu_cdi.exporter import webconfig

HASH = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"
VALID: Any = {"tls_server_config": {"cert_file": "tls.crt", "key_file": "tls.key", "client_ca_file": "ca.crt",
                                    "client_auth_type": "RequireAndVerifyClientCert", "min_version": "TLS12",
                                    "client_allowed_sans": ["prometheus"]},
              "http_server_config": {"http2": False, "headers": {"X-Frame-Options": "deny"}},
              "basic_auth_users": {"prometheus": HASH}}


@FUZZ
@given(data=file_contents(mutated(VALID)))
@example(data=BILLION_LAUGHS)
@example(data=b"basic_auth_users: {prometheus: '$2y$99$" + b"a" * 53 + b"'}\n")
@example(data=b"tls_server_config: {cert_file: /dev/zero, key_file: /dev/zero}\n")
def test_any_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "web.yml"
        path.write_bytes(data)
        got = ours(webconfig.load, str(path))
        if isinstance(got, ConfigError):
            assert str(path) in str(got)
        else:
            assert isinstance(got, webconfig.WebConfig)
