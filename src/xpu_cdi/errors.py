"""The one exception hierarchy of xpu-cdi.

Every error raised on purpose derives from :class:`XpuCdiError`; the CLI
maps the classes to exit codes (:data:`ERROR_CODES`), each error one line on
stderr (:func:`report`), and :data:`EXIT_CODES` is the one table of every command's
exit codes.  (The compiled hook and wrapper word their own errors in the same style.)
Messages follow the CDI library's style: lowercase, the bad value in quotes, then the
reason, and where possible what to do about it.
"""

from __future__ import annotations

import sys
from typing import Dict, Type


class XpuCdiError(Exception):
    """Base of all xpu-cdi errors.  Never raised directly."""


class ProfileError(XpuCdiError):
    """A vendor profile is unknown, unreadable or violates the schema."""


class InputError(XpuCdiError, ValueError):
    """A file or value over a bound (size, depth, YAML aliases, a range), or not a regular file
    (:mod:`xpu_cdi.bounded`): one short line, which each reader words with its path into its own error.
    A ValueError too, so a reader's ``except ValueError`` (not JSON, a bad shape) holds it as well."""


class DiscoveryError(XpuCdiError):
    """The host does not have what a profile needs (no cards, no control node)."""


class SpecError(XpuCdiError):
    """A CDI spec is invalid, cannot be read or cannot be written."""


class SelectionError(XpuCdiError):
    """A container asked for devices in a way we cannot honour."""


class AllocationError(SelectionError):
    """kubelet asked the device plugin for IDs that cannot be given (unknown, unhealthy)."""


class RuntimeConfigError(XpuCdiError):
    """A container-runtime configuration file cannot be read or changed.

    ``path`` and ``reason`` are the file and the bare cause (no advice), set
    where a file cannot be read or parsed: ``doctor`` words its own message
    from them, where ``runtime configure`` prints the whole one.
    """

    def __init__(self, message: str, path: str = "", reason: str = "") -> None:
        self.path = path
        self.reason = reason or message
        super().__init__(message)


class HostSetupError(XpuCdiError):
    """A change to the host itself (the ``/dev/char`` links) cannot be made."""


class InstallError(XpuCdiError):
    """A compiled part of the installation is missing or cannot be loaded."""


class ConfigError(XpuCdiError):
    """A node config file (``/etc/xpu-cdi/config.yaml``) or the device plugin's settings are unusable."""


class ClaimError(SelectionError):
    """A DRA ResourceClaim cannot be prepared on this node (kubelet gets the line in that claim's ``error``)."""


class ApiError(XpuCdiError):
    """A request the API server refused (``status`` >= 400) or that did not reach it (``status`` 0)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


class SourceError(XpuCdiError):
    """A source the exporter reads gave nothing usable (the source then reads as down, with this line)."""


class ToolError(SourceError):
    """A vendor tool could not give its output: one line saying why."""


class PodResourcesError(SourceError):
    """kubelet's PodResources API could not be read."""


# Every exit code of every command, one table: docs/cli.md's "Exit codes" lists exactly these
# (tests/test_cli.py compares them).  2 is click's usage error and means nothing else.
OK = 0
FAILED = 1
USAGE = 2
PROFILE = 3
PROFILE_SKIPPED = 4
SPEC = 5
WARNINGS = 6
EXIT_CODES: Dict[int, str] = {
    OK: "done; `doctor`: every check ok",
    FAILED: "what was asked failed (an error without a code of its own below, one line on stderr); "
            "`doctor`: a check failed; `validate`: a file is invalid; `generate --check`: the spec on disk "
            "differs; a daemon could not start or serve; `--probe`: the daemon has not registered",
    USAGE: "usage error, from click: an unknown option or command, a missing or bad value",
    PROFILE: "a vendor profile is unknown, unreadable or invalid",
    PROFILE_SKIPPED: "`--profile auto` (`generate`, `topology`, `system`): a profile failed and was skipped, "
                     "the others' output was written",
    SPEC: "a CDI spec cannot be written or read",
    WARNINGS: "`doctor`: warnings only, no check failed",
}
# the errors with a code of their own (the first matching class wins); every other XpuCdiError is FAILED
ERROR_CODES: Dict[Type[XpuCdiError], int] = {ProfileError: PROFILE, SpecError: SPEC}


def exit_code(err: XpuCdiError) -> int:
    """The exit code for an error: the first matching class in ERROR_CODES, else FAILED."""
    for cls, code in ERROR_CODES.items():
        if isinstance(err, cls):
            return code
    return FAILED


def report(err: XpuCdiError) -> int:
    """*err* as the command line says it, one line on stderr; its exit code."""
    print(f"xpu-cdi: {err}", file=sys.stderr, flush=True)
    return exit_code(err)
