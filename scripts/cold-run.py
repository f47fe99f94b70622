"""CI as a fresh machine runs it, on this machine: the Debian packages the project's install steps
added are purged, a clean clone of HEAD runs `CI=true bash .ci/run` with a new, empty test cache
and pip cache, and the time is printed (docs/testing.md#a-cold-run).

    .venv/bin/python scripts/cold-run.py --dry-run   # what would be purged, nothing done
    make cold-run                                    # the run (about an hour here); log in its dir

Only what scripts/install-deps.sh installed is purged (apt's history says which), and nothing when
apt would take more with it; the machine's own test cache is left as it is (the run uses its own,
removed afterwards when the run passed, with the clone; the log stays)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from support import coldrun

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print what would be purged, do nothing")
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp/xpu-cdi-cold-run"),
                    help="where the clone, its caches and the log go (default %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its caches after a passing run")
    args = ap.parse_args()

    plan = coldrun.purge_plan(coldrun.history_texts())
    extra = sorted(set(coldrun.removals(plan)) - set(plan)) if plan else []
    if extra:
        print(f"cold-run: purging what install-deps.sh installed would also remove {' '.join(extra)} "
              "(installed since, depending on it): remove those first or install them again afterwards",
              file=sys.stderr)
        return 1
    print(f"cold-run: {len(plan)} packages install-deps.sh added: {' '.join(plan) or '(none)'}")
    if args.dry_run:
        return 0
    if os.geteuid() != 0:
        print("cold-run: run as root (it purges packages and runs CI as root)", file=sys.stderr)
        return 1

    if plan:
        subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "purge", "-y", "-qq",
                        *coldrun.purge_options(plan), *plan], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), stdout=subprocess.DEVNULL)
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    clone, log = args.dir / "main", args.dir / "ci.log"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    env = dict(os.environ, CI="true", XPU_CDI_TEST_CACHE=str(args.dir / "cache"),
               PIP_CACHE_DIR=str(args.dir / "pip-cache"))
    for var in ("VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(var, None)
    print(f"cold-run: {head} in {clone}, log {log}", flush=True)
    t0 = time.monotonic()
    with open(log, "w") as out:
        rc = subprocess.run(["bash", ".ci/run"], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                            stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - t0
    summaries = [line.strip("= \n") for line in log.read_text(errors="replace").splitlines()
                 if re.search(r"\d+ (passed|failed)\b.* in [\d.]+s", line)]
    print(f"cold-run: {head}: .ci/run exited {rc} after {seconds:.0f} s ({seconds / 60:.1f} min); "
          f"pytest: {' | '.join(summaries) or 'no summary'}")
    if rc == 0 and not args.keep:
        unmount_below(args.dir)  # buildah's storage keeps its overlay mounted between builds
        for d in (clone, args.dir / "cache", args.dir / "pip-cache"):
            shutil.rmtree(d, ignore_errors=True)
    return rc


def unmount_below(top: Path) -> None:
    """Lazily unmount every mount below *top*, deepest first."""
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    prefix = str(top).rstrip("/") + "/"
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


if __name__ == "__main__":
    sys.exit(main())
