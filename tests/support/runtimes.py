"""Real container runtimes for end-to-end tests (no mocks): a busybox rootfs,
runc/crun bundles, podman with a private store, containerd 1.6.

Facts of this kind of machine (see docs/runtime-integration.md#tested-live): hybrid cgroups with the
v1 devices controller; no systemd (podman: cgroupfs + file events logger);
root cannot raise rlimits (podman default_ulimits at the hard limit); crun
refuses hybrid mode unless run in a private mount namespace with
/sys/fs/cgroup/unified unmounted; no registry (images built from busybox).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import pytest

BUSYBOX = "/bin/busybox"
CACHE = Path(os.environ.get("XPU_CDI_TEST_CACHE", "/var/tmp/xpu-cdi-test-cache"))
IMAGE = "localhost/xpu-cdi-busybox:latest"
# what writing to a fake node (no driver behind it) gives when the cgroup allows the device;
# EPERM ("Operation not permitted") when it denies it
ENXIO = "No such device or address"
# a container's card nodes on one line, then what writing to each gives (ENXIO: allowed)
CARDS = ("ls /dev | grep '^xpu[0-9]' | tr '\\n' ' '; echo; "
         "for n in /dev/xpu[0-9]*; do [ -e $n ] && (echo x > $n) 2>&1; done; true")


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def require(*tools: str) -> None:
    """Fail (not skip) when a runtime the suite relies on is missing: `make test` installs them."""
    missing = [t for t in tools if not have(t)]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run `make deps` (scripts/install-deps.sh)")


def cgroup_v2_only() -> bool:
    """cgroup2 alone on /sys/fs/cgroup (a stock Debian 13 host), not this kind of machine's
    hybrid layout (v1 controllers, cgroup2 at /sys/fs/cgroup/unified)."""
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


def wait_for_exec(proc: "subprocess.Popen", comm: str, timeout: float = 60.0) -> None:
    """Wait until *proc* has exec'd *comm*: a stand-in container started as `unshare -m ... sleep`
    is, until then, still unshare, perhaps in the caller's mount namespace (where a hook would
    rightly inject).  Raises RuntimeError when it has not after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{proc.pid}/comm").read_text().strip() == comm:
                return
        except OSError:
            pass
        time.sleep(0.001)
    raise RuntimeError(f"pid {proc.pid} did not exec {comm!r} within {timeout} s")


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def remove_cgroups(name: str) -> None:
    """rmdir the (empty) cgroups named *name* at the top of each hierarchy, deepest first (a runtime
    makes a container's cgroup path in every v1 hierarchy, not only the one a test wrote to)."""
    for top in [*Path("/sys/fs/cgroup").glob(f"*/{name}"), Path("/sys/fs/cgroup") / name]:
        remove_cgroup_tree(top)


def remove_cgroup_tree(top: Path) -> None:
    """rmdir *top* and the cgroups below it, deepest first; a busy one stays."""
    below = [Path(d) for d, _dirs, _files in os.walk(top)]  # nothing when *top* is gone
    for d in sorted(below, key=lambda p: -len(p.parts)):
        try:
            d.rmdir()
        except OSError:
            pass


