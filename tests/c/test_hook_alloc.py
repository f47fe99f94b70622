"""The static hook's allocator (src/xpu_cdi/_native/hotpath/hook/alloc.c) on its own:
tests/c/alloc_units.c, compiled warning-free with build_bin's flags and the static build's
define, linked against it (it replaces the libc's malloc in that program too) and run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any


def test_hook_alloc(build_bin: Any, tmp_path: Path) -> None:
    bb = build_bin
    exe = tmp_path / "alloc_units"
    cmd = [*bb.compiler(), *bb.CFLAGS, *bb.STATIC_CFLAGS, "-Werror", f"-I{bb.ROOT}", "-o", str(exe),
           str(Path(__file__).with_name("alloc_units.c")), str(bb.ROOT / "hook" / "alloc.c"), *bb.LDFLAGS]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0 and built.stderr == "", built.stderr
    nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    assert re.search(r" T malloc$", nm, re.M), "the program does not define malloc: hook/alloc.c was left out"
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    failures = [line for line in lines if line.startswith("not ok")]
    assert (r.returncode, failures, r.stderr) == (0, [], ""), r.stdout
    plan = re.fullmatch(r"1\.\.(\d+)", lines[-1])
    assert plan and int(plan.group(1)) == len(lines) - 1 >= 18, lines[-3:]
