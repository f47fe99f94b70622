"""``xpu-cdi exporter`` against a fake node: every metric with its value and labels, sources that
fail one by one, cards that come and go, allocation labels from a PodResources server.

Scrapes are parsed with prometheus_client's own parser.  The refresh runs in
the test's process here (``Exporter.refresh``, then the text a scrape gets);
``test_daemon.py`` runs the real daemon over HTTP.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.exporternode import Node
from support.podresourceskit import Container, Pod
from xpu_cdi.exporter.daemon import Exporter, Settings
from xpu_cdi.exporter.webconfig import Watched

XPU, NPU = "kunlunxin.com/xpu", "huawei.com/npu"
MiB = 1048576

Series = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


def settings(node: Node, sock: str = "/nonexistent/kubelet.sock", **kw: object) -> Settings:
    r = str(node.root)
    return Settings(spec_dirs=(str(node.spec_dir),), dev_root=r, driver_root=r, sysfs_root=r,
                    pod_resources_socket=sock, status_file=str(node.status), **kw)  # type: ignore[arg-type]


def render(exp: Exporter, accept: str = "", accept_encoding: str = "") -> Tuple[bytes, Dict[str, str]]:
    """What the exporter's WSGI app answers a GET /metrics with these headers (no web config)."""
    got: List[object] = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "HTTP_ACCEPT": accept,
               "HTTP_ACCEPT_ENCODING": accept_encoding}
    body = b"".join(exp.app(Watched("", lambda message, bad: None))(environ, lambda *a: got.extend(a)))
    assert got[0] == "200 OK"
    return body, dict(got[1])  # type: ignore[arg-type]


