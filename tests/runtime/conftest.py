"""Fixtures of the runtime-integration tests (no root needed for these)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import wrapper_specs


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    """A CDI spec dir holding a 4-card Kunlunxin spec and its index."""
    return wrapper_specs.spec_dir(tmp_path / "cdi")
