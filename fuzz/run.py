"""`make fuzz`: run every atheris harness in this directory for a while.

    python fuzz/run.py [SECONDS_EACH] [HARNESS...]

Each harness gets a seed corpus (real specs, profiles, names)
and its own corpus and crash directory under ``$XPU_CDI_FUZZ_DIR`` (default
``/var/tmp/xpu-cdi-fuzz``), so a later run continues where the last one
stopped.  Exits non-zero when any harness found a crash; the crashing input
is saved as ``<dir>/<harness>/crash-*`` and reproduces with
``python fuzz/<harness>.py <that file>``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = Path(os.environ.get("XPU_CDI_FUZZ_DIR", "/var/tmp/xpu-cdi-fuzz"))


def seeds() -> Dict[str, List[bytes]]:
    """Valid inputs to start from, per harness."""
    specs = [p.read_bytes() for p in sorted((REPO / "tests" / "data" / "specs").glob("*.json"))]
    good = [p.read_bytes() for p in sorted((REPO / "tests" / "data" / "schemas" / "good").glob("*.json"))]
    profiles = [p.read_bytes() for p in sorted((REPO / "src" / "xpu_cdi" / "profiles").glob("*.yaml"))]
    deep = b"[" * 3000  # past the interpreter's recursion limit: parsers must refuse it as ours
    return {
        "fuzz_names": [b"cdi.k8s.io/p_1kunlunxin.com/xpu=0", b"huawei.com/npu=all"],
        "fuzz_specdir": specs + good + [deep],
        "fuzz_validate": specs + good + [deep],
        "fuzz_profile": profiles,
        "fuzz_check": specs,
        "fuzz_settings": [b"accept-env-selection-when-unprivileged: false\nkubernetes-allocation: {a.com/b: dra}\n",
                          b"plugin-dir: /k\nhealth-interval: 5\n"
                          b"sharing: {timeSlicing: {resources: [{name: huawei.com/npu, replicas: 4}]}}\n", deep],
        "fuzz_checkpoint": [b'{"version": 1, "bootId": "boot-1", "claims": {}, "sha256": '
                            b'"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}', deep],
    }


def main(argv: List[str]) -> int:
    seconds = int(argv[0]) if argv and argv[0].isdigit() else int(os.environ.get("FUZZ_SECONDS", "30"))
    names = [a for a in argv if not a.isdigit()] or sorted(p.stem for p in HERE.glob("fuzz_*.py"))
    failed = []
    for name in names:
        corpus, crashes = WORK / name / "corpus", WORK / name
        corpus.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(seeds().get(name, [])):
            (corpus / f"seed-{i}").write_bytes(seed)
        print(f"== {name}: {seconds} s", flush=True)
        scratch = tempfile.mkdtemp(prefix="xpu-cdi-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        try:
            r = subprocess.run([sys.executable, str(HERE / f"{name}.py"), str(corpus),
                                f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=1024",
                                f"-artifact_prefix={crashes}/", "-print_final_stats=1"],
                               capture_output=True, text=True, env=dict(os.environ, XPU_CDI_FUZZ_SCRATCH=scratch))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        tail = [ln for ln in r.stderr.splitlines() if ln.startswith(("Done", "stat::number_of_executed_units",
                                                                      "==", "SUMMARY", "Traceback", "  File"))]
        print("\n".join(tail[-12:]) or r.stderr[-2000:])
        if r.returncode != 0:
            failed.append(name)
            print(r.stderr[-4000:])
    print(f"fuzz: {len(names) - len(failed)} clean, {len(failed)} with findings {failed or ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
