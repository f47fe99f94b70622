"""Fixtures of the runtime-integration tests (no root needed for these)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wrapper_specs import index, spec


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    """A CDI spec dir holding a 4-card Kunlunxin spec and its index."""
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "kunlunxin.com-xpu.json").write_text(json.dumps(spec()))
    (d / "kunlunxin.com-xpu.json.xpu-cdi").write_text(json.dumps(index()))
    return d
