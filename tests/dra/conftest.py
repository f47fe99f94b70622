"""Fixtures of the DRA driver's unit tests: a fake 4-card P800 node with its spec, short socket
dirs, the in-memory API stand-in and the daemon stepped by hand (no loop thread)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest
from click.testing import CliRunner

from support import fakehost
from support.fakeapi import FakeKube
from xpu_cdi import log
from xpu_cdi.cli import main
from xpu_cdi.dra import config


class Node:
    def __init__(self, root: Path, sockets: Path) -> None:
        self.host = fakehost.kunlunxin(root, cards=4)
        for n in range(2):
            (root / f"sys/devices/system/node/node{n}").mkdir(parents=True, exist_ok=True)
        self.spec_dir = root / "cdi"
        res = CliRunner().invoke(main, ["generate", *self.host.cli_roots, "--spec-dir", str(self.spec_dir)])
        assert res.exit_code == 0, res.output
        self.sockets = sockets
        self.boot = root / "boot_id"
        self.boot.write_text("boot-1\n")
        self.logs: List[str] = []
        r = str(root)
        self.settings = config.Settings(
            node_name="n1", registry_dir=str(sockets / "reg"), plugins_dir=str(sockets / "plugins"),
            run_dir=str(sockets / "run"), pod_uid="pod1", spec_dirs=(str(self.spec_dir),), dev_root=r,
            driver_root=r, sysfs_root=r, node_config=str(root / "config.yaml"), boot_id_file=str(self.boot),
            health_interval=0.1)

    def daemon(self, kube: FakeKube, **changes):
        import dataclasses

        from xpu_cdi.dra.daemon import Daemon
        from xpu_cdi.generate import profile as _profile

        d = Daemon(dataclasses.replace(self.settings, **changes), log=log.into(self.logs), kube=kube)
        d.profiles = [_profile.load_all()["kunlunxin"]]
        d.ours = {p.kind: p.name for p in d.profiles}
        return d


@pytest.fixture
def dra_node(host_root: Path) -> Iterator[Node]:
    sockets = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))  # unix socket paths hold 107 bytes
    yield Node(host_root, sockets)
    shutil.rmtree(sockets, ignore_errors=True)


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()
