"""What every ``xpu-cdi`` command shares: errors as one line and an exit
code, the root options (--profile, --profiles-dir, the three host roots)
and the --spec-dir and --node-config options of the commands that read
specs.  (From those options to generate's inputs: ``generate.options``.)

Each subsystem's ``command.py`` imports this module, never ``cli``: ``cli``
imports them (on first use), so the dependency goes one way.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Dict, Tuple

import click

from . import bounded, errors
from .cdi import registry

if TYPE_CHECKING:
    from .log import Log

from .errors import EXIT_CODES, exit_code  # noqa: F401 - the table is errors'; the commands name it here

PROFILE_FAILED = errors.PROFILE_SKIPPED  # --profile auto: a profile failed and was skipped; the others' written


class Group(click.Group):
    """A click group that turns our errors into one line on stderr and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.XpuCdiError as err:
            ctx.exit(errors.report(err))


class Seconds(click.ParamType):
    """A flag's number of seconds in ``[low, high]``, checked as a config file's (bounded.seconds):
    ``nan`` and ``inf`` are refused, which click's FloatRange lets through or not by accident."""

    name = "seconds"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            number = value if isinstance(value, (int, float)) else float(str(value).strip())
            return bounded.seconds(number, self.low, self.high)
        except ValueError:
            self.fail(f"{bounded.short(value, 40)}: must be a number of seconds between {self.low:g} and "
                      f"{self.high:g}", param, ctx)

    def __repr__(self) -> str:
        return f"Seconds({self.low:g}, {self.high:g})"


def root_options(f: Any) -> Any:
    """--profile, --profiles-dir and the three host roots, shared by generate, doctor, topology."""
    from .generate.profile import DEFAULT_PROFILE_DIRS  # here: `list` builds no root options, needs no YAML

    for opt in reversed([
        click.option("--profile", "profiles", multiple=True, metavar="NAME|FILE",
                     help="Vendor profile (repeatable); 'auto' (default) takes every profile whose cards are present."),
        click.option("--profiles-dir", multiple=True, default=DEFAULT_PROFILE_DIRS, show_default=True,
                     help="Directory of admin profiles (*.yaml) that add to or replace the built-in ones."),
        click.option("--dev-root", default="/", show_default=True, help="Where the host's /dev is."),
        click.option("--driver-root", default="/", show_default=True, help="Where driver files (/usr/local/...) are."),
        click.option("--sysfs-root", default="/", show_default=True, help="sysfs is read from <root>/sys."),
    ]):
        f = opt(f)
    return f


@functools.lru_cache(maxsize=None)  # click.option mutates the function: build each command once
def subcommand(name: str, f: Any, options: Tuple[Any, ...], envvars: bool = False) -> click.Command:
    """The command *name* running *f*, with *options* (in --help order) and the root options;
    a daemon's (*envvars*) settings also read from the environment (:func:`read_from_env`)."""
    for opt in reversed(options):
        f = opt(f)
    command = click.command(name)(root_options(f))
    if envvars:
        read_from_env(command)
    return command


ENV_PREFIX = "XPU_CDI_"
# what one run does, not how the daemon is set up: never from the environment (the readiness
# probe's exec inherits the container's env, and must not start a daemon nor the daemon probe)
NOT_FROM_ENV = frozenset({"--probe", "--once", "--json", "--daemon", "--help"})


def env_name(flag: str) -> str:
    """The environment variable of a long flag: ``--plugin-dir`` -> ``XPU_CDI_PLUGIN_DIR``."""
    return ENV_PREFIX + flag[2:].upper().replace("-", "_")


def read_from_env(command: click.Command) -> None:
    """The one rule for every daemon: each setting's flag also reads ``XPU_CDI_<LONG_FLAG>``
    (shown in --help); a flag given wins over it, and it over the config file and the default.
    A repeatable flag's variable holds its values separated by spaces. An envvar the option had
    already (``labels --node``: ``NODE_NAME``) stays, after ours."""
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        long = next((o for o in param.opts if o.startswith("--")), None)
        if long is None or long in NOT_FROM_ENV:
            continue
        had = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
        param.envvar = [env_name(long), *had]
        param.show_envvar = True


# where the commands that read specs (list, doctor, the daemons) look
SPEC_DIRS_OPTION = click.option("--spec-dir", "spec_dirs", multiple=True, default=registry.DEFAULT_DIRS,
                                show_default=True, help="CDI spec directory, lowest priority first (repeatable).")


def __getattr__(name: str) -> Any:
    """``NODE_CONFIG_OPTION`` and ``LOG_OPTIONS``, built on first use: only doctor and the daemons
    take them, and ``list`` and ``generate`` then import neither the node config nor logging."""
    if name == "NODE_CONFIG_OPTION":  # the node config the hook, the wrapper and the daemons follow
        from . import nodeconfig

        value: Any = click.option("--node-config", default=nodeconfig.DEFAULT_PATH, show_default=True,
                                  help="The node config (docs/operations.md): what the hook, the wrapper and "
                                       "the daemons follow on this node.")
    elif name == "LOG_OPTIONS":  # the daemons' logging (device-plugin, dra-driver, exporter, watch, labels)
        from . import log

        value = (
            click.option("--log-level", type=click.Choice(list(log.LEVELS)), default="info", show_default=True,
                         help="Lines below this level are not written."),
            click.option("-v", "--verbose", type=KLOG_LEVEL, is_flag=False, flag_value=str(KLOG_DEBUG), default=None,
                         metavar="[LEVEL]", callback=lambda _ctx, _param, v: v is not None and v >= KLOG_DEBUG,
                         help=f"klog's verbosity, as -v=4 or -v 4: {KLOG_DEBUG} and above (or -v alone) is "
                              "--log-level debug."),
            click.option("--log-format", type=click.Choice(log.FORMATS), default="text", show_default=True,
                         help="text: klog's shape (I1204 18:20:01.123456 PID LOGGER] MESSAGE); json: one object "
                              "a line (ts, level, logger, msg)."),
        )
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: every command taking it shares the one object
    return value


KLOG_DEBUG = 4  # Kubernetes' logging convention: V(4) is debug-level verbosity


class KlogLevel(click.ParamType):
    """``-v``'s value, klog's verbosity: ``-v 4``, ``-v4`` and klog's own ``-v=4`` (click hands
    a short option's rest, ``=4``, over as its value)."""

    name = "LEVEL"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        text = value[1:] if value.startswith("=") else value
        if not text.isdigit():
            self.fail(f"{value!r} is not a verbosity level: a number, {KLOG_DEBUG} and above is debug", param, ctx)
        return int(text)


KLOG_LEVEL = KlogLevel()


def level_of(log_level: str, verbose: bool) -> str:
    """The level LOG_OPTIONS' flags ask for (``-v`` is ``--log-level debug``)."""
    return "debug" if verbose else log_level


def daemon_log(name: str, log_level: str, verbose: bool, log_format: str) -> Log:
    """The stderr Log of the daemon *name* (``xpu-cdi device-plugin``) from LOG_OPTIONS' flags."""
    from . import log

    return log.to_stderr(name, level_of(log_level, verbose), log_format)


def echo_labels(labels: Dict[str, str], as_json: bool) -> None:
    """Node labels as ``topology --labels`` and ``labels`` print them: ``key=value`` lines, or a JSON object."""
    if as_json:
        click.echo(json.dumps(labels, indent=2, sort_keys=True))
    else:
        for key in sorted(labels):
            click.echo(f"{key}={labels[key]}")
