"""Write xpu-cdi(1) in roff to stdout, made from the commands' own --help
texts so that the page cannot drift from the code.

Run at package build time with the built package on PYTHONPATH:
``python3 packaging/man/make_manpage.py > xpu-cdi.1``.
"""

from __future__ import annotations

import sys
from typing import List

import click

from xpu_cdi._version import VERSION
from xpu_cdi.cli import main

DATE = "2026-11-30"  # fixed, so that builds are reproducible


def roff_text(text: str) -> str:
    """Escape a plain-text block for roff inside .nf/.fi."""
    out: List[str] = []
    for line in text.splitlines():
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def help_of(cmd: click.Command, name: str, parent: click.Context) -> str:
    ctx = click.Context(cmd, info_name=name, parent=parent, terminal_width=78, max_content_width=78)
    return cmd.get_help(ctx)


def page() -> str:
    root = click.Context(main, info_name="xpu-cdi", terminal_width=78, max_content_width=78)
    lines = [
        f'.TH XPU-CDI 1 "{DATE}" "xpu-cdi {VERSION}" "User Commands"',
        ".SH NAME",
        "xpu-cdi \\- CDI specs, an OCI hook and runtime wiring for AI accelerators",
        ".SH SYNOPSIS",
        ".B xpu-cdi",
        "\\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        "xpu\\-cdi finds the accelerator cards of a host (Kunlunxin XPU, Huawei",
        "Ascend NPU and the other vendors its profiles describe) and writes",
        "Container Device Interface specs for them, so that containerd, CRI\\-O,",
        "podman and Docker can give cards to containers by name, e.g.",
        ".BR kunlunxin.com/xpu=0 .",
        "The package keeps the specs in",
        ".I /etc/cdi",
        "up to date through the",
        ".B xpu\\-cdi\\-refresh",
        "systemd units and a udev rule.",
        ".SH COMMANDS",
    ]
    for name in sorted(main.list_commands(root)):
        cmd = main.get_command(root, name)
        if cmd is None or cmd.hidden:
            continue
        lines += [f".SS {name}", ".nf", roff_text(help_of(cmd, name, root)), ".fi"]
    lines += [
        ".SH FILES",
        ".TP", ".I /etc/cdi/*.json, /var/run/cdi/*.json", "CDI specs (the later directory wins for a device).",
        ".TP", ".I /etc/xpu\\-cdi/profiles.d/*.yaml", "Admin profiles that add to or replace the built\\-in ones.",
        ".TP", ".I /var/lib/xpu\\-cdi/generated", "The specs the package generated (removed with the package).",
        ".SH EXIT STATUS",
        "0 success; 1 what was asked failed (no cards, unknown device, stale spec for",
        '.BR "generate \\-\\-check" ),',
        "2 usage error, 3 profile error, 5 a spec cannot be written or read.",
        ".SH SEE ALSO",
        ".BR xpu\\-cdi\\-hook (1),",
        ".BR xpu\\-container\\-runtime (1),",
        ".BR podman (1)",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(page())
