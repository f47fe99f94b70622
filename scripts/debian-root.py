"""Run a command on a fresh Debian root holding a clean clone of this checkout's HEAD: what CI
does on a new machine of that release, with only that release's own packages (its Go included).

    .venv/bin/python scripts/debian-root.py [--release trixie] [--root DIR] [--fresh] [-- COMMAND...]

The root is ``debootstrap --variant=minbase`` of the release from the host's mirror, plus make,
git and ca-certificates (what a user has who cloned the project), kept between runs (``--fresh``
makes it again); a ``policy-rc.d`` refuses every service start in it.  What belongs to the
machine's network rather than to its release is copied in before each run, as a machine on the
same network would have it: resolv.conf, the local CA certificates (a proxy that re-signs TLS)
and pip.conf.  Each run clones HEAD anew into ``/src/xpu-cdi`` and runs COMMAND there
(default ``.ci/run``) with ``CI=true``, as root, in a private mount namespace whose root is the
tree (pivot_root, as ``support.releasetree`` enters its trees): /proc, /sys, /dev and tmpfs
/run, /tmp and /root are mounted there only, so they go with the namespace whatever ends the run.
The root's own /var/tmp holds its test cache: the Go toolchain and the Kubernetes builds are
fetched and built cold.  docs/testing-go.md has the how and what a run took.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from support.imagebuild import builder
from support.releasetree import POLICY_RC_D, Tree

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("make", "git", "ca-certificates")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def build(release: str, root: Path) -> None:
    """debootstrap *release* into *root* (made in a side directory, renamed when complete)."""
    tmp = root.with_name(root.name + ".building")
    subprocess.run(["rm", "-rf", "--one-file-system", str(tmp)], check=True)
    t0 = time.monotonic()
    subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", release, str(tmp),
                    builder().host_mirror()], check=True, stdout=subprocess.DEVNULL)
    policy = tmp / "usr/sbin/policy-rc.d"
    policy.write_text(POLICY_RC_D)
    policy.chmod(0o755)
    (tmp / ".oldroot").mkdir()
    tmp.rename(root)
    print(f"debian-root: {release} made in {root} in {time.monotonic() - t0:.0f} s", file=sys.stderr)


def machine_network(root: Path) -> None:
    """The host's resolv.conf, local CA certificates and pip.conf, into *root*."""
    shutil.copy2("/etc/resolv.conf", root / "etc/resolv.conf")
    local = Path("/usr/local/share/ca-certificates")
    if local.is_dir():
        shutil.copytree(local, root / local.relative_to("/"), dirs_exist_ok=True)
    if Path("/etc/pip.conf").exists():
        shutil.copy2("/etc/pip.conf", root / "etc/pip.conf")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default="trixie", help="Debian codename (default: trixie, Debian 13)")
    ap.add_argument("--root", type=Path, help="where the root is kept (default: /var/tmp/xpu-cdi-debian-RELEASE)")
    ap.add_argument("--fresh", action="store_true", help="make the root again")
    ap.add_argument("command", nargs="*", default=[".ci/run"], help="run in the clone (default: .ci/run)")
    args = ap.parse_args()
    root = args.root or Path(f"/var/tmp/xpu-cdi-debian-{args.release}")
    if args.fresh and root.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)
    if not root.exists():
        build(args.release, root)
    machine_network(root)
    src = root / "src/xpu-cdi"
    subprocess.run(["rm", "-rf", "--one-file-system", str(src)], check=True)
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO), str(src)], check=True)
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    print(f"debian-root: running {' '.join(args.command)} at {head} in {root}", file=sys.stderr)
    enter = ["unshare", "-m", "--propagation", "private", "sh", "-c", Tree.ENTER, "enter", str(root), "0"]
    inside = ["env", "-i", f"PATH={PATH}", "HOME=/root", "CI=true", "LC_ALL=C.UTF-8", "sh", "-c",
              'update-ca-certificates >/dev/null && cd /src/xpu-cdi && exec "$@"', "run", *args.command]
    t0 = time.monotonic()
    rc = subprocess.run(enter + inside, stdin=subprocess.DEVNULL).returncode
    print(f"debian-root: exit {rc} after {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
