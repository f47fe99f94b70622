"""kube/client.py's own setup of the common kubeconfigs (urllib3 alone) and its fall-back to the
official client's loaders for the others; requests against a loopback HTTP server."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from support import HANG
from xpu_cdi.kube.client import Kube


def kubeconfig(path: Path, server: str, user: Dict[str, Any], **cluster: Any) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@pytest.fixture()
def api() -> Iterator[Dict[str, Any]]:
    """A loopback HTTP server answering every GET with the Authorization header it got."""
    seen: List[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps({"path": self.path, "auth": seen[-1]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield {"url": f"http://127.0.0.1:{server.server_address[1]}", "seen": seen}
    finally:
        server.shutdown()
        server.server_close()


def test_token_kubeconfig_without_the_official_client(tmp_path: Path, api: Dict[str, Any]) -> None:
    """A server and a token: the request carries it, and the process never imports ``kubernetes``."""
    cfg = kubeconfig(tmp_path / "kc", api["url"] + "/", {"token": "tok-1"})
    code = ("import json, sys\nfrom xpu_cdi.kube.client import Kube\nk = Kube(sys.argv[1])\n"
            "print(json.dumps([k.host, k.get('/api/v1/nodes/n')['auth'], 'kubernetes' in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [api["url"], "Bearer tok-1", False]


def test_token_file_is_read_at_each_request(tmp_path: Path, api: Dict[str, Any]) -> None:
    """tokenFile (relative to the kubeconfig): a rotated token is sent from the next request on."""
    (tmp_path / "token").write_text("first\n")
    k = Kube(str(kubeconfig(tmp_path / "kc", api["url"], {"tokenFile": "token"})))
    try:
        assert k.get("/a")["auth"] == "Bearer first"
        (tmp_path / "token").write_text("second\n")
        assert k.get("/b")["auth"] == "Bearer second"
    finally:
        k.close()
    assert api["seen"] == ["Bearer first", "Bearer second"]


def test_certificate_data_goes_to_private_files_removed_at_close(tmp_path: Path) -> None:
    """ssl loads a client certificate from files only: the -data fields are written 0600 and removed."""
    ca, cert, key = b"-----CA-----\n", b"-----CERT-----\n", b"-----KEY-----\n"
    cfg = kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443",
                     {"client-certificate-data": base64.b64encode(cert).decode(),
                      "client-key-data": base64.b64encode(key).decode()},
                     **{"certificate-authority-data": base64.b64encode(ca).decode(), "tls-server-name": "api"})
    k = Kube(str(cfg))
    kw = k.pool.connection_pool_kw
    files = [kw["cert_file"], kw["key_file"]]
    assert [Path(f).read_bytes() for f in files] == [cert, key]
    assert all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in files)
    assert (kw["ca_cert_data"], kw["server_hostname"], kw["cert_reqs"], k.insecure) == \
        (ca.decode(), "api", "CERT_REQUIRED", False)
    k.close()
    assert not any(os.path.exists(f) for f in files)


def test_relative_ca_path_and_insecure(tmp_path: Path) -> None:
    k = Kube(str(kubeconfig(tmp_path / "kc", "https://h:1", {"token": "t"}, **{"certificate-authority": "ca.pem"})))
    assert k.pool.connection_pool_kw["ca_certs"] == str(tmp_path / "ca.pem")
    k = Kube(str(kubeconfig(tmp_path / "kc2", "https://h:1", {}, **{"insecure-skip-tls-verify": True})))
    assert (k.pool.connection_pool_kw["cert_reqs"], k.insecure, k._headers().get("Authorization")) == \
        ("CERT_NONE", True, None)


def test_exec_plugin_goes_to_the_official_client(tmp_path: Path, api: Dict[str, Any]) -> None:
    """A user the plain setup does not know (an exec credential plugin) is the library's: its token
    arrives all the same."""
    plugin = tmp_path / "cred.sh"
    plugin.write_text('#!/bin/sh\necho \'{"apiVersion": "client.authentication.k8s.io/v1", '
                      '"kind": "ExecCredential", "status": {"token": "from-exec"}}\'\n')
    plugin.chmod(0o755)
    cfg = kubeconfig(tmp_path / "kc", api["url"], {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                            "command": str(plugin), "interactiveMode": "Never"}})
    code = ("import json, sys\nfrom xpu_cdi.kube.client import Kube\nk = Kube(sys.argv[1])\n"
            "print(json.dumps([k.get('/x')['auth'], 'kubernetes' in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["Bearer from-exec", True]


def test_insecure_as_the_library_pool_applies_it(tmp_path: Path, api: Dict[str, Any]) -> None:
    """Through the official client too, ``insecure`` says whether the pool it built skips the
    server's certificate: as the kubeconfig's insecure-skip-tls-verify says."""
    plugin = tmp_path / "cred.sh"
    plugin.write_text('#!/bin/sh\necho \'{"apiVersion": "client.authentication.k8s.io/v1", '
                      '"kind": "ExecCredential", "status": {"token": "from-exec"}}\'\n')
    plugin.chmod(0o755)
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                          "interactiveMode": "Never"}}
    for flag in (True, False):
        k = Kube(str(kubeconfig(tmp_path / f"kc-{flag}", api["url"], exec_user, **{"insecure-skip-tls-verify": flag})))
        assert (k.insecure, k._headers()["Authorization"]) == (flag, "Bearer from-exec")  # the library's token
        k.close()


def test_files_the_library_reads_are_bounded(tmp_path: Path) -> None:
    """A kubeconfig only the official client reads (a FIFO, an alias bomb, nesting 500 deep, one
    entry of a KUBECONFIG list) is refused in one line naming the file before the library opens it:
    its loader reads unbounded (a FIFO hung it, aliases filled the memory)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    bomb = tmp_path / "bomb"
    bomb.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                    + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                              for p, c in zip("abcdefg", "bcdefgh")) + "users: [*h]\n")
    deep = tmp_path / "deep"
    deep.write_text("users: " + "[" * 500 + "]" * 500 + "\n")  # libyaml itself stops at 1,000
    good = kubeconfig(tmp_path / "good", "https://127.0.0.1:1", {"token": "t"})
    code = ("import json, os, sys\nfrom xpu_cdi.errors import ConfigError\nfrom xpu_cdi.kube.client import Kube\n"
            "out = []\nfor arg in sys.argv[1:]:\n"
            "    try:\n        Kube(arg).close()\n        out.append('')\n"
            "    except ConfigError as err:\n        out.append(str(err))\n"
            "print(json.dumps(out))\n")
    cases = [str(fifo), str(bomb), str(deep), f"{good}{os.pathsep}{deep}"]
    r = subprocess.run([sys.executable, "-c", code, *cases], capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    for arg, path, why in zip(cases, (fifo, bomb, deep, deep), ("a FIFO", "nodes", "deeper", "deeper")):
        assert said[0].startswith(f"cannot configure the API client from --kubeconfig {arg}: {path}: "), said
        assert why in said[0] and "\n" not in said[0] and len(said[0]) < 600, said[0]
        said = said[1:]


def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod's service account: the service's address (an IPv6 one bracketed), its CA, and the
    projected token re-read as kubelet rotates it."""
    from xpu_cdi.kube import client as kube

    (tmp_path / "token").write_text("sa-1")
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    k = Kube()
    assert (k.host, k.pool.connection_pool_kw["ca_certs"], k.insecure) == \
        ("https://[fd00::1]:6443", str(tmp_path / "ca.crt"), False)
    assert k._headers()["Authorization"] == "Bearer sa-1"
    (tmp_path / "token").write_text("sa-2")
    assert k._headers()["Authorization"] == "Bearer sa-2"


def test_in_cluster_reads_no_yaml(tmp_path: Path) -> None:
    """In a pod the driver reads no kubeconfig file, so PyYAML (~1.1 MiB) stays out of it (issue 30);
    a kubeconfig file still imports it where it is read."""
    (tmp_path / "token").write_text("sa-1")
    probe = ("import json, os, sys\n"
             "from xpu_cdi.kube import client as kube\n"
             "kube.SERVICE_ACCOUNT = sys.argv[1]\n"
             "k = kube.Kube(sys.argv[2] or None)\n"
             "print(json.dumps([k.host, 'yaml' in sys.modules]))\n")
    env = dict(os.environ, KUBERNETES_SERVICE_HOST="10.0.0.1", KUBERNETES_SERVICE_PORT="443")
    r = subprocess.run([sys.executable, "-c", probe, str(tmp_path), ""], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["https://10.0.0.1:443", False]
    config = kubeconfig(tmp_path / "config", "http://127.0.0.1:1", {"token": "t"})
    r = subprocess.run([sys.executable, "-c", probe, str(tmp_path), str(config)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["http://127.0.0.1:1", True]
