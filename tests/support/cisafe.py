"""A pytest plugin: under ``CI=true`` (what .ci/run's machines set) a skipped test fails.

CI installs every dependency itself, so a skip there means a broken install or fetch hidden
behind a green run; outside CI the same skip stays a skip with its reason."""

from __future__ import annotations

import os
from typing import Iterator

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") == "true" and report.skipped and isinstance(report.longrepr, tuple):
        report.outcome = "failed"
        reason = str(report.longrepr[2]).replace("Skipped: ", "", 1)
        report.longrepr = f"CI=true, so this fails instead of skipping: {reason}"
