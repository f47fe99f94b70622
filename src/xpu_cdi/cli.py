"""The ``xpu-cdi`` command line: the table of its commands, each loaded on first use
from the ``command.py`` of its subsystem (``generate`` after a driver update then pays
for neither tomlkit, pyudev nor the doctor).  Errors become one line and an exit code
in one place, :data:`errors.EXIT_CODES`.
"""

from __future__ import annotations

import importlib
from typing import Dict, List, Optional, Tuple

import click

from . import clikit

# name -> (module, the function of it that builds the click command): most are the
# command() of a subsystem's command.py
COMMANDS: Dict[str, Tuple[str, str]] = {name: (f"xpu_cdi.{package}.command", "command") for name, package in (
    ("generate", "generate"), ("runtime", "runtime"), ("watch", "watch"), ("topology", "topology"),
    ("doctor", "doctor"), ("system", "system"), ("device-plugin", "deviceplugin"), ("exporter", "exporter"),
    ("dra-driver", "dra"), ("host", "host"), ("labels", "labels"))}
COMMANDS.update({"list": ("xpu_cdi.cdi.command", "list_command"),
                 "validate": ("xpu_cdi.cdi.command", "validate_command"),
                 "hook": ("xpu_cdi.binaries", "hook_command"),
                 "device-plugin-config": ("xpu_cdi.deviceplugin.command", "config_command")})

class Group(clikit.Group):
    """The top-level group: builds the commands of :data:`COMMANDS` when first asked for."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name not in self.commands and name in COMMANDS:
            module, builder = COMMANDS[name]
            self.add_command(getattr(importlib.import_module(module), builder)(), name)
        return super().get_command(ctx, name)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xpu-cdi", prog_name="xpu-cdi")
def main() -> None:
    """CDI specs, an OCI hook and runtime wiring for AI accelerators
    (Kunlunxin XPU, Huawei Ascend NPU and more)."""


if __name__ == "__main__":  # pragma: no cover
    main()
