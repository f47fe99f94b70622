"""``xpu-cdi list`` and ``xpu-cdi validate``: the spec directories as runtimes read them,
and spec files against our strict schema and the CDI library's rules."""

from __future__ import annotations

import os
import sys
from typing import Tuple

import click

from ..clikit import SPEC_DIRS_OPTION
from ..errors import SpecError
from . import registry


@click.command("list")
@SPEC_DIRS_OPTION
@click.pass_context
def list_devices(ctx: click.Context, spec_dirs: Tuple[str, ...]) -> None:
    """Print the qualified CDI devices the spec directories define.

    A --spec-dir that does not exist is an error, and so is none of the default ones existing.
    """
    missing = [d for d in spec_dirs if not os.path.isdir(d)]
    if missing and ctx.get_parameter_source("spec_dirs") is not click.core.ParameterSource.DEFAULT:
        raise SpecError(f"spec dir {missing[0]!r} does not exist: name the directory the specs are in, or "
                        f"write them there first (`xpu-cdi generate --spec-dir {missing[0]}`)")
    if len(missing) == len(spec_dirs):
        raise SpecError(f"no spec dir exists ({', '.join(map(repr, spec_dirs))}): write the specs first "
                        "(`xpu-cdi generate`)")
    reg = registry.load(spec_dirs)
    for problem in reg.problems:
        click.echo(f"xpu-cdi: warning: {problem}", err=True)
    for name in sorted(reg.devices):
        click.echo(name)


@click.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate(files: Tuple[str, ...]) -> None:
    """Check spec files against our strict schema and the CDI library's rules."""
    from . import validate as cdi_validate  # jsonschema: only this command pays for it

    bad = 0
    for path in files:
        try:
            spec = cdi_validate.load_file(path)
        except OSError as err:
            click.echo(f"{path}: cannot read: {err.strerror}")
            bad += 1
            continue
        except Exception as err:  # noqa: BLE001 - json/yaml parse errors of any kind
            click.echo(f"{path}: cannot parse: {' '.join(str(err).split())}")
            bad += 1
            continue
        found = cdi_validate.problems(spec)
        for p in found:
            click.echo(f"{path}: {p}")
        if not found:
            click.echo(f"{path}: ok ({spec['kind']}, cdiVersion {spec['cdiVersion']}, "
                       f"{len(spec['devices'])} devices)")
        bad += bool(found)
    if bad:
        sys.exit(1)


def list_command() -> click.Command:
    return list_devices


def validate_command() -> click.Command:
    return validate
