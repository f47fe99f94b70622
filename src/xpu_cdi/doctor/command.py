"""``xpu-cdi doctor``: run every check and print one line each (or JSON)."""

from __future__ import annotations

import json
import os
import sys
from typing import Callable, List, Optional, Tuple

import click

from ..clikit import NODE_CONFIG_OPTION, SPEC_DIRS_OPTION, subcommand
from ..errors import XpuCdiError
from ..generate.options import roots_of
from . import (claims, consumers, devices, dra, driverfiles, exporter, interconnect, k8s, olddriver, plugin, runtimes,
               specs, stale, topo, wiring)
from .context import DEFAULT_HOOKS_DIRS, Context, Options, gather
from .result import Result, exit_code, fail, line, summary

Check = Callable[[Context], List[Result]]

CHECKS: Tuple[Tuple[str, Check], ...] = (
    ("runtimes", runtimes.check_runtimes),
    ("driver", devices.check_driver),
    ("device-nodes", devices.check_nodes),
    ("device-permissions", devices.check_permissions),
    ("control-nodes", devices.check_control),
    ("dev-char", devices.check_dev_char),
    ("driver-files", driverfiles.check_files),
    ("driver-file-owners", driverfiles.check_owners),
    ("spec-files", specs.check_present),
    ("spec-valid", specs.check_valid),
    ("spec-version", specs.check_versions),
    ("spec-fresh", stale.check_fresh),
    ("spec-conflicts", specs.check_conflicts),
    ("spec-paths", specs.check_paths),
    ("containerd-cdi", lambda ctx: wiring.check_cdi(ctx, "containerd")),
    ("containerd-handler", lambda ctx: wiring.check_handler(ctx, "containerd")),
    ("crio-cdi", lambda ctx: wiring.check_cdi(ctx, "crio")),
    ("crio-handler", lambda ctx: wiring.check_handler(ctx, "crio")),
    ("docker-cdi", lambda ctx: wiring.check_cdi(ctx, "docker")),
    ("docker-handler", lambda ctx: wiring.check_handler(ctx, "docker")),
    ("hook", wiring.check_hook),
    ("oci-hooks", wiring.check_oci_hooks),
    ("runtimeclass", k8s.check_runtimeclass),
    ("topology", topo.check_topology),
    ("interconnect", interconnect.check_interconnect),
    ("device-plugin", plugin.check_plugin),
    ("env-selection", plugin.check_env_selection),
    ("dra-driver", dra.check_dra),
    ("one-way", dra.check_one_way),
    ("dra-claim-specs", claims.check_claim_specs),
    ("whole-and-partitioned", claims.check_partitioned),
    ("vnpu-held", claims.check_vnpus),
    ("exporter", exporter.check_exporter),
    ("old-driver", olddriver.check_old_driver),
    ("consumers", consumers.check_consumers),
)


def run(opts: Options) -> List[Result]:
    """Every check against the host *opts* describes.

    A check that hits one of our errors becomes a ``fail`` line naming it,
    so one broken piece never hides the others.

    Raises:
        ProfileError: an unknown ``--profile`` (nothing can be checked).
    """
    ctx = gather(opts)
    ctx.versions = runtimes.detect() if opts.versions is None else dict(opts.versions)
    results: List[Result] = []
    for name, check in CHECKS:
        try:
            results += check(ctx)
        except XpuCdiError as err:
            results.append(fail(name, f"check stopped: {err}", "fix the error above and run doctor again"))
        except OSError as err:
            results.append(fail(name, f"check stopped: {err.strerror or err} ({err.filename!r})",
                                "check the path exists and is readable by root"))
    return results


