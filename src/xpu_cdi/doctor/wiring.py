"""Runtime wiring: CDI on and reading our spec dirs, the ``xpu`` handler
running a binary that exists, and a hook or wrapper where there is no CDI."""

from __future__ import annotations

import json
import os
from typing import List, Optional

from ..runtime import ocihooks
from . import configs, runtimes
from .configs import RuntimeConfig, binary_problem
from .context import Context
from .result import Result, fail, ok, warn
from .specs import ours

NAMES = {"containerd": "containerd", "crio": "CRI-O", "docker": "Docker"}
CONFIGURE = "xpu-cdi runtime configure --runtime {rt}"
WRAPPER = "xpu-container-runtime"
HOOK = ocihooks.HOOK_NAME


def _considered(ctx: Context, runtime: str) -> Optional[RuntimeConfig]:
    """The runtime's config when it is installed or configured, else None (nothing to check)."""
    cfg = configs.load(ctx, runtime)
    return cfg if runtime in ctx.versions or cfg.exists else None


def _our_dirs(ctx: Context) -> List[str]:
    return sorted({sf.dir for st in ctx.states for sf in ours(ctx, st)})


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def check_cdi(ctx: Context, runtime: str) -> List[Result]:
    """<runtime>-cdi: CDI enabled and reading the dirs our specs are in."""
    cfg = _considered(ctx, runtime)
    if cfg is None:
        return []
    check, name, release = f"{runtime}-cdi", NAMES[runtime], ctx.versions.get(runtime)
    if cfg.error:
        return [fail(check, f"cannot parse {cfg.path!r}: {cfg.error}",
                     f"fix the file's syntax: {name} itself refuses to start with it")]
    if cfg.cdi is None:
        return [ok(check, f"{name} {runtimes.show(release)} has no CDI support: cards reach containers only "
                          f"through the {WRAPPER} handler or the hook (see the 'hook' check)")]
    where = f"{cfg.path!r}" if cfg.exists else f"{cfg.path!r} (absent: defaults apply)"
    if not cfg.cdi:
        setting = f"enable_cdi = true in {cfg.cdi_table}" if runtime == "containerd" else cfg.cdi_table
        return [fail(check, f"CDI is off in {where}: pods are Running but get no /dev/xpu* or /dev/davinci* "
                            f"even when the device plugin returns CDI devices",
                     f"set {setting} in {cfg.path!r} ({CONFIGURE.format(rt=runtime)} --enable-cdi), "
                     f"then restart {name}")]
    unread = [d for d in _our_dirs(ctx) if not any(_same(d, s) for s in cfg.spec_dirs)]
    if unread:
        return [fail(check, f"our specs are in {', '.join(repr(d) for d in unread)} but {name} reads CDI specs "
                            f"only from {', '.join(repr(s) for s in cfg.spec_dirs)}",
                     f"add the dir to cdi_spec_dirs in {cfg.cdi_table} of {cfg.path!r}, or generate into "
                     f"one of the dirs {name} reads")]
    return [ok(check, f"CDI on in {where}; spec dirs {', '.join(cfg.spec_dirs)}")]


def check_handler(ctx: Context, runtime: str) -> List[Result]:
    """<runtime>-handler: the ``xpu`` handler exists and runs a binary that exists."""
    cfg = _considered(ctx, runtime)
    if cfg is None or cfg.error:
        return []
    check, name, want = f"{runtime}-handler", NAMES[runtime], ctx.opts.runtime_name
    handler = cfg.handlers.get(want)
    if handler is None:
        have = ", ".join(sorted(cfg.handlers)) or "none"
        text = f"no {want!r} handler in {cfg.path!r} (handlers: {have})"
        if cfg.cdi:
            return [ok(check, f"{text}: not needed while pods request cards by CDI name",
                       f"{CONFIGURE.format(rt=runtime)} adds it for selection by env var "
                       f"(CXPU_VISIBLE_DEVICES) with RuntimeClass {want!r}")]
        return [warn(check, f"{text}, and {name} has no CDI here: nothing injects cards",
                     f"{CONFIGURE.format(rt=runtime)} --runtime-name {want}, then restart {name}")]
    if not handler.binary:
        return [warn(check, f"handler {want!r} in {cfg.path!r} runs plain runc: it injects nothing",
                     f"{CONFIGURE.format(rt=runtime)} sets it to run {WRAPPER}")]
    problem = binary_problem(handler.binary)
    if problem:
        return [fail(check, f"handler {want!r} in {cfg.path!r} runs {problem}: every pod with RuntimeClass "
                            f"{want!r} fails to start",
                     f"install xpu-cdi on the node (it ships {WRAPPER}) or fix the handler's binary path")]
    return [ok(check, f"handler {want!r} runs {handler.binary!r}")]


