"""Write xpu-cdi's completion script for bash or zsh to stdout: click's own
(what ``_XPU_CDI_COMPLETE=bash_source xpu-cdi`` prints), so that it completes
the installed release's commands and options by asking ``xpu-cdi`` itself.

Run at package build time with the built package on PYTHONPATH:
``python3 packaging/completion/make_completion.py bash > xpu-cdi``.
"""

from __future__ import annotations

import sys

from click.shell_completion import get_completion_class

from xpu_cdi.cli import main

SHELLS = ("bash", "zsh")
PROG = "xpu-cdi"
COMPLETE_VAR = "_XPU_CDI_COMPLETE"  # click's name for it: _<PROG, upper case, '-' as '_'>_COMPLETE


def script(shell: str) -> str:
    """The completion script of *shell* (one of :data:`SHELLS`)."""
    cls = get_completion_class(shell)
    if cls is None or shell not in SHELLS:
        raise ValueError(f"no completion for shell {shell!r}: one of {', '.join(SHELLS)}")
    return cls(main, {}, PROG, COMPLETE_VAR).source()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SHELLS:
        print(f"usage: make_completion.py {'|'.join(SHELLS)}", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(script(sys.argv[1]))
