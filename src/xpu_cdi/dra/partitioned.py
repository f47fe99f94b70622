"""A partitionable chip as the driver publishes it: its counters, the chip consuming all of them,
and a device per partition a template could make, each consuming what its template takes.

Every budget the vendor's tool checks before it creates a vNPU is a counter (npu-smi's
``check_create_vnpu_param``: AI cores, AI CPUs, and on 310P/910B the media engines VPC, VENC,
VDEC, JPEGD, JPEGE; docs/vendors.md), with memory (in MiB where the vendor gives MiB, else in parts
of the chip: the 310P's templates take 1/8, 1/4, 1/2 of it, so the chip has 8 parts).  A budget
is published only where the data gives the chip's total and every template's take; the
scheduler then never allocates a mix the tool refuses (two 310P ``vir04`` take 8 AI CPUs of 7).
The 310P's vGroups (at most 4, of at least 2 AI cores each, two vir01 sharing one) never bind
before its 8 AI cores do.  A template gets as many devices as fit the chip alone (7 ``vir01``,
3 ``vir02``, 1 ``vir04`` ...); the counters decide which mix the scheduler may allocate.  One set
per chip of at most 8 counters, one consumption per device: within resource.k8s.io/v1's limits.

Pure: the chips' devices, the chips as the vendor's tool names them, the partition data in; the
devices to publish out.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Dict, Mapping, Optional, Tuple

from ..partitions import ChipModel, Partitions
from ..node.vnpu import ToolChip
from .shares import format_quantity
from .slices import DeviceInfo

AICORE = "aicore"
AICPU = "aicpu"
MEMORY = "memory"  # MiB, as a quantity
MEMORY_PARTS = "memory-parts"  # parts of the chip's memory


def takes(model: ChipModel) -> Tuple[Dict[str, int], Dict[str, Dict[str, int]]]:
    """The chip's counters and what each template takes of them (whole numbers)."""
    ts = model.templates
    total = {AICORE: model.aicore}
    per = {name: {AICORE: t.aicore} for name, t in ts.items()}
    if model.aicpu is not None and all(t.aicpu is not None for t in ts.values()):
        total[AICPU] = model.aicpu
        for name, t in ts.items():
            per[name][AICPU] = t.aicpu or 0
    for engine, n in sorted(model.media.items()):  # the media engines, where every template says its take
        if n > 0 and all(engine in t.media for t in ts.values()):
            total[engine] = n
            for name, t in ts.items():
                per[name][engine] = t.media[engine]
    mib = {name: model.memory_of(t) for name, t in ts.items()}
    shares = [t.memory_share for t in ts.values()]
    if model.memory_mib is not None and all(v is not None for v in mib.values()):
        total[MEMORY] = model.memory_mib
        for name, v in mib.items():
            per[name][MEMORY] = int(v or 0)
    elif shares and all(s is not None for s in shares):  # Fractions: no fractions import here
        parts = math.lcm(*(s.denominator for s in shares if s is not None))
        total[MEMORY_PARTS] = parts
        for name, t in ts.items():
            per[name][MEMORY_PARTS] = int((t.memory_share or 0) * parts)
    return total, per


def _value(counter: str, n: int) -> str:
    return format_quantity(n << 20) if counter == MEMORY else str(n)


def label(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def expand(devices: Mapping[str, DeviceInfo], tool: Mapping[int, ToolChip],
           parts: Optional[Partitions]) -> Dict[str, DeviceInfo]:
    """*devices* with each chip the tool names (by index) and the data knows made partitionable:
    the chip owning and consuming its counter set, followed by its template devices."""
    out: Dict[str, DeviceInfo] = {}
    for name, d in devices.items():
        chip = tool.get(d.index) if d.index is not None and not d.parent else None  # a static vNPU is no chip
        model = parts.chip(chip.name) if parts is not None and chip is not None else None
        if chip is None or model is None or not model.templates:
            out[name] = d
            continue
        total, per = takes(model)
        set_name = f"chip-{label(name)}"
        ids = model.ids_of(chip.phy)
        counters = tuple((k, _value(k, v)) for k, v in sorted(total.items()))
        out[name] = dataclasses.replace(d, counters=(set_name, counters))
        for tname, take in per.items():
            fit = min(total[k] // v for k, v in take.items() if v) if any(take.values()) else 0
            for n in range(fit):
                dev = f"{label(name)}-{label(tname)}-{n}"
                out[dev] = dataclasses.replace(
                    d, name=dev, cdi="", uuid="", memory="", template=tname, parent=name,
                    consumes=(set_name, tuple((k, _value(k, v)) for k, v in sorted(take.items()) if v)),
                    tool_ids=(chip.card, chip.chip, ids.start, ids.stop))
    return out
