"""The fake node of the exporter's tests: 8 Kunlunxin cards and 8 Ascend NPUs under one root,
their CDI specs written by `generate`, and the vendors' tools replaced by fake ones.

A fake tool is a shell script at the path the profile names (under the
driver root) printing a file of ``tests/data/exporter/`` (see its
``SOURCES.md``), or misbehaving as its ``<tool>.mode`` file says: ``hang``
(never finishes), ``linger`` (prints, exits, leaves a child holding its
output open; either writes the pid left running to ``<tool>.pid``), ``crash`` (exit 3 with a
message), ``garbage``, ``flood`` (more output than the cap).  Each run appends a line to ``<tool>.runs``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

from click.testing import CliRunner

from support import fakehost
from xpu_cdi.cli import main

DATA = Path(__file__).resolve().parent.parent / "data" / "exporter"
TOOLS = {"xpu-smi": "/usr/local/bin/xpu-smi", "npu-smi": "/usr/local/bin/npu-smi"}

_SCRIPT = """#!/bin/sh
d=$(dirname "$0"); n=$(basename "$0")
echo run >> "$d/$n.runs"
mode=$(cat "$d/$n.mode" 2>/dev/null || echo ok)
case "$mode" in
  hang) echo $$ > "$d/$n.pid"; exec sleep 1000 ;;
  linger) cat "$d/$n.out"; sleep 1000 & echo $! > "$d/$n.pid"; exit 0 ;;
  crash) echo "$n: cannot open the device: No such device" >&2; exit 3 ;;
  garbage) echo "dcmi module initialize failed. ret is -8005"; echo "%%%% not a table %%%%" ;;
  flood) exec yes "flood flood flood flood flood flood flood flood" ;;
  *) cat "$d/$n.out" ;;
esac
"""


@dataclass
class Node:
    host: fakehost.FakeHost
    root: Path
    spec_dir: Path
    status: Path

    def generate(self) -> None:
        res = CliRunner().invoke(main, ["generate", *self.host.cli_roots, "--spec-dir", str(self.spec_dir)])
        assert res.exit_code == 0, res.output

    def tool(self, name: str) -> Path:
        return self.root / TOOLS[name].lstrip("/")

    def set_tool(self, name: str, mode: str = "ok", data: str = "") -> None:
        """Make the fake *name* print *data* (a file of tests/data/exporter) or misbehave as *mode* says."""
        t = self.tool(name)
        t.write_text(_SCRIPT)
        t.chmod(0o755)
        if data:
            shutil.copyfile(DATA / data, t.with_name(name + ".out"))
        t.with_name(name + ".mode").write_text(mode + "\n")

    def left_pid(self, name: str) -> int:
        return int(self.tool(name).with_name(name + ".pid").read_text())

    def runs(self, name: str) -> int:
        p = self.tool(name).with_name(name + ".runs")
        return len(p.read_text().splitlines()) if p.exists() else 0

    def args(self, *extra: str) -> List[str]:
        return [*self.host.cli_roots, "--spec-dir", str(self.spec_dir), "--status-file", str(self.status), *extra]


def make_node(root: Path, tmp: Path, xpu: int = 8, npu: int = 8) -> Node:
    """Both kinds on one fake host, specs generated, tools printing the documented formats."""
    host = fakehost.kunlunxin(root, cards=xpu)
    if npu:
        npu_host = fakehost.ascend(root, cards=npu)
        host.nodes.update(npu_host.nodes)
    node = Node(host, root, tmp / "cdi", tmp / "run" / "exporter.json")
    node.generate()
    node.set_tool("xpu-smi", data="xpu-smi-m.txt")
    node.set_tool("npu-smi", data="npu-smi-info-910.txt")
    return node


def short_dir() -> Path:
    """A directory for sockets: a unix socket path holds 107 bytes, pytest's tmp paths can be longer."""
    return Path(tempfile.mkdtemp(prefix="exp-", dir="/tmp"))


class ExporterProcess:
    """``xpu-cdi exporter`` as its own process on a free port; its log in *log*."""

    def __init__(self, args: List[str], log: Path, python: str = sys.executable, env: Dict[str, str] = None) -> None:
        self.log = log
        self.proc = subprocess.Popen([python, "-m", "xpu_cdi.cli", "exporter", "--listen", "127.0.0.1:0", *args],
                                     stdout=subprocess.DEVNULL, stderr=open(log, "wb"), env=env)
        self.port = self._port()

    def _port(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if "serving /metrics on [" in line:
                    return int(line.split("]:", 1)[1].split(",", 1)[0])
            if self.proc.poll() is not None:
                raise AssertionError(f"exporter exited {self.proc.returncode}: {self.log.read_text()}")
            time.sleep(0.05)
        raise AssertionError(f"exporter did not start serving within {timeout}s: {self.log.read_text()}")

    def url(self, path: str = "/metrics") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def on_node(node: Any, cards: Any, work: Path, *extra: str) -> ExporterProcess:
    """The exporter on the machine for a tests/k8s node's *cards*: its specs, kubelet's PodResources
    asked every second, *extra* options; stopped with the node."""
    p = ExporterProcess([*cards.host.cli_roots, "--profile", cards.profile, "--profiles-dir", "/nonexistent",
                         "--spec-dir", str(node.cdi_dir), "--status-file", str(work / "exporter.json"),
                         "--pod-resources-socket", str(node.pod_resources_socket), "--interval", "1", *extra],
                        work / "exporter.log")
    node.on_stop(p.stop)
    return p
