"""The node labels: what they say of fake hosts, the sanitising rule, the NFD feature file, and
the labeller's passes against a recording API (the real API server: tests/k8s/test_labels_node.py)."""

from __future__ import annotations

import datetime
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from xpu_cdi import log

from support import fakehost
from support.matrix import XPU_CDI
from xpu_cdi import labels as _labels
from xpu_cdi.labels import nfd
from xpu_cdi.labels.daemon import Labeller, Settings

# the Kubernetes rule for a label value (apimachinery's IsValidLabelValue)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def roots(host: fakehost.FakeHost) -> Dict[str, str]:
    r = str(host.root)
    return {"dev_root": r, "driver_root": r, "sysfs_root": r}


def labels_of(host: fakehost.FakeHost, profile: str, **kw: Any) -> Dict[str, str]:
    return Labeller(Settings(profiles=(profile,), profiles_dir=("/nonexistent",), uevents="none",
                             **roots(host), **kw), log=log.into([])).wanted()


def test_kunlunxin_labels(tmp_path: Path) -> None:
    host = fakehost.kunlunxin(tmp_path / "h", 8)
    got = labels_of(host, "kunlunxin")
    assert got == {"xpu-cdi.io/present": "true", "xpu-cdi.io/xpu.present": "true", "xpu-cdi.io/xpu.count": "8",
                   "xpu-cdi.io/xpu.model": "P800", "xpu-cdi.io/xpu.driver-version": fakehost.XRE_VERSION,
                   "xpu-cdi.io/xpu.numa-nodes": "2", "xpu-cdi.io/xpu.switches": "2",
                   "xpu-cdi.io/xpu.max-switch-group": "4", "xpu-cdi.io/xpu.switch-groups": "0-3_4-7"}, got


@pytest.mark.parametrize("device,model", [("0xd500", "Ascend310P"), ("0xd802", "Ascend910B")])
def test_ascend_model_from_the_hosts_pci_functions(tmp_path: Path, device: str, model: str) -> None:
    """davinciN has no parent device: the model is the one all the host's NPU functions are."""
    host = fakehost.ascend(tmp_path / "h", 4, pci_device=device)
    fakehost.kunpeng_nics(host.root)  # Huawei functions that are not NPUs do not count
    got = labels_of(host, "ascend")
    assert got["xpu-cdi.io/npu.model"] == model and got["xpu-cdi.io/npu.count"] == "4", got
    assert got["xpu-cdi.io/npu.driver-version"] == "24.1.0-rc2" and got["xpu-cdi.io/npu.topology"] == "unknown"


@pytest.mark.parametrize("npus, device, domains, size", [(16, "0xd802", "2", "8"), (8, "0xd801", "2", "4"),
                                                        (8, "0xd802", "1", "8")])
def test_ascend_interconnect_labels(tmp_path: Path, npus: int, device: str, domains: str, size: str) -> None:
    """Server-level interconnect facts only: how many HCCS domains of how many NPUs, how many NPUs have
    a RoCE address in hccn.conf; no per-card label."""
    host = fakehost.ascend(tmp_path / "h", npus, pci_device=device, hccn=True)
    (host.root / "etc/hccn.conf").write_text(fakehost.hccn_conf(npus, skip=(1,)))
    got = labels_of(host, "ascend")
    assert got["xpu-cdi.io/npu.hccs-domains"] == domains and got["xpu-cdi.io/npu.hccs-domain-size"] == size, got
    assert got["xpu-cdi.io/npu.device-ips"] == str(npus - 1), got
    assert all(LABEL_VALUE.match(v) for v in got.values()), got


def test_ascend_no_interconnect_labels_without_facts(tmp_path: Path) -> None:
    """A 4-NPU 910B host (no domain rule) without hccn.conf: none of the three labels."""
    got = labels_of(fakehost.ascend(tmp_path / "h", 4), "ascend")
    assert not [k for k in got if k.split(".")[-1] in ("hccs-domains", "hccs-domain-size", "device-ips")], got


def test_ascend_mixed_models_no_model_label(tmp_path: Path) -> None:
    host = fakehost.ascend(tmp_path / "h", 2, pci_device="0xd500")
    (host.root / "sys/bus/pci/devices/0000:c2:00.0/device").write_text("0xd802\n")
    notes: List[str] = []
    Labeller(Settings(profiles=("ascend",), profiles_dir=("/nonexistent",), **roots(host)),
             log=log.into(notes)).wanted()
    got = labels_of(host, "ascend")
    assert "xpu-cdi.io/npu.model" not in got and got["xpu-cdi.io/npu.count"] == "2", got
    assert any("npu.model left out: a card's model is not known" in n for n in notes), notes


@pytest.mark.parametrize("raw,want", [
    ("24.1.0-rc2", "24.1.0-rc2"), ("5.0.21+13", "5.0.21_13"), ("  v1 (beta) ", "v1_beta"),
    ("-x-", "x"), ("a" * 80, "a" * 63), ("+++", ""), ("a" * 62 + "+b", "a" * 62),
])
def test_sanitise(raw: str, want: str) -> None:
    got = _labels.sanitise(raw)
    assert got == want and LABEL_VALUE.match(got) and len(got) <= 63


def test_driver_version_sanitised(tmp_path: Path) -> None:
    host = fakehost.kunlunxin(tmp_path / "h", 2)
    (host.root / "proc/xpu/version").write_text("5.0.21.13\n")  # semver 5.0.21+13: '+' is no label character
    assert labels_of(host, "kunlunxin")["xpu-cdi.io/xpu.driver-version"] == "5.0.21_13"


