"""Spec file checks: present for every kind on the host, valid, loadable by
the installed runtimes, no conflicting definitions, paths that exist."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import bounded
from ..cdi import registry
from ..cdi import validate as cdi_validate
from ..cdi import version as _version
from ..generate import spec as _spec
from . import runtimes
from .context import Context, ProfileState
from .result import Result, fail, ok, warn


@dataclass
class SpecFile:
    """One file in a spec dir, parsed and validated."""

    path: str
    dir: str
    spec: Optional[Dict[str, Any]] = None
    error: str = ""  # unreadable or unparseable
    problems: List[str] = field(default_factory=list)
    profile: str = ""  # from the hook index generate writes beside it

    @property
    def kind(self) -> str:
        return str(self.spec.get("kind", "")) if self.spec else ""


def _index_profile(path: str) -> str:
    """The profile named in the hook index ``generate`` writes beside a spec ("" when none)."""
    try:
        index = bounded.read_json(path + _spec.INDEX_SUFFIX, 1 << 20)
    except (OSError, ValueError):
        return ""
    return str(index.get("profile", "")) if isinstance(index, dict) else ""


def scan(ctx: Context) -> List[SpecFile]:
    """Every ``*.json``/``*.yaml`` directly in the spec dirs (cached per run)."""
    if "specs" in ctx.cache:
        files: List[SpecFile] = ctx.cache["specs"]
        return files
    files = []
    for d in ctx.opts.spec_dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".json", ".yaml")):
                continue
            sf = SpecFile(os.path.join(d, name), d)
            try:
                data = cdi_validate.load_file(sf.path)
            except OSError as err:
                sf.error = f"cannot read: {err.strerror}"
            except Exception as err:  # noqa: BLE001 - json/yaml parse errors of any kind
                sf.error = f"cannot parse: {' '.join(str(err).split())}"
            else:
                if isinstance(data, dict):
                    sf.spec = data
                sf.problems = cdi_validate.problems(data)
            sf.profile = _index_profile(sf.path)
            files.append(sf)
    ctx.cache["specs"] = files
    return files


def ours(ctx: Context, st: ProfileState) -> List[SpecFile]:
    """The spec files of one profile: same kind, or generated for it (``--vendor``/``--class``)."""
    return [sf for sf in scan(ctx)
            if sf.kind == st.profile.kind or sf.profile == st.profile.name
            or (sf.spec is None and os.path.basename(sf.path).startswith(st.profile.kind.replace("/", "-") + "."))]


def _where(ctx: Context) -> str:
    return ", ".join(repr(d) for d in ctx.opts.spec_dirs)


def check_present(ctx: Context) -> List[Result]:
    """spec-files: a spec for every kind whose cards are present."""
    out = []
    for st in ctx.states:
        if not st.nodes:
            continue
        mine = ours(ctx, st)
        if not mine:
            target = os.path.join(ctx.opts.spec_dirs[0] if ctx.opts.spec_dirs else "/etc/cdi",
                                  _spec.file_name(st.profile.kind, "json"))
            out.append(fail("spec-files", f"{st.profile.name}: no spec for {st.profile.kind!r} in {_where(ctx)}: "
                                          f"requests for {st.profile.kind}=N fail as 'unresolvable CDI devices'",
                            f"run `xpu-cdi generate` (writes {target!r})"))
        else:
            out.append(ok("spec-files", f"{st.profile.name}: {', '.join(repr(sf.path) for sf in mine)}"))
    ignored = [os.path.join(d, n) for d in ctx.opts.spec_dirs if os.path.isdir(d)
               for n in sorted(os.listdir(d)) if n.endswith(".yml")]
    if ignored:
        out.append(warn("spec-files", f"runtimes ignore {', '.join(repr(p) for p in ignored)} ('.yml')",
                        "rename to .yaml"))
    return out


def _is_ours(ctx: Context, sf: SpecFile) -> bool:
    return any(sf in ours(ctx, st) for st in ctx.states)


def check_valid(ctx: Context) -> List[Result]:
    """spec-valid: every spec file parses and passes the schema and CDI's rules.

    A broken file of another vendor is a warning: runtimes skip it and load the rest.
    """
    out = []
    good = 0
    for sf in scan(ctx):
        bad = [sf.error] if sf.error else sf.problems
        if not bad:
            good += 1
            continue
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        if _is_ours(ctx, sf):
            out.append(fail("spec-valid", f"{sf.path!r}: {bad[0]}{more}: runtimes skip the whole file",
                            f"regenerate it with `xpu-cdi generate`; `xpu-cdi validate {sf.path}` lists "
                            f"every problem"))
        else:
            out.append(warn("spec-valid", f"{sf.path!r}: {bad[0]}{more}: runtimes skip this file",
                            f"fix or remove it (`xpu-cdi validate {sf.path}` lists every problem)"))
    if good:
        out.append(ok("spec-valid", f"{good} spec file(s) valid in {_where(ctx)}"))
    return out


def check_versions(ctx: Context) -> List[Result]:
    """spec-version: each installed runtime with CDI loads the cdiVersion of our specs."""
    readers = {n: r for n, r in ctx.versions.items() if runtimes.highest(n, r)}
    out = []
    for st in ctx.states:
        for sf in ours(ctx, st):
            ver = str(sf.spec.get("cdiVersion", "")) if sf.spec else ""
            if ver not in _version.KNOWN:
                continue  # spec-valid reports it
            too_new = [(n, r) for n, r in sorted(readers.items())
                       if _version.parse(ver) > _version.parse(runtimes.highest(n, r))]
            for name, release in too_new:
                upgrade = runtimes.first_release_for(name, ver)
                out.append(fail("spec-version", f"{sf.path!r} is cdiVersion {ver} but {name} "
                                                f"{runtimes.show(release)} loads at most "
                                                f"{runtimes.highest(name, release)}: it ignores the file "
                                                f"('unresolvable CDI devices')",
                                "regenerate without --with-topology (the default spec is 0.5.0)"
                                + (f", or upgrade {name} to {upgrade} or later" if upgrade else "")))
            if readers and not too_new:
                names = ", ".join(f"{n} {runtimes.show(r)}" for n, r in sorted(readers.items()))
                out.append(ok("spec-version", f"{sf.path!r} (cdiVersion {ver}) loads in {names}"))
    return out


def check_conflicts(ctx: Context) -> List[Result]:
    """spec-conflicts: one device defined twice in a dir (both dropped) or shadowed across dirs."""
    reg = registry.load(ctx.opts.spec_dirs)
    out = []
    for problem in reg.problems:
        if problem.startswith("conflicting device"):
            out.append(fail("spec-conflicts", problem.split(": both dropped")[0] + ": runtimes drop both",
                            "keep each device in one file: remove the older spec (e.g. one written by "
                            "another tool for the same kind)"))
    defined: Dict[str, List[SpecFile]] = {}
    for sf in scan(ctx):
        if sf.spec and not sf.error:
            for dev in sf.spec.get("devices") or []:
                if isinstance(dev, dict):
                    defined.setdefault(f"{sf.kind}={dev.get('name')}", []).append(sf)
    shadowed: Dict[str, List[str]] = {}
    for qualified, files in defined.items():
        dirs = {sf.dir for sf in files}
        if len(dirs) > 1:
            key = " and ".join(repr(sf.path) for sf in files)
            shadowed.setdefault(key, []).append(qualified)
    for where, devices in shadowed.items():
        winner = where.rsplit(" and ", 1)[-1]
        out.append(warn("spec-conflicts", f"{where} both define {len(devices)} device(s) "
                                          f"({', '.join(sorted(devices)[:3])}...): {winner} wins",
                        "remove the stale copy so a later refresh of one cannot be masked by the other"))
    if not out:
        out.append(ok("spec-conflicts", f"{len(reg.devices)} device(s), each defined once"))
    return out


def _edits(spec: Dict[str, Any]) -> List[Dict[str, Any]]:
    out = [spec.get("containerEdits") or {}]
    out += [d.get("containerEdits") or {} for d in spec.get("devices") or [] if isinstance(d, dict)]
    return [e for e in out if isinstance(e, dict)]


def check_paths(ctx: Context) -> List[Result]:
    """spec-paths: hook programs, mount sources and device nodes our specs name exist."""
    from .configs import binary_problem

    out = []
    for st in ctx.states:
        for sf in ours(ctx, st):
            if not sf.spec:
                continue
            hooks, missing = set(), set()
            for e in _edits(sf.spec):
                for h in e.get("hooks") or []:
                    problem = binary_problem(str(h.get("path", "")))
                    if problem:
                        hooks.add(problem)
                for m in e.get("mounts") or []:
                    if m.get("hostPath") and not os.path.exists(m["hostPath"]):
                        missing.add(repr(m["hostPath"]))
                for n in e.get("deviceNodes") or []:
                    hp = n.get("hostPath") or n.get("path")
                    if hp and not os.path.exists(hp):
                        missing.add(repr(hp))
            if hooks:
                out.append(fail("spec-paths", f"{sf.path!r}: hook {', '.join(sorted(hooks))}: every container "
                                              f"that requests these devices fails to start",
                                "reinstall xpu-cdi, or regenerate with --hook-path set to the installed "
                                "xpu-cdi-hook"))
            if missing:
                out.append(fail("spec-paths", f"{sf.path!r} names {', '.join(sorted(missing))}, which no "
                                              f"longer exist: containers fail to start",
                                "run `xpu-cdi generate` (a card, node or driver path went away)"))
            if not hooks and not missing:
                out.append(ok("spec-paths", f"{sf.path!r}: every hook, mount source and device node exists"))
    return out
