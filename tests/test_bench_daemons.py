"""scripts/bench_daemons.py's judgement of the daemons' memory: one target, the same on either
library stack (issue 41), and the idle CPU beside it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_daemons  # noqa: E402

Footprints = Dict[str, Dict[str, float]]


def sample(rss: float, cpu: float = 0.05) -> Dict[str, float]:
    return {"rss_mib": rss, "hwm_mib": rss, "anon_mib": rss / 2, "grpc_mib": 4.0, "cpu_percent": cpu, "load": 1.0}


def row(fp: Footprints, title: str) -> str:
    return next(r[2] for r in bench_daemons.rows_of(fp) if r[0] == title)


def test_each_daemon_on_either_stack_is_judged_against_64_mib() -> None:
    fp = {"device-plugin/pypi": sample(63.9), "device-plugin/debian": sample(64.1),
          "dra-driver/pypi": sample(40.0), "exporter/debian": sample(64.0)}
    assert bench_daemons.RSS_TARGET == 64.0
    assert "target <= 64 MiB: met" in row(fp, "device-plugin (pypi): resident memory after start")
    assert "target <= 64 MiB: NOT met" in row(fp, "device-plugin (debian): resident memory after start")
    assert "target <= 64 MiB: met" in row(fp, "dra-driver (pypi): resident memory after start")
    assert "target <= 64 MiB: met" in row(fp, "exporter (debian): resident memory after start")  # <= is met


def test_each_daemon_has_its_figure_and_its_idle_cpu_row() -> None:
    fp = {"exporter/pypi": sample(47.25, cpu=0.2)}
    rows = bench_daemons.rows_of(fp)
    assert [(r[0], r[1]) for r in rows] == [("exporter (pypi): resident memory after start", "47.2 MiB"),
                                            ("exporter (pypi): idle CPU", "0.200 %")]
    assert "NOT met" in rows[1][2]


def test_the_churn_soak_is_flat_within_2_mib() -> None:
    flat = {"device-plugin/debian": dict(sample(40.0), soak_start_mib=40.5, soak_end_mib=42.4)}
    grew = {"exporter/pypi": dict(sample(40.0), soak_start_mib=40.5, soak_end_mib=42.6)}
    title = "device-plugin (debian): RSS across the churn soak"
    assert [r[1] for r in bench_daemons.rows_of(flat) if r[0] == title] == ["40.5 -> 42.4 MiB"]
    assert "within 2 MiB of the start: met (+1.9)" in row(flat, title)
    assert "10 kubelet restarts, 300 Allocate calls" in row(flat, title)
    assert "within 2 MiB of the start: NOT met (+2.1)" in row(grew, "exporter (pypi): RSS across the churn soak")
    assert "300 scrapes" in row(grew, "exporter (pypi): RSS across the churn soak")
    dra = {"dra-driver/pypi": dict(sample(40.0), soak_start_mib=41.0, soak_end_mib=41.2)}
    assert "240 one-card claims prepared and unprepared" in row(dra, "dra-driver (pypi): RSS across the churn soak")
    assert not [r for r in bench_daemons.rows_of({"dra-driver/pypi": sample(40.0)}) if "soak" in r[0]]
