"""``xpu-cdi runtime configure``: work out every file change first (a
:class:`Plan`), then show it as a diff or write it (backup, atomic).

Planning only reads, so ``--dry-run`` and a real run see the same changes;
a second run plans no change at all (idempotence is tested).
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .. import atomic, binaries
from ..cdi import registry
from ..errors import RuntimeConfigError
from . import containerd, crio, docker, ocihooks, podman, tomlconf

RUNTIMES = ("containerd", "crio", "docker", "podman")
DEFAULT_CONFIGS = {"containerd": containerd.DEFAULT_CONFIG, "crio": crio.DEFAULT_CONFIG,
                   "docker": docker.DEFAULT_CONFIG, "podman": podman.DEFAULT_CONFIG}
DEFAULT_SPEC_DIRS = registry.DEFAULT_DIRS
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Options:
    """What ``runtime configure`` was asked to do."""

    runtime: str
    config: Optional[str] = None  # default per runtime
    drop_in: Optional[str] = None
    enable_cdi: bool = False
    runtime_name: str = "xpu"
    set_as_default: bool = False
    wrapper: str = field(default_factory=lambda: binaries.installed("xpu-container-runtime"))
    spec_dirs: Tuple[str, ...] = DEFAULT_SPEC_DIRS
    oci_hook: Optional[bool] = None  # default: on for podman and CRI-O
    hook_path: str = field(default_factory=lambda: binaries.installed("xpu-cdi-hook"))
    hooks_dir: str = ocihooks.DEFAULT_HOOKS_DIR
    # the runtime's release when the caller knows it (the DaemonSet asks the running
    # containerd); None: `containerd --version` on PATH
    release: Optional[str] = None


@dataclass(frozen=True)
class Change:
    """One file: its text before (None: absent) and after."""

    path: str
    before: Optional[str]
    after: str
    backup: bool = True  # False for files that belong to xpu-cdi entirely

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class Plan:
    """The file changes of one run and notes for the user."""

    changes: List[Change] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


def _check(opts: Options) -> None:
    if opts.runtime not in RUNTIMES:
        raise RuntimeConfigError(f"unknown runtime {opts.runtime!r}: use one of {', '.join(RUNTIMES)}")
    if not _DNS_LABEL.match(opts.runtime_name):
        raise RuntimeConfigError(f"--runtime-name {opts.runtime_name!r} must be a DNS label (lowercase letters, "
                                 f"digits and '-'), as Kubernetes RuntimeClass handlers are")
    if not os.path.isabs(opts.wrapper):
        raise RuntimeConfigError(f"--wrapper-path {opts.wrapper!r} must be absolute: runtimes do not search PATH")
    if opts.drop_in is not None and not os.path.isabs(opts.drop_in):
        raise RuntimeConfigError(f"--drop-in {opts.drop_in!r} must be absolute: runtimes resolve it from /")


def _toml(doc: object, before: Optional[str]) -> str:
    """The document's text; a file we create (or that had one) ends with a newline."""
    text = tomlconf.dumps(doc)
    if text and not text.endswith("\n") and (not before or before.endswith("\n")):
        text += "\n"
    return text


def _containerd(opts: Options, path: str, plan: Plan) -> None:
    text = tomlconf.read_text(path)
    main = tomlconf.parse(text, path) if text is not None else tomlconf.empty()
    release = opts.release or containerd.installed_version()
    new_version = containerd.version_for_release(release)
    if opts.enable_cdi and release and release.startswith(("1.5.", "1.6.")):
        plan.notes.append(f"containerd {release} has no CDI and ignores enable_cdi: the '{opts.runtime_name}' "
                          f"handler (the wrapper) is what injects devices there")
    custom = containerd.binaries(main)["runc"]
    if custom and custom != opts.wrapper:
        plan.notes.append(f"the runc handler runs {custom!r}: set XPU_CDI_RUNTIME={custom} in containerd's "
                          f"environment so that the wrapper execs it")
    disabled = {str(p) for p in containerd.get(main, ["disabled_plugins"], []) or []}
    if disabled & {"cri", containerd.CRI_PLUGIN[2], containerd.CRI_PLUGIN[3]}:
        plan.notes.append(f"{path} disables the CRI plugin (disabled_plugins): Kubernetes cannot use the "
                          f"'{opts.runtime_name}' handler until it is enabled (ctr --runc-binary still can)")
    args = (opts.runtime_name, opts.wrapper, opts.enable_cdi, opts.set_as_default, list(opts.spec_dirs))
    if opts.drop_in:
        drop = containerd.drop_in_doc(main, *args, new_version)
        before = tomlconf.read_text(opts.drop_in)
        plan.changes.append(Change(opts.drop_in, before, _toml(drop, before), False))
        if main and containerd.version(main) < 3 and containerd.get(main, containerd.cri_keys(main)):
            plan.notes.append(f"containerd 1.x replaces a plugin's whole table with an imported one: the drop-in "
                              f"carries a copy of the CRI table of {path}; run this again after editing it")
        containerd.ensure_import(main, opts.drop_in, new_version)
    else:
        plan.notes.extend(containerd.configure(main, *args, new_version))
    plan.changes.append(Change(path, text, _toml(main, text)))


