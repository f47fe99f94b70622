"""Build the two executables of the container start path, ``xpu-cdi-hook``
and ``xpu-container-runtime``, from the C tree in ``hotpath/``
(docs/architecture.md, "The compiled hot path").

setup.py's ``build_ext`` loads this file by path (it is not imported as a
package module there: the package is not built yet) and calls
:func:`build` after the cffi extension, so ``pip install`` (editable or
not) puts the binaries in ``xpu_cdi/_native/bin/``.  The sanitizer tests
(tests/c/) call :func:`build` with extra flags.

    python src/xpu_cdi/_native/build_bin.py [--out DIR] [--static] [--cross TRIPLET] [TARGET...]

--cross aarch64-linux-gnu builds for that Debian multiarch triplet (``make cross``):
its cross compiler (gcc-aarch64-linux-gnu) and the -dev packages of that architecture
(libyajl-dev:arm64, libyaml-dev:arm64), found through their pkg-config directory.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent / "hotpath"
# the package version's one place: the binaries' --version gets it as -DXPU_CDI_VERSION
VERSION_FILE = ROOT.parent.parent / "_version.py"


def sources(*folders: str) -> List[str]:
    """Every .c file under the given folders of hotpath/ (sorted: the build is reproducible)."""
    return sorted(str(p.relative_to(ROOT)) for f in folders for p in (ROOT / f).rglob("*.c"))


# Each binary links only the layers it uses: the hook everything but the
# wrapper's runtime/, the wrapper no kernel/ and no hook/.
TARGETS: Dict[str, List[str]] = {
    "xpu-cdi-hook": sources("lib", "kernel", "hook"),
    "xpu-container-runtime": sources("lib", "runtime"),
}
# hardened like a distribution build: these run as root on every container start.
# Each function in its own section, unreferenced ones dropped at link time: every
# libc symbol left in the binary is looked up by ld.so on each start (-z now).
CFLAGS = ["-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-D_FORTIFY_SOURCE=2",
          "-fstack-protector-strong", "-fPIE", "-ffunction-sections", "-fdata-sections"]
LDFLAGS = ["-pie", "-Wl,-z,relro,-z,now", "-Wl,--as-needed", "-Wl,--gc-sections"]
# the parsers are the distributions' libraries (docs/architecture.md, "Parsers"):
# yajl for JSON, linked; libyaml for YAML, its headers only: lib/yaml_load.c loads
# it when a YAML file is first read (dlopen: -ldl before glibc 2.34).
# scripts/install-deps.sh installs their -dev packages
LINKED = ["yajl"]
HEADERS_ONLY = ["yaml-0.1"]
# --static (the DaemonSet's copy for the host, whatever its distribution): the same
# sources and flags, linked static-pie against the static archives Debian's -dev
# packages ship (libyajl-dev names its archive libyajl_s.a) and glibc's libc.a;
# libyaml is linked in too (a static binary cannot dlopen it)
STATIC_LDFLAGS = ["-static-pie", "-Wl,-z,relro,-z,now", "-Wl,--gc-sections"]
# and the hook's own allocator (hook/alloc.c: a bump arena, small blocks reused by size class)
STATIC_CFLAGS = ["-DXPU_CDI_LINKED_YAML", "-DXPU_CDI_ARENA_MALLOC"]
STATIC_LIBRARIES = ["-l:libyajl_s.a", "-l:libyaml.a"]
# The hook is linked so by default too, where the static archives are installed: it runs on
# every container start, and a static binary starts without the loader's work (a third of the
# hook's system calls and most of its time in `make bench`: docs/hook.md, "System calls").  The
# wrapper stays dynamic (it execs the runtime, which costs more than its own start), and so does
# the hook of the .deb and .rpm, whose builds set XPU_CDI_HOOK_LINK=dynamic: there the
# distribution's security fixes to yajl and libyaml must reach it without a rebuild.
STATIC_BY_DEFAULT = {"xpu-cdi-hook"}
LINK_ENV = "XPU_CDI_HOOK_LINK"


def pkg_config_env(cross: Optional[str]) -> Optional[Dict[str, str]]:
    """pkg-config's environment for *cross* (Debian's multiarch .pc directory), None for the host."""
    if not cross:
        return None
    return dict(os.environ, PKG_CONFIG_LIBDIR=f"/usr/lib/{cross}/pkgconfig:/usr/share/pkgconfig")


def library_flags(cross: Optional[str] = None) -> List[str]:
    """Compile flags of both libraries and link flags of :data:`LINKED`, from
    pkg-config (plain flags where pkg-config itself is missing).

    Raises:
        subprocess.CalledProcessError: pkg-config does not know a library
            (its message names the package to install).
    """
    try:
        env = pkg_config_env(cross)
        cflags = subprocess.run(["pkg-config", "--cflags", *LINKED, *HEADERS_ONLY], check=True, capture_output=True,
                                text=True, env=env).stdout
        libs = subprocess.run(["pkg-config", "--libs", *LINKED], check=True, capture_output=True, text=True,
                              env=env).stdout
    except FileNotFoundError:
        return ["-lyajl", "-ldl"]
    except subprocess.CalledProcessError as err:
        print(f"pkg-config: {err.stderr.strip()} (install libyajl-dev and libyaml-dev, or yajl-devel and "
              "libyaml-devel: scripts/install-deps.sh)", file=sys.stderr)
        raise
    return [*shlex.split(cflags), *shlex.split(libs), "-ldl"]


def static_available(cross: Optional[str] = None) -> bool:
    """Whether the compiler finds the archives a static link needs (libc.a, libyajl_s.a, libyaml.a)."""
    for archive in ("libc.a", *(lib[len("-l:"):] for lib in STATIC_LIBRARIES)):
        r = subprocess.run([*compiler(cross), f"-print-file-name={archive}"], capture_output=True, text=True)
        if r.returncode != 0 or not os.path.isabs(r.stdout.strip()):
            return False
    return True


def compiler(cross: Optional[str] = None) -> List[str]:
    if cross:
        return [f"{cross}-gcc"]
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def version() -> str:
    """The package version, read from :data:`VERSION_FILE` (by path: see the module doc).

    Raises:
        ValueError: the file has no ``VERSION = "..."`` line.
    """
    found = re.search(r'^VERSION = "([^"\\]+)"$', VERSION_FILE.read_text(), re.M)
    if found is None:
        raise ValueError(f"{VERSION_FILE}: no VERSION = \"...\" line")
    return found.group(1)


def command(name: str, out: str, extra_cflags: Sequence[str] = (), libs: Optional[Sequence[str]] = None,
            static: bool = False, cross: Optional[str] = None) -> List[str]:
    """The one compile-and-link command of target *name* writing *out* (the other
    Debian release's build test, tests/c/test_build_other_release.py, runs it in that
    release's tree); *static* links it statically (:data:`STATIC_LDFLAGS`); *cross*: see the module doc."""
    if static:
        libs = [*(f for f in library_flags(cross) if not f.startswith("-l")), *STATIC_LIBRARIES]
    return [*compiler(cross), *CFLAGS, *(STATIC_CFLAGS if static else ()), f'-DXPU_CDI_VERSION="{version()}"',
            *extra_cflags, f"-I{ROOT}", "-o", out,
            *(str(ROOT / s) for s in TARGETS[name]),
            *(STATIC_LDFLAGS if static else LDFLAGS), *(library_flags(cross) if libs is None else libs)]


def build(out_dir: str, targets: Optional[Sequence[str]] = None, extra_cflags: Sequence[str] = (),
          static: Optional[bool] = None, cross: Optional[str] = None) -> List[str]:
    """Compile *targets* (default: all of :data:`TARGETS`) into *out_dir*; return their paths.

    *extra_cflags* go after the usual flags of the one compile-and-link
    command (tests/c/test_sanitized.py builds with
    ``-fsanitize=address,undefined -O1`` that way: later flags win).
    *static*: link every target statically (True) or dynamically (False);
    None links :data:`STATIC_BY_DEFAULT` statically where :func:`static_available`,
    unless ``$XPU_CDI_HOOK_LINK`` is ``dynamic`` (the packages' builds).

    Raises:
        subprocess.CalledProcessError: the compiler failed (its output shown).
    """
    os.makedirs(out_dir, exist_ok=True)
    libs = library_flags(cross)
    made = []
    if static is None and os.environ.get(LINK_ENV) == "dynamic":
        static = False
    wants_static = static is None and bool(STATIC_BY_DEFAULT & set(targets or TARGETS))
    default_static = wants_static and static_available(cross)
    if wants_static and not default_static:
        print(f"build_bin: no static libc/yajl/yaml archives: {', '.join(sorted(STATIC_BY_DEFAULT))} linked "
              "dynamically (install libc6-dev, libyajl-dev and libyaml-dev for the static link)", file=sys.stderr)
    for name in targets or TARGETS:
        out = os.path.join(out_dir, name)
        tmp = f"{out}.tmp-{os.getpid()}"
        link_static = static if static is not None else default_static and name in STATIC_BY_DEFAULT
        subprocess.run(command(name, tmp, extra_cflags, None if link_static else libs, link_static, cross),
                       check=True)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
        made.append(out)
    return made


def main(argv: "Sequence[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT.parent / "bin"))
    parser.add_argument("--static", action="store_true", default=None,
                        help="link every target statically (the DaemonSet's host copy)")
    parser.add_argument("--cross", metavar="TRIPLET", help="cross-compile for this multiarch triplet "
                        "(aarch64-linux-gnu)")
    parser.add_argument("targets", nargs="*", choices=[*TARGETS, []], metavar="TARGET")
    args = parser.parse_args(argv)
    try:
        for path in build(args.out, args.targets or None, static=args.static, cross=args.cross):
            print(path)
    except subprocess.CalledProcessError as err:
        print(f"build failed: {shlex.join(err.cmd)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
