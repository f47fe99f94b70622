"""A pytest plugin: under ``CI=true`` (what .ci/run's machines set) a skipped test fails.

CI installs every dependency itself, so a skip there means a broken install or fetch hidden
behind a green run; outside CI the same skip stays a skip with its reason.  The one exception
is :func:`not_here`: what this machine's release cannot run at all (a Debian 13 host's binaries
in a Debian 12 tree), which no install fixes; it is listed by ``-ra`` like any skip."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

#: the reason's prefix of a skip that CI lets stand (:func:`not_here`)
NOT_HERE = "not testable on this machine's release: "


def not_here(reason: str) -> None:
    """Skip, in CI too: the machine's release cannot run this, whatever is installed."""
    pytest.skip(NOT_HERE + reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if (os.environ.get("CI") == "true" and report.skipped and isinstance(report.longrepr, tuple)
            and NOT_HERE not in str(report.longrepr[2])):
        report.outcome = "failed"
        reason = str(report.longrepr[2]).replace("Skipped: ", "", 1)
        report.longrepr = f"CI=true, so this fails instead of skipping: {reason}"
