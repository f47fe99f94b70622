"""The exporter's metric families (exporter/metrics.py) through prometheus_client: the same names,
labels and HELP text as the scrape users' dashboards and deploy/monitoring/ rules were written
against (golden/, what the exporter wrote before it moved onto prometheus_client), read back by
prometheus_client's own parsers in both formats, on the venv's version and on Debian 12's 0.16."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, List

from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from xpu_cdi.exporter import metrics
from xpu_cdi.exporter.claimdevices import ClaimDevice
from xpu_cdi.node.podresources import Holder
from xpu_cdi.exporter.sources import Result

GOLDEN = Path(__file__).parent / "golden"
HOSTILE = 'a\\b"c\nd é 卡'  # a backslash, a quote, a newline, non-ASCII
PROCESS = {"process_virtual_memory_bytes", "process_resident_memory_bytes", "process_start_time_seconds",
           "process_cpu_seconds", "process_open_fds", "process_max_fds"}


def snapshot() -> metrics.Snapshot:
    """Every family with samples: two cards (one held), readings of every size, a claim's share,
    sources, a driver; label values with every character the formats escape."""
    cards = [metrics.CardState("kunlunxin.com/xpu", "0", healthy=True, uuid=HOSTILE, pci="0000:3b:00.0", model="P800",
                               holder=Holder("ml", "train-0", "w"),
                               readings={"memory_used": 34359738368.0, "memory_total": 103079215104.0,
                                         "utilization": 0.25, "temperature": 45.0, "power": 123.5}),
             metrics.CardState("huawei.com/npu", "1", healthy=False, readings={"utilization": 1e-7})]
    claim = ClaimDevice("kunlunxin.com", "ml", "c1", "0", "kunlunxin.com/xpu=0", card="kunlunxin.com/xpu=0",
                        share_id="aaaa-1", memory=32 << 30, holder=Holder("ml", "p", "c"))
    return metrics.Snapshot(cards, allocation_known=True, claim_devices=[claim],
                            sources=[Result("kunlunxin/xpu-smi", up=True, duration=0.012345),
                                     Result("pod-resources", up=False, why="no socket")],
                            drivers={"kunlunxin.com/xpu": "5.0.21+13"},
                            remedies={("evict", "kunlunxin.com/xpu", "unhealthy"): 2.0,
                                      ("restore", "kunlunxin.com/xpu", "recovered"): 1.0,
                                      ("restore", "huawei.com/npu", "held-down"): 3.0})


def collector() -> metrics.SnapshotCollector:
    c = metrics.SnapshotCollector()
    c.snapshot = snapshot()
    return c


def series(fams: Any) -> List[Any]:
    """(family, type, help, [(sample name, labels, value)]) in order."""
    return [(f.name, f.type, f.documentation, [(s.name, sorted(s.labels.items()), s.value) for s in f.samples])
            for f in fams]


def test_the_scrape_is_what_users_were_given() -> None:
    """Byte for byte the text format the exporter served before (names, labels, HELP, values) on a
    prometheus_client that writes exponents as Go does (0.16 wrote e+010: the series test below)."""
    body = generate_latest(collector()).decode()  # type: ignore[arg-type]
    golden = (GOLDEN / "scrape.txt").read_text()
    if "e+010" not in body:
        assert body == golden
    assert series(parse_text(body)) == series(parse_text(golden))


def test_openmetrics_is_what_users_were_given() -> None:
    body = openmetrics_latest(collector()).decode()  # type: ignore[arg-type]
    assert series(parse_openmetrics(body)) == series(parse_openmetrics((GOLDEN / "scrape.openmetrics.txt").read_text()))
    assert body.endswith("\n# EOF\n") and "# UNIT xpu_cdi_card_temperature_celsius celsius\n" in body


def test_prometheus_clients_parser_reads_every_family() -> None:
    reg = metrics.registry(collector())
    fams = {f.name: f for f in parse_text(generate_latest(reg).decode())}
    assert PROCESS <= set(fams) and not [n for n in fams if n.startswith("python_")]
    healthy = {tuple(sorted(s.labels.items())): s.value for s in fams["xpu_cdi_card_healthy"].samples}
    assert healthy[(("card", "0"), ("container", "w"), ("kind", "kunlunxin.com/xpu"), ("model", "P800"),
                    ("namespace", "ml"), ("pci_bus_id", "0000:3b:00.0"), ("pod", "train-0"), ("uuid", HOSTILE))] == 1
    assert [s.value for s in fams["xpu_cdi_card_memory_total_bytes"].samples] == [103079215104.0]
    assert fams["xpu_cdi_exporter_source_up"].documentation.startswith("1 when the source answered")
    empty = metrics.registry(metrics.SnapshotCollector())  # no cards yet: every family still has HELP and TYPE
    assert {f.name for f in parse_text(generate_latest(empty).decode())} == set(fams)


DEBIAN_PROBE = """
import json, sys
import prometheus_client
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families as parse
sys.path.insert(0, sys.argv[1])
from xpu_cdi.exporter import metrics
c = metrics.SnapshotCollector()
def series(fams):
    return [(f.name, f.type, f.documentation, [(s.name, sorted(s.labels.items()), s.value) for s in f.samples])
            for f in fams]
print(json.dumps({"at": prometheus_client.__file__, "empty": series(parse(generate_latest(c).decode())),
                  "golden": series(parse(open(sys.argv[2]).read()))}))
"""


def test_debian_prometheus_client_serves_the_same_families() -> None:
    """Debian 12's python3-prometheus-client 0.16 (what the .deb runs on): the collector works on it and
    its parser reads the golden scrape."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    r = subprocess.run(["/usr/bin/python3", "-c", DEBIAN_PROBE, src, str(GOLDEN / "scrape.txt")], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=""))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["at"].startswith("/usr/lib/python3/dist-packages/")
    assert [f[0] for f in doc["empty"]] == [f[0] for f in doc["golden"]]
    assert [f[2] for f in doc["empty"]] == [f[2] for f in doc["golden"]]  # the HELP texts
