"""The fake node of the device-plugin tests (and of doctor's and the e2e ones that run the plugin)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

from click.testing import CliRunner

from support import fakehost
from xpu_cdi.cli import main


@dataclass
class Node:
    """A fake host, its spec dir, kubelet's plugin dir and the plugin's status file."""

    host: fakehost.FakeHost
    spec_dir: Path
    plugin_dir: Path
    status: Path

    def generate(self, *extra: str) -> None:
        res = CliRunner().invoke(main, ["generate", *self.host.cli_roots, "--spec-dir", str(self.spec_dir), *extra])
        assert res.exit_code == 0, res.output

    def status_kinds(self) -> Dict[str, Any]:
        """The kinds the plugin's status file names (kind -> its entry); {} before it is written."""
        try:
            return json.loads(self.status.read_text()).get("kinds") or {}
        except (OSError, ValueError):
            return {}

    def args(self, *extra: str) -> List[str]:
        return [*self.host.cli_roots, "--plugin-dir", str(self.plugin_dir), "--spec-dir", str(self.spec_dir),
                "--status-file", str(self.status), "--uevents", "none", "--health-interval", "0.5", *extra]


#: A ``--health-interval`` (the poll under the events) for tests that time the daemon's reaction
#: to an event: what it did within a few seconds, it did on the event, not on this poll.
FLOOR = "30"


def numa_nodes(root: Path, count: int) -> None:
    """/sys/devices/system/node/node<N>: the NUMA nodes the fake host has."""
    for n in range(count):
        (root / "sys" / "devices" / "system" / "node" / f"node{n}").mkdir(parents=True, exist_ok=True)


def short_dir() -> Path:
    """A directory for sockets: a unix socket path holds 107 bytes, pytest's tmp paths can be longer."""
    return Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
