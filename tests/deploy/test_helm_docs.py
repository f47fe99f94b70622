"""docs/helm.md's table of values against the chart's values.yaml, both ways: every value is documented
(itself, or a map above it), every documented name is a value, and each stated default is the one
values.yaml has.

How the table is read:

- the first cell names values in backticks: ``a.b``; ``.c`` after it is ``a.c``; ``<component>.x``
  is x of each DaemonSet's block that has it and no row names itself; ``resources.<container>`` is
  every key of resources;
- the second cell gives the defaults, in the same order, split at the commas outside backticks and
  parentheses (one part for all when there is one): ``empty`` (``""``, ``{}``, ``[]``) or a literal
  in backticks first (``false``, ``{}``, ``xpu-cdi.io/present: "true"``, read as YAML); anything else
  is prose, allowed only for the values of :data:`PROSE`, whose defaults a literal would not fit.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import yaml

from support import helmchart

DOC = Path(__file__).resolve().parents[2] / "docs" / "helm.md"
VALUES = helmchart.CHART / "values.yaml"
COMPONENTS = ("devicePlugin", "dra", "exporter", "labels", "runtimeWiring")
#: the values whose default the table describes in words: lists and maps too long for a cell
PROSE = {"tolerations", "dra.tolerations", "dra.deviceClasses", "resources.<container>"}
MISSING = object()


def values() -> Dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def lookup(tree: Dict[str, Any], path: str) -> Any:
    node: Any = tree
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def leaves(tree: Dict[str, Any], prefix: str = "") -> List[str]:
    """Every value of values.yaml: the paths of its scalars, lists and empty maps."""
    out = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += leaves(value, path + ".")
        else:
            out.append(path)
    return out


def split_top(cell: str) -> List[str]:
    """*cell* split at the commas outside backticks and parentheses."""
    parts, depth, quoted, cur = [], 0, False, ""
    for ch in cell:
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        if ch == "," and not quoted and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()]


def rows() -> List[Tuple[List[str], str, str]]:
    """The Values table: (names as written, with ``.x`` made whole; the default cell; the what cell)."""
    text = DOC.read_text().split("## Values", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, line
        names: List[str] = []
        for token in re.findall(r"`([^`]+)`", cells[0]):
            if token.startswith("."):
                assert names, line
                token = names[-1].rsplit(".", 1)[0] + token
            names.append(token)
        out.append((names, cells[1], cells[2]))
    return out


def expand(name: str, tree: Dict[str, Any]) -> List[str]:
    """A documented name as the values' paths it stands for (``<component>.x``: those no row names itself)."""
    if name.startswith("<component>."):
        rest = name.split(".", 1)[1]
        named = {n for names, _d, _w in rows() for n in names}
        return [f"{c}.{rest}" for c in COMPONENTS
                if lookup(tree, f"{c}.{rest}") is not MISSING and f"{c}.{rest}" not in named]
    if name.endswith(".<container>"):
        base = name.rsplit(".", 1)[0]
        return [f"{base}.{k}" for k in lookup(tree, base)]
    return [name]


def test_every_value_is_documented_and_every_documented_one_exists() -> None:
    tree = values()
    documented = set()
    for names, _d, _w in rows():
        for name in names:
            paths = expand(name, tree)
            assert paths and all(lookup(tree, p) is not MISSING for p in paths), \
                f"docs/helm.md names {name}, which values.yaml does not have"
            documented.update(paths)
    undocumented = [p for p in leaves(tree)
                    if not any(p == d or p.startswith(d + ".") for d in documented)]
    assert undocumented == [], f"values.yaml's values missing from docs/helm.md's table: {undocumented}"


def stated(part: str) -> Tuple[str, Any]:
    """("empty", None), ("literal", the YAML of the first backticked token) or ("prose", part)."""
    if part.startswith("empty"):
        return "empty", None
    m = re.match(r"`([^`]+)`", part)
    if m:
        return "literal", yaml.safe_load(m.group(1))
    return "prose", part


def test_the_stated_defaults_are_values_yamls() -> None:
    tree = values()
    prose, wrong = set(), []
    for names, cell, _w in rows():
        parts = split_top(cell) if len(names) > 1 else [cell]
        assert len(parts) in (1, len(names)), f"{names}: {len(parts)} defaults for {len(names)} values: {cell}"
        for name, part in zip(names, parts * len(names) if len(parts) == 1 else parts):
            how, literal = stated(part)
            if how == "prose":
                prose.add(name)
                continue
            for path in expand(name, tree):
                actual = lookup(tree, path)
                ok = actual in ("", {}, [], None) if how == "empty" else actual == literal
                if not ok:
                    wrong.append(f"{path}: docs say {part!r}, values.yaml has {actual!r}")
    assert wrong == []
    assert prose == PROSE, "defaults in words: only where a literal would not fit"


def test_the_containers_resources_are_named() -> None:
    """The resources row names each container that has a resources entry."""
    (what,) = [w for names, _d, w in rows() if names == ["resources.<container>"]]
    assert set(re.findall(r"`([a-z-]+)`", what)) == set(values()["resources"])


@pytest.mark.parametrize("mutation", ["drop", "add", "default"])
def test_a_mismatch_is_caught(mutation: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each check fails on a table one edit away from the values."""
    text = DOC.read_text()
    if mutation == "drop":
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("| `devicePlugin.resourceNaming`"))
    elif mutation == "add":
        text = text.replace("| `devicePlugin.resourceNaming` |", "| `devicePlugin.resourceNamin` |")
    else:
        text = text.replace("| `devicePlugin.resourceNaming` | `kind` |", "| `devicePlugin.resourceNaming` | `model` |")
    doc = tmp_path / "helm.md"
    doc.write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "DOC", doc)
    check = test_the_stated_defaults_are_values_yamls if mutation == "default" else \
        test_every_value_is_documented_and_every_documented_one_exists
    with pytest.raises(AssertionError, match="resourceNamin"):
        check()
