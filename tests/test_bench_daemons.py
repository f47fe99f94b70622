"""scripts/bench_daemons.py's judgement of the daemons' memory: the targets as they are on the
shipped stack, and on another stack the same room above that stack's gRPC floor."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_daemons  # noqa: E402

Footprints = Dict[str, Dict[str, float]]


def sample(rss: float) -> Dict[str, float]:
    return {"rss_mib": rss, "hwm_mib": rss, "anon_mib": rss / 2, "grpc_mib": 4.0, "cpu_percent": 0.05, "load": 1.0}


def footprints(plugin_wheels: float, floor_wheels: float, floor_debian: float) -> Footprints:
    return {"floor-tls/pypi": sample(floor_wheels), "device-plugin/pypi": sample(plugin_wheels),
            "floor-tls/debian": sample(floor_debian), "device-plugin/debian": sample(34.0)}


def rss_row(fp: Footprints, stack: str) -> str:
    title = f"device-plugin ({stack}): resident memory after start"
    return next(r[2] for r in bench_daemons.rows_of(fp) if r[0] == title)


def test_the_shipped_stack_keeps_the_target_as_it_is() -> None:
    fp = footprints(36.0, 33.0, 30.5)
    assert bench_daemons.rss_target(fp, "device-plugin", "debian")[0] == 35.0
    assert "target <= 35 MiB: met" in rss_row(fp, "debian")
    assert "3.5 above the gRPC floor" in rss_row(fp, "debian")


def test_another_stack_gets_the_same_room_above_its_floor() -> None:
    fp = footprints(36.0, 33.0, 30.5)
    target, how = bench_daemons.rss_target(fp, "device-plugin", "pypi")
    assert abs(target - 37.5) < 1e-9 and "35 + 2.5" in how
    assert "met" in rss_row(fp, "pypi") and "NOT met" not in rss_row(fp, "pypi")
    over = footprints(38.0, 33.0, 30.5)  # 5.0 above its floor where the shipped stack has room for 4.5
    assert "NOT met" in rss_row(over, "pypi")


def test_without_the_shipped_stack_the_target_is_as_it_is() -> None:
    fp = {"floor-tls/pypi": sample(33.0), "device-plugin/pypi": sample(36.0)}
    assert bench_daemons.rss_target(fp, "device-plugin", "pypi")[0] == 35.0
    assert "NOT met" in rss_row(fp, "pypi")


def test_the_dra_driver_is_judged_against_its_floor() -> None:
    fp = {"floor-tls/pypi": sample(37.0), "floor-tls/debian": sample(32.5), "dra-driver/pypi": sample(49.0)}
    assert abs(bench_daemons.rss_target(fp, "dra-driver", "pypi")[0] - 49.5) < 1e-9
