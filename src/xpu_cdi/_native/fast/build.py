"""Build the compiled front end: ``xpu-cdi-hook`` and ``xpu-container-runtime``.

Two small executables that handle the common container start themselves
and exec the Python implementation (``<binary>.py`` beside them) for
everything else (see common.h).  setup.py calls :func:`build` after the
cffi extension is built, so ``pip install`` (editable or not) puts them
in ``xpu_cdi/_native/bin/``; ``install-launcher`` copies them from there.

    python src/xpu_cdi/_native/fast/build.py [--out DIR] [TARGET...]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
COMMON = ["common.c", "fjson.c", "fjtree.c", "fyaml.c", "request_util.c", "select.c", "names.c", "registry.c",
          "config.c", "privileged.c"]
TARGETS: Dict[str, List[str]] = {
    "xpu-cdi-hook": COMMON + ["undo.c", "cgroup.c", "rootfs.c", "links.c", "ldcache.c", "plan.c", "inject.c",
                              "ocistate.c", "stage.c", "hook_main.c", "../hook.c"],
    "xpu-container-runtime": COMMON + ["ociedit.c", "wrapper_main.c"],
    # not installed anywhere: the unit tests' way into the C parsers
    # (tests/native/), one subcommand per module (*_test.c)
    "xpu-cdi-fast-test": COMMON + ["undo.c", "cgroup.c", "ociedit.c", "../hook.c", "test_main.c", "fjson_test.c",
                                   "request_test.c", "cgroup_test.c", "ociedit_test.c"],
}
# hardened like a distribution build: these run as root on every container start
CFLAGS = ["-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-D_FORTIFY_SOURCE=2",
          "-fstack-protector-strong", "-fPIE"]
LDFLAGS = ["-pie", "-Wl,-z,relro,-z,now", "-Wl,--as-needed"]
# the parsers are the distributions' libraries (docs/architecture.md, "Parsers"):
# yajl for JSON, libyaml for YAML; scripts/install-deps.sh installs their -dev packages
LIBRARIES = ["yajl", "yaml-0.1"]


def library_flags() -> List[str]:
    """Compile and link flags of :data:`LIBRARIES` from pkg-config (plain
    ``-l`` flags where pkg-config itself is missing).

    Raises:
        subprocess.CalledProcessError: pkg-config does not know a library
            (its message names the package to install).
    """
    try:
        out = subprocess.run(["pkg-config", "--cflags", "--libs", *LIBRARIES], check=True, capture_output=True,
                             text=True).stdout
    except FileNotFoundError:
        return ["-lyajl", "-lyaml"]
    except subprocess.CalledProcessError as err:
        print(f"pkg-config: {err.stderr.strip()} (install libyajl-dev and libyaml-dev, or yajl-devel and "
              "libyaml-devel: scripts/install-deps.sh)", file=sys.stderr)
        raise
    return shlex.split(out)


def compiler() -> List[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def build(out_dir: str, targets: Optional[Sequence[str]] = None, extra_cflags: Sequence[str] = ()) -> List[str]:
    """Compile *targets* (default: all) into *out_dir*; return their paths.

    *extra_cflags* go after the usual flags of the one compile-and-link
    command (tests/native/test_fast_sanitized.py builds with
    ``-fsanitize=address,undefined -O1`` that way: later flags win).

    Raises:
        subprocess.CalledProcessError: the compiler failed (its output shown).
    """
    os.makedirs(out_dir, exist_ok=True)
    libs = library_flags()
    made = []
    for name in targets or TARGETS:
        out = os.path.join(out_dir, name)
        tmp = f"{out}.tmp-{os.getpid()}"
        cmd = [*compiler(), *CFLAGS, *extra_cflags, f"-I{HERE}", "-o", tmp, *(str(HERE / s) for s in TARGETS[name]),
               *LDFLAGS, *libs]
        subprocess.run(cmd, check=True)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
        made.append(out)
    return made


def main(argv: "Sequence[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(HERE.parent / "bin"))
    parser.add_argument("targets", nargs="*", choices=[*TARGETS, []], metavar="TARGET")
    args = parser.parse_args(argv)
    try:
        for path in build(args.out, args.targets or None):
            print(path)
    except subprocess.CalledProcessError as err:
        print(f"build failed: {shlex.join(err.cmd)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
