"""The certificates, keys and kubeconfigs of the one-node cluster, made with Debian's openssl.

One CA signs everything; each identity is what the Node authorizer and RBAC's bootstrap
bindings expect of it (``system:node:<name>`` in ``system:nodes`` for kubelet,
``system:kube-controller-manager``, ``system:kube-scheduler``, an admin in
``system:masters``).  EC P-256 keys: made in milliseconds, accepted by every component (the
service-account key signs ES256 tokens).
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Sequence

DAYS = "2"  # a session's cluster lives for minutes


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _openssl(*args: str, input: str = "") -> None:
    r = subprocess.run(["openssl", *args], capture_output=True, text=True, input=input or None)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {r.stderr.strip()}")


def ec_key(path: Path) -> Path:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
    path.chmod(0o600)
    return path


class PKI:
    """A CA in *dir* and the pairs it signs (:meth:`issue`), plus the service-account key pair."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        self.lock = threading.Lock()  # a fleet's nodes issue theirs at once; the CA's serial file is one
        dir.mkdir(parents=True, exist_ok=True)
        key = ec_key(dir / "ca.key")
        self.ca = Pair(dir / "ca.crt", key)
        _openssl("req", "-x509", "-new", "-key", str(key), "-subj", "/CN=xpu-cdi-test-ca", "-days", DAYS,
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", str(self.ca.cert))
        self.sa_key = ec_key(dir / "sa.key")
        self.sa_pub = dir / "sa.pub"
        _openssl("pkey", "-in", str(self.sa_key), "-pubout", "-out", str(self.sa_pub))

    def issue(self, name: str, cn: str, orgs: Sequence[str] = (), dns: Sequence[str] = (),
              ips: Sequence[str] = (), server: bool = False, client: bool = True) -> Pair:
        key = ec_key(self.dir / f"{name}.key")
        csr = self.dir / f"{name}.csr"
        subj = "".join(f"/O={o}" for o in orgs) + f"/CN={cn}"
        _openssl("req", "-new", "-key", str(key), "-subj", subj, "-out", str(csr))
        usages = [u for u, on in (("serverAuth", server), ("clientAuth", client)) if on]
        ext = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
               f"extendedKeyUsage={','.join(usages)}"]
        sans = [f"DNS:{d}" for d in dns] + [f"IP:{i}" for i in ips]
        if sans:
            ext.append("subjectAltName=" + ",".join(sans))
        extfile = self.dir / f"{name}.ext"
        extfile.write_text("\n".join(ext) + "\n")
        cert = self.dir / f"{name}.crt"
        with self.lock:
            _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.ca.cert), "-CAkey", str(self.ca.key),
                     "-CAcreateserial", "-days", DAYS, "-extfile", str(extfile), "-out", str(cert))
        csr.unlink()
        extfile.unlink()
        return Pair(cert, key)

    def kubeconfig(self, path: Path, server: str, user: str, pair: Pair) -> Path:
        """A kubeconfig for *user* authenticating with *pair* to *server*, trusting the CA."""
        path.write_text(kubeconfig_text(server, self.ca.cert, user, pair))
        path.chmod(0o600)
        return path


def kubeconfig_text(server: str, ca: Path, user: str, pair: Pair) -> str:
    doc: Dict[str, object] = {
        "apiVersion": "v1", "kind": "Config", "current-context": "xpu-cdi-test",
        "clusters": [{"name": "xpu-cdi-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)}}],
        "contexts": [{"name": "xpu-cdi-test", "context": {"cluster": "xpu-cdi-test", "user": user}}],
    }
    import json

    return json.dumps(doc, indent=1) + "\n"  # JSON is YAML: every component reads it
