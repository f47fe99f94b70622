"""`xpu-cdi host wire-runtime`, the DaemonSet's optional runtime wiring, against a real
containerd (the machine's, with its CRI plugin) run the way a host runs it: under a
supervisor that starts it again when it exits (a shell loop here, standing in for systemd's
``Restart=always`` in containerd.service).  Off unless the node config says so; then the
drop-in with the ``xpu`` handler and CDI, a restart that the new containerd's CRI config
shows, and a running container that keeps running across it (same task, same shim,
exec'd into afterwards); no second restart when nothing changed; a clear failure when
nothing restarts containerd."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from support import runtimes
from xpu_cdi.host import wiring

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]

XPU_CDI = str(Path(sys.executable).parent / "xpu-cdi")
WRAPPER = "/usr/local/xpu-cdi/bin/xpu-container-runtime"
# the machine's containerd with its CRI plugin on (the default), which logs its whole config on start;
# the CRI table named so that runtimes.private_containerd_config moves its CNI dirs into the test's
CONFIG = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n'


class Supervised(runtimes.Containerd):
    """A private containerd (runtimes.Containerd's paths and clean-up) started by a supervisor loop,
    or by nothing (*supervised* False: a SIGTERM then leaves it down)."""

    def __init__(self, base: Path, supervised: bool = True) -> None:  # noqa: D107 - replaces the start
        import tempfile

        runtimes.require("containerd", "ctr", "runc")
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.sock_dir = tempfile.mkdtemp(prefix="xc-")
        self.address = os.path.join(self.sock_dir, "c.sock")
        self.namespace = runtimes.unique("xc")
        self.config_path = base / "config.toml"
        self.config_path.write_text(self.private(CONFIG))
        self.log_path = base / "containerd.log"
        loop = 'while :; do containerd --config "$1"; sleep 0.2; done' if supervised else \
            'exec containerd --config "$1"'
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(["sh", "-c", loop, "supervisor", str(self.config_path)], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.wait_up(60)

    def wait_up(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.daemons()
            if pids and os.path.exists(self.address) and self.ctr("version", timeout=10).returncode == 0:
                return pids[0]
            time.sleep(0.05)
        raise RuntimeError(f"containerd did not come up:\n{self.log_path.read_text(errors='replace')[-2000:]}")

    def daemons(self) -> List[int]:
        return [p.pid for p in wiring.find_containerd(str(self.config_path))]

    def stop(self) -> None:
        try:
            for cid in self.ctr("containers", "ls", "-q", timeout=20).stdout.split():
                self.ctr("task", "kill", "-s", "SIGKILL", cid, timeout=20)
                self.ctr("task", "delete", "-f", cid, timeout=20)
                self.ctr("containers", "delete", cid, timeout=20)
        except subprocess.TimeoutExpired:
            pass
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the loop first, so that nothing starts again
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None
        for pid in self.daemons():
            os.kill(pid, signal.SIGKILL)
        super().stop()  # shims, mounts, cgroups, dirs


@pytest.fixture
def ctrd(tmp_path: Path) -> Iterator[Supervised]:
    c = Supervised(tmp_path / "ctrd")
    try:
        c.import_image()
        yield c
    finally:
        c.stop()


def node_config(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text(text)
    return p


def wire(c: Supervised, cfg: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([XPU_CDI, "host", "wire-runtime", "--node-config", str(cfg), "--containerd-config",
                           str(c.config_path), "--drop-in", str(c.base / "conf.d" / "99-xpu-cdi.toml"),
                           "--socket", c.address, "--wrapper-path", WRAPPER, *extra],
                          capture_output=True, text=True, timeout=180)


def task(c: Supervised, cid: str) -> Dict[str, str]:
    for line in c.ctr("task", "ls").stdout.splitlines()[1:]:
        cols = line.split()
        if cols and cols[0] == cid:
            return {"pid": cols[1], "status": cols[2]}
    return {}


def shims(c: Supervised) -> List[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and b"containerd-shim" in args[0] and c.address.encode() in args:
            out.append(int(pid))
    return sorted(out)


def cri_runtimes_logged(c: Supervised) -> List[str]:
    """The runtime handlers each start of containerd's CRI plugin logged ("Start cri plugin with config")."""
    text = c.log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if "Start cri plugin with config" in line]


def test_off_by_default(ctrd: Supervised, tmp_path: Path) -> None:
    before = ctrd.config_path.read_text()
    pid = ctrd.daemons()
    for text in ("accept-env-selection-when-unprivileged: false\n", "configure-containerd: false\n"):
        r = wire(ctrd, node_config(tmp_path, text))
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("runtime wiring off: configure-containerd is not true in "), r.stdout
    assert ctrd.config_path.read_text() == before and not (ctrd.base / "conf.d").exists()
    assert ctrd.daemons() == pid