def scrape(exp: Exporter) -> Series:
    body, _ = render(exp)
    out: Series = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(series: Series, name: str, **labels: str) -> float:
    """The one series of *name* whose labels include *labels*."""
    hits = [v for (n, ls), v in series.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(hits) == 1, f"{name} {labels}: {len(hits)} series"
    return hits[0]


def labels_of(series: Series, name: str, **labels: str) -> Dict[str, str]:
    (ls,) = [dict(ls) for (n, ls), _v in series.items() if n == name and labels.items() <= dict(ls).items()]
    return ls


def names(series: Series) -> List[str]:
    return sorted({n for n, _ls in series})


def test_every_metric_with_its_value_and_labels(node: Node) -> None:
    exp = Exporter(settings(node))
    exp.step()
    s = scrape(exp)
    # Kunlunxin card 2 (xpu-smi -m line 2): 47 C, 82 W, 3072 / 98304 MiB, 10 %
    assert value(s, "xpu_cdi_card_temperature_celsius", kind=XPU, card="2") == 47
    assert value(s, "xpu_cdi_card_power_watts", kind=XPU, card="2") == 82
    assert value(s, "xpu_cdi_card_memory_used_bytes", kind=XPU, card="2") == 3072 * MiB
    assert value(s, "xpu_cdi_card_memory_total_bytes", kind=XPU, card="2") == 98304 * MiB
    assert value(s, "xpu_cdi_card_utilization_ratio", kind=XPU, card="2") == pytest.approx(0.10)
    # Ascend NPU 5 (910 layout): HBM 3005 / 65536 MB wins over Memory-Usage 0 / 0
    assert value(s, "xpu_cdi_card_memory_used_bytes", kind=NPU, card="5") == 3005 * MiB
    assert value(s, "xpu_cdi_card_memory_total_bytes", kind=NPU, card="5") == 65536 * MiB
    assert value(s, "xpu_cdi_card_temperature_celsius", kind=NPU, card="5") == 45
    assert value(s, "xpu_cdi_card_power_watts", kind=NPU, card="5") == 95.5
    assert value(s, "xpu_cdi_card_utilization_ratio", kind=NPU, card="5") == pytest.approx(0.5)
    # identity labels: the PCI address from sysfs (Kunlunxin) or from npu-smi (Ascend: no parent in sysfs)
    xpu2 = labels_of(s, "xpu_cdi_card_healthy", kind=XPU, card="2")
    assert xpu2["pci_bus_id"] == node.host.pci[2] and xpu2["model"] == "" and xpu2["pod"] == ""
    npu5 = labels_of(s, "xpu_cdi_card_healthy", kind=NPU, card="5")
    assert npu5["pci_bus_id"] == "0000:c6:00.0" and npu5["model"] == "910B3"
    for kind in (XPU, NPU):
        for card in range(8):
            assert value(s, "xpu_cdi_card_healthy", kind=kind, card=str(card)) == 1
    assert value(s, "xpu_cdi_exporter_source_up", source="kunlunxin/xpu-smi") == 1
    assert value(s, "xpu_cdi_exporter_source_up", source="ascend/npu-smi") == 1
    # no kubelet: allocation is unknown, so absent (never 0); the source says why
    assert value(s, "xpu_cdi_exporter_source_up", source="pod-resources") == 0
    assert "xpu_cdi_card_allocated" not in names(s)
    assert sum(1 for n, _ in s if n == "xpu_cdi_card_temperature_celsius") == 16


def test_a_reading_the_tool_cannot_give_is_absent(node: Node) -> None:
    """npu-smi's 310B table prints NA for NPU 7's power: no series, not 0; the others are there."""
    node.set_tool("npu-smi", data="npu-smi-info-310b.txt")
    exp = Exporter(settings(node))
    exp.step()
    s = scrape(exp)
    power = {dict(ls)["card"] for (n, ls), _v in s.items() if n == "xpu_cdi_card_power_watts"
             and dict(ls)["kind"] == NPU}
    assert power == {str(i) for i in range(7)}
    assert value(s, "xpu_cdi_card_memory_used_bytes", kind=NPU, card="7") == 907 * MiB
    assert value(s, "xpu_cdi_card_memory_total_bytes", kind=NPU, card="7") == 10810 * MiB
    assert labels_of(s, "xpu_cdi_card_healthy", kind=NPU, card="7")["model"] == "310B1"


@pytest.mark.parametrize("mode, why", [("crash", "failed (exit status 3): npu-smi: cannot open the device"),
                                       ("garbage", "printed nothing the profile's rule reads"),
                                       ("flood", "wrote more than 1048576 bytes: killed"),
                                       ("missing", "is not installed")])
def test_a_failing_tool_is_down_and_the_others_unaffected(node: Node, mode: str, why: str) -> None:
    if mode == "missing":
        node.tool("npu-smi").unlink()
    else:
        node.set_tool("npu-smi", mode=mode)
    exp = Exporter(settings(node))
    snap = exp.step()
    s = scrape(exp)
    assert value(s, "xpu_cdi_exporter_source_up", source="ascend/npu-smi") == 0
    (res,) = [r for r in snap.sources if r.source == "ascend/npu-smi"]
    assert why in res.why
    # no reading of any NPU, but every NPU is still listed (healthy), and the Kunlunxin readings are whole
    assert not [1 for (n, ls), _v in s.items() if n.startswith("xpu_cdi_card_temp") and dict(ls)["kind"] == NPU]
    assert value(s, "xpu_cdi_card_healthy", kind=NPU, card="3") == 1
    assert value(s, "xpu_cdi_exporter_source_up", source="kunlunxin/xpu-smi") == 1
    assert value(s, "xpu_cdi_card_temperature_celsius", kind=XPU, card="7") == 52


@pytest.mark.parametrize("mode", ["hang", "linger"])
def test_a_hanging_tool_is_killed_after_its_timeout(node: Node, mode: str, tmp_path: Path) -> None:
    """A tool that never finishes (or leaves a child holding its output) is killed at the profile's
    timeout, here 1.5 s through an admin profile; the pass ends then, with that source down."""
    from xpu_cdi.generate import profile

    text = profile.builtin_texts()["kunlunxin"].replace("argv: [/usr/local/bin/xpu-smi, -m]",
                                                        "argv: [/usr/local/bin/xpu-smi, -m]\n      timeout: 1.5")
    assert "timeout: 1.5" in text
    (tmp_path / "profiles.d").mkdir()
    (tmp_path / "profiles.d" / "kunlunxin.yaml").write_text(text)
    node.set_tool("xpu-smi", mode=mode, data="xpu-smi-m.txt")
    exp = Exporter(settings(node, profiles_dir=(str(tmp_path / "profiles.d"),)))
    start = time.monotonic()
    snap = exp.step()
    took = time.monotonic() - start
    assert 1.4 < took < 60, took  # ended by the timeout, not by the tool (1000 s), on a loaded machine too
    (res,) = [r for r in snap.sources if r.source == "kunlunxin/xpu-smi"]
    assert not res.up and "did not finish within 1.5s: killed" in res.why
    s = scrape(exp)
    assert value(s, "xpu_cdi_exporter_source_up", source="ascend/npu-smi") == 1
    assert value(s, "xpu_cdi_card_temperature_celsius", kind=NPU, card="0") == 40
    # nothing of the tool is left running: its process group was killed
    pid = node.left_pid("xpu-smi")
    deadline = time.monotonic() + 60
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid), f"pid {pid} ({mode}) still runs"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_cards_appear_and_disappear(node: Node) -> None:
    exp = Exporter(settings(node))
    exp.step()
    assert value(scrape(exp), "xpu_cdi_card_healthy", kind=XPU, card="6") == 1
    # card 6 goes (node removed, spec regenerated): its series go
    node.host.remove_card(6)
    node.generate()
    exp.step()
    s = scrape(exp)
    cards = {dict(ls)["card"] for (n, ls), _v in s.items() if n == "xpu_cdi_card_healthy" and dict(ls)["kind"] == XPU}
    assert cards == {"0", "1", "2", "3", "4", "5", "7"}
    assert not [1 for (n, ls), _v in s.items() if dict(ls).get("card") == "6" and dict(ls).get("kind") == XPU]
    # the node is back: so are its series
    from support import fakehost
    fakehost.mknod(node.host.path("/dev/xpu6"), fakehost.XPU_MAJOR, 6)
    node.generate()
    exp.step()
    assert value(scrape(exp), "xpu_cdi_card_temperature_celsius", kind=XPU, card="6") == 51


