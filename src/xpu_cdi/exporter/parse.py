"""A tool's output -> one record per card, by the profile's rules (regex or columns).

A record is a dict of the fields the rule names (``index``, ``pci``,
``uuid``, ``model`` and the readings) to the text the tool printed.  Numbers
become floats in the metric's base unit; anything that is not a number
(``NA``, ``N/A``, ``-``) is no reading: absent, never 0.
"""

from __future__ import annotations

import math
import re
from typing import Dict, List, Optional

from ..model import READING_UNITS, MetricSource

Record = Dict[str, str]
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_PCI = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def records(source: MetricSource, text: str) -> List[Record]:
    """The records of *text* under *source*'s rule, in output order."""
    out: List[Record] = []
    if source.regex:
        rx = re.compile(source.regex, re.MULTILINE)
        # a field may have several groups (index, index__chip): the last that matched wins
        groups = sorted(rx.groupindex.items(), key=lambda kv: kv[1])
        for m in rx.finditer(text):
            rec: Record = {}
            for name, number in groups:
                value = m.group(number)
                if value is not None and value.strip():
                    rec[name.partition("__")[0]] = value.strip()
            out.append(rec)
        return out
    line_rx = re.compile(source.line) if source.line else None
    split = re.compile(source.separator).split if source.separator else str.split
    for line in text.splitlines():
        if line_rx is not None and not line_rx.search(line):
            continue
        cols = split(line.strip())
        if not cols:
            continue
        rec = {name: cols[i].strip() for name, i in source.columns if i < len(cols)}
        if rec:
            out.append(rec)
    return out


def number(reading: str, raw: Optional[str], unit: str) -> Optional[float]:
    """*raw* as a float in *reading*'s base unit, or None when it is not a finite number."""
    if raw is None:
        return None
    raw = raw.strip().rstrip("%")
    if not _NUMBER.match(raw):
        return None
    value = float(raw) * READING_UNITS[reading][unit]
    return value if math.isfinite(value) else None


def pci_address(raw: Optional[str]) -> Optional[str]:
    """A PCI address as sysfs writes it (``0000:3b:00.0``), from ``0000:3B:00.0``, ``00000000:3b:00.0``
    or ``3b:00.0``; None when *raw* is not one."""
    m = _PCI.match((raw or "").strip())
    if not m:
        return None
    domain = int(m.group(1) or "0", 16)
    return f"{domain:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


def index_of(raw: Optional[str]) -> Optional[int]:
    text = (raw or "").strip()
    return int(text) if text.isdigit() else None
