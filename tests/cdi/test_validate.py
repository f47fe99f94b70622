"""`validate`: our strict schema plus the reference library's semantic rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest

from support import upstream_schema
from xpu_cdi.cdi import validate
from xpu_cdi.cdi.version import parse as parse_version

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


# the CDI module's versions that carry schema/ (see tests/support/gomod/go.mod): v0.6.0 is
# the schema of specs up to cdiVersion 0.6.0, None go.mod's v0.8.1 (up to 0.8.0)
SCHEMAS = pytest.mark.parametrize("version", [upstream_schema.OLDEST, None], ids=["cdi-v0.6.0", "cdi-go.mod"])


@SCHEMAS
def test_upstream_good_testdata_passes_upstream_and_ours(version: Optional[str]) -> None:
    """The upstream good examples pass our strict schema too (we are stricter, not different)."""
    check = upstream_schema.validator(version)
    for path in upstream_schema.testdata(version, "good"):
        data = json.loads(path.read_text())
        check(data)
        problems = [p for p in validate.problems(data) if "too low" not in p]
        assert problems == [], (path, problems)


@SCHEMAS
def test_upstream_bad_testdata_fails_ours(version: Optional[str]) -> None:
    """The upstream bad examples fail our checks as well (an empty file fails to parse)."""
    for path in upstream_schema.testdata(version, "bad"):
        try:
            data = validate.load_file(str(path))
        except ValueError:
            continue
        assert validate.problems(data), path


def test_our_good_cases_pass_upstream() -> None:
    """What we call good, the newest upstream schema to be had accepts, and the 0.6.0 one
    too where the case is at a version that schema describes."""
    newest, oldest = upstream_schema.validator(), upstream_schema.validator(upstream_schema.OLDEST)
    for path in sorted((DATA / "good").glob("*.json")):
        data = json.loads(path.read_text())
        newest(data)
        if parse_version(data["cdiVersion"]) <= (0, 6, 0):
            oldest(data)


def test_the_two_schemas_differ_where_the_format_did() -> None:
    """Both schemas are really read, and they are not the same: additionalGids came with 0.7.0,
    so the v0.8.1 schema checks its items (uint32) and the v0.6.0 one, which predates it, lets
    anything through (upstream schemas refuse no unknown field; ours does)."""
    import jsonschema

    spec = {"cdiVersion": "0.7.0", "kind": "example.com/acc",
            "devices": [{"name": "a", "containerEdits": {"additionalGids": ["not a gid"]}}]}
    upstream_schema.validator(upstream_schema.OLDEST)(spec)
    with pytest.raises(jsonschema.ValidationError, match="not a gid"):
        upstream_schema.validator()(spec)
    assert validate.problems(spec) != []


def test_problems_on_non_object() -> None:
    """A top-level list is one clear problem, not a crash."""
    assert validate.problems([1]) != []