def test_a_card_whose_node_vanished_is_unhealthy_before_the_spec_changes(node: Node) -> None:
    """The device plugin's rule: a node missing (or renumbered) makes the card unhealthy at once."""
    exp = Exporter(settings(node))
    node.host.path("/dev/xpu4").unlink()
    exp.step()
    s = scrape(exp)
    assert value(s, "xpu_cdi_card_healthy", kind=XPU, card="4") == 0
    assert value(s, "xpu_cdi_card_healthy", kind=XPU, card="3") == 1


def test_allocation_labels_from_pod_resources(node: Node, kubelet: "object") -> None:
    """Device-plugin devices (our IDs, and Huawei's plugin's Ascend910-N under its own resource
    name, recognised through GetAllocatableResources) and DRA claims (CDI names) all label their cards."""
    kubelet.set(  # type: ignore[attr-defined]
        pods=[Pod("ml", "train-0", [Container("worker", devices=[(XPU, ["0", "1"])])]),
              Pod("ml", "infer-1", [Container("server", devices=[("huawei.com/Ascend910", ["Ascend910-3"])])]),
              Pod("dra", "claimer", [Container("main", claims=[("gpu-claim", [f"{XPU}=5"])])])],
        allocatable=[(XPU, [str(i) for i in range(8)]),
                     ("huawei.com/Ascend910", [f"Ascend910-{i}" for i in range(8)])])
    exp = Exporter(settings(node, sock=str(kubelet.path)))  # type: ignore[attr-defined]
    exp.step()
    s = scrape(exp)
    assert value(s, "xpu_cdi_exporter_source_up", source="pod-resources") == 1
    l0 = labels_of(s, "xpu_cdi_card_allocated", kind=XPU, card="0")
    assert (l0["namespace"], l0["pod"], l0["container"]) == ("ml", "train-0", "worker")
    assert value(s, "xpu_cdi_card_allocated", kind=XPU, card="1", pod="train-0") == 1
    assert value(s, "xpu_cdi_card_allocated", kind=NPU, card="3", pod="infer-1", container="server") == 1
    assert value(s, "xpu_cdi_card_allocated", kind=XPU, card="5", namespace="dra", pod="claimer") == 1
    assert value(s, "xpu_cdi_card_allocated", kind=XPU, card="2", pod="") == 0
    # the readings carry the holder too: "allocated but idle" is one query
    assert value(s, "xpu_cdi_card_utilization_ratio", kind=NPU, card="3", pod="infer-1") == pytest.approx(0.3)
    allocated = sum(v for (n, _ls), v in s.items() if n == "xpu_cdi_card_allocated")
    assert allocated == 4
    # the pod ends: labels go, allocated 0
    kubelet.set(pods=[], allocatable=[(XPU, [str(i) for i in range(8)])])  # type: ignore[attr-defined]
    exp.step()
    s = scrape(exp)
    assert value(s, "xpu_cdi_card_allocated", kind=XPU, card="0") == 0
    assert labels_of(s, "xpu_cdi_card_allocated", kind=XPU, card="0")["pod"] == ""


