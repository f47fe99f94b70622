"""dra/partitioned.py's counters against the vendor's tool: every budget npu-smi checks before it
creates a vNPU is a counter, so a mix of templates fits the counters exactly when the stand-in (written
from npu-smi's and DCMI's source, tests/support/npusmi.py) would make it; the vendor's recommended
310P mixes fit, the ones it refuses do not, named by the counter that runs out; within the API's limits."""

from __future__ import annotations

import itertools
import re
from typing import Dict, List, Sequence

import pytest

from support import npusmi
from xpu_cdi import partitions
from xpu_cdi.dra import partitioned

LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# the names npu-smi prints, with the memory DCMI reports, for each model the stand-in knows
CHIPS = [("310P3", 24576), ("310P3", 49152), ("910B2", 65536), ("910B3", 65536), ("910B4", 32768),
         ("910B4-1", 65536), ("910", 32768)]


@pytest.fixture(scope="module")
def ascend() -> partitions.Partitions:
    parts = partitions.builtin("ascend")
    assert parts is not None
    return parts


def short(model: partitions.ChipModel, combo: Sequence[str]) -> List[str]:
    """The counters a mix of templates overdraws on a chip of *model*."""
    total, per = partitioned.takes(model)
    return [k for k in total if sum(per[t].get(k, 0) for t in combo) > total[k]]


def refused_by_tool(name: str, memory: int, combo: Sequence[str]) -> bool:
    """Whether npu-smi refuses some create of *combo* made in turn (its budgets add up: check_create_vnpu_param
    against DCMI's free resource, then the driver's memory)."""
    chip = npusmi.chip_of(name, memory)
    assert chip is not None
    table, left = npusmi.TABLES[chip.table], dict(chip.total._asdict())
    keys = ["aic", "mem"] + (["aicpu"] if chip.total.aicpu >= 0 else []) + \
        (list(npusmi.MEDIA) if chip.family in ("310P", "910B") else [])
    for t in combo:
        if t not in table:
            return True
        for k in keys:
            left[k] -= getattr(table[t], k)
        if any(left[k] < 0 for k in keys):
            return True
    return False


def test_counters_within_the_apis_limits(ascend: partitions.Partitions) -> None:
    """resource.k8s.io/v1: at most 32 counters a set (one set a chip), names DNS labels, one consumption a device."""
    for model in ascend.chips:
        total, per = partitioned.takes(model)
        assert 1 <= len(total) <= 32 and all(LABEL.match(k) for k in total), model.model
        assert all(set(p) == set(total) for p in per.values()), model.model


@pytest.mark.parametrize("name,memory", CHIPS)
def test_counters_refuse_exactly_what_the_tool_refuses(ascend: partitions.Partitions, name: str,
                                                        memory: int) -> None:
    """Every mix of the chip's templates up to what its AI cores hold: the counters overdraw iff the tool
    refuses; and every template the data ships is one the tool makes."""
    model = ascend.chip(name)
    assert model is not None
    table = npusmi.TABLES[npusmi.chip_of(name, memory).table]  # type: ignore[union-attr]
    assert set(model.templates) == set(table), name
    smallest = min(t.aicore for t in model.templates.values())
    checked = 0
    for n in range(1, model.aicore // smallest + 2):
        for combo in itertools.combinations_with_replacement(sorted(model.templates), n):
            assert bool(short(model, combo)) == refused_by_tool(name, memory, combo), (name, combo, short(model, combo))
            checked += 1
    assert checked > 10


@pytest.mark.parametrize("combo", [["vir04", "vir04_3c"], ["vir04", "vir02", "vir02_1c"], ["vir01"] * 7,
                                   ["vir04_3c_ndvpp", "vir04_4c_dvpp"]])
def test_vendors_310p_mixes_fit(ascend: partitions.Partitions, combo: List[str]) -> None:
    """mind-cluster's virtual-instance guide recommends vir04+vir04_3c and vir04+vir02+vir02_1c."""
    assert short(ascend.chip("310P3"), combo) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("combo,counters", [
    (["vir04", "vir04"], ["aicpu", "venc"]),  # 8 AI CPUs of 7 (npu-smi: unallocated AICPU number:3)
    (["vir01"] * 8, ["aicpu"]),
    (["vir04_4c_dvpp", "vir02"], ["vpc", "vdec", "jpegd", "jpege", "venc"]),
    (["vir04_4c_dvpp", "vir01"], ["vpc", "vdec", "jpegd", "jpege"]),
    (["vir04_3c_ndvpp", "vir04_3c_ndvpp", "vir01"], ["aicore", "memory-parts"]),
])
def test_refused_310p_mixes_overdraw_a_named_counter(ascend: partitions.Partitions, combo: List[str],
                                                      counters: List[str]) -> None:
    assert sorted(short(ascend.chip("310P3"), combo)) == sorted(counters)  # type: ignore[arg-type]


def test_310p_devices_per_template(ascend: partitions.Partitions) -> None:
    """A template gets as many devices as fit the chip alone: AI CPUs and VENC bind before AI cores."""
    total, per = partitioned.takes(ascend.chip("310P3"))  # type: ignore[arg-type]
    assert total == {"aicore": 8, "aicpu": 7, "memory-parts": 8, "vpc": 12, "vdec": 12, "jpegd": 16, "jpege": 8,
                     "venc": 3}
    fit: Dict[str, int] = {t: min(total[k] // v for k, v in take.items() if v) for t, take in per.items()}
    assert fit == {"vir01": 7, "vir02": 3, "vir02_1c": 4, "vir04": 1, "vir04_3c": 2, "vir04_3c_ndvpp": 2,
                   "vir04_4c_dvpp": 1}
