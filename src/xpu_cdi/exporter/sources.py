"""One pass of a profile's reading sources over the cards of its kind.

A source is up when it answered: a tool that ran and printed at least one
record the profile's rule matches, or files of which at least one could be
read.  A reading a source does not give is simply not in the result (the
metric is then absent for that card); a source that fails gives nothing and
says why in one line.  Sources never raise: one bad source never stops the
others.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..node.inventory import SpecCard
from ..hostfs import host_path
from ..model import MetricSource
from . import parse, tool

CardKey = Tuple[str, str]  # (kind, CDI device name)


@dataclass
class Result:
    """What one source gave in one pass."""

    source: str  # "<profile>/<name>"
    up: bool
    why: str = ""  # when down: what went wrong
    duration: float = 0.0
    readings: Dict[CardKey, Dict[str, float]] = field(default_factory=dict)  # reading -> base-unit value
    identity: Dict[CardKey, Dict[str, str]] = field(default_factory=dict)  # uuid, model, pci the source told


@dataclass(frozen=True)
class Roots:
    driver: str = "/"
    sysfs: str = "/"
    proc: str = "/"


def _template(path: str, card: SpecCard) -> Optional[str]:
    """*path* with the card's ``{index}`` and ``{pci}``; None when it needs one the card has not."""
    if "{index}" in path and card.index is None or "{pci}" in path and not card.pci:
        return None
    return path.replace("{index}", str(card.index)).replace("{pci}", card.pci or "")


def _read_number_file(path: str) -> Optional[str]:
    matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    for p in matches:
        try:
            with open(p, "rb") as f:
                return f.read(128).decode("ascii", "replace").strip()
        except OSError:
            continue
    return None


def read_files(name: str, source: MetricSource, kind: str, cards: Sequence[SpecCard], roots: Roots) -> Result:
    """Every card's files of *source*."""
    start = time.monotonic()
    out = Result(name, up=False)
    tried: List[str] = []
    for card in cards:
        for mf in source.files:
            path = _template(mf.path, card)
            if path is None:
                continue
            root = roots.proc if path.startswith("/proc/") else roots.sysfs
            full = host_path(root, path)
            tried.append(full)
            raw = _read_number_file(full)
            value = parse.number(mf.reading, raw, mf.unit)
            if raw is not None:
                out.up = True
            if value is not None:
                out.readings.setdefault((kind, card.id), {})[mf.reading] = value
    if not out.up:
        out.why = (f"none of its files can be read (e.g. {tried[0]})" if tried else
                   "no card has the index or PCI address its file paths need")
    out.duration = time.monotonic() - start
    return out


def _card_for(source: MetricSource, rec: parse.Record, by_index: Dict[int, SpecCard],
              by_pci: Dict[str, SpecCard]) -> Optional[SpecCard]:
    if source.card == "pci":
        addr = parse.pci_address(rec.get("pci"))
        return by_pci.get(addr) if addr else None
    idx = parse.index_of(rec.get("index"))
    return by_index.get(idx) if idx is not None else None


def read_tool(name: str, source: MetricSource, kind: str, cards: Sequence[SpecCard], roots: Roots) -> Result:
    """One run of *source*'s tool, its records matched to *cards*."""
    start = time.monotonic()
    argv = (host_path(roots.driver, source.argv[0]),) + tuple(source.argv[1:])
    try:
        if not os.path.isfile(argv[0]):
            raise tool.ToolError(f"{argv[0]} is not installed")
        text = tool.run(argv, source.env, source.timeout, source.max_output)
    except tool.ToolError as err:
        return Result(name, up=False, why=str(err), duration=time.monotonic() - start)
    recs = parse.records(source, text)
    out = Result(name, up=bool(recs), duration=time.monotonic() - start)
    if not recs:
        first = " ".join(text.strip().splitlines()[0].split())[:120] if text.strip() else "(nothing)"
        out.why = f"{argv[0]} printed nothing the profile's rule reads (first line: {first})"
        return out
    units = dict(source.units)
    by_index = {c.index: c for c in cards if c.index is not None}
    by_pci = {c.pci: c for c in cards if c.pci}
    for rec in recs:
        card = _card_for(source, rec, by_index, by_pci)
        if card is None:
            continue
        key = (kind, card.id)
        for reading, unit in units.items():
            value = parse.number(reading, rec.get(reading), unit)
            if value is not None:
                out.readings.setdefault(key, {})[reading] = value
        ident = {k: rec[k] for k in ("uuid", "model") if rec.get(k) and rec[k].upper() not in ("NA", "N/A", "-")}
        addr = parse.pci_address(rec.get("pci"))
        if addr:
            ident["pci"] = addr
        if ident:
            out.identity.setdefault(key, {}).update(ident)
    return out


def read(name: str, source: MetricSource, kind: str, cards: Sequence[SpecCard], roots: Roots) -> Result:
    """*source* over *cards*, whichever kind of source it is; never raises."""
    try:
        if source.argv:
            return read_tool(name, source, kind, cards, roots)
        return read_files(name, source, kind, cards, roots)
    except Exception as err:  # noqa: BLE001 - one bad source never stops the others
        return Result(name, up=False, why=f"internal error: {type(err).__name__}: {err}")
