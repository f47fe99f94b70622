"""The upstream CDI JSON schema and its testdata, from the module
tags.cncf.io/container-device-interface (tests/support/upstream.py; gomod/go.mod says why
that module and which versions).  Versions here are that module's: ``v0.8.1`` (the default,
go.mod's) describes specs up to cdiVersion 0.8.0, ``v0.6.0`` specs up to 0.6.0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, List, Optional

from . import upstream

MODULE = "tags.cncf.io/container-device-interface"
OLDEST = "v0.6.0"  # pinned in go.sum beside go.mod's version


def schema_dir(version: Optional[str] = None) -> Path:
    base = upstream.module_dir(MODULE, version) / "schema"
    if not (base / "schema.json").is_file():
        raise AssertionError(f"{MODULE}@{version or 'go.mod'} has no schema/schema.json (v1.x dropped it)")
    return base


def validator(version: Optional[str] = None) -> Callable[[Any], None]:
    """A function raising jsonschema.ValidationError when an instance fails the upstream schema."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    base = schema_dir(version)
    schema = json.loads((base / "schema.json").read_text())
    defs = json.loads((base / "defs.json").read_text())
    registry = Registry().with_resource("defs.json", Resource.from_contents(defs, default_specification=DRAFT7))
    return jsonschema.Draft7Validator(schema, registry=registry).validate


def testdata(version: Optional[str], kind: str) -> List[Path]:
    """The upstream examples of *kind* ("good" or "bad")."""
    found = sorted((schema_dir(version) / "testdata" / kind).glob("*.json"))
    if not found:
        raise AssertionError(f"{MODULE}@{version or 'go.mod'}: no schema/testdata/{kind}/*.json")
    return found