def test_changes_touch_only_ours() -> None:
    current = {"kubernetes.io/hostname": "n", "team": "a", "xpu-cdi.io/xpu.count": "8", "xpu-cdi.io/xpu.gone": "1",
               "xpu-cdi.io/kubernetes-allocation": "dra"}  # an admin's choice of the way: not ours
    wanted = {"xpu-cdi.io/xpu.count": "7", "xpu-cdi.io/present": "true"}
    assert _labels.changes(current, wanted) == {"xpu-cdi.io/xpu.count": "7", "xpu-cdi.io/present": "true",
                                                "xpu-cdi.io/xpu.gone": None}
    assert _labels.changes({**current, **wanted, "xpu-cdi.io/xpu.gone": "1"}, {**wanted}) == \
        {"xpu-cdi.io/xpu.gone": None}


def parse_feature_file(text: str) -> Tuple[Optional[datetime.datetime], Dict[str, str]]:
    """NFD's local-source format as its docs describe it: '#' comments, the '# +expiry-time=' directive
    (RFC 3339), then one name=value a line."""
    expiry, out = None, {}
    for line in text.splitlines():
        if line.startswith("# +expiry-time="):
            expiry = datetime.datetime.strptime(line.split("=", 1)[1], "%Y-%m-%dT%H:%M:%S%z")
        elif line and not line.startswith("#"):
            name, sep, value = line.partition("=")
            assert sep and name and "/" in name, line
            out[name] = value
    return expiry, out


def test_nfd_feature_file(tmp_path: Path) -> None:
    host = fakehost.ascend(tmp_path / "h", 4, pci_device="0xd500")
    path = tmp_path / "features.d" / "xpu-cdi"
    before = datetime.datetime.now(datetime.timezone.utc)
    r = subprocess.run([XPU_CDI, "labels", "--profile", "ascend", "--profiles-dir", "/nonexistent",
                        *host.cli_roots, "--nfd-file", str(path), "--expiry", "600"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    expiry, got = parse_feature_file(path.read_text())
    assert got == labels_of(host, "ascend") and got["xpu-cdi.io/npu.model"] == "Ascend310P", got
    assert expiry is not None and 599 <= (expiry - before).total_seconds() <= 660, expiry
    assert [p.name for p in path.parent.iterdir()] == ["xpu-cdi"]  # no temp file left beside it
    assert all(LABEL_VALUE.match(v) for v in got.values())


def test_nfd_file_removed_when_no_cards(tmp_path: Path) -> None:
    path = tmp_path / "xpu-cdi"
    nfd.write(str(path), {"xpu-cdi.io/present": "true"})
    assert path.exists()
    nfd.write(str(path), {})
    assert not path.exists()


class RecordingKube:
    """A stand-in API server holding one Node's labels and recording the requests."""

    def __init__(self, labels: Dict[str, str]) -> None:
        self.labels = dict(labels)
        self.requests: List[Tuple[str, str]] = []

    def get(self, path: str) -> Dict[str, Any]:
        self.requests.append(("GET", path))
        return {"metadata": {"name": "n1", "labels": dict(self.labels)}}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Dict[str, Any]:
        self.requests.append((method, path))
        assert method == "PATCH" and content_type == "application/merge-patch+json"
        for k, v in body["metadata"]["labels"].items():
            if v is None:
                self.labels.pop(k, None)
            else:
                self.labels[k] = v
        return {}


def test_daemon_passes_follow_the_host(tmp_path: Path) -> None:
    """A card gone: count follows, nothing else is sent; idle passes make no request; a kind gone
    keeps its labels for the removal grace, then they go; others' labels are never touched."""
    host = fakehost.kunlunxin(tmp_path / "h", 8)
    kube = RecordingKube({"team": "infer", "xpu-cdi.io/xpu.stale": "x", "xpu-cdi.io/kubernetes-allocation": "dra"})
    lab = Labeller(Settings(profiles=("kunlunxin",), profiles_dir=("/nonexistent",), node="n1", uevents="none",
                            removal_grace=3600, **roots(host)), log=log.into([]), kube=kube)
    lab.step()
    assert kube.labels["xpu-cdi.io/xpu.count"] == "8" and "xpu-cdi.io/xpu.stale" not in kube.labels
    assert kube.labels["team"] == "infer"
    n = len(kube.requests)
    lab.step()
    assert len(kube.requests) == n, kube.requests[n:]  # idle: no request before --resync
    (host.root / "dev/xpu7").unlink()
    lab.step()
    assert kube.labels["xpu-cdi.io/xpu.count"] == "7", kube.labels
    for i in range(7):
        (host.root / f"dev/xpu{i}").unlink()
    lab.step()
    assert kube.labels["xpu-cdi.io/xpu.count"] == "7"  # within the grace: kept
    lab.s = Settings(**{**lab.s.__dict__, "removal_grace": 0})
    lab.step()
    assert kube.labels == {"team": "infer", "xpu-cdi.io/kubernetes-allocation": "dra"}, kube.labels


def test_resync_puts_back_and_idle_costs_one_read(tmp_path: Path) -> None:
    """Every --resync the node is read once (nothing sent when it holds what we want); a label of
    ours someone removed is put back at that read."""
    host = fakehost.kunlunxin(tmp_path / "h", 2)
    kube = RecordingKube({})
    lab = Labeller(Settings(profiles=("kunlunxin",), profiles_dir=("/nonexistent",), node="n1", uevents="none",
                            resync=0, **roots(host)), log=log.into([]), kube=kube)
    lab.step()
    n = len(kube.requests)
    lab.step()
    assert kube.requests[n:] == [("GET", "/api/v1/nodes/n1")]
    del kube.labels["xpu-cdi.io/xpu.count"]
    lab.step()
    assert [m for m, _p in kube.requests[n + 1:]] == ["GET", "PATCH"] and kube.labels["xpu-cdi.io/xpu.count"] == "2"
