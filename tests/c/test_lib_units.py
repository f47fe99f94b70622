"""The table-driven C tests of lib/'s pure functions (tests/c/lib_units.c: the reason mark
of the error convention (xf_named), the devices cgroup from mountinfo and /proc/PID/cgroup,
plain YAML scalars typed as go-yaml v2 does, the cdi.k8s.io/ annotation vectors the Python
tooling and the wrapper are checked against), compiled warning-free with build_bin's flags
against the library sources and run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "tests" / "data" / "vectors" / "annotations.json"


def test_lib_units(build_bin: Any, tmp_path: Path) -> None:
    bb = build_bin
    exe = tmp_path / "lib_units"
    cmd = [*bb.compiler(), *bb.CFLAGS, "-Werror", f"-I{bb.ROOT}", "-o", str(exe),
           str(Path(__file__).with_name("lib_units.c")), *(str(bb.ROOT / s) for s in bb.sources("lib")), *bb.LDFLAGS,
           *bb.library_flags()]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0 and built.stderr == "", built.stderr
    r = subprocess.run([str(exe), str(VECTORS)], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    failures = [line for line in lines if line.startswith("not ok")]
    assert (r.returncode, failures, r.stderr) == (0, [], ""), r.stdout
    plan = re.fullmatch(r"1\.\.(\d+)", lines[-1])
    assert plan and int(plan.group(1)) == len(lines) - 1 > 60, lines[-3:]