def test_dra_all_device_and_kubelet_restart(node: Node, kubelet: "object") -> None:
    kubelet.set(pods=[Pod("dra", "all", [Container("c", claims=[("everything", [f"{NPU}=all"])])])],  # type: ignore[attr-defined]
                allocatable=[])
    exp = Exporter(settings(node, sock=str(kubelet.path)))  # type: ignore[attr-defined]
    exp.step()
    s = scrape(exp)
    assert sum(v for (n, ls), v in s.items() if n == "xpu_cdi_card_allocated" and dict(ls)["kind"] == NPU) == 8
    kubelet.stop()  # type: ignore[attr-defined]
    exp.step()
    s = scrape(exp)
    assert value(s, "xpu_cdi_exporter_source_up", source="pod-resources") == 0
    assert "xpu_cdi_card_allocated" not in names(s)  # unknown, not "free"
    kubelet.start()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while True:  # gRPC reconnects by itself (with its own backoff)
        exp.step()
        s = scrape(exp)
        if value(s, "xpu_cdi_exporter_source_up", source="pod-resources") == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert value(s, "xpu_cdi_card_allocated", kind=NPU, card="0", pod="all") == 1


def test_openmetrics_when_asked(node: Node) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse

    exp = Exporter(settings(node))
    exp.step()
    body, headers = render(exp, "application/openmetrics-text; version=1.0.0,text/plain;q=0.5", "")
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    fams = {f.name: f for f in om_parse(body.decode())}
    assert fams["xpu_cdi_card_temperature_celsius"].unit == "celsius"
    assert body.endswith(b"# EOF\n")
    plain, headers = render(exp, "text/plain", "")
    assert headers["Content-Type"].startswith("text/plain") and b"# EOF" not in plain


def test_gzip_when_asked(node: Node) -> None:
    import gzip

    exp = Exporter(settings(node))
    exp.step()
    plain, headers = render(exp, "", "")
    zipped, zheaders = render(exp, "", "deflate, gzip;q=0.5")
    assert "Content-Encoding" not in headers and zheaders["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped).split(b"# HELP process_")[0] == plain.split(b"# HELP process_")[0]
    for refused in ("gzip;q=0", "gzip; q=0.000, deflate", "*;q=0", "identity", "*;q=1, gzip;q=0"):
        assert "Content-Encoding" not in render(exp, "", refused)[1], refused
    assert render(exp, "", "*")[1]["Content-Encoding"] == "gzip"


def test_status_file(node: Node) -> None:
    import json

    exp = Exporter(settings(node))
    node.set_tool("npu-smi", mode="crash")
    exp.step()
    doc = json.loads(node.status.read_text())
    assert doc["sources"]["kunlunxin/xpu-smi"] == {"up": True, "why": ""}
    assert doc["sources"]["ascend/npu-smi"]["up"] is False and doc["cards"] == 16


def test_driver_version_per_kind_follows_an_upgrade(node: Node) -> None:
    """xpu_cdi_driver_info names each kind's driver version (the profile's version file); after
    the Ascend driver's version.info changes, the next pass names the new one, only it."""
    exp = Exporter(settings(node))
    exp.step()
    s = scrape(exp)
    assert labels_of(s, "xpu_cdi_driver_info", kind=NPU)["version"] == "24.1.0-rc2"
    assert value(s, "xpu_cdi_driver_info", kind=NPU) == 1
    assert labels_of(s, "xpu_cdi_driver_info", kind=XPU)["version"] != ""
    node.host.path("/usr/local/Ascend/driver/version.info").write_text("Version=25.0.rc1\n")
    exp.step()
    s = scrape(exp)
    assert labels_of(s, "xpu_cdi_driver_info", kind=NPU)["version"] == "25.0.0-rc1"


def test_interconnect_info_per_npu(node: Node) -> None:
    """xpu_cdi_card_interconnect_info: each NPU's hccn.conf address and HCCS domain (an 8-NPU 910B: one
    domain); a card without an address keeps its domain; the P800s, which have neither, no series."""
    from support import fakehost

    fakehost.write(node.root / "etc/hccn.conf", fakehost.hccn_conf(8, skip=(5,)))
    exp = Exporter(settings(node))
    exp.step()
    s = scrape(exp)
    for card in range(8):
        got = labels_of(s, "xpu_cdi_card_interconnect_info", kind=NPU, card=str(card))
        assert got["hccs_domain"] == "0", got
        assert got.get("device_ip", "") == ("" if card == 5 else f"192.168.1.{10 + card}"), got
    assert not [ls for (n, ls) in s if n == "xpu_cdi_card_interconnect_info" and ("kind", XPU) in ls]
