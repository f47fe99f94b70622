"""A real Prometheus (built from source, tests/support/k8s/builds.py) scrapes the exporter over TLS
with a client certificate and basic auth, as a --web-config-file asks: the target is up and its
series arrive; the same target without the client certificate, or with a wrong password, is down.

No cluster: Prometheus and the exporter both run on loopback, with a static scrape config."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from support import HANG
from support.exporternode import ExporterProcess, Node
from support.k8s import builds
from support.k8s.pki import PKI

pytestmark = pytest.mark.xdist_group("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port: int, path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:{port}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=HANG) as r:
        return json.loads(r.read())["data"]


def test_prometheus_scrapes_over_tls_with_a_client_certificate(node: Node, tmp_path: Path) -> None:
    bin_dir = builds.ensure_or_skip("prometheus")
    ca = PKI(tmp_path / "pki")
    server = ca.issue("exporter", "xpu-cdi-exporter", dns=["localhost"], ips=["127.0.0.1"], server=True, client=False)
    client = ca.issue("prometheus", "prometheus", dns=["prometheus.monitoring"])
    import bcrypt

    hashed = bcrypt.hashpw(b"scrape-pw", bcrypt.gensalt(10)).decode()
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({
        "tls_server_config": {"cert_file": str(server.cert), "key_file": str(server.key),
                              "client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": str(ca.ca.cert)},
        "basic_auth_users": {"prometheus": hashed}}))
    exporter = ExporterProcess(node.args("--interval", "1", "--web-config-file", str(web)), tmp_path / "exporter.log")
    prom = None
    try:
        target = f"127.0.0.1:{exporter.port}"
        tls = {"ca_file": str(ca.ca.cert), "cert_file": str(client.cert), "key_file": str(client.key)}
        auth = {"username": "prometheus", "password": "scrape-pw"}
        jobs = [("mtls", tls, auth), ("no-client-cert", {"ca_file": str(ca.ca.cert)}, auth),
                ("wrong-password", tls, dict(auth, password="wrong")), ("plain-http", None, auth)]
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [dict({"job_name": name, "static_configs": [{"targets": [target]}],
                                     "basic_auth": basic, "scheme": "https" if t else "http"},
                                    **({"tls_config": t} if t else {}))
                               for name, t, basic in jobs]}))
        port = free_port()
        log = open(tmp_path / "prometheus.log", "wb")
        prom = subprocess.Popen([str(bin_dir / "prometheus"), f"--config.file={cfg}",
                                 f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + HANG
        health: Dict[str, Dict[str, Any]] = {}
        while len(health) < len(jobs) or "unknown" in {t["health"] for t in health.values()}:
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"targets not all scraped: {health}"
            time.sleep(0.2)
            try:
                health = {t["labels"]["job"]: t for t in api(port, "/api/v1/targets")["activeTargets"]}
            except OSError:  # not listening yet
                pass
        assert health["mtls"]["health"] == "up", health["mtls"]
        for refused in ("no-client-cert", "wrong-password", "plain-http"):
            assert health[refused]["health"] == "down", health[refused]
        assert "401" in health["wrong-password"]["lastError"]
        got: List[Any] = []
        while not got:  # the scrape's samples are queryable once its append committed
            assert time.monotonic() < deadline, "no series from the mtls job"
            got = api(port, "/api/v1/query", query='count(xpu_cdi_card_healthy{job="mtls"})')["result"]
            time.sleep(0.2)
        assert got[0]["value"][1] == "16"
        assert api(port, "/api/v1/query", query='up{job="mtls"} == 1')["result"]
        assert api(port, "/api/v1/query", query='up{job="no-client-cert"}')["result"][0]["value"][1] == "0"
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(timeout=HANG)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait()
        assert exporter.stop() == 0
