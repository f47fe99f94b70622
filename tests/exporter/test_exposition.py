"""The exporter's own exposition (exporter/exposition.py) against prometheus_client, the library it
replaced: the same families written by both are the same bytes in both formats (the venv's 0.26) or
the same series (Debian's 0.16, whose large exponents read ``e+010``), read by prometheus_client's
parsers; the Accept negotiation as its ``choose_encoder``; the process_* series as its
ProcessCollector gives them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
from prometheus_client import ProcessCollector
from prometheus_client import generate_latest as prom_text
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as prom_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from xpu_cdi.exporter import exposition, metrics
from xpu_cdi.exporter.claimdevices import ClaimDevice
from xpu_cdi.exporter.exposition import Family
from xpu_cdi.exporter.podresources import Holder
from xpu_cdi.exporter.sources import Result

HOSTILE = 'a\\b"c\nd é 卡'  # a backslash, a quote, a newline, non-ASCII


class Registry:
    """Our families as prometheus_client collects them: what the old SnapshotCollector built."""

    def __init__(self, families: List[Family]) -> None:
        self.families = families

    def collect(self) -> Any:
        for f in self.families:
            cls = CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily
            kw = {"unit": f.unit} if f.unit else {}
            m = cls(f.name, f.help, labels=f.labels, **kw)
            for values, value in f.samples:
                m.add_metric(list(values), value)
            yield m


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
                            drivers={"kunlunxin.com/xpu": "5.0.21+13"})


def families() -> List[Family]:
    fams = metrics.families(snapshot())
    odd = Family("xpu_cdi_test_odd", 'help with \\ and " and\na newline', labels=["b", "a"])
    for v in (float("nan"), float("inf"), float("-inf"), -2e6, 1e6, 999999.0, 0.1 + 0.2, 0.0):
        odd.add([HOSTILE, str(v)], v)
    counter = Family("xpu_cdi_test_things", "A counter.", kind="counter")
    counter.add([], 7.0)
    return fams + [odd, counter, Family("xpu_cdi_test_empty_bytes", "No samples.", labels=["x"], unit="bytes")]


def series(fams: Any) -> List[Any]:
    """(family, type, unit, help, [(sample name, labels, value)]) in order; NaN made comparable."""
    return [(f.name, f.type, getattr(f, "unit", ""), f.documentation,
             [(s.name, sorted(s.labels.items()), "NaN" if s.value != s.value else s.value) for s in f.samples])
            for f in fams]


def test_text_is_prometheus_clients_bytes() -> None:
    fams = families()
    assert exposition.text(fams) == prom_text(Registry(fams))  # type: ignore[arg-type]


def test_openmetrics_is_prometheus_clients_bytes() -> None:
    fams = families()
    ours = exposition.openmetrics(fams)
    assert ours == prom_openmetrics(Registry(fams))  # type: ignore[arg-type]
    assert ours.endswith(b"\n# EOF\n") and b"# UNIT xpu_cdi_card_temperature_celsius celsius\n" in ours


def test_both_formats_parse_to_the_families_written() -> None:
    fams = families()
    text, om = series(parse_text(exposition.text(fams).decode())), series(parse_openmetrics(
        exposition.openmetrics(fams).decode()))
    want = series(Registry(fams).collect())
    assert [s[3:] for s in text] == [w[3:] for w in want]  # the text format has no units
    assert om == want
    first = dict(((n, tuple(ls)), v) for n, ls, v in om[0][4])
    assert first[("xpu_cdi_card_healthy", (("card", "0"), ("container", "w"), ("kind", "kunlunxin.com/xpu"),
                                           ("model", "P800"), ("namespace", "ml"), ("pci_bus_id", "0000:3b:00.0"),
                                           ("pod", "train-0"), ("uuid", HOSTILE)))] == 1.0


DEBIAN_PROBE = """
import json, sys
import prometheus_client
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as om_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as text_parse
doc = json.load(open(sys.argv[1]))
class Registry:
    def collect(self):
        for name, kind, doc_, labels, unit, samples in doc["families"]:
            cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            m = cls(name, doc_, labels=labels, **({"unit": unit} if unit else {}))
            for values, value in samples:
                m.add_metric(values, value)
            yield m
def series(fams):
    return repr([(f.name, f.type, f.unit, f.documentation, [(s.name, sorted(s.labels.items()),
                  "NaN" if s.value != s.value else s.value) for s in f.samples]) for f in fams])