def test_configures_and_restarts_without_disturbing_containers(ctrd: Supervised, tmp_path: Path) -> None:
    r = ctrd.ctr("run", "-d", runtimes.IMAGE, "long", "sleep", "100000")
    assert r.returncode == 0, r.stderr
    before = task(ctrd, "long")
    assert before["status"] == "RUNNING"
    shims_before, (old,) = shims(ctrd), ctrd.daemons()
    assert len(shims_before) == 1 and len(cri_runtimes_logged(ctrd)) == 1

    r = wire(ctrd, node_config(tmp_path, "configure-containerd: true\n"))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert f"wrote {ctrd.base}/conf.d/99-xpu-cdi.toml" in out and f"wrote {ctrd.config_path}" in out, out
    assert f"restarting containerd (pid {old}): SIGTERM" in out
    m = re.search(rf"containerd (\d+\.\d+\.\d+) is back \(pid {old} -> (\d+)\) after", out)
    assert m, out
    new = int(m.group(2))
    assert ctrd.daemons() == [new] != [old]

    # the running container did not notice: same task, same shim, and the new daemon talks to it
    assert task(ctrd, "long") == before and shims(ctrd) == shims_before
    r = ctrd.ctr("task", "exec", "--exec-id", "probe", "long", "echo", "still-here")
    assert (r.returncode, r.stdout.strip()) == (0, "still-here"), r.stderr
    # the new daemon's CRI plugin read the drop-in: the xpu handler runs the wrapper, CDI is on
    started = cri_runtimes_logged(ctrd)
    assert len(started) == 2, started
    assert "xpu:{Type:io.containerd.runc.v2" in started[1] and WRAPPER in started[1], started[1][-2000:]
    assert "xpu:{" not in started[0]
    drop_in = (ctrd.base / "conf.d" / "99-xpu-cdi.toml").read_text()
    assert "enable_cdi = true" in drop_in and f'BinaryName = "{WRAPPER}"' in drop_in

    # a pod restart of the DaemonSet: nothing to write, no restart
    r = wire(ctrd, node_config(tmp_path, "configure-containerd: true\n"))
    assert r.returncode == 0, r.stderr
    assert "runs with this configuration already: no restart" in r.stdout, r.stdout
    assert ctrd.daemons() == [new] and task(ctrd, "long") == before


def test_restart_left_to_the_admin(ctrd: Supervised, tmp_path: Path) -> None:
    (old,) = ctrd.daemons()
    r = wire(ctrd, node_config(tmp_path, "configure-containerd: true\nrestart-containerd: false\n"))
    assert r.returncode == 0, r.stderr
    assert f"restart-containerd is false: restart containerd (pid {old}) yourself to apply" in r.stdout, r.stdout
    assert (ctrd.base / "conf.d" / "99-xpu-cdi.toml").is_file() and ctrd.daemons() == [old]


def test_an_unsupervised_containerd_fails_loudly(tmp_path: Path) -> None:
    c = Supervised(tmp_path / "ctrd", supervised=False)
    try:
        r = wire(c, node_config(tmp_path, "configure-containerd: true\n"), "--timeout", "5")
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.strip() == (
            "xpu-cdi: containerd did not come back within 5 s of the restart: no new one started (is containerd "
            "supervised? systemd's containerd.service has Restart=always); start it on the host (systemctl start "
            "containerd)"), r.stderr
    finally:
        c.stop()


def test_no_containerd_with_that_config(ctrd: Supervised, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text("version = 2\n")
    r = subprocess.run([XPU_CDI, "host", "wire-runtime", "--node-config", str(node_config(tmp_path,
                        "configure-containerd: true\n")), "--containerd-config", str(other), "--drop-in",
                        str(tmp_path / "d.toml"), "--socket", ctrd.address, "--wrapper-path", WRAPPER],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == (f"xpu-cdi: no containerd running with config {other}: cannot restart it (the pod "
                                f"needs hostPID: true; or set restart-containerd: false and restart it yourself)")


def test_the_configmap_decides_until_the_host_has_a_file(ctrd: Supervised, tmp_path: Path) -> None:
    """On a new node the wiring may run before the node-config init container installed the host's
    file: the ConfigMap's copy (--fallback-config) decides then; a host file, once there, wins."""
    cm = tmp_path / "cm.yaml"
    cm.write_text("configure-containerd: true\nrestart-containerd: false\n")
    host = tmp_path / "host-config.yaml"
    r = wire(ctrd, host, "--fallback-config", str(cm))
    assert r.returncode == 0 and "restart-containerd is false" in r.stdout, r.stdout + r.stderr
    host.write_text("configure-containerd: false\n")
    r = wire(ctrd, host, "--fallback-config", str(cm))
    assert r.stdout.startswith(f"runtime wiring off: configure-containerd is not true in {host}"), r.stdout


def test_an_admins_spec_dirs_are_kept(ctrd: Supervised, tmp_path: Path) -> None:
    """cdi_spec_dirs already set by the admin stay, /var/run/cdi (where the DaemonSet writes) is added."""
    table = '[plugins."io.containerd.grpc.v1.cri"]\n'
    text = ctrd.config_path.read_text().replace(table, table + 'cdi_spec_dirs = ["/opt/vendor/cdi"]\n')
    ctrd.config_path.write_text(text)
    r = wire(ctrd, node_config(tmp_path, "configure-containerd: true\nrestart-containerd: false\n"))
    assert r.returncode == 0, r.stderr
    drop_in = (ctrd.base / "conf.d" / "99-xpu-cdi.toml").read_text()
    assert 'cdi_spec_dirs = ["/opt/vendor/cdi", "/var/run/cdi"]' in drop_in, drop_in