def _hook_in_base_spec(path: str) -> bool:
    """Whether a containerd base_runtime_spec registers our hook (and the hook exists)."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError):
        return False
    hooks = spec.get("hooks") or {} if isinstance(spec, dict) else {}
    return any(os.path.basename(str(h.get("path", ""))) == HOOK and not binary_problem(str(h["path"]))
               for stage in hooks.values() if isinstance(stage, list) for h in stage if isinstance(h, dict))


def check_hook(ctx: Context) -> List[Result]:
    """hook: every installed runtime without CDI has the wrapper handler or the hook registered."""
    out = []
    for runtime in ("containerd", "docker"):
        release = ctx.versions.get(runtime)
        if runtime not in ctx.versions or runtimes.has_cdi(runtime, release) is not False:
            continue
        cfg = configs.load(ctx, runtime)
        name = f"{NAMES[runtime]} {runtimes.show(release)}"
        wrappers = [h.name for h in cfg.handlers.values()
                    if os.path.basename(h.binary) == WRAPPER and not binary_problem(h.binary)]
        hooked = [h.name for h in cfg.handlers.values() if h.base_spec and _hook_in_base_spec(h.base_spec)]
        if wrappers or hooked:
            via = ", ".join([f"handler {w!r} runs {WRAPPER}" for w in wrappers]
                            + [f"handler {h!r} has {HOOK} in its base_runtime_spec" for h in hooked])
            out.append(ok("hook", f"{name} has no CDI; cards are injected by: {via}"))
        else:
            out.append(fail("hook", f"{name} has no CDI, and neither {WRAPPER} nor {HOOK} is registered in "
                                    f"{cfg.path!r}: containers get no cards whatever the device plugin says",
                            f"{CONFIGURE.format(rt=runtime)} (adds the {ctx.opts.runtime_name!r} handler running "
                            f"{WRAPPER}) and give pods runtimeClassName: {ctx.opts.runtime_name}; or upgrade "
                            f"to a release with CDI ({runtimes.FIRST_CDI[runtime][0]}."
                            f"{runtimes.FIRST_CDI[runtime][1]}+)"))
    if not out and ctx.versions:
        out.append(ok("hook", "every installed runtime reads CDI specs: no hook or wrapper needed"))
    return out


def check_oci_hooks(ctx: Context) -> List[Result]:
    """oci-hooks: our oci-hooks.d files (podman, CRI-O) are valid and point at an existing hook."""
    out = []
    for path, (doc, why) in ocihooks.inspect(list(ctx.opts.hooks_dirs)).items():
        if why:
            out.append(fail("oci-hooks", f"{path!r} is not a valid hooks.d file ({why})",
                            "reinstall it from xpu-cdi's hooks/ directory"))
            continue
        hook_path = str(doc["hook"]["path"])
        problem = binary_problem(hook_path)
        if problem:
            out.append(fail("oci-hooks", f"{path!r} runs {problem}: matching containers fail to start",
                            "reinstall xpu-cdi, or fix hook.path in the file"))
        else:
            out.append(ok("oci-hooks", f"{path!r} runs {hook_path!r}"))
    return out
