"""Each node daemon serves from the process its command started: ``ps`` shows ``xpu-cdi`` and the
command line with its flags, and an error while serving is one line and the exit code of
``errors.EXIT_CODES``, as for any command."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from support import HANG, fakehost

XPU_CDI = str(Path(sys.executable).parent / "xpu-cdi")  # the console script, as a package installs it


@pytest.fixture
def host(host_root: Path, tmp_path: Path) -> Iterator[fakehost.FakeHost]:
    """A 2-card Kunlunxin host with its spec in tmp_path/cdi."""
    h = fakehost.kunlunxin(host_root, cards=2)
    subprocess.run([XPU_CDI, "generate", *h.cli_roots, "--spec-dir", str(tmp_path / "cdi")], check=True,
                   capture_output=True, timeout=HANG)
    yield h


@pytest.fixture
def short() -> Iterator[Path]:
    """A directory with a short path, for unix sockets (~104 bytes at most)."""
    d = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def serving(argv: List[str], log: Path, needle: str) -> List[str]:
    """Start *argv*, wait for *needle* in its log; its comm and cmdline then (``ps -o comm,args``).
    It is stopped with SIGTERM and must exit 0."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HANG
        while needle not in log.read_text(errors="replace"):
            assert proc.poll() is None, f"exited {proc.returncode} before {needle!r}: {log.read_text()}"
            assert time.monotonic() < deadline, f"{needle!r} not logged in {HANG}s: {log.read_text()}"
            time.sleep(0.05)
        comm = Path(f"/proc/{proc.pid}/comm").read_text().strip()
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(HANG) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [comm, *cmdline]


def test_the_device_plugin_shows_its_flags_in_ps(host: fakehost.FakeHost, tmp_path: Path, short: Path) -> None:
    flags = [*host.cli_roots, "--spec-dir", str(tmp_path / "cdi"), "--plugin-dir", str(short), "--status-file",
             str(tmp_path / "dp.json"), "--uevents", "none", "--health-interval", "7.5"]
    comm, *cmdline = serving([XPU_CDI, "device-plugin", *flags], tmp_path / "dp.log", "] starting: ")
    assert comm == "xpu-cdi"
    assert cmdline[-len(flags) - 2:] == [XPU_CDI, "device-plugin", *flags]  # after the interpreter's path


def test_the_exporter_shows_its_flags_in_ps(host: fakehost.FakeHost, tmp_path: Path) -> None:
    flags = [*host.cli_roots, "--spec-dir", str(tmp_path / "cdi"), "--listen", "127.0.0.1:0", "--status-file",
             str(tmp_path / "exporter.json"), "--pod-resources-socket", str(tmp_path / "none.sock")]
    comm, *cmdline = serving([XPU_CDI, "exporter", *flags], tmp_path / "exporter.log", "serving /metrics on")
    assert comm == "xpu-cdi"
    assert cmdline[-len(flags) - 2:] == [XPU_CDI, "exporter", *flags]


def test_the_dra_driver_shows_its_flags_in_ps(host: fakehost.FakeHost, tmp_path: Path, short: Path) -> None:
    """An API server that is not there: the driver serves kubelet and retries the API server."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text('{"apiVersion": "v1", "kind": "Config", "current-context": "x",'
                          ' "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],'
                          ' "users": [{"name": "u", "user": {"token": "t"}}],'
                          ' "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}')
    flags = [*host.cli_roots, "--spec-dir", str(tmp_path / "cdi"), "--kubeconfig", str(kubeconfig),
             "--registry-dir", str(short / "reg"), "--plugins-dir", str(short / "pl"), "--run-dir",
             str(tmp_path / "run"), "--node-name", "n1", "--pod-uid", "u1"]
    comm, *cmdline = serving([XPU_CDI, "dra-driver", *flags], tmp_path / "dra.log", "] starting on node n1")
    assert comm == "xpu-cdi"
    assert cmdline[-len(flags) - 2:] == [XPU_CDI, "dra-driver", *flags]


def test_an_error_while_serving_is_one_line_and_its_exit_code(host: fakehost.FakeHost, tmp_path: Path,
                                                              short: Path) -> None:
    """The profiles are loaded once the daemon runs: a broken one is a ProfileError, exit 3."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "bad.yaml").write_text("name: [broken\n")
    r = subprocess.run([XPU_CDI, "device-plugin", *host.cli_roots, "--spec-dir", str(tmp_path / "cdi"),
                        "--plugin-dir", str(short), "--status-file", str(tmp_path / "dp.json"), "--uevents", "none",
                        "--profiles-dir", str(profiles)], capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 3, r.stderr  # errors.ERROR_CODES[ProfileError]
    [line] = r.stderr.splitlines()
    assert line.startswith(f"xpu-cdi: profile '{profiles / 'bad.yaml'}': not valid YAML: "), line


def test_an_api_client_that_cannot_be_built_is_one_line(host: fakehost.FakeHost, tmp_path: Path,
                                                        short: Path) -> None:
    """The DRA driver builds its API client once it runs: a missing kubeconfig is a ConfigError, exit 1."""
    r = subprocess.run([XPU_CDI, "dra-driver", *host.cli_roots, "--spec-dir", str(tmp_path / "cdi"),
                        "--kubeconfig", str(tmp_path / "missing"), "--registry-dir", str(short / "reg"),
                        "--plugins-dir", str(short / "pl"), "--run-dir", str(tmp_path / "run"), "--node-name", "n1",
                        "--pod-uid", "u1"], capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 1, r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith(f"xpu-cdi: cannot configure the API client from --kubeconfig {tmp_path / 'missing'}: ")
