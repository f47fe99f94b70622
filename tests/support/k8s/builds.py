"""The upstream Go programs the one-node cluster runs, built from pinned module releases.

Each component is a small Go module of the suite's own, ``tests/support/k8s/go/<name>/`` (go.mod,
go.sum, tools.go), whose requirements pin the upstream release: ``k8s.io/kubernetes`` (with
every ``k8s.io/<staging>`` module replaced by the matching ``v0.<minor>.<patch>``),
``github.com/containerd/containerd/v2``, ``go.etcd.io/etcd/server/v3``,
``github.com/NVIDIA/nvidia-container-toolkit`` (its CDI hook, for make bench).  :func:`ensure`
builds one into the test cache, ``<cache>/k8s/<name>-<version>/bin/``, once per pin: a
stamp there holds the hash of the module files, the build command and the Go release, and
a different stamp rebuilds.  The build runs under a file lock, so two pytest workers or two
checkouts wanting it at once build it once.

To move a pin::

    cd tests && ../.venv/bin/python -m support.k8s.builds pin kubernetes v1.37.3  # or kubelet-compat, containerd, etcd

rewrites that module's go.mod/go.sum: written anew from that release's own go.mod, so its
dependencies are the release's, then ``go mod tidy``.  The go command of both comes from
``upstream.go_for``: the machine's when new enough, else the pinned toolchain.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from support import upstream
from support.runtimes import CACHE

HERE = Path(__file__).resolve().parent
GO_DIR = HERE / "go"

BUILDS = CACHE / "k8s"
#: What every component is built with: paths out of the binaries, no symbol tables.
BUILD_FLAGS = ["-trimpath"]
LDFLAGS = ["-s", "-w"]


#: No Go to build with (none on the machine to fetch the pinned toolchain with, or no proxy):
#: the message says what to install.
Unavailable = upstream.GoUnavailable


@dataclass(frozen=True)
class Component:
    name: str                       # the directory under tests/support/k8s/go/
    module: str                     # the upstream module its go.mod pins
    packages: Tuple[Tuple[str, str], ...]  # (package, binary name)
    env: Tuple[Tuple[str, str], ...] = ()
    tags: Tuple[str, ...] = ()
    staging: bool = False           # k8s.io/kubernetes: replace the staging modules, stamp the version
    extra: Dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    short: str = ""                 # its directory in the cache (default: the name up to a dash)

    @property
    def dir(self) -> Path:
        return GO_DIR / self.name

    def version(self) -> str:
        m = re.search(rf"^\s*(?:require\s+)?{re.escape(self.module)}\s+(v\S+)", (self.dir / "go.mod").read_text(),
                      re.M)
        if not m:
            raise RuntimeError(f"{self.dir / 'go.mod'} does not require {self.module}")
        return m.group(1)

    def go_needed(self) -> Tuple[int, ...]:
        """The Go release the module needs: the highest ``go`` line of its go.mod and the pinned module's."""
        lines = [(self.dir / "go.mod").read_text()]
        pinned = upstream.GOMODCACHE / "cache" / "download" / self.module.lower() / "@v" / f"{self.version()}.mod"
        if pinned.is_file():
            lines.append(pinned.read_text())
        found = [parse_go(m) for t in lines for m in re.findall(r"^go\s+(\S+)", t, re.M)]
        return max(found) if found else (1, 0)

    def bin_dir(self) -> Path:
        short = self.short or self.name.split("-")[0]
        return BUILDS / f"{short}-{self.version()}" / "bin"


parse_go = upstream.parse_go


