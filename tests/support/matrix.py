"""The runtime matrix: the host's own release line and the other Debian release's (in a
tree, tests/support/releasetree.py), each driven live by the tests as users run it.

``Place`` is where a runtime runs: the host itself (in a private mount namespace, so the
mounts a daemon makes go away with it) or the release tree (pivot_root).  ``Dockerd``
is a private Docker daemon there.  The card checks are the same for every line: inside
the container exactly the asked cards exist and are usable (a write gives ENXIO: the
device cgroup allows it and the fake node has no driver), the others are absent, and the
driver tree is mounted read-only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

import pytest
import yaml

from . import devdirs
from . import fakehost
from . import releasetree
from .runtimes import ENXIO, cached_rootfs_tar, past_exit_code_race, podman_config, private_etc_cdi, \
    remove_cgroups, unique

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
XPU_CDI = str(BIN / "xpu-cdi")
HOOK = str(BIN / "xpu-cdi-hook")
WRAPPER = str(BIN / "xpu-container-runtime")
IMAGE = "localhost/xpu-cdi-busybox:latest"
CARDS = 8
DRIVER = "/usr/local/xpu"


def selection_env() -> str:
    """The Kunlunxin selection variable: CXPU_VISIBLE_DEVICES (what Kunlunxin's device
    plugin sets), read from the profile rather than assumed."""
    names = yaml.safe_load((REPO / "src/xpu_cdi/profiles/kunlunxin.yaml").read_text())["selection"]["env"]
    return "CXPU_VISIBLE_DEVICES" if "CXPU_VISIBLE_DEVICES" in names else names[0]


# ------------------------------------------------------------------------------ places


class Place:
    """The host: commands run as they are, long-lived daemons in a private mount namespace."""

    release = releasetree.host_release()
    name = f"host ({release or 'unknown release'})"

    def argv(self, cmd: Sequence[str], cgroups: str = "") -> List[str]:
        if cgroups:
            return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                    releasetree.CGROUP_VIEWS[cgroups] + '\nexec "$@"', cgroups, *cmd]
        return list(cmd)

    def daemon_argv(self, cmd: Sequence[str]) -> List[str]:
        return ["unshare", "-m", "--propagation", "private", *cmd]

    def run(self, cmd: Sequence[str], timeout: float = 120, env: Sequence[str] = (),
            cgroups: str = "", input: Optional[str] = None) -> subprocess.CompletedProcess:
        full = self.argv(["env", *env, *cmd] if env else list(cmd), cgroups=cgroups)
        return subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def popen(self, cmd: Sequence[str], log_path: Path, env: Sequence[str] = ()) -> subprocess.Popen:
        with open(log_path, "ab") as logf:
            return subprocess.Popen(self.daemon_argv(["env", *env, *cmd] if env else list(cmd)),
                                    stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def which(self, tool: str) -> bool:
        return shutil.which(tool) is not None

    def bind(self, path: Path) -> None:
        """Make *path* visible at the same path to what runs here (the host sees everything)."""


class TreePlace(Place):
    """The other release's tree; *binds* are the test's own directories."""

    def __init__(self, root: Path, release: str, binds: Iterable[Path]) -> None:
        self.release = release
        self.name = f"{release} tree"
        self.tree = releasetree.Tree(release, root, list(binds))

    def argv(self, cmd: Sequence[str], cgroups: str = "") -> List[str]:
        return self.tree.argv(cmd, cgroups=cgroups)

    def daemon_argv(self, cmd: Sequence[str]) -> List[str]:
        return self.tree.argv(cmd)

    def which(self, tool: str) -> bool:
        return self.run(["sh", "-c", f"command -v {tool}"]).returncode == 0

    def bind(self, path: Path) -> None:
        self.tree.binds.append(str(path))


def short_dir(prefix: str) -> Path:
    """A fresh directory with a short path (unix socket paths are limited to ~104 bytes;
    xdist's tmp paths are longer), in the temp dir the environment names."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def device_dir(base: Path) -> Path:
    """*base* when its filesystem allows device nodes, else a skip saying why."""
    base.mkdir(parents=True, exist_ok=True)
    if not devdirs.allows_device_nodes(base):
        pytest.skip(f"{base} is on a nodev filesystem: fake device nodes there cannot be opened "
                    "(set TMPDIR or --basetemp to a directory on a filesystem without nodev)")
    return base


def version_line(place: Place, cmd: Sequence[str]) -> str:
    r = place.run(cmd)
    text = (r.stdout + r.stderr).strip()
    return text.splitlines()[0] if text else ""


def release_of(line: str) -> tuple:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", line)
    return tuple(int(x or 0) for x in m.groups()) if m else ()


# ------------------------------------------------------------------------------ the cards


class Cards:
    """A fake 8-card Kunlunxin host and its CDI spec (JSON + index) in a private spec dir."""

    def __init__(self, base: Path, hook_path: str = HOOK) -> None:
        self.base = device_dir(base)
        self.host = fakehost.kunlunxin(base / "host", CARDS)
        self.spec_dir = base / "cdi"
        self.spec_dir.mkdir()
        r = subprocess.run([XPU_CDI, "generate", "--profile", "kunlunxin", "--profiles-dir", "/nonexistent",
                            *self.host.cli_roots, "--spec-dir", str(self.spec_dir), "--hook-path", hook_path],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        self.kind = "kunlunxin.com/xpu"

    def close(self) -> None:
        fakehost.remove_tree(self.host.root)


SCRIPT = ("for i in " + " ".join(map(str, range(CARDS))) + " ctrl; do n=/dev/xpu$i; "
          "if [ -e $n ]; then echo \"present $n\"; (echo x > $n) 2>&1 | sed \"s|^|$n: |\"; fi; done; "
          f"grep ' {DRIVER} ' /proc/mounts; cat {DRIVER}/version; (touch {DRIVER}/new) 2>&1; true")


def check_cards(out: str, asked: Iterable[int]) -> None:
    """What SCRIPT printed shows exactly the *asked* cards (and the control node) usable,
    every other card absent, and the driver tree read-only."""
    asked = sorted(set(asked))
    present = sorted(int(m) for m in re.findall(r"^present /dev/xpu(\d+)$", out, re.M))
    assert present == asked, f"cards present {present}, asked {asked}:\n{out}"
    for n in [f"/dev/xpu{i}" for i in asked] + (["/dev/xpuctrl"] if asked else []):
        assert f"{n}: sh: can't create {n}: {ENXIO}" in out, f"{n} not usable (want ENXIO):\n{out}"
    if not asked:
        assert "present /dev/xpuctrl" not in out and f" {DRIVER} " not in out, out
        return
    mounts = [ln for ln in out.splitlines() if f" {DRIVER} " in ln]
    assert mounts and all(re.search(r"\sro[,\s]", ln) for ln in mounts), f"driver mount not read-only:\n{out}"
    assert "version:5.0.21" in out and "Read-only file system" in out, out


# ------------------------------------------------------------------------------ docker


class Dockerd:
    """A private dockerd at *place*: its own socket, data-root, exec-root, pidfile and
    config file, no iptables, no bridge, its own managed containerd, its containers
    under a cgroup parent of its own.  ``stop()`` removes all of it."""

    def __init__(self, place: Place, base: Path, daemon_json: Dict, env: Sequence[str] = ()) -> None:
        self.place, self.base = place, base
        self.short = short_dir("xd-")   # exec-root holds containerd's socket
        place.bind(self.short)
        place.bind(cached_rootfs_tar())
        self.sock = self.short / "docker.sock"
        self.cgroup_parent = unique("xpu-cdi-docker")
        self.config = base / "daemon.json"
        self.config.write_text(json.dumps(daemon_json, indent=2))
        self.log = base / "dockerd.log"
        self.client = "docker" if isinstance(place, TreePlace) else "/usr/bin/docker"
        cmd = ["dockerd", "--host", f"unix://{self.sock}", "--data-root", str(base / "data"),
               "--exec-root", str(self.short / "exec"), "--pidfile", str(self.short / "docker.pid"),
               "--config-file", str(self.config), "--iptables=false", "--ip6tables=false", "--bridge=none",
               "--ip-masq=false", "--cgroup-parent", f"/{self.cgroup_parent}", "--storage-driver", "overlay2"]
        self.proc: Optional[subprocess.Popen] = place.popen(cmd, self.log, env=env)
        deadline = time.monotonic() + 90
        try:
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self.sock.exists() and self.docker("version").returncode == 0:
                    return
                time.sleep(0.2)
        except BaseException:  # e.g. no client binary: the daemon must not outlive the test
            self.stop()
            raise
        tail = self.log.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"dockerd in the {place.name} did not come up:\n{tail}")

    def docker(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.place.run([self.client, "-H", f"unix://{self.sock}", *args], timeout=timeout)

    def server_version(self) -> str:
        return self.docker("version", "--format", "{{.Server.Version}}").stdout.strip()

    def load_busybox(self) -> None:
        r = self.docker("import", str(cached_rootfs_tar()), IMAGE)
        assert r.returncode == 0, r.stderr

    def run(self, args: Sequence[str], command: Sequence[str]) -> subprocess.CompletedProcess:
        return self.docker("run", "--rm", "--network", "none", *args, IMAGE, *command)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                ids = self.docker("ps", "-aq", timeout=30).stdout.split()
                if ids:
                    self.docker("rm", "-f", *ids, timeout=60)
            except (subprocess.TimeoutExpired, OSError):
                pass
        stop_process(self.proc)
        kill_by_cmdline(str(self.short))  # shims outlive their containerd
        remove_cgroups(self.cgroup_parent)
        shutil.rmtree(self.base / "data", ignore_errors=True)
        shutil.rmtree(self.short, ignore_errors=True)


def stop_process(proc: Optional[subprocess.Popen]) -> None:
    """SIGTERM a daemon we started, SIGKILL after 30 s; nothing when it already ended."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kill_by_cmdline(needle: str) -> None:
    """SIGKILL every process whose command line names *needle* (a path of this test's own)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if needle.encode() in cmdline:
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="session")
def other_tree() -> Path:
    return releasetree.other_tree()


def places(tree_root: Optional[Path], binds: Iterable[Path]) -> Iterator[Place]:
    yield Place()
    if tree_root is not None:
        yield TreePlace(tree_root, releasetree.other_release() or "", binds)


# ------------------------------------------------------------------------------ containerd's CRI


def has_cap_sys_resource() -> bool:
    """CAP_SYS_RESOURCE in our effective set (containerd's CRI sets oom_score_adj below its own without it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 24))
    return False


class CriContainerd:
    """A private containerd with its CRI plugin at *place*, started from *config* (a
    config.toml text; its paths are moved under *base*), the busybox and pause images
    imported into CRI's k8s.io namespace; pods go under a cgroup parent of their own.
    ``stop()`` removes every pod, container, shim, mount and cgroup it made."""

    NAMESPACE = "k8s.io"
    PAUSE = "localhost/xpu-cdi-pause:latest"

    def __init__(self, place: Place, base: Path, config: str, env: Sequence[str] = ()) -> None:
        from .runtimes import oci_image_archive, private_containerd_config

        self.place, self.base = place, base
        base.mkdir(parents=True, exist_ok=True)
        self.short = short_dir("xk-")
        self.address = str(self.short / "c.sock")
        self.cgroup_parent = unique("xpu-cdi-cri")
        self.archives = [oci_image_archive(), oci_image_archive(self.PAUSE, ["sleep", "2147483647"])]
        for p in (self.short, *self.archives):
            place.bind(p)
        self.config_path = base / "config.toml"
        text = private_containerd_config(config, base, self.address)
        if isinstance(place, TreePlace):
            # the state (and so each container's bundle and rootfs) where containerd keeps it
            # by default, /run: in the tree that is a tmpfs of the daemon's own namespace,
            # which no process outside it sees (a hook that looks there through the host's
            # /proc/<pid> finds nothing, as on a real node)
            import tomlkit

            doc = tomlkit.parse(text)
            doc["state"] = "/run/containerd"
            text = tomlkit.dumps(doc)
        self.config_path.write_text(text)
        self.log = base / "containerd.log"
        self.proc: Optional[subprocess.Popen] = place.popen(["containerd", "--config", str(self.config_path)],
                                                            self.log, env=env)
        try:  # whatever fails from here (a ctr that times out on a loaded machine too) stops the daemon
            self._come_up()
        except BaseException:
            self.stop()
            raise

    def _come_up(self) -> None:
        """Until containerd answers, then the images imported."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            if os.path.exists(self.address) and self.ctr("version").returncode == 0:
                break
            time.sleep(0.1)
        else:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"containerd in the {self.place.name} did not come up:\n{tail}")
        for archive in self.archives:
            r = self.ctr("image", "import", str(archive), timeout=300)
            if r.returncode != 0:
                raise RuntimeError(f"ctr image import {archive}: {r.stderr}")

    def ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.place.run(["ctr", "--address", self.address, "-n", self.NAMESPACE, *args], timeout=timeout)

    def stop(self) -> None:
        stop_process(self.proc)
        kill_by_cmdline(self.address)  # the shims (and the pods' sleeping pause processes under them)
        remove_cgroups(self.cgroup_parent)
        for d in ("root", "state", "opt"):
            shutil.rmtree(self.base / d, ignore_errors=True)
        shutil.rmtree(self.short, ignore_errors=True)


# ------------------------------------------------------------------------------ podman

class PlacePodman:
    """podman at *place* with a private store, config and CDI spec dir (*spec_dir*, seen
    as /etc/cdi: runtimes.PRIVATE_ETC_CDI).  *runtime*: the OCI runtime podman drives; *cgroups*:
    a view of the machine's cgroups to run it on (releasetree.CGROUP_VIEWS)."""

    def __init__(self, place: Place, base: Path, spec_dir: Path, runtime: str = "runc",
                 cgroups: str = "") -> None:
        self.place, self.base, self.spec_dir, self.cgroups = place, base, spec_dir, cgroups
        base.mkdir(parents=True, exist_ok=True)
        place.bind(cached_rootfs_tar())
        self.version = release_of(version_line(place, ["podman", "--version"]))
        self.env = [f"{k}={v}" for k, v in podman_config(base, runtime).items()]
        try:  # a failed or timed-out import leaves the store to remove: nobody else holds the object
            r = self.podman("import", "-q", str(cached_rootfs_tar()), IMAGE)
            if r.returncode != 0:
                raise RuntimeError(f"podman import in the {place.name} failed: {r.stderr}")
        except BaseException:
            self.close()
            raise

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        def once(a: Sequence[str]) -> subprocess.CompletedProcess:
            cmd = private_etc_cdi(self.spec_dir, self.base, ["podman", *a])
            return self.place.run(cmd, env=self.env, timeout=timeout, cgroups=self.cgroups)
        return past_exit_code_race(once, args)

    def run(self, args: Sequence[str], command: Sequence[str]) -> subprocess.CompletedProcess:
        return self.podman("run", "--rm", "--network", "none", *args, IMAGE, *command)

    def close(self) -> None:
        self.podman("rm", "-af")
        self.podman("rmi", "-af")
        self.podman("system", "reset", "-f")
        kill_by_cmdline(str(self.base))  # a conmon podman lost track of
        with open("/proc/self/mounts") as f:
            targets = [t for t in (line.split()[1] for line in f) if t.startswith(f"{self.base}/")]
        for target in reversed(targets):
            subprocess.run(["umount", "-l", target], capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


def hybrid_cgroups() -> bool:
    """v1 controllers plus cgroup2 at /sys/fs/cgroup/unified (this kind of machine)."""
    return Path("/sys/fs/cgroup/unified/cgroup.controllers").exists()


# ------------------------------------------------------------------------------ doctor


def doctor(place: Place, cards: Cards, *args: str, env: Sequence[str] = ()) -> Dict[str, Dict[str, str]]:
    """`xpu-cdi doctor --json` run where the runtime runs; check name -> its result."""
    r = place.run([XPU_CDI, "doctor", "--json", "--profile", "kunlunxin", "--profiles-dir", "/nonexistent",
                   *cards.host.cli_roots, "--spec-dir", str(cards.spec_dir), *args], env=env)
    assert r.stdout.strip().startswith("["), r.stdout + r.stderr
    return {c["check"]: c for c in json.loads(r.stdout)}


# ------------------------------------------------------------------------------ cdiVersions

CDI_VERSIONS = ["0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"]


def version_kind(v: str) -> str:
    return f"v{v.replace('.', '')}.example.com/xpu"


def version_specs(cards: Cards, dest: Path) -> Path:
    """The cards' spec once per cdiVersion, each under its own kind (version_kind), in *dest*."""
    dest.mkdir(parents=True, exist_ok=True)
    spec = json.loads(next(cards.spec_dir.glob("*.json")).read_text())
    for v in CDI_VERSIONS:
        spec.update(cdiVersion=v, kind=version_kind(v))
        (dest / f"v{v}.json").write_text(json.dumps(spec))
    return dest


def check_highest(runtime: str, release: tuple, loaded: List[str]) -> None:
    """*loaded* (the cdiVersions a live runtime accepted) runs from the lowest up, at least
    to the one doctor's table (xpu_cdi.cdi.version.RUNTIME_MAX) gives for *release*: the
    table holds what the upstream release's bundled library loads, and Debian builds some
    runtimes with a newer packaged library (containerd 1.7.24 and Docker 26.1.5 of Debian
    13 load more than upstream's), never with an older one."""
    from xpu_cdi.cdi import version as cdi_version

    assert loaded and loaded == CDI_VERSIONS[:len(loaded)], loaded
    table = cdi_version.runtime_max(runtime, release)
    assert table and cdi_version.parse(loaded[-1]) >= cdi_version.parse(table), \
        f"{runtime} {'.'.join(map(str, release))} loads up to {loaded[-1]}; doctor's table says {table}"
