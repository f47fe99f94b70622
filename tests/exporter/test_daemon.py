"""The exporter as its own process over HTTP: one tool run per interval whatever the scrape rate,
none while nobody scrapes, a scrape answered at once while a tool hangs, /healthz, SIGTERM; on
PyPI's and Debian's libraries."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import HANG, importlog
from support.exporternode import ExporterProcess, Node

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"


def get(url: str, accept: str = "") -> "tuple[int, dict, bytes]":
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=HANG) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def samples(body: bytes) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(body.decode()) for s in f.samples}


@pytest.fixture(params=["pypi", "debian"])
def python(request: pytest.FixtureRequest) -> "tuple[str, dict]":
    env = dict(os.environ)
    if request.param == "pypi":
        return sys.executable, env
    env["PYTHONPATH"] = str(REPO / "src")
    import subprocess
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import grpc, google.protobuf, click, yaml"],
                           capture_output=True, text=True, env=env)
    if probe.returncode != 0:  # a failure under CI=true (support/cisafe.py)
        pytest.skip(f"Debian's python3-grpcio (or protobuf, click, yaml) are not installed "
                    f"for {SYSTEM_PYTHON}: `make install` installs them ({probe.stderr.strip()[-200:]})")
    return SYSTEM_PYTHON, env


def test_one_tool_run_per_interval_however_often_it_is_scraped(node: Node, tmp_path: Path,
                                                               python: "tuple[str, dict]") -> None:
    exe, env = python
    p = ExporterProcess(node.args("--interval", "2"), tmp_path / "exporter.log", python=exe, env=env)
    try:
        start = time.monotonic()
        for _ in range(40):  # 40 scrapes in about 3 s
            code, headers, body = get(p.url())
            assert code == 200 and headers["Content-Type"].startswith("text/plain")
            time.sleep(0.07)
        elapsed = time.monotonic() - start
        s = samples(body)
        assert s[("xpu_cdi_card_temperature_celsius",
                  (("card", "3"), ("container", ""), ("kind", "kunlunxin.com/xpu"), ("model", ""),
                   ("namespace", ""), ("pci_bus_id", node.host.pci[3]), ("pod", ""), ("uuid", "")))] == 48
        runs = node.runs("xpu-smi")
        assert 1 <= runs <= 1 + int(elapsed / 2) + 1, (runs, elapsed)
        code, _h, ok = get(p.url("/healthz"))
        assert (code, ok) == (200, b"ok\n")
        code, headers, om = get(p.url(), accept="application/openmetrics-text; version=1.0.0")
        assert headers["Content-Type"].startswith("application/openmetrics-text") and om.endswith(b"# EOF\n")
        assert get(p.url("/nothing"))[0] == 404
    finally:
        assert p.stop() == 0
    assert not node.status.exists()  # removed on SIGTERM


def test_no_tool_runs_while_nobody_scrapes(node: Node, tmp_path: Path) -> None:
    """Idle, the exporter only rewrites its status file each interval (doctor's sign of life);
    the next scrape runs a pass (that scrapes within the interval reuse it: the test above)."""
    p = ExporterProcess(node.args("--interval", "1"), tmp_path / "exporter.log")
    try:
        get(p.url())  # started: the first pass ran before the server answered
        runs = node.runs("xpu-smi")
        first = json.loads(node.status.read_text())
        deadline = time.monotonic() + HANG
        while True:  # two heartbeats: the loop turned twice with nobody scraping
            doc = json.loads(node.status.read_text())
            if doc["updated"] >= first["updated"] + 2:
                break
            assert time.monotonic() < deadline and p.proc.poll() is None, p.log.read_text()
            time.sleep(0.1)
        assert node.runs("xpu-smi") == runs and doc["refreshed"] == first["refreshed"]
        assert get(p.url())[0] == 200  # older than the interval: this scrape asks for a pass
        while json.loads(node.status.read_text())["refreshed"] == first["refreshed"]:
            assert time.monotonic() < deadline and p.proc.poll() is None, p.log.read_text()
            time.sleep(0.05)
        assert node.runs("xpu-smi") == runs + 1
        assert get(p.url("/healthz"))[::2] == (200, b"ok\n")
    finally:
        assert p.stop() == 0


def test_a_scrape_is_answered_while_a_tool_hangs(node: Node, tmp_path: Path) -> None:
    """The pass a scrape asked for is stuck in xpu-smi for its whole 5 s timeout; scrapes meanwhile
    answer at once from the last snapshot, and after the timeout the source reads as down."""
    p = ExporterProcess(node.args("--interval", "1"), tmp_path / "exporter.log")
    try:
        node.set_tool("xpu-smi", mode="hang", data="xpu-smi-m.txt")
        hanging, end = node.tool("xpu-smi").with_name("xpu-smi.pid"), time.monotonic() + HANG
        while not hanging.exists():  # a scrape's pass has started and hangs in the tool
            assert time.monotonic() < end and p.proc.poll() is None, "no pass ran the hanging tool"
            t = time.monotonic()
            assert get(p.url())[0] == 200
            assert time.monotonic() - t < HANG / 2
            time.sleep(0.2)
        slowest = 0.0
        for _ in range(10):
            t = time.monotonic()
            code, _h, body = get(p.url())
            slowest = max(slowest, time.monotonic() - t)
            assert code == 200
            time.sleep(0.1)
        assert slowest < 1.0, slowest
        deadline = time.monotonic() + HANG
        up = 1.0
        while time.monotonic() < deadline:
            up = samples(get(p.url())[2])[("xpu_cdi_exporter_source_up", (("source", "kunlunxin/xpu-smi"),))]
            if up == 0:
                break
            time.sleep(0.2)
        assert up == 0
        s = samples(get(p.url())[2])
        assert s[("xpu_cdi_exporter_source_up", (("source", "ascend/npu-smi"),))] == 1
    finally:
        assert p.stop() == 0


def test_a_taken_port_is_one_line_and_exit_1(node: Node, tmp_path: Path) -> None:
    import socket
    import subprocess

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        port = s.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "xpu_cdi.cli", "exporter", "--listen", f"127.0.0.1:{port}",
                              *node.args()], capture_output=True, text=True, timeout=60)
        assert res.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in res.stderr
    finally:
        s.close()


def test_bad_listen_is_refused(node: Node) -> None:
    from click.testing import CliRunner
    from xpu_cdi.cli import main

    res = CliRunner().invoke(main, ["exporter", "--listen", "localhost", *node.args()])
    assert res.exit_code != 0 and "is not ADDR:PORT" in res.output


def test_the_exporter_after_a_pass_imports_only_its_own(node: Node, tmp_path: Path, python: "tuple[str, dict]",
                                                        kubelet: "object", sock_dir: Path) -> None:
    """Its whole run to a scraped pass that asked kubelet (issue 30: each module is resident memory of
    every node)."""
    exe, env = python
    p = ExporterProcess(node.args("--interval", "1", "--pod-resources-socket", str(sock_dir / "kubelet.sock")),
                        tmp_path / "exporter.log", python=exe, env=dict(env, **importlog.ENV))
    try:
        assert b'xpu_cdi_exporter_source_up{source="pod-resources"} 1.0' in get(p.url())[2]
        maps = Path(f"/proc/{p.proc.pid}/maps").read_text()
    finally:
        assert p.stop() == 0
    mods = importlog.imported(p.log.read_text()) - importlog.at_start(exe, env)
    assert {"grpc", "xpu_cdi.exporter.daemon", "xpu_cdi.exporter.sources", "xpu_cdi.exporter.server",
            "prometheus_client", "wsgiref"} <= mods
    # no web config: no YAML parser, no bcrypt; not the DRA driver's API client nor its slice builder
    assert importlog.loaded(mods, importlog.NOT_IN_DAEMONS | importlog.YAML | {"urllib3", "fractions", "bcrypt",
                                                                                "xpu_cdi.dra.slices"}) == []
    assert "/_ssl." in maps  # nothing is kept out of it: TLS is there when --web-config-file asks


def test_tls_and_basic_auth_from_a_web_config_and_a_bad_reload(node: Node, tmp_path: Path,
                                                               python: "tuple[str, dict]") -> None:
    """The daemon on each stack (Debian's prometheus_client 0.16 and bcrypt 3.2 too) serves /metrics
    over TLS to a client certificate and a password; after SIGHUP with a broken file it says so in
    one line and serves on with the last good config."""
    import base64
    import signal
    import ssl

    from support.k8s.pki import PKI

    exe, env = python
    ca = PKI(tmp_path / "pki")
    srv = ca.issue("server", "exporter", ips=["127.0.0.1"], server=True, client=False)
    cli = ca.issue("prometheus", "prometheus")
    web = tmp_path / "web.yml"
    good = (f"tls_server_config:\n  cert_file: {srv.cert}\n  key_file: {srv.key}\n  client_ca_file: {ca.ca.cert}\n"
            f"  client_auth_type: RequireAndVerifyClientCert\n"
            # bcrypt of "pw" ($2y$, as htpasswd writes it)
            f"basic_auth_users:\n  prom: '$2y$04$XYA.EFqvHN4Qdb8mvkOfJOmvadIbQbEzmjKT8Jvd0E18Ewe9rSJoC'\n")
    web.write_text(good)
    p = ExporterProcess(node.args("--web-config-file", str(web)), tmp_path / "exporter.log", python=exe, env=env)
    ctx = ssl.create_default_context(cafile=str(ca.ca.cert))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(cli.cert), str(cli.key))

    def scrape(password: str) -> int:
        req = urllib.request.Request(f"https://127.0.0.1:{p.port}/metrics", headers={
            "Authorization": "Basic " + base64.b64encode(f"prom:{password}".encode()).decode()})
        try:
            with urllib.request.urlopen(req, timeout=HANG, context=ctx) as r:
                assert any(name == "xpu_cdi_card_healthy" for name, _labels in samples(r.read()))
                return r.status
        except urllib.error.HTTPError as err:
            return err.code

    try:
        assert scrape("pw") == 200 and scrape("nope") == 401
        web.write_text("tls_server_config: [broken\n")
        p.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + HANG
        while "last good web config" not in p.log.read_text():
            assert time.monotonic() < deadline and p.proc.poll() is None, p.log.read_text()
            time.sleep(0.05)
        assert scrape("pw") == 200
    finally:
        assert p.stop() == 0
    bad = [ln for ln in p.log.read_text().splitlines() if "last good web config" in ln]
    assert len(bad) == 1 and "not valid YAML" in bad[0]
