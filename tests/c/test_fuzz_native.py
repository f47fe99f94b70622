"""A short libFuzzer run of the compiled parsers (fuzz/native/run.sh, as
`make fuzz-native` runs it for longer): both harnesses build with ASan and
UBSan, run a few seconds each from the repo's seeds, and find nothing."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from support import HANG

REPO = Path(__file__).resolve().parents[2]
SECONDS = 3


def test_fuzzers_run_clean(tmp_path: Path) -> None:
    out = subprocess.run(["sh", str(REPO / "fuzz" / "native" / "run.sh"), str(SECONDS)], capture_output=True,
                         text=True, timeout=10 * HANG, env=dict(os.environ, XPU_CDI_FUZZ_DIR=str(tmp_path)))
    assert out.returncode == 0, out.stderr[-4000:]
    runs = dict(re.findall(r"fuzz/native: (\w+) stat::number_of_executed_units: (\d+)", out.stderr))
    assert set(runs) == {"fuzz_json", "fuzz_yaml"}, out.stderr
    # it really ran, past its seeds (a count, not a rate: a loaded machine runs a few hundred in 3 s)
    seeds = {h: len(list((tmp_path / f"native-{h}" / "corpus").glob("seed-*"))) for h in runs}
    assert all(seeds.values()) and all(int(runs[h]) > 2 * seeds[h] for h in runs), (runs, seeds)
    assert all(not list((tmp_path / f"native-{h}").glob("crash-*")) for h in runs)
