"""Driver file checks: the libraries and tools a profile mounts exist, and
nobody but root can change them (every container loads them)."""

from __future__ import annotations

import os
import stat
from typing import List, Tuple

from ..generate import discover as _discover
from .context import Context, ProfileState
from .result import Result, fail, ok, warn

MAX_ENTRIES = 20000  # a driver tree has a few thousand files; stop well before a runaway walk


def _shown(ctx: Context, hostp: str) -> str:
    root = ctx.opts.roots.driver
    return hostp if root in ("", "/") else "/" + os.path.relpath(hostp, root)


def _libraries(path: str) -> int:
    try:
        return sum(1 for n in os.listdir(path) if ".so" in n)
    except OSError:
        return 0


def check_files(ctx: Context) -> List[Result]:
    """driver-files: mounts and library dirs of each profile present on the host."""
    out = []
    for st in ctx.states:
        prof, root = st.profile, ctx.opts.roots.driver
        present, skipped, required = [], [], []
        for rule in prof.mounts:
            hp = _discover.host_path(root, rule.path)
            if os.path.exists(hp):
                present.append(rule.path)
            elif rule.required:
                required.append(repr(hp))
            else:
                skipped.append(rule.path)
        libs = [d for d in prof.library_dirs if os.path.isdir(_discover.host_path(root, d))]
        name = prof.name
        if required:
            out.append(fail("driver-files", f"{name}: required driver path(s) {', '.join(required)} missing",
                            f"install the {prof.description} user-space package, then run `xpu-cdi generate`"))
        if prof.library_dirs and not libs:
            looked = ", ".join(repr(_discover.host_path(root, d)) for d in prof.library_dirs)
            out.append(fail("driver-files", f"{name}: no library dir exists (looked for {looked}): programs in "
                                            f"containers fail with 'lib*.so: cannot open shared object file'",
                            "install the vendor user-space runtime (driver libraries) on the host, or pass "
                            "--driver-root where it lives (an admin profile in /etc/xpu-cdi/profiles.d can "
                            "name other library_dirs), then run `xpu-cdi generate`"))
            continue
        empty = [d for d in libs if not _libraries(_discover.host_path(root, d))]
        if empty and len(empty) == len(libs):
            out.append(warn("driver-files", f"{name}: library dir(s) {', '.join(empty)} hold no .so files",
                            "reinstall the vendor user-space runtime: the dirs exist but the libraries are gone"))
        elif not required:
            note = f"; not present, not mounted: {', '.join(skipped)}" if skipped else ""
            count = sum(_libraries(_discover.host_path(root, d)) for d in libs)
            out.append(ok("driver-files", f"{name}: mounted read-only: {', '.join(present) or 'nothing'}; "
                                          f"{count} .so file(s) in {', '.join(libs) or '-'}{note}"))
    return out


def _sources(st: ProfileState, ctx: Context) -> List[str]:
    """Existing host paths of the profile's mounts and library dirs, outermost first, no nesting."""
    root = ctx.opts.roots.driver
    paths = [_discover.host_path(root, r.path) for r in st.profile.mounts]
    paths += [_discover.host_path(root, d) for d in st.profile.library_dirs]
    out: List[str] = []
    for p in sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}):
        if not any(p == o or p.startswith(o.rstrip("/") + "/") for o in out):
            out.append(p)
    return out


def _offence(st: os.stat_result) -> str:
    why = []
    if st.st_uid != 0:
        why.append(f"owned by uid {st.st_uid}")
    if st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode):
        why.append(f"mode {stat.S_IMODE(st.st_mode):04o} (group/other-writable)")
    return " and ".join(why)


def _walk(top: str, ctx: Context, bad: List[Tuple[str, str]], seen: List[int]) -> None:
    """Collect (path, why) for entries under *top* (and its parents up to the driver root)."""
    root = os.path.realpath(ctx.opts.roots.driver)
    parent = os.path.dirname(top)
    while parent.startswith(root.rstrip("/") + "/") and parent != root:
        try:
            why = _offence(os.lstat(parent))
        except OSError:
            why = ""
        if why:
            bad.append((parent, why))
        parent = os.path.dirname(parent)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [""] + dirnames + filenames:
            if seen[0] >= MAX_ENTRIES:
                return
            seen[0] += 1
            path = os.path.join(dirpath, name) if name else dirpath
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue  # a link's own owner and mode do not matter; its target is walked elsewhere
            why = _offence(st)
            if why:
                bad.append((path, why))
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]


def check_owners(ctx: Context) -> List[Result]:
    """driver-file-owners: mount sources root-owned and not group/other-writable."""
    out = []
    for st in ctx.states:
        bad: List[Tuple[str, str]] = []
        seen = [0]
        sources = _sources(st, ctx)
        for top in sources:
            _walk(top, ctx, bad, seen)
        bad = list(dict.fromkeys(bad))  # parents shared by several sources appear once
        name = st.profile.name
        if bad:
            first, why = bad[0]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            top = next((s for s in sources if first == s or first.startswith(s + "/")), first)
            out.append(fail("driver-file-owners", f"{name}: {_shown(ctx, first)!r} is {why}{more}",
                            f"chown -R root:root {top!r} && chmod -R go-w {top!r}: whoever can write there can "
                            f"replace libraries every container loads (vendor runtimes refuse such mount "
                            f"sources)"))
        elif seen[0] >= MAX_ENTRIES:
            out.append(warn("driver-file-owners", f"{name}: stopped after {MAX_ENTRIES} entries without a "
                                                  f"problem", "check the rest by hand: `find <dir> ! -user root`"))
        elif sources:
            out.append(ok("driver-file-owners", f"{name}: {seen[0]} driver file(s) and dir(s) root-owned, "
                                                f"not group/other-writable"))
    return out