json.dump({"at": prometheus_client.__file__,
           "text": [series(text_parse(doc["text"])), series(text_parse(generate_latest(Registry()).decode()))],
           "om": [series(om_parse(doc["om"])), series(om_parse(om_latest(Registry()).decode()))]}, sys.stdout)
"""


def test_debian_prometheus_client_reads_the_same_series(tmp_path: Path) -> None:
    """Debian 12's python3-prometheus-client 0.16 (the .deb's users' parser) reads our scrape as the
    same series as its own writer's, in both formats."""
    import json

    fams = families()
    (tmp_path / "in.json").write_text(json.dumps({
        "families": [(f.name, f.kind, f.help, f.labels, f.unit, [(list(v), x) for v, x in f.samples]) for f in fams],
        "text": exposition.text(fams).decode(), "om": exposition.openmetrics(fams).decode()}))
    r = subprocess.run(["/usr/bin/python3", "-c", DEBIAN_PROBE, str(tmp_path / "in.json")], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=""))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["at"].startswith("/usr/lib/python3/dist-packages/")
    assert doc["text"][0] == doc["text"][1] and doc["om"][0] == doc["om"][1]
    assert "103079215104.0" in doc["om"][0] and repr(HOSTILE) in doc["om"][0]  # parsed: a number, the label


# Accept headers real scrapers send, and what prometheus_client's choose_encoder answers
PROMETHEUS_3 = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
                "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,"
                "text/plain;version=0.0.4;q=0.2,*/*;q=0.1")
PROMETHEUS_2 = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


@pytest.mark.parametrize("accept, openmetrics", [
    ("", False), ("*/*", False), ("text/plain", False), ("text/plain; version=0.0.4", False),
    (PROMETHEUS_2, True), (PROMETHEUS_3, True), ("application/openmetrics-text", True),
    ("application/openmetrics-text; version=1.0.0", True), (" Application/OpenMetrics-Text ;version=1.0.0", True),
    ("application/openmetrics-text; version=0.0.1", False), ("application/openmetrics-text; version=x.y", False),
    ("application/openmetrics-text; version=0.0.1, application/openmetrics-text", True),
    ("text/html,application/json", False), (";;,,;", False),
])
def test_the_format_from_accept(accept: str, openmetrics: bool) -> None:
    write, content_type = exposition.negotiate(accept)
    assert (write, content_type) == ((exposition.openmetrics, exposition.OPENMETRICS) if openmetrics else
                                     (exposition.text, exposition.TEXT))
    assert content_type in ("text/plain; version=0.0.4; charset=utf-8",
                            "application/openmetrics-text; version=1.0.0; charset=utf-8")


def test_process_series_as_prometheus_clients_process_collector() -> None:
    theirs = {m.name: (m.type, m.documentation, m.samples[0].value) for m in ProcessCollector(registry=None).collect()}
    ours = {f.name: (f.kind, f.help, f.samples[0][1]) for f in metrics.Process().families()}
    assert set(ours) == set(theirs) == {"process_virtual_memory_bytes", "process_resident_memory_bytes",
                                        "process_start_time_seconds", "process_cpu_seconds", "process_open_fds",
                                        "process_max_fds"}
    for name, (kind, doc, value) in ours.items():
        assert (kind, doc) == theirs[name][:2], name
    assert ours["process_start_time_seconds"][2] == pytest.approx(theirs["process_start_time_seconds"][2], abs=0.02)
    assert ours["process_max_fds"][2] == theirs["process_max_fds"][2]
    assert abs(ours["process_open_fds"][2] - theirs["process_open_fds"][2]) <= 1  # the listing's own fd
    assert ours["process_resident_memory_bytes"][2] == pytest.approx(theirs["process_resident_memory_bytes"][2],
                                                                     rel=0.05)
    assert 0 < ours["process_cpu_seconds"][2] < 10 ** 6


def test_no_proc_no_process_series(tmp_path: Path) -> None:
    assert metrics.Process(str(tmp_path)).families() == []


def test_the_writer_imports_nothing_of_prometheus_client() -> None:
    r = subprocess.run([sys.executable, "-c", "import sys, xpu_cdi.exporter.daemon; "
                        "print(sorted(m for m in sys.modules if m.startswith('prometheus_client')))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
