"""consumers: every process holding a kind's device nodes open is named (a real process holding a
fake card node, the kernel's own /proc), with its pod where kubelet's cgroup path names one; the
pods with a request or claim come from kubelet's PodResources (the real kubelet:
tests/k8s/test_doctor_node.py's cluster is not needed for the process half)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from support import HANG
from support.doctornode import Node, checks

pytestmark = pytest.mark.privileged  # mknod of the fake cards
UID = "0d6c1f8e-3b2a-4c5d-9e8f-112233445566"


@pytest.fixture
def holding(node: Node) -> Iterator[subprocess.Popen]:
    """A real process with the fake host's /dev/xpu2 and /dev/xpuctrl open.  O_PATH:
    no driver is behind the fake nodes (a plain open is ENXIO); the fd's link is the same."""
    node.kunlunxin()
    dev = node.host.path("/dev")
    code = ("import os, sys, time; fds = [os.open(p, os.O_PATH) for p in sys.argv[1:]]; "
            "print('ready', flush=True); time.sleep(600)")
    p = subprocess.Popen([sys.executable, "-c", code, f"{dev}/xpu2", f"{dev}/xpuctrl", "/dev/null"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        yield p
    finally:
        p.kill()
        p.wait(timeout=HANG)


def test_a_process_outside_any_pod_is_named(node: Node, holding: subprocess.Popen, tmp_path: Path) -> None:
    _code, res = node.doctor("--proc-root", "/", "--pod-resources-socket", str(tmp_path / "none.sock"))
    (r,) = checks(res, "consumers")
    assert r["status"] == "ok", r
    comm = Path(f"/proc/{holding.pid}/comm").read_text().strip()
    assert f"{holding.pid} ({comm}: xpu2, xpuctrl)" in r["found"], r
    assert "no request or claim" in r["found"] and "none.sock is absent" in r["found"], r
    assert "before a driver upgrade" in r["fix"]


def test_nothing_holds_the_cards(node: Node, tmp_path: Path) -> None:
    """A /proc of one process holding nothing of ours (a link to /dev/null; one to another node's path)."""
    node.kunlunxin()
    proc = tmp_path / "p" / "proc" / "7"
    (proc / "fd").mkdir(parents=True)
    (proc / "fd" / "0").symlink_to("/dev/null")
    (proc / "fd" / "1").symlink_to("/dev/xpu2")  # the machine's path, not the fake host's
    (proc / "cgroup").write_text(f"0::/kubepods/pod{UID}/cri-containerd-ab\n")
    _code, res = node.doctor("--proc-root", str(tmp_path / "p"), "--pod-resources-socket", str(tmp_path / "x"))
    (r,) = checks(res, "consumers")
    assert "processes in pods holding its nodes: none" in r["found"] and r["fix"] == "", r


def test_a_pods_process_is_named_by_its_pod(node: Node, tmp_path: Path) -> None:
    node.kunlunxin()
    proc = tmp_path / "p" / "proc" / "40"
    (proc / "fd").mkdir(parents=True)
    os.symlink(str(node.host.path("/dev/xpu5")), proc / "fd" / "3")
    (proc / "cgroup").write_text(f"0::/kubepods/besteffort/pod{UID}/cri-containerd-ab\n")
    (proc / "comm").write_text("python3\n")
    _code, res = node.doctor("--proc-root", str(tmp_path / "p"), "--pod-resources-socket", str(tmp_path / "x"))
    (r,) = checks(res, "consumers")
    assert f"processes in pods holding its nodes: pod {UID}" in r["found"], r
    assert "(no request or claim): none" in r["found"], r
