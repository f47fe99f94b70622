"""The DaemonSet's image for the tests that need it, built once per input into the test
cache by ``make image``'s own code (packaging/image/build.py): the archive is
``<cache>/image/xpu-cdi-<key>.oci.tar``, the key a hash of the build context (the files git
lists less what .containerignore names: no tests, no docs the package does not ship), the
Debian release, the slimming rules and the architecture, so a change to what goes into the
image rebuilds it and a test or docs edit never does.  The build runs under a file lock (two
pytest workers or two checkouts wanting it at once build it once); buildah's storage
under ``<cache>/image/work`` keeps the layers, so a source change only reruns the steps
after ``COPY . /src``.

``second_version()`` is the image of a rolling update: the same image with other
bytes in the two host binaries (a trailing note, which ELF loaders ignore) and a label,
so that an update really replaces what install-binaries put on the host.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Set

import pytest

from support.runtimes import CACHE

REPO = Path(__file__).resolve().parents[2]
DIR = CACHE / "image"
WORK = DIR / "work"


def builder() -> Any:
    spec = importlib.util.spec_from_file_location("xpu_cdi_image_build", REPO / "packaging" / "image" / "build.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def log(msg: str) -> None:
    sys.stderr.write(f"imagebuild: {msg}\n")


def _require() -> None:
    for tool in ("buildah", "debootstrap"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} missing: run `make deps` (scripts/install-deps.sh installs it)")


def image(target: str = "") -> Dict[str, Any]:
    """``{"archive": Path, "name": str, "key": str, "arch": str}`` of the image of this checkout, for
    architecture *target* (default: the machine's; another one is built under qemu, see build.py)."""
    b = builder()
    target = target or b.arch()
    key = b.inputs_key(REPO, target)
    archive = DIR / f"xpu-cdi-{key}.oci.tar"
    DIR.mkdir(parents=True, exist_ok=True)
    # another architecture's (long, emulated) build holds a lock of its own, not the machine's image
    with open(DIR / (".lock" if target == b.arch() else f".lock-{target}"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.is_file():
            _require()
            t0 = time.monotonic()
            # another architecture in a work dir of its own (its base, its vfs storage)
            times = b.build(archive, WORK if target == b.arch() else WORK / target, b.default_name(), REPO, target)
            (DIR / f"xpu-cdi-{key}.built").write_text(json.dumps(
                {"seconds": round(time.monotonic() - t0, 1), **{k: round(v, 1) for k, v in times.items()},
                 "mib": round(archive.stat().st_size / (1 << 20), 1)}) + "\n")
            log(f"built {archive} in {time.monotonic() - t0:.0f} s")
        archive.touch()  # in use: drop_stale keeps it
        drop_stale(key, target)
    return {"archive": archive, "name": b.default_name(), "key": key, "arch": target}


STALE_SECONDS = 3 * 3600
#: a key's files: the archives, the build record, test_image.py's podman listing
KEYED = re.compile(r"^(?:xpu-cdi-|framework-|podman-build-)([0-9a-f]{16})\b")


def owners_file(key: str) -> Path:
    """The checkouts whose sources are (or were) *key*: ``<arch> <path>`` a line."""
    return DIR / f"owners-{key}"


def owners(key: str) -> Set[str]:
    try:
        return {ln for ln in owners_file(key).read_text().splitlines() if ln}
    except FileNotFoundError:
        return set()


def set_owners(key: str, paths: Set[str]) -> None:
    """Written atomically; empty: owned by no checkout (its files go once stale)."""
    tmp = owners_file(key).with_suffix(".tmp")
    tmp.write_text("".join(f"{p}\n" for p in sorted(paths)))
    tmp.rename(owners_file(key))


def drop_stale(key: str, target: str) -> None:
    """This checkout's image for *target* is *key* and no other key; remove the files of every key that
    no checkout owns any more (the checkouts that moved on, or are gone) and that none used for
    STALE_SECONDS.  Another checkout's images stay while it exists and has not moved on, however long
    it has not run; files with no owners file (written before owners were kept) are left alone.
    Called under the lock."""
    me = f"{target} {REPO}"
    set_owners(key, owners(key) | {me})
    now = time.time()
    files: Dict[str, List[Path]] = {}
    for f in DIR.iterdir():
        m = KEYED.match(f.name)
        if m and m.group(1) != key:
            files.setdefault(m.group(1), []).append(f)
    for other, paths in files.items():
        if not owners_file(other).is_file():
            continue
        left = {o for o in owners(other) - {me} if Path(o.split(" ", 1)[-1]).is_dir()}
        set_owners(other, left)
        if left:
            continue
        try:
            if all(now - p.stat().st_mtime > STALE_SECONDS for p in paths):
                for p in paths:
                    p.unlink()
                owners_file(other).unlink()
        except FileNotFoundError:
            pass


def derived(first: Dict[str, Any], archive: Path, name: str, change: Callable[[Path], None],
            *config: str) -> Path:
    """The OCI archive *archive* of image *name*: the image of *first* (from its archive, not a tag other
    checkouts' builds may have moved) with *change* applied to its root and ``buildah config *config*``;
    made once per input, under the lock."""
    b = builder()
    with open(DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.is_file():
            with open(WORK / f"{archive.name}.log", "wb") as logf:
                bh = b.Buildah(WORK, logf)
                ctr = bh("from", "--quiet", f"oci-archive:{first['archive']}", capture=True)
                try:
                    change(Path(bh("mount", ctr, capture=True)))
                    if config:
                        bh("config", *config, ctr)
                    bh("commit", "--quiet", ctr, name)
                finally:
                    bh("rm", ctr)
                tmp = archive.with_name(archive.name + ".tmp")
                tmp.unlink(missing_ok=True)
                bh("push", "--quiet", name, f"oci-archive:{tmp}:{name}")
                tmp.rename(archive)
        archive.touch()  # in use: drop_stale keeps it
    return archive


def second_version() -> Dict[str, Any]:
    """The rolling update's image: ``<name>-v2``, host binaries with other bytes."""
    first = image()

    def change(root: Path) -> None:
        for n in ("xpu-cdi-hook", "xpu-container-runtime"):
            with open(root / "usr/lib/xpu-cdi/host" / n, "ab") as f:
                f.write(b"\0xpu-cdi test image, second version\0")

    name = first["name"] + "-v2"
    archive = derived(first, DIR / f"xpu-cdi-{first['key']}-v2.oci.tar", name, change,
                      "--label", "io.xpu-cdi.test=second-version")
    return {"archive": archive, "name": name, "key": first["key"]}


FRAMEWORK = "localhost/xpu-cdi-framework-test:1"
FRAMEWORK_LIB = "/opt/framework/lib"
FRAMEWORK_SO = "libframework.so.1"


def shared_library(out: Path, soname: str, symbol: str, value: int) -> None:
    """A real ELF shared object *out* (SONAME *soname*) whose *symbol*() returns *value*; no libc needed."""
    import subprocess

    src = out.with_suffix(".c")
    src.write_text(f"int {symbol}(void) {{ return {value}; }}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-nostdlib", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
                   check=True)
    src.unlink()


def framework_image() -> Dict[str, Any]:
    """An image as a CANN or Kunlunxin framework image is: Debian with ldconfig, its own library in
    /opt/framework/lib and ``LD_LIBRARY_PATH=/opt/framework/lib`` in its config (the xpu-cdi image plus
    that, so no other base is needed); ``framework_answer()`` of libframework.so.1 returns 7."""
    first = image()

    def change(root: Path) -> None:
        lib = root / FRAMEWORK_LIB.lstrip("/")
        lib.mkdir(parents=True)
        shared_library(lib / FRAMEWORK_SO, FRAMEWORK_SO, "framework_answer", 7)

    archive = derived(first, DIR / f"framework-{first['key']}.oci.tar", FRAMEWORK, change,
                      "--env", f"LD_LIBRARY_PATH={FRAMEWORK_LIB}", "--entrypoint", "[]", "--cmd", "sh")
    return {"archive": archive, "name": FRAMEWORK}
