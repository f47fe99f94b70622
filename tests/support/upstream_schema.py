"""The upstream CDI JSON schema from ../shared/reference (data, not copied into
the project).  Tests that need it skip, saying why, where it is absent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

REF = Path(__file__).resolve().parents[3] / "shared" / "reference"


def validator(version: str = "v1.1.0") -> Callable[[Any], None]:
    """A function raising jsonschema.ValidationError when an instance fails the upstream schema."""
    base = REF / f"cdi-schema-{version}"
    if not (base / "schema.json").exists():
        pytest.skip(f"upstream CDI schema not available at {base} (../shared is absent outside the dev/CI setup)")
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    schema = json.loads((base / "schema.json").read_text())
    defs = json.loads((base / "defs.json").read_text())
    registry = Registry().with_resource("defs.json", Resource.from_contents(defs, default_specification=DRAFT7))
    v = jsonschema.Draft7Validator(schema, registry=registry)
    return v.validate


def testdata(version: str, kind: str) -> list:
    base = REF / f"cdi-schema-{version}" / "testdata" / kind
    if not base.exists():
        pytest.skip(f"upstream CDI testdata not available at {base}")
    return sorted(base.glob("*.json"))
