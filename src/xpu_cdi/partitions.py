"""A profile's partition templates (Ascend vNPU), from ``profiles/partitions/<profile>.yaml``.

Data, validated by ``schemas/partitions.schema.json``; the facts and their sources are in
docs/vendors.md ("Ascend vNPU templates").  What a template takes of its chip is read here,
once, for whoever partitions a chip (the DRA driver, doctor, the tests' stand-in ``npu-smi``).
The YAML files are the source; ``profiles/partitions/builtin.json`` holds their documents
(``scripts/render-profiles.py`` writes it, a test compares), so that no node daemon imports a
YAML parser for them (PyYAML is ~1.1 MiB of a daemon's memory; issue 30).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import profiles as _builtin_package
from . import schema_files
from .errors import ProfileError

if TYPE_CHECKING:
    from fractions import Fraction

SCHEMA = "partitions.schema.json"


@dataclass(frozen=True)
class Template:
    """One template: what a partition made from it takes of its chip."""

    name: str
    aicore: int
    aicpu: Optional[int] = None
    memory_share: Optional[Fraction] = None  # of the chip's memory
    memory_mib: Optional[int] = None
    media: Dict[str, int] = field(default_factory=dict)
    dvpp: Optional[str] = None  # "all" / "none", where the name says so


@dataclass(frozen=True)
class ChipModel:
    """A chip model, its totals and its templates."""

    model: str
    aicore: int
    vnpu_ids: Tuple[int, int, int]  # first, stride (per physical id), count
    templates: Dict[str, Template]
    match: Optional[str] = None
    series: str = ""
    aicpu: Optional[int] = None
    memory_mib: Optional[int] = None
    media: Dict[str, int] = field(default_factory=dict)
    vgroups: Optional[int] = None
    min_group_aicore: Optional[int] = None

    def ids_of(self, phy_id: int) -> range:
        """The vNPU ids ``-v`` takes on the chip of physical id *phy_id*."""
        first, stride, count = self.vnpu_ids
        return range(first + stride * phy_id, first + stride * phy_id + count)

    def memory_of(self, template: Template, chip_mib: Optional[int] = None) -> Optional[int]:
        """MiB a partition of *template* takes, for a chip of *chip_mib* (default: the model's)."""
        if template.memory_mib is not None:
            return template.memory_mib
        total = chip_mib if chip_mib is not None else self.memory_mib
        if template.memory_share is None or total is None:
            return None
        return int(total * template.memory_share)


@dataclass(frozen=True)
class Partitions:
    """The templates of one profile's chips."""

    profile: str
    tool: str
    chips: Tuple[ChipModel, ...]

    def vnpu_parent(self, vnpu_id: int) -> Optional[int]:
        """The physical id of the chip a vNPU of id *vnpu_id* was carved from, or None: not a vNPU id."""
        for c in self.chips:
            first, stride, count = c.vnpu_ids
            if vnpu_id >= first and (vnpu_id - first) % stride < count:
                return (vnpu_id - first) // stride
        return None

    def chip(self, name: str) -> Optional[ChipModel]:
        """The model of a chip the tool names *name* (first match wins), or the model called *name*."""
        for c in self.chips:
            if c.match and re.fullmatch(c.match, name):
                return c
        return next((c for c in self.chips if c.model == name), None)


def _template(t: Dict[str, Any]) -> Template:
    from fractions import Fraction  # lazy: fractions and decimal, ~0.3 MiB of every node daemon, for Ascend only

    mem = t.get("memory") or {}
    return Template(t["name"], t["aicore"], t.get("aicpu"),
                    Fraction(mem["share"]) if "share" in mem else None, mem.get("mib"),
                    dict(t.get("media") or {}), t.get("dvpp"))


def parse(data: Any, where: str, trusted: bool = False) -> Partitions:
    """*trusted*: skip the schema (the shipped files: the test suite validates them, and importing
    jsonschema costs ~80 ms).  Raises ProfileError: a schema violation, or a template larger than its
    chip (one line)."""
    problems = [] if trusted else schema_files.errors(SCHEMA, data)
    if problems:
        raise ProfileError(f"{where}: {problems[0]}")
    chips = []
    for c in data["chips"]:
        templates: Dict[str, Template] = {}
        for raw in c["templates"]:
            t = _template(raw)
            if t.name in templates:
                raise ProfileError(f"{where}: chip {c['model']}: template {t.name} given twice")
            limits = {"aicore": c["aicore"], "aicpu": c.get("aicpu"), "memory": c.get("memory_mib"),
                      **{f"media {k}": v for k, v in (c.get("media") or {}).items()}}
            takes = {"aicore": t.aicore, "aicpu": t.aicpu, "memory": t.memory_mib,
                     **{f"media {k}": v for k, v in t.media.items()}}
            over = [k for k, v in takes.items() if v is not None and limits.get(k) is not None and v > limits[k]]
            if t.memory_share is not None and t.memory_share > 1:
                over.append("memory share")
            if over:
                raise ProfileError(f"{where}: chip {c['model']}: template {t.name} takes more {', '.join(over)} "
                                   f"than the chip has")
            templates[t.name] = t
        ids = c["vnpu_ids"]
        chips.append(ChipModel(c["model"], c["aicore"], (ids["first"], ids["stride"], ids["count"]), templates,
                               c.get("match"), c.get("series", ""), c.get("aicpu"), c.get("memory_mib"),
                               dict(c.get("media") or {}), c.get("vgroups"), c.get("min_group_aicore")))
    return Partitions(data["profile"], data["tool"], tuple(chips))


BUILTIN_DIR = os.path.join(_builtin_package.DIR, "partitions")
BUILTIN_JSON = os.path.join(BUILTIN_DIR, "builtin.json")  # the YAML files' documents, by profile


def builtin_names() -> List[str]:
    """The profiles with shipped templates (a YAML file each)."""
    return _builtin_package.yaml_names(BUILTIN_DIR)


def render_builtin_json() -> str:
    """What ``profiles/partitions/builtin.json`` must hold: each YAML file's document by profile."""
    import yaml  # the source files: read when rendering, never by a daemon

    return _builtin_package.render_json(BUILTIN_DIR, yaml.safe_load)


@functools.lru_cache(maxsize=None)  # shipped files: the daemons ask at every spec change
def builtin(profile: str) -> Optional[Partitions]:
    """The shipped templates of *profile*, or None when it has none."""
    doc = _builtin_package.documents(BUILTIN_DIR).get(profile)
    return None if doc is None else parse(doc, f"<builtin>/partitions/{profile}.yaml", trusted=True)
