"""`validate`: our strict schema plus the reference library's semantic rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support import upstream_schema
from xpu_cdi.cdi import validate

DATA = Path(__file__).resolve().parent.parent / "data" / "schemas"


@pytest.mark.parametrize("path", sorted((DATA / "good").glob("*.json")), ids=lambda p: p.name)
def test_good_cases(path: Path) -> None:
    """Specs runtimes load pass with no problem."""
    assert validate.problems(json.loads(path.read_text())) == []


@pytest.mark.parametrize("path", sorted((DATA / "bad").glob("*.json")), ids=lambda p: p.name)
def test_bad_cases(path: Path) -> None:
    """Each bad case yields the problem its '_expect' names (removed before checking)."""
    data = json.loads(path.read_text())
    expect = data.pop("_expect")
    found = validate.problems(data)
    assert any(expect in p for p in found), found


def test_cases_exist() -> None:
    """The case directories are not empty (an empty glob would pass vacuously)."""
    assert len(list((DATA / "good").glob("*.json"))) >= 3
    assert len(list((DATA / "bad").glob("*.json"))) >= 8


@pytest.mark.parametrize("version", ["v0.6.0", "v1.1.0"])
def test_upstream_good_testdata_passes_upstream_and_ours(version: str) -> None:
    """The upstream good examples pass our strict schema too (we are stricter, not different)."""
    check = upstream_schema.validator(version)
    for path in upstream_schema.testdata(version, "good"):
        data = json.loads(path.read_text())
        check(data)
        problems = [p for p in validate.problems(data) if "too low" not in p]
        assert problems == [], (path, problems)


@pytest.mark.parametrize("version", ["v0.6.0", "v1.1.0"])
def test_upstream_bad_testdata_fails_ours(version: str) -> None:
    """The upstream bad examples fail our checks as well (an empty file fails to parse)."""
    for path in upstream_schema.testdata(version, "bad"):
        try:
            data = validate.load_file(str(path))
        except ValueError:
            continue
        assert validate.problems(data), path


def test_our_good_cases_pass_upstream() -> None:
    """What we call good, the upstream schema accepts."""
    check = upstream_schema.validator()
    for path in sorted((DATA / "good").glob("*.json")):
        check(json.loads(path.read_text()))


def test_problems_on_non_object() -> None:
    """A top-level list is one clear problem, not a crash."""
    assert validate.problems([1]) != []
