#!/usr/bin/python3
"""Write src/xpu_cdi/profiles/builtin.json and profiles/partitions/builtin.json from the
built-in profiles' and partition templates' YAML files.

The YAML files are the source (edit them); the builtin.json files hold their parsed documents
so that `generate` and the daemons read the built-ins without importing a YAML parser
(src/xpu_cdi/generate/profile.py, src/xpu_cdi/partitions.py).  After editing one, run

    .venv/bin/python scripts/render-profiles.py [--check]

--check writes nothing and exits 1 when a file differs (tests/generate/test_profile.py and
test_partitions.py make the same comparison).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xpu_cdi import partitions
from xpu_cdi.generate import profile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when builtin.json is stale")
    args = ap.parse_args()
    stale = 0
    for path, want in ((Path(profile.BUILTIN_JSON), profile.render_builtin_json()),
                       (Path(partitions.BUILTIN_JSON), partitions.render_builtin_json())):
        if path.exists() and path.read_text(encoding="utf-8") == want:
            continue
        if args.check:
            print(f"{path}: stale: run scripts/render-profiles.py", file=sys.stderr)
            stale = 1
            continue
        path.write_text(want, encoding="utf-8")
        print(f"wrote {path}")
    return stale

if __name__ == "__main__":
    sys.exit(main())