COMPONENTS: Dict[str, Component] = {c.name: c for c in [
    Component("kubernetes", "k8s.io/kubernetes", tuple((f"k8s.io/kubernetes/cmd/{b}", b) for b in (
        "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")), staging=True),
    # the oldest release with DRA v1, whose kubelet the device-plugin tests also run against the
    # newer control plane (kubelet may be three minors older than the API server)
    Component("kubelet-compat", "k8s.io/kubernetes", (("k8s.io/kubernetes/cmd/kubelet", "kubelet"),), staging=True),
    # the fleet's Services (tests/support/k8s/fleet.py), at the kubernetes component's pin
    # (tests/test_k8s_builds.py holds them equal); a module of its own, so that adding it left the
    # control plane's module, and so its build stamp, as they were
    Component("kube-proxy", "k8s.io/kubernetes", (("k8s.io/kubernetes/cmd/kube-proxy", "kube-proxy"),),
              staging=True, short="kube-proxy"),
    # static, as containerd's releases build them; no btrfs snapshotter (it needs cgo and libbtrfs)
    Component("containerd", "github.com/containerd/containerd/v2", tuple(
        (f"github.com/containerd/containerd/v2/cmd/{b}", b) for b in ("containerd", "containerd-shim-runc-v2", "ctr")),
        env=(("CGO_ENABLED", "0"),)),
    Component("etcd", "go.etcd.io/etcd/server/v3", (("go.etcd.io/etcd/server/v3", "etcd"),),
              env=(("CGO_ENABLED", "0"),)),
    # NVIDIA's CDI hook, which make bench times ours against (scripts/bench.py); cgo, as NVIDIA
    # builds it (go-nvml needs it)
    Component("nvidia-cdi-hook", "github.com/NVIDIA/nvidia-container-toolkit", (
        ("github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook", "nvidia-cdi-hook"),)),
    # the fleet's Prometheus (tests/fleet/test_fleet_prometheus.py): Debian's is built without
    # Kubernetes service discovery; only that one of the discovery plugins is compiled in
    Component("prometheus", "github.com/prometheus/prometheus", (
        ("github.com/prometheus/prometheus/cmd/prometheus", "prometheus"),
        ("github.com/prometheus/prometheus/cmd/promtool", "promtool")),
        env=(("CGO_ENABLED", "0"),), tags=("remove_all_sd", "enable_kubernetes_sd")),
    # the chart's tests (tests/deploy/test_chart.py, tests/k8s/test_helm_node.py)
    Component("helm", "helm.sh/helm/v4", (("helm.sh/helm/v4/cmd/helm", "helm"),), env=(("CGO_ENABLED", "0"),)),
]}


go_version = upstream.go_version


def go_env() -> Dict[str, str]:
    """The suite's Go environment (support.upstream: the test cache's module and build caches)."""
    return upstream.go_env()


def check_go(component: Component) -> str:
    """The go binary to build *component* with (upstream.go_for: the machine's when new enough, else
    the pinned toolchain); Unavailable saying what to install when there is none."""
    try:
        return upstream.go_for(component.go_needed())
    except Unavailable as err:
        raise Unavailable(f"building {component.module} {component.version()} for the Kubernetes tests: "
                          f"{err}") from None