def _crio(opts: Options, path: str, plan: Plan) -> None:
    drop_in = opts.drop_in or crio.DEFAULT_DROP_IN
    effective = crio.load_effective(path, os.path.dirname(drop_in), skip=drop_in)
    doc = crio.drop_in_doc(effective, opts.runtime_name, opts.wrapper, opts.set_as_default, list(opts.spec_dirs))
    before = tomlconf.read_text(drop_in)
    plan.changes.append(Change(drop_in, before, _toml(doc, before), False))
    source, handler = crio.source_handler(effective, opts.runtime_name)
    real = crio.binary(source, handler)
    on_path = shutil.which("runc")
    if source and not (on_path and os.path.realpath(shutil.which(real) or real) == os.path.realpath(on_path)):
        plan.notes.append(f"the {source} handler runs {real!r}: set XPU_CDI_RUNTIME={real} in "
                          f"CRI-O's environment so that the wrapper execs it (default: runc on PATH)")
    if opts.enable_cdi:
        plan.notes.append("CRI-O always has CDI on: only cdi_spec_dirs is written")


def _docker(opts: Options, path: str, plan: Plan) -> None:
    if opts.drop_in:
        raise RuntimeConfigError("docker has no drop-in files: leave out --drop-in (daemon.json is edited in place)")
    text = tomlconf.read_text(path)
    doc = docker.parse(text, path) if text is not None else {}
    before = copy.deepcopy(doc)
    plan.notes.extend(docker.configure(doc, opts.runtime_name, opts.wrapper, opts.enable_cdi,
                                       opts.set_as_default, list(opts.spec_dirs)))
    # compare content, not text: an unchanged config keeps its own formatting
    after = text if (doc == before and text is not None) else docker.dumps(doc, text or "")
    plan.changes.append(Change(path, text, after))


def _podman(opts: Options, path: str, plan: Plan) -> None:
    if opts.drop_in:
        doc = tomlconf.empty()
        podman.configure(doc, opts.runtime_name, opts.wrapper, opts.set_as_default)
        before = tomlconf.read_text(opts.drop_in)
        plan.changes.append(Change(opts.drop_in, before, _toml(doc, before), False))
    else:
        text = tomlconf.read_text(path)
        doc = tomlconf.parse(text, path) if text is not None else tomlconf.empty()
        podman.configure(doc, opts.runtime_name, opts.wrapper, opts.set_as_default)
        plan.changes.append(Change(path, text, _toml(doc, text)))
    if opts.enable_cdi:
        plan.notes.append("podman always has CDI on (--device vendor/class=name)")


def plan(opts: Options) -> Plan:
    """Every file change ``runtime configure`` would make; reads, never writes.

    Raises:
        RuntimeConfigError: a bad option, or a config that cannot be read or parsed.
    """
    _check(opts)
    path = opts.config or DEFAULT_CONFIGS[opts.runtime]
    out = Plan()
    {"containerd": _containerd, "crio": _crio, "docker": _docker, "podman": _podman}[opts.runtime](opts, path, out)
    hook = opts.oci_hook if opts.oci_hook is not None else opts.runtime in ("crio", "podman")
    if hook:
        target = os.path.join(opts.hooks_dir, ocihooks.FILE_NAME)
        out.changes.append(Change(target, tomlconf.read_text(target), ocihooks.render(opts.hook_path), False))
    if not os.access(opts.wrapper, os.X_OK):
        out.notes.append(f"{opts.wrapper!r} is not an executable file (yet): install xpu-cdi there or pass "
                         f"--wrapper-path")
    return out


def diff(p: Plan) -> str:
    """A unified diff of the plan (empty when nothing would change)."""
    chunks = []
    for c in p.changes:
        if c.changed:
            chunks.extend(difflib.unified_diff((c.before or "").splitlines(True), c.after.splitlines(True),
                                               fromfile=c.path if c.before is not None else "/dev/null",
                                               tofile=c.path))
    return "".join(chunks)


def _backup_name(path: str) -> str:
    base = f"{path}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    name, n = base, 1
    while os.path.lexists(name):
        name, n = f"{base}.{n}", n + 1
    return name


def apply(p: Plan) -> List[str]:
    """Write the plan's changed files (a backup of each edited one first).

    Returns:
        One line per file: what happened to it.

    Raises:
        RuntimeConfigError: a file cannot be written.
    """
    done = []
    for c in p.changes:
        if not c.changed:
            done.append(f"unchanged {c.path}")
            continue
        # a symlinked config (managed elsewhere) is edited where it lives, not replaced by a file
        target = os.path.realpath(c.path)
        try:
            mode = os.stat(target).st_mode & 0o7777 if c.before is not None else 0o644
            os.makedirs(os.path.dirname(target) or ".", mode=0o755, exist_ok=True)
            line = f"wrote {c.path}" + (f" (-> {target})" if target != os.path.abspath(c.path) else "")
            if c.before is not None and c.backup:
                backup = _backup_name(target)
                atomic.write_atomic(backup, c.before.encode(), mode)
                line += f" (backup: {backup})"
            atomic.write_atomic(target, c.after.encode(), mode)
        except OSError as err:
            raise RuntimeConfigError(f"cannot write {c.path!r}: {err.strerror or err}") from None
        done.append(line)
    return done
