"""Shared fixtures: fake host trees (cleaned up even on failure), a CLI runner
and the repository paths.  Real-runtime fixtures live in tests/support/runtimes.py."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from support import DEPS_CHECK
from support import devdirs
from support import fakehost
from support import leaks

# the fixtures of the helper package (tests/support, importable through pyproject's pythonpath)
pytest_plugins = ["support.cisafe", "support.runtimes", "support.hookkit", "support.matrix", "support.upstream"]

REPO = Path(__file__).resolve().parent.parent
IS_ROOT = os.geteuid() == 0


def pytest_configure(config: pytest.Config) -> None:
    """Fake device nodes need a filesystem without nodev: where the temp dir is nodev (a
    stock Debian 13 host's /tmp), pytest's base temp dir moves to one that allows them.
    xdist workers inherit the controller's.  The run never installs packages: DEPS_CHECK."""
    os.environ.update(DEPS_CHECK)
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        base = devdirs.pytest_basetemp()
        if base is not None:
            config.option.basetemp = str(base)


_before: dict = {}  # the controller's view of the machine when the run started (leaks)


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers: they inherit the run's token
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        leaks.note_pid()
        return
    leaks.start(config._tmp_path_factory.getbasetemp() / "xpu-cdi-run")
    _before.update(cgroups=leaks.cgroups(), pids=set(leaks.processes()))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run fails, naming them, when its tests left a daemon or a cgroup behind (support/leaks.py)."""
    config = session.config
    if hasattr(config, "workerinput") or not _before:
        return
    run = leaks.Run(Path(os.environ[leaks.TOKEN]), config._tmp_path_factory.getbasetemp())
    procs, groups = leaks.settle(run, _before["cgroups"], _before["pids"])
    mounts = run.mounts()
    message = leaks.report(procs, groups, mounts)
    if message is None:
        return
    leaks.remove(procs, groups, mounts)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "left behind", red=True)
        reporter.write_line(message)
    else:
        print(message)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: Test directories whose tests run on one xdist worker (``make test``'s ``--dist loadgroup``):
#: tests/k8s shares one cluster per session, tests/fleet one fleet, tests/training the training fleet.
XDIST_GROUPS = {"tests/k8s/": "k8s-cluster", "tests/fleet/": "k8s-fleet", "tests/scale/": "k8s-scale",
                "tests/training/": "k8s-training"}


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is off (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """--dist loadgroup with the groups of XDIST_GROUPS read from the test's path: xdist 3.8 groups
    by a suffix it writes into each nodeid at collection, which pytest 9.2 no longer lets it
    change (pytest-dev/pytest-xdist#1386), so its own xdist_group marks group nothing there."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class PathGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for prefix, group in XDIST_GROUPS.items():
                if nodeid.startswith(prefix):
                    return group
            return super()._split_scope(nodeid)

    return PathGroups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if IS_ROOT:
        return
    skip = pytest.mark.skip(reason="needs root: mknod of fake device nodes, mounts and namespaces")
    for item in items:
        if "privileged" in item.keywords or "runtime" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def host_root(tmp_path: Path) -> Iterator[Path]:
    """An empty directory for a fake host, removed (with its nodes) afterwards."""
    root = tmp_path / "host"
    root.mkdir()
    yield root
    fakehost.remove_tree(root)


@pytest.fixture
def xpu_host(host_root: Path) -> "fakehost.FakeHost":
    """A fake 8-card Kunlunxin P800 host."""
    return fakehost.kunlunxin(host_root, cards=8)


@pytest.fixture
def npu_host(host_root: Path) -> "fakehost.FakeHost":
    """A fake 4-NPU Ascend 910B host."""
    return fakehost.ascend(host_root, cards=4)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# build_bin.py, the one place that says how the binaries are built, loaded by path as setup.py
# loads it (the package it sits in is what is being built): tests/c/ and the dynamic hook's tests
BUILD_BIN = Path(__file__).resolve().parents[1] / "src" / "xpu_cdi" / "_native" / "build_bin.py"


@pytest.fixture(scope="session")
def build_bin() -> Any:
    if not (BUILD_BIN.parent / "hotpath").is_dir():
        pytest.skip(f"no C sources beside {BUILD_BIN} (an installed package, not a checkout)")
    spec = importlib.util.spec_from_file_location("xpu_cdi_build_bin", BUILD_BIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
