"""The result of one check, and how results print and map to an exit code."""

from __future__ import annotations

from typing import Dict, List, Sequence

from .. import errors

Result = Dict[str, str]  # {"check", "status", "found", "fix"}
STATUSES = ("ok", "warn", "fail")


def result(check: str, status: str, found: str, fix: str = "") -> Result:
    """One check's outcome.

    Args:
        check: the check's id, e.g. ``"device-nodes"``.
        status: ``ok``, ``warn`` or ``fail``.
        found: what the check saw on this host.
        fix: what to do about it (empty when nothing needs doing).

    Raises:
        ValueError: an unknown status (a bug in a check).
    """
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    return {"check": check, "status": status, "found": found, "fix": fix}


def ok(check: str, found: str, fix: str = "") -> Result:
    """A passing check (*fix* may carry a tip)."""
    return result(check, "ok", found, fix)


def warn(check: str, found: str, fix: str) -> Result:
    """Something that works now but will bite (or cannot be verified)."""
    return result(check, "warn", found, fix)


def fail(check: str, found: str, fix: str) -> Result:
    """Something that breaks containers using the cards."""
    return result(check, "fail", found, fix)


def exit_code(results: Sequence[Result]) -> int:
    """0 all ok, 1 any fail, 6 warnings only (errors.EXIT_CODES: 2 is click's usage error)."""
    statuses = {r["status"] for r in results}
    if "fail" in statuses:
        return errors.FAILED
    return errors.WARNINGS if "warn" in statuses else errors.OK


def line(r: Result) -> str:
    """One line: status, check, what was found and, unless ok, the fix."""
    text = f"{r['status']:<4}  {r['check']}: {r['found']}"
    if r["fix"]:
        text += f" -> {'tip' if r['status'] == 'ok' else 'fix'}: {r['fix']}"
    return text


def summary(results: Sequence[Result]) -> str:
    """``12 ok, 1 warn, 2 fail``."""
    counts: List[str] = [f"{sum(r['status'] == s for r in results)} {s}" for s in STATUSES]
    return ", ".join(counts)