def doctor(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
           sysfs_root: str, proc_root: Optional[str], spec_dirs: Tuple[str, ...], containerd_config: str,
           crio_config: str, docker_config: str, runtimeclasses: Tuple[str, ...], hooks_dirs: Tuple[str, ...],
           runtime_name: str, runtime_versions: Tuple[str, ...], plugin_dir: str, plugin_status_file: str,
           node_config: str, exporter_status_file: str, dra_run_dir: str, pod_resources_socket: str,
           as_json: bool) -> None:
    """Check the chain from driver to pod: cards, nodes, driver files, specs,
    runtime config, hook, RuntimeClass, topology, device plugin, env selection,
    DRA driver, one way per kind, exporter.

    One line per check with what it found and the fix. Exit 0 all ok,
    1 any fail, 6 warnings only.
    """
    roots = roots_of(dev_root, driver_root, sysfs_root)
    opts = Options(roots=roots, proc_root=os.path.abspath(proc_root) if proc_root else roots.sysfs,
                   profiles=profiles, profiles_dir=profiles_dir,
                   spec_dirs=tuple(os.path.abspath(d) for d in spec_dirs),
                   containerd_config=containerd_config, crio_config=crio_config, docker_config=docker_config,
                   runtimeclasses=runtimeclasses, hooks_dirs=hooks_dirs, runtime_name=runtime_name,
                   versions=runtimes.parse_option(runtime_versions) if runtime_versions else None,
                   plugin_dir=os.path.abspath(plugin_dir), plugin_status_file=os.path.abspath(plugin_status_file),
                   node_config=os.path.abspath(node_config),
                   exporter_status_file=os.path.abspath(exporter_status_file),
                   dra_run_dir=os.path.abspath(dra_run_dir), pod_resources_socket=os.path.abspath(pod_resources_socket))
    results = run(opts)
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        for r in results:
            click.echo(line(r))
        click.echo(summary(results), err=True)
    sys.exit(exit_code(results))


OPTIONS = (
    click.option("--proc-root", default=None, help="proc is read from <root>/proc (default: --sysfs-root)."),
    SPEC_DIRS_OPTION,
    click.option("--containerd-config", default=Options.containerd_config, show_default=True),
    click.option("--crio-config", default=Options.crio_config, show_default=True,
                 help="CRI-O config; drop-ins in crio.conf.d beside it are read too."),
    click.option("--docker-config", default=Options.docker_config, show_default=True),
    click.option("--runtimeclass", "runtimeclasses", multiple=True, metavar="FILE",
                 help="RuntimeClass manifest whose handler must match this node's runtime (repeatable)."),
    click.option("--hooks-dir", "hooks_dirs", multiple=True, default=DEFAULT_HOOKS_DIRS, show_default=True,
                 help="oci-hooks.d directory (podman, CRI-O) (repeatable)."),
    click.option("--runtime-name", default="xpu", show_default=True,
                 help="The runtime handler name `xpu-cdi runtime configure` set up."),
    click.option("--runtime-version", "runtime_versions", multiple=True, metavar="NAME=X.Y.Z|none",
                 help="Installed runtime and release (repeatable); replaces asking `<runtime> --version` on PATH. "
                      "'none': no runtime installed."),
    click.option("--plugin-dir", default=Options.plugin_dir, show_default=True,
                 help="kubelet's device-plugins directory (kubelet.sock and the plugins' sockets)."),
    NODE_CONFIG_OPTION,
    *(click.option(flag, default=getattr(Options, flag[2:].replace("-", "_")), show_default=True,
                   help=f"The {what} of `xpu-cdi {daemon}` (its {own}).") for flag, what, daemon, own in (
        ("--plugin-status-file", "status file", "device-plugin", "--status-file"),
        ("--exporter-status-file", "status file", "exporter", "--status-file"),
        ("--dra-run-dir", "run dir", "dra-driver", "--run-dir: status files dra-driver-*.json"))),
    click.option("--pod-resources-socket", default=Options.pod_resources_socket, show_default=True,
                 help="kubelet's PodResources socket: the pods holding cards (the consumers check)."),
    click.option("--json", "as_json", is_flag=True, help='Print a JSON list of {"check","status","found","fix"}.'),
)


def command() -> click.Command:
    """The ``doctor`` click command (``cli`` builds it on first use)."""
    return subcommand("doctor", doctor, OPTIONS)