def version_ldflags(component: Component) -> List[str]:
    """What Kubernetes' hack/lib/version.sh stamps into its binaries (kubelet reports it in the Node's
    nodeInfo, kubectl and the components print it); the build date is the release's, from the proxy."""
    if not component.staging:
        return []
    v = component.version()
    major, minor = re.match(r"v(\d+)\.(\d+)", v).groups()  # type: ignore[union-attr]
    info = upstream.GOMODCACHE / "cache" / "download" / "k8s.io" / "kubernetes" / "@v" / f"{v}.info"
    date = json.loads(info.read_text()).get("Time", "") if info.is_file() else ""
    values = {"gitVersion": v, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    if date:
        values["buildDate"] = date
    return [f"-X k8s.io/{pkg}/version.{k}={val}" for pkg in ("component-base", "client-go/pkg")
            for k, val in values.items()]


def build_commands(component: Component, out: Path) -> List[List[str]]:
    """The ``go build`` commands (one per binary name the default would get wrong, else one for all)."""
    base = ["build", *BUILD_FLAGS, "-ldflags", " ".join([*LDFLAGS, *version_ldflags(component)])]
    if component.tags:
        base += ["-tags", ",".join(component.tags)]
    named = [(p, b) for p, b in component.packages if p.rsplit("/", 1)[-1] != b]
    together = [p for p, b in component.packages if (p, b) not in named]
    cmds = [[*base, "-o", f"{out}/", *together]] if together else []
    cmds += [[*base, "-o", str(out / b), p] for p, b in named]
    return cmds


def stamp(component: Component, go: str) -> str:
    h = hashlib.sha256()
    for f in ("go.mod", "go.sum", "tools.go"):
        h.update((component.dir / f).read_bytes())
    h.update(json.dumps([build_commands(component, Path("OUT")), sorted(component.env),
                         list(go_version(go))]).encode())
    return h.hexdigest()


def log(msg: str) -> None:
    print(f"[k8s builds] {msg}", file=sys.stderr, flush=True)


def ensure(name: str) -> Path:
    """The bin dir of component *name*, built when its stamp is absent or differs."""
    component = COMPONENTS[name]
    go = check_go(component)
    dest = component.bin_dir()
    want = stamp(component, go)
    stamp_file = dest.parent / "stamp"
    if stamp_file.is_file() and stamp_file.read_text().split("\n")[0] == want:
        return dest
    BUILDS.mkdir(parents=True, exist_ok=True)
    with open(BUILDS / f".lock-{component.name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp_file.is_file() and stamp_file.read_text().split("\n")[0] == want:
            return dest  # another worker or checkout built it while we waited
        tmp = dest.parent / f"bin.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        env = dict(go_env(), **dict(component.env))
        logf = dest.parent / "build.log"
        t0 = time.monotonic()
        log(f"building {component.module} {component.version()} into {dest} (cold: minutes; log {logf})")
        with open(logf, "w") as out:
            for cmd in build_commands(component, tmp):
                out.write("$ go " + " ".join(cmd) + "\n")
                out.flush()
                # nice: the machine's cores are shared with the rest of the suite
                r = subprocess.run(["nice", "-n", "10", go, *cmd], cwd=component.dir, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                if r.returncode != 0:
                    tail = logf.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"building {component.module} {component.version()} failed "
                                       f"(`go {' '.join(cmd)}` in {component.dir}, exit {r.returncode}):\n{tail}")
        took = time.monotonic() - t0
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
        stamp_file.write_text(f"{want}\nbuilt in {took:.0f} s with {go} {'.'.join(map(str, go_version(go)))}\n")
        log(f"built {component.module} {component.version()} in {took:.0f} s")
    return dest


def ensure_or_skip(name: str) -> Path:
    """:func:`ensure`, but where Go is missing or too old the calling test skips saying what to
    install -- a failure under CI=true, where nothing may skip (support/cisafe.py)."""
    import pytest

    try:
        check_go(COMPONENTS[name])
    except Unavailable as err:
        pytest.skip(str(err))
    return ensure(name)


def build_seconds(name: str) -> Optional[float]:
    """How long the cached build of *name* took (from its stamp), None when unknown."""
    stamp_file = COMPONENTS[name].bin_dir().parent / "stamp"
    m = re.search(r"built in (\d+) s", stamp_file.read_text()) if stamp_file.is_file() else None
    return float(m.group(1)) if m else None


# ------------------------------------------------------------------------------ moving a pin


def staging_replaces(release_gomod: str, version: str) -> List[str]:
    """``k8s.io/<staging> => k8s.io/<staging> v0.<minor>.<patch>`` for each staging module
    k8s.io/kubernetes *version*'s own go.mod (*release_gomod*) replaces with ``./staging/src/k8s.io/...``."""
    mods = sorted(set(re.findall(r"^\s*(?:replace\s+)?(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", release_gomod, re.M)))
    staged = "v0." + version.split(".", 1)[1]
    return [f"{m} => {m} {staged}" for m in mods]


def requirements(gomod: str) -> List[str]:
    """The ``require`` lines of a go.mod's text (``path version [// indirect]``), block or single."""
    blocks = re.findall(r"(?ms)^require\s*\((.*?)^\)", gomod)
    lines = [x.strip() for b in blocks for x in b.splitlines()] + re.findall(r"(?m)^require\s+([^(\s].*)$", gomod)
    return [x for x in lines if x and not x.startswith("//")]


def pin(name: str, version: str, where: Optional[Path] = None) -> None:
    """Rewrite component *name*'s go.mod/go.sum (in *where*, default its own directory) to require its
    module at *version* with that release's own dependency versions: go.mod written anew from the
    release's go.mod (its requirements, its go line; for Kubernetes the staging replaces), then
    ``go mod tidy``.  Unavailable, with the proxy's reason, for a version it does not have."""
    component = COMPONENTS[name]
    where = where or component.dir
    gomod = where / "go.mod"
    go = upstream.go_for(upstream.go_line(gomod))
    key = f"{component.module}@{version}"
    info = upstream.download_info(go, where, key, goflags="-modcacherw")
    release = Path(info["GoMod"]).read_text()
    module = re.search(r"^module\s+\S+", gomod.read_text(), re.M)
    need = upstream.go_line(Path(info["GoMod"]))
    text = (f"{module.group(0) if module else 'module xpu-cdi.test/' + name}\n\ngo {upstream.dotted(need)}\n\n"
            f"require {component.module} {version}\n\nrequire (\n"
            + "".join(f"\t{r}\n" for r in requirements(release)) + ")\n")
    if component.staging:
        text += "\nreplace (\n" + "".join(f"\t{r}\n" for r in staging_replaces(release, version)) + ")\n"
    gomod.write_text(text)
    r = subprocess.run([upstream.go_for(need), "mod", "tidy"], cwd=where, capture_output=True, text=True,
                       env=dict(go_env(), GOFLAGS="-modcacherw"))  # rewrites go.mod and go.sum
    if r.returncode != 0:
        raise RuntimeError(f"go mod tidy in {where} after pinning {key} failed: {r.stderr.strip()}")


def main(argv: Sequence[str]) -> int:
    if len(argv) == 3 and argv[0] == "pin":
        try:
            pin(argv[1], argv[2])
        except Unavailable as err:
            print(f"pin: {err}", file=sys.stderr)
            return 1
        return 0
    if len(argv) >= 1 and argv[0] == "build":
        for name in argv[1:] or COMPONENTS:
            print(ensure(name))
        return 0
    print(f"usage: {sys.argv[0]} pin <{'|'.join(COMPONENTS)}> <version> | build [component...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