def make_rootfs(dest: Path, ldconfig: bool = False) -> Path:
    """A busybox rootfs at *dest* (applets as relative symlinks)."""
    for d in ("bin", "dev", "proc", "sys", "etc", "tmp", "usr/lib", "usr/local", "sbin"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, dest / "bin" / "busybox")
    subprocess.run(["chroot", str(dest), "/bin/busybox", "--install", "-s", "/bin"], check=True)
    (dest / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\n")
    (dest / "etc" / "group").write_text("root:x:0:\n")
    return dest


def cached_rootfs_tar() -> Path:
    """A tarball of the busybox rootfs, built once per machine (lock-protected for xdist)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tar = CACHE / "busybox-rootfs.tar"
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tar.exists():
            tmp = CACHE / unique("rootfs")
            make_rootfs(tmp)
            with tarfile.open(str(tar) + ".tmp", "w") as t:
                t.add(tmp, arcname=".")
            shutil.rmtree(tmp)
            os.rename(str(tar) + ".tmp", tar)
    return tar


def runtime_spec(rootfs: Path, args: Sequence[str], env: Sequence[str] = (),
                 annotations: Optional[Dict[str, str]] = None, readonly: bool = False) -> Dict[str, Any]:
    """A minimal OCI config.json (what `runc spec` gives, non-interactive)."""
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False, "user": {"uid": 0, "gid": 0}, "args": list(args),
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *env],
            "cwd": "/",
            "capabilities": {k: ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
                             for k in ("bounding", "effective", "permitted", "ambient")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": True,
        },
        "root": {"path": str(rootfs), "readonly": readonly},
        "hostname": "xpu-cdi-test",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        ],
        "annotations": dict(annotations or {}),
        "linux": {
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list"],
            "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger"],
        },
    }


class Bundle:
    """An OCI bundle in a temp dir with its own busybox rootfs copy."""

    def __init__(self, base: Path, rootfs_name: str = "rootfs") -> None:
        self.dir = base / unique("bundle")
        self.dir.mkdir(parents=True)
        self.rootfs = self.dir / rootfs_name
        self.rootfs.mkdir()
        with tarfile.open(cached_rootfs_tar()) as t:
            t.extractall(self.rootfs)
        self.config: Dict[str, Any] = runtime_spec(self.rootfs, ["true"])

    def write(self) -> None:
        (self.dir / "config.json").write_text(json.dumps(self.config, indent=1))

    def set_process(self, args: Sequence[str], env: Sequence[str] = ()) -> None:
        self.config["process"]["args"] = list(args)
        self.config["process"]["env"] = self.config["process"]["env"][:1] + list(env)

    def add_hook(self, stage: str, path: str, args: Sequence[str], env: Sequence[str] = (),
                 timeout: int = 20) -> None:
        self.config.setdefault("hooks", {}).setdefault(stage, []).append(
            {"path": path, "args": list(args), "env": list(env), "timeout": timeout})


def run_runc(bundle: Bundle, runtime: str = "runc", timeout: float = 60,
             cgroup_v2: bool = False, private_ns: bool = False) -> subprocess.CompletedProcess:
    """`runc run` the bundle (non-interactive) and return the result; the container is always deleted.

    cgroup_v2: run inside a private mount namespace with cgroup2 mounted on
    /sys/fs/cgroup (the lab's trick), so the runtime uses the eBPF device
    controller.  private_ns: a private mount namespace with the unified
    hierarchy hidden (what crun needs on this hybrid machine).
    """
    bundle.write()
    cid = unique("xc")
    cmd: List[str] = [runtime, "run", "--bundle", str(bundle.dir), cid]
    if cgroup_v2:
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'umount -l /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"', "v2", *cmd]
    elif private_ns:
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'umount /sys/fs/cgroup/unified 2>/dev/null; exec "$@"', "priv", *cmd]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        subprocess.run([runtime, "delete", "--force", cid], capture_output=True)


PODMAN_EXIT_CODE_RACE = "from DB: no such exit code"

#: A command in a private mount namespace whose /etc/cdi is $1 (podman reads only /etc/cdi and
#: /var/run/cdi: 4.3 has no setting, 5.4 ignores cdi_spec_dirs, containers/podman#25691); with
#: no /etc/cdi, on an overlay of /etc ($2 upper, $3 work dir), so /etc itself never changes.
PRIVATE_ETC_CDI = r"""
set -e
spec=$1 upper=$2 work=$3; shift 3
if [ ! -d /etc/cdi ]; then
  mkdir -p "$upper" "$work"
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$upper,workdir=$work" /etc
  mkdir -p /etc/cdi
fi
mount --bind "$spec" /etc/cdi
exec "$@"
"""


def private_etc_cdi(spec_dir: Path, scratch: Path, cmd: Sequence[str]) -> List[str]:
    """*cmd* run with *spec_dir* as its /etc/cdi (PRIVATE_ETC_CDI; *scratch* for the overlay)."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", PRIVATE_ETC_CDI, "cdi",
            str(spec_dir), str(scratch / "etc-upper"), str(scratch / "etc-work"), *cmd]


def podman_config(base: Path, runtime: str = "runc") -> Dict[str, str]:
    """containers.conf and storage.conf for a podman with its store under *base* and the
    settings this machine needs; the environment variables that select them."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    (base / "containers.conf").write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={hard}:{hard}", "nproc=32768:32768"]\n'
        "[engine]\n"
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        # its own, not /run/libpod: `podman system reset` of one test's podman empties its
        # tmp dir, and a shared one breaks every other podman running at that moment
        # ("creating runtime status file: open /run/libpod/alive")
        f'tmp_dir = "{base}/tmp"\n'
        f'runtime = "{runtime}"\n')
    (base / "storage.conf").write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{base}/root"\nrunroot = "{base}/runroot"\n')
    return {"CONTAINERS_CONF": str(base / "containers.conf"), "CONTAINERS_STORAGE_CONF": str(base / "storage.conf")}


def past_exit_code_race(podman: Callable[[Sequence[str]], subprocess.CompletedProcess],
                        args: Sequence[str]) -> subprocess.CompletedProcess:
    """``podman(args)``, once more when a ``run`` failed with PODMAN_EXIT_CODE_RACE: podman
    4.3 sometimes reads the container's exit code from its DB before conmon has stored it
    (under load) and fails the run itself; the container ran.  Only this message of
    podman's own is retried, never a failure of the container."""
    r = podman(args)
    if r.returncode != 0 and PODMAN_EXIT_CODE_RACE in r.stderr and "run" in args:
        podman(["rm", "-af"])
        r = podman(args)
    return r


class Podman:
    """podman with a private store, the settings this machine needs and a private CDI
    spec dir, ``cdi_dir``, that it sees as /etc/cdi; with ``private_cdi=False`` it reads
    the CDI dirs of the mount namespace it runs in, as a user's podman does (the demo)."""

    def __init__(self, base: Path, private_cdi: bool = True) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.private_cdi = private_cdi
        self.cdi_dir = base / "cdi"
        self.cdi_dir.mkdir(exist_ok=True)
        self.env = dict(os.environ, **podman_config(base))
        try:
            self.run_cmd(["import", "-q", str(cached_rootfs_tar()), IMAGE], check=True)
        except BaseException:  # nobody else holds the object to close it
            self.close()
            raise

    def run_cmd(self, args: Sequence[str], check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
        r = past_exit_code_race(lambda a: self._podman(a, timeout), args)
        if check and r.returncode != 0:
            raise subprocess.CalledProcessError(r.returncode, ["podman", *args], r.stdout, r.stderr)
        return r

    def command(self, args: Sequence[str]) -> List[str]:
        cmd = ["podman", *args]
        return private_etc_cdi(self.cdi_dir, self.base, cmd) if self.private_cdi else cmd

    def _podman(self, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(args), env=self.env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def run(self, podman_args: Sequence[str], command: Sequence[str]) -> subprocess.CompletedProcess:
        return self.run_cmd(["run", "--rm", "--network", "none", *podman_args, IMAGE, *command])

    def close(self) -> None:
        self.run_cmd(["rm", "-af"])
        self.run_cmd(["rmi", "-af"])
        subprocess.run(self.command(["system", "reset", "-f"]), env=self.env, capture_output=True)
        # a run podman lost track of (its exit-code race) leaves runc's state behind
        listed = subprocess.run(["runc", "list", "-f", "json"], capture_output=True, text=True)
        for c in json.loads(listed.stdout or "null") or []:
            if str(c.get("bundle", "")).startswith(f"{self.base}/"):
                subprocess.run(["runc", "delete", "--force", c["id"]], capture_output=True)
        # overlay mounts of the private store must not outlive the test
        subprocess.run(["sh", "-c", f"grep -o ' {self.base}[^ ]*' /proc/mounts | xargs -r -n1 umount -l"],
                       capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def podman() -> Iterator[Podman]:
    """A podman with a private store, removed (containers, images, mounts) afterwards."""
    require("podman", "runc")
    # a short path: podman 4.3 waits 20 s for each container's exit ("Exceeded conmon
    # timeout") when its store's paths are as long as xdist's tmp paths
    p = Podman(Path(tempfile.mkdtemp(prefix="xp-")))
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def cdi_dir(podman: Podman) -> Path:
    """The spec dir this test's podman sees as /etc/cdi (a private mount namespace per podman
    command); nothing is written to the machine's /etc/cdi."""
    return podman.cdi_dir


def install_spec(host: Any, profile: str, cdi_dir: Path, *extra: str) -> str:
    """``xpu-cdi generate`` for the fake *host* into *cdi_dir* under a kind unique to the test
    (so that parallel tests never share one); the kind."""
    vendor = f"t{uuid.uuid4().hex[:10]}.example.com"
    xpu_cdi = str(Path(sys.executable).parent / "xpu-cdi")
    r = subprocess.run([xpu_cdi, "generate", "--profile", profile, "--profiles-dir", "/nonexistent",
                        *host.cli_roots, "--vendor", vendor, "--output", str(cdi_dir / f"{vendor}.json"), *extra],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return f"{vendor}/{'xpu' if profile == 'kunlunxin' else 'npu'}"


def oci_image_archive(name: str = IMAGE, cmd: Sequence[str] = ("sh",)) -> Path:
    """An OCI image archive of the busybox rootfs for `ctr image import`, named
    *name* and running *cmd* by default; built once per machine (no registry, no
    podman needed).  A pod sandbox's pause image is one of these running sleep."""
    import hashlib

    CACHE.mkdir(parents=True, exist_ok=True)
    key = "" if (name, tuple(cmd)) == (IMAGE, ("sh",)) else \
        "-" + hashlib.sha256(json.dumps([name, list(cmd)]).encode()).hexdigest()[:12]
    tar = CACHE / f"busybox-oci{key}.tar"
    with open(CACHE / ".lock-oci", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tar.exists():
            write_oci_archive(tar, name, cached_rootfs_tar().read_bytes(),
                              {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": list(cmd)})
    return tar


def write_oci_archive(tar: Path, name: str, layer: bytes, config: Dict[str, Any]) -> None:
    """Write *tar*: an OCI image archive (oci-layout, index.json, blobs) of one image named
    *name* whose one layer is the tar *layer* and whose config's ``config`` is *config*;
    written beside and renamed, so a reader never sees half of it."""
    import hashlib

    blobs: Dict[str, bytes] = {}

    def blob(data: bytes) -> Dict[str, Any]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    layer_desc = blob(layer)
    image_config = json.dumps({"architecture": "amd64", "os": "linux", "config": config,
                               "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(image_config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_desc}]}).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", **blob(manifest),
        "annotations": {"io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}]})
    tmp = Path(str(tar) + ".tmp")
    with tarfile.open(tmp, "w") as t:
        def add(member: str, data: bytes) -> None:
            info = tarfile.TarInfo(member)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", index.encode())
        for digest, data in blobs.items():
            add("blobs/sha256/" + digest.split(":", 1)[1], data)
    os.rename(tmp, tar)


def private_containerd_config(text: str, base: Path, address: str) -> str:
    """*text* (a containerd config.toml) with root, state, sockets, the opt dir and the
    CRI plugin's CNI dirs moved under *base* and *address*."""
    import tomlkit

    doc = tomlkit.parse(text)
    doc["root"], doc["state"] = str(base / "root"), str(base / "state")
    plugins = doc.setdefault("plugins", tomlkit.table())
    version = doc.get("version", 1)
    if version >= 4:  # containerd 2.3+: the servers are plugins with their own settings
        plugins.setdefault("io.containerd.server.v1.grpc", tomlkit.table())["address"] = address
        plugins.setdefault("io.containerd.server.v1.ttrpc", tomlkit.table())["address"] = address + ".ttrpc"
    else:
        doc.setdefault("grpc", tomlkit.table())["address"] = address
        doc.setdefault("ttrpc", tomlkit.table())["address"] = address + ".ttrpc"
    opt = "opt" if version == 1 else "io.containerd.internal.v1.opt"
    plugins.setdefault(opt, tomlkit.table())["path"] = str(base / "opt")
    cri = plugins.get({1: "cri", 2: "io.containerd.grpc.v1.cri"}.get(version, "io.containerd.cri.v1.runtime"))
    if cri is not None:  # the CRI plugin creates and watches its CNI conf dir
        cni = cri.setdefault("cni", tomlkit.table())
        cni["conf_dir"] = str(base / "cni" / "net.d")
        if version >= 3:  # 2.x: a list
            cni["bin_dirs"] = [str(base / "cni" / "bin")]
        else:
            cni["bin_dir"] = str(base / "cni" / "bin")
    return tomlkit.dumps(doc)


class Containerd:
    """A private containerd 1.6 daemon (own root, state, sockets, namespace),
    like the lab script runs it.  ``stop()`` removes every task, container,
    shim and mount it made, and is safe to call after a failed start.

    config: the text of a config.toml to start with (its root, state, socket
    and opt paths are replaced by private ones); default: a minimal one with
    the CRI plugin disabled.  env: extra environment of the daemon, which its
    shims and so the runtime binary inherit (e.g. XPU_CDI_SPEC_DIRS).
    """

    def __init__(self, base: Path, config: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> None:
        require("containerd", "ctr", "runc")
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        # unix socket paths are limited to ~104 bytes: xdist's tmp paths are longer
        self.sock_dir = tempfile.mkdtemp(prefix="xc-")
        self.address = os.path.join(self.sock_dir, "c.sock")
        self.namespace = unique("xc")
        self.config_path = base / "config.toml"
        self.config_path.write_text(self.private(config if config is not None else
                                                 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n'))
        self.log_path = base / "containerd.log"
        self.proc: Optional[subprocess.Popen] = None
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(["containerd", "--config", str(self.config_path)], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=dict(os.environ, **(env or {})))
        try:  # whatever fails from here stops the daemon: nobody else holds the object to
            self._come_up()
        except BaseException:
            self.stop()
            raise

    def _come_up(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            # ctr blocks while the socket is missing: ask only once containerd has made it
            if os.path.exists(self.address):
                try:
                    if self.ctr("version", timeout=30).returncode == 0:
                        return
                except subprocess.TimeoutExpired:
                    pass
            time.sleep(0.05)
        tail = self.log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"containerd did not come up (exit {self.proc.returncode}):\n{tail}")

    def private(self, text: str) -> str:
        return private_containerd_config(text, self.base, self.address)

    def ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(["ctr", "--address", self.address, "-n", self.namespace, *args],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def import_image(self) -> str:
        r = self.ctr("image", "import", str(oci_image_archive()), timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"ctr image import failed: {r.stderr}")
        return IMAGE

    def plugins(self) -> Dict[str, str]:
        """Plugin id -> status ("ok", "error", "skip") as `ctr plugins ls` reports it."""
        out: Dict[str, str] = {}
        for line in self.ctr("plugins", "ls").stdout.splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 4:
                out[f"{cols[0]}.{cols[1]}"] = cols[-1]
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                for cid in self.ctr("containers", "ls", "-q", timeout=20).stdout.split():
                    self.ctr("task", "kill", "-s", "SIGKILL", cid, timeout=20)
                    self.ctr("task", "delete", "-f", cid, timeout=20)
                    self.ctr("containers", "delete", cid, timeout=20)
            except subprocess.TimeoutExpired:
                pass  # an unresponsive daemon: the kills below still clean up
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # shims outlive the daemon: end the ones started for this daemon's socket, by pid
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline and b"containerd-shim" in cmdline[0] and self.address.encode() in cmdline:
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
        with open("/proc/self/mounts") as f:
            targets = [t for t in (line.split()[1] for line in f) if (t + "/").startswith(f"{self.base}/")]
        for target in reversed(targets):
            subprocess.run(["umount", "-l", target], capture_output=True)
        # the runc shim keeps runc's state in /run/containerd/runc/<namespace> whatever the
        # config says: runc removes each container's dir there, not the namespace's (empty now)
        try:
            os.rmdir(f"/run/containerd/runc/{self.namespace}")
        except OSError:
            pass
        # runc removes each container's cgroup but not the one named after the
        # namespace above them (/sys/fs/cgroup/<controller>/<namespace>): remove those
        remove_cgroups(self.namespace)
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.sock_dir, ignore_errors=True)


@pytest.fixture
def containerd(tmp_path: Path) -> Iterator[Containerd]:
    """A private containerd 1.6 (CRI disabled) with the busybox image imported; always stopped."""
    c = Containerd(tmp_path / "containerd")
    try:
        c.import_image()
        yield c
    finally:
        c.stop()
