"""Entry point of ``xpu-cdi-hook`` (being built: see issue 3)."""

from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    print("xpu-cdi-hook: not implemented yet", file=sys.stderr)
    return 1
