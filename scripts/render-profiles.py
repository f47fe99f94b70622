#!/usr/bin/python3
"""Write src/xpu_cdi/profiles/builtin.json from the built-in profiles' YAML files.

The YAML files are the source (edit them); builtin.json holds their parsed documents so
that `generate` and the daemons read the built-ins without importing a YAML parser
(src/xpu_cdi/generate/profile.py).  After editing a profile, run

    .venv/bin/python scripts/render-profiles.py [--check]

--check writes nothing and exits 1 when the file differs (tests/generate/test_profile.py
makes the same comparison).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xpu_cdi.generate import profile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when builtin.json is stale")
    args = ap.parse_args()
    path = Path(profile.BUILTIN_JSON)
    want = profile.render_builtin_json()
    if path.exists() and path.read_text(encoding="utf-8") == want:
        return 0
    if args.check:
        print(f"{path}: stale: run scripts/render-profiles.py", file=sys.stderr)
        return 1
    path.write_text(want, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
