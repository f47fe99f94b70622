"""The daemons' footprint and the CLI's start for `make bench` (issue 30; scripts/bench.py calls :func:`run`).

* on each library stack (``pypi``: this venv's wheels; ``debian``: Debian's
  python3-grpcio, -protobuf, -prometheus-client, which the .deb and the
  DaemonSet's image run), resident memory (VmRSS, the peak VmHWM, the private
  RssAnon and how much of it all is grpc's compiled core) of ``xpu-cdi device-plugin``
  (against the tests' stand-in kubelet, once it lists 8 cards) and ``xpu-cdi
  exporter`` (8 + 8 cards, once it has served a scrape), each its own process
  on a fake host, a settled second after start;
* the same of ``xpu-cdi dra-driver`` once it has published 8 cards to an
  HTTP stand-in of the API server (tests/support/fakeapi.py's tables);
* each judged against :data:`RSS_TARGET` on either stack (issue 41: what users
  weigh is a process they can read and well-kept libraries, not the last MiB);
* each daemon's RSS across a churn soak, after a warm-up round and at its
  end: kubelet restarted :data:`SOAK_ROUNDS` times, each time the plugin
  registered again and :data:`SOAK_CALLS` Allocate calls; :data:`SOAK_ROUNDS`
  x :data:`SOAK_CALLS` scrapes of the exporter; :data:`SOAK_PREPARES` x 8
  claims a round made, prepared, unprepared and deleted by the DRA driver.
  Flat within :data:`SOAK_SLACK` (the fleet soak, tests/fleet, does it on a
  cluster);
* their idle CPU over 30 s, three of their 10 s health intervals (no scrapes,
  no calls: what the daemon spends on its own, its health polls; the exporter runs its passes when scraped, so
  idle it only rewrites its status file each interval): the run time of a
  cpuacct cgroup the daemon is moved into for the while, to the ns, threads
  that start and end meanwhile included;
* whole-process wall and CPU time of ``xpu-cdi generate`` (8 cards) and
  ``xpu-cdi list``, interleaved with the same interpreter doing nothing and
  importing click (their floor): judged on the fastest run, the median beside,
  with the load average.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

from support import fakehost  # noqa: E402

BIN = Path(sys.executable).parent
RSS_TARGET = 64.0  # MiB, each daemon on either stack (the chart's limits are 128-160 Mi)
CPU_TARGET = 0.1  # percent, idle
CLI_TARGETS = {"generate": 100.0, "list": 60.0}  # ms, whole process
SOAK_ROUNDS, SOAK_CALLS = 10, 30
SOAK_PREPARES = 3  # the DRA driver's prepare calls a round, 8 claims each: its client reads each claim at 5 a second
SOAK_SLACK = 2.0  # MiB the RSS may grow from the warm-up round to the end of the soak
IDLE_S = 30.0  # three health intervals: one window of 10 s held one pass, and went 0.04-0.14 % by chance
STACKS = ("pypi", "debian")
Rows = List[Tuple[str, str, str]]


def status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1; on a v2-only host, the unified tree's cpu.stat


def idle_cpu_percent(pid: int, seconds: float) -> float:
    """The percent of a core *pid* ran over *seconds*, every thread counted to the ns (utime's 10 ms
    ticks are 0.1 % of 10 s, and a thread's own schedstat goes with it when it ends): the process is
    moved into a cgroup of its own for the while, then back."""
    from support.runtimes import unique

    v1 = CPUACCT.is_dir()
    top = CPUACCT if v1 else Path("/sys/fs/cgroup")
    line = next(ln for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                if (ln.split(":")[1].split(",").count("cpuacct") if v1 else ln.startswith("0::")))
    home = top / line.split(":", 2)[2].lstrip("/")
    group = top / unique("xcbench-idle")
    group.mkdir()

    def used_ns() -> int:
        if v1:
            return int((group / "cpuacct.usage").read_text())
        stat = dict(ln.split() for ln in (group / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) * 1000

    try:
        (group / "cgroup.procs").write_text(str(pid))
        c0, t0 = used_ns(), time.monotonic()
        time.sleep(seconds)
        return 100 * (used_ns() - c0) / 1e9 / (time.monotonic() - t0)
    finally:
        try:
            (home / "cgroup.procs").write_text(str(pid))
        except ProcessLookupError:
            pass
        group.rmdir()


def mapped_kib(pid: int, names: Tuple[str, ...]) -> int:
    """Resident KiB of the file mappings whose path has one of *names* in it (/proc/PID/smaps)."""
    total, counting = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 6)
            if "-" in head[0] and not head[0].endswith(":"):  # a mapping's first line
                counting = len(head) > 5 and any(n in head[-1] for n in names)
            elif counting and head[0] == "Rss:":
                total += int(head[1])
    return total


GRPC_CORE = ("grpc/_cython/cygrpc", "libgrpc")  # the wheel's core is inside cygrpc; Debian's links libgrpc*.so


def footprint(pid: int, idle: bool = True) -> Dict[str, float]:
    """RSS and HWM after a settled second, then (*idle*) the CPU percent of IDLE_S seconds."""
    time.sleep(1.0)
    out = {"rss_mib": status_kib(pid, "VmRSS") / 1024, "hwm_mib": status_kib(pid, "VmHWM") / 1024,
           "anon_mib": status_kib(pid, "RssAnon") / 1024, "grpc_mib": mapped_kib(pid, GRPC_CORE) / 1024}
    if idle:
        out["cpu_percent"] = idle_cpu_percent(pid, IDLE_S)
    out["load"] = os.getloadavg()[0]
    return out


def device_plugin(work: Path, stack: str) -> Dict[str, float]:
    from support import kubeletkit
    from support.dpnode import Node

    work = work / stack
    work.mkdir(exist_ok=True)
    root = work / "fp-dp-host"
    host = fakehost.kunlunxin(root, cards=8)
    node = Node(host, work / "fp-dp-cdi", work / "fp-dp-k", work / "fp-dp.json")
    node.plugin_dir.mkdir()
    node.generate()
    kubelet = kubeletkit.FakeKubelet(node.plugin_dir)
    args = [*host.cli_roots, "--plugin-dir", str(node.plugin_dir), "--spec-dir", str(node.spec_dir),
            "--status-file", str(node.status)]  # the default health interval and uevents, as on a node
    proc = kubeletkit.PluginProcess(stack, args, work / "fp-dp.log")
    try:
        kubelet.wait_registered()
        kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="8 cards")
        out = footprint(proc.proc.pid)
        _plugin_churn(kubelet)  # the warm-up round: the first Allocate's imports and caches
        out["soak_start_mib"] = footprint(proc.proc.pid, idle=False)["rss_mib"]
        for _ in range(SOAK_ROUNDS):
            _plugin_churn(kubelet)
        out["soak_end_mib"] = footprint(proc.proc.pid, idle=False)["rss_mib"]
        return out
    finally:
        proc.stop()
        kubelet.stop()


def _plugin_churn(kubelet: "object") -> None:
    """One round: kubelet restarted, the plugin registered again and listing 8 cards, then
    SOAK_CALLS Allocate calls of 1-4 cards."""
    k: Any = kubelet
    rng = random.Random(41)
    started = k.restart()
    k.wait_for(lambda: any(t >= started and len(devs) == 8 for t, devs in k.lists), message="8 cards listed again")
    stub = k.plugin()
    for _ in range(SOAK_CALLS):
        ids = [str(i) for i in rng.sample(range(8), rng.randint(1, 4))]
        req = k.pb2.AllocateRequest(container_requests=[k.pb2.ContainerAllocateRequest(devices_ids=ids)])
        assert stub.Allocate(req, timeout=60).container_responses, "an Allocate answered nothing"


def exporter(work: Path, stack: str) -> Dict[str, float]:
    """Asking kubelet's PodResources (the stand-in of bench_exporter) each interval, as on a node."""
    import shutil
    import urllib.request

    from bench_exporter import _pod_resources
    from support.exporternode import ExporterProcess, make_node
    from support.kubeletkit import stack_python

    python, env = stack_python(stack)
    root, tmp = work / stack / "fp-exp-host", work / stack / "fp-exp"
    root.mkdir(parents=True)
    tmp.mkdir(parents=True)
    node = make_node(root, tmp)
    kubelet, sock_dir = _pod_resources()
    proc = ExporterProcess(node.args("--pod-resources-socket", str(sock_dir / "kubelet.sock")), tmp / "exporter.log",
                           python=python, env=env)
    try:
        body = urllib.request.urlopen(proc.url(), timeout=30).read()
        assert b'xpu_cdi_card_temperature_celsius{card="7"' in body, "the first scrape has no readings"
        out = footprint(proc.proc.pid)

        def scrapes(n: int) -> None:
            for i in range(n):  # plain and gzipped, as Prometheus asks
                req = urllib.request.Request(proc.url(), headers={"Accept-Encoding": "gzip"} if i % 2 else {})
                assert urllib.request.urlopen(req, timeout=30).read(), "a scrape answered nothing"

        scrapes(SOAK_CALLS)  # the warm-up round
        out["soak_start_mib"] = footprint(proc.proc.pid, idle=False)["rss_mib"]
        scrapes(SOAK_ROUNDS * SOAK_CALLS)
        out["soak_end_mib"] = footprint(proc.proc.pid, idle=False)["rss_mib"]
        return out
    finally:
        proc.stop()
        if kubelet is not None:
            kubelet.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)


def dra_driver(work: Path, stack: str) -> Dict[str, float]:
    """Against the HTTP stand-in of the API (fakeapi.HttpFront), kubelet's directories empty: published, idle."""
    import json
    import uuid

    from support import kubeletkit
    from support.fakeapi import FakeKube, HttpFront

    host = fakehost.kunlunxin(work / stack / "fp-dra-host", cards=8)
    d = work / stack / "fp-dra"
    for sub in ("registry", "plugins", "run", "cdi"):
        (d / sub).mkdir(parents=True)
    from support.dpnode import Node

    Node(host, d / "cdi", d / "plugins", d / "unused").generate()
    api = HttpFront(FakeKube())
    kubeconfig = d / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": api.url}}],
        "users": [{"name": "u", "user": {"token": "bench"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    (d / "boot_id").write_text(str(uuid.uuid4()) + "\n")
    uid = str(uuid.uuid4())
    args = [*host.cli_roots, "--profile", "kunlunxin", "--profiles-dir", "/nonexistent",
            "--kubeconfig", str(kubeconfig), "--node-name", "bench-node", "--registry-dir", str(d / "registry"),
            "--plugins-dir", str(d / "plugins"),
            "--run-dir", str(d / "run"), "--pod-uid", uid, "--spec-dir", str(d / "cdi"),
            "--node-config", str(d / "config.yaml"), "--boot-id-file", str(d / "boot_id")]
    proc = kubeletkit.PluginProcess(stack, args, d / "dra.log", command="dra-driver")
    status = d / "run" / f"dra-driver-{uid}.json"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if json.loads(status.read_text())["kinds"]["kunlunxin.com/xpu"].get("published"):
                    break
            except (OSError, ValueError, KeyError):
                pass
            if proc.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the DRA driver did not publish: {(d / 'dra.log').read_text()[-2000:]}")
            time.sleep(0.05)
        out = footprint(proc.proc.pid)
        kubelet = _DraKubelet(d / "registry")
        try:
            kubelet.churn(api.kube, "warm-up")
            out["soak_start_mib"] = footprint(proc.proc.pid, idle=False)["rss_mib"]
            for i in range(SOAK_ROUNDS):
                kubelet.churn(api.kube, str(i))
            out["soak_end_mib"] = footprint(proc.proc.pid, idle=False)["rss_mib"]
        finally:
            kubelet.channel.close()
        return out
    finally:
        proc.stop()
        api.close()


class _DraKubelet:
    """kubelet's side of the DRA driver, by the stubs of kubelet's own protos: registered through the
    plugin watcher's socket, then NodePrepareResources and NodeUnprepareResources."""

    def __init__(self, registry: Path) -> None:
        import grpc

        from support import kubeproto

        self.dra, dra_grpc = kubeproto.stubs("dra/v1/api.proto")
        reg, reg_grpc = kubeproto.stubs("pluginregistration/v1/api.proto")
        [sock] = registry.iterdir()
        with grpc.insecure_channel(f"unix:{sock}") as ch:
            info = reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=60)
            reg_grpc.RegistrationStub(ch).NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=True),
                                                                   timeout=60)
        self.channel = grpc.insecure_channel(f"unix:{info.endpoint}")
        self.stub = dra_grpc.DRAPluginStub(self.channel)

    def churn(self, kube: Any, round_name: str) -> None:
        """One round: SOAK_PREPARES times, a claim of one card for each of the 8 cards made,
        prepared in one call, unprepared in one call and deleted."""
        for n in range(SOAK_PREPARES):
            claims = []
            for card in range(8):
                name, uid = f"c{card}", f"uid-{round_name}-{n}-{card}"
                kube.add_claim("bench", name, uid, [{"request": "xpus", "driver": "kunlunxin.com",
                                                     "pool": "bench-node", "device": str(card)}])
                claims.append(self.dra.Claim(namespace="bench", name=name, uid=uid))
            got = self.stub.NodePrepareResources(self.dra.NodePrepareResourcesRequest(claims=claims), timeout=60)
            errors = [r.error for r in got.claims.values() if r.error]
            assert len(got.claims) == 8 and not errors, f"prepare failed: {errors[:2]}"
            got = self.stub.NodeUnprepareResources(self.dra.NodeUnprepareResourcesRequest(claims=claims), timeout=60)
            assert not [r.error for r in got.claims.values() if r.error], "unprepare failed"
            for card in range(8):
                kube.claims.pop(("bench", f"c{card}"), None)


def cli_times(work: Path, rounds: int = 30) -> Dict[str, List[Tuple[float, float]]]:
    """(wall, CPU) seconds of whole `xpu-cdi generate` (8 cards) and `xpu-cdi list` processes, and of
    the same interpreter doing nothing and importing click (the floor the two stand on), interleaved."""
    host = fakehost.kunlunxin(work / "fp-cli-host", cards=8)
    spec_dir = work / "fp-cli-cdi"
    exe = str(BIN / "xpu-cdi")
    cmds = {"generate": [exe, "generate", *host.cli_roots, "--profile", "kunlunxin", "--spec-dir", str(spec_dir)],
            "list": [exe, "list", "--spec-dir", str(spec_dir)],
            "python": [sys.executable, "-c", "pass"], "click": [sys.executable, "-c", "import click"]}
    out: Dict[str, List[Tuple[float, float]]] = {k: [] for k in cmds}
    # bytecode, as an installed package has it: with PYTHONDONTWRITEBYTECODE set (CI, these
    # machines) an editable install compiled every module on every run, a fifth of generate
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src" / "xpu_cdi")], check=True,
                   capture_output=True)
    subprocess.run(cmds["generate"], check=True, capture_output=True)
    order = list(cmds)
    for _ in range(rounds):
        random.shuffle(order)
        for name in order:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(cmds[name], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[name].append((wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def cli_rows(cli: Dict[str, List[Tuple[float, float]]], load: float) -> Rows:
    """generate and list against their targets: the fastest of the interleaved runs (a wall time
    under load is the process's own time plus waits for a core; the fastest run waited least),
    the median and the CPU beside; then the interpreter's and click's floor in the same rounds."""
    def stats(name: str) -> Tuple[float, float, float]:
        walls = [w * 1e3 for w, _ in cli[name]]
        return min(walls), statistics.median(walls), statistics.median(c * 1e3 for _, c in cli[name])

    rows: Rows = []
    for name in ("generate", "list"):
        fastest, med, cpu = stats(name)
        rows.append((f"xpu-cdi {name} (8 cards): whole process", f"{fastest:.0f} ms",
                     f"fastest of {len(cli[name])} interleaved runs (median {med:.0f}, CPU {cpu:.0f} ms); "
                     f"target <= {CLI_TARGETS[name]:.0f} ms: {_met(fastest <= CLI_TARGETS[name])}; load {load:.2f}"))
    py, click = stats("python"), stats("click")
    rows.append(("  the floor: python -c pass / import click", f"{py[0]:.0f} / {click[0]:.0f} ms",
                 f"the same interpreter in the same rounds, fastest (median {py[1]:.0f} / {click[1]:.0f}, "
                 f"CPU {py[2]:.0f} / {click[2]:.0f} ms): what every command pays before its own imports"))
    return rows


def rows_of(fp: Dict[str, Dict[str, float]]) -> Rows:
    rows: Rows = []
    for key, s in fp.items():
        name, _, stack = key.partition("/")
        rows.append((f"{name} ({stack}): resident memory after start", f"{s['rss_mib']:.1f} MiB",
                     f"VmRSS (HWM {s['hwm_mib']:.1f}, private anon {s['anon_mib']:.1f}, grpc's core "
                     f"{s['grpc_mib']:.1f}), 8 cards, fake host; target <= {RSS_TARGET:.0f} MiB: "
                     f"{_met(s['rss_mib'] <= RSS_TARGET)}; load {s['load']:.2f}"))
        rows.append((f"{name} ({stack}): idle CPU", f"{s['cpu_percent']:.3f} %",
                     f"run time over {IDLE_S:.0f} s idle (its cgroup's); target <= {CPU_TARGET} %: "
                     f"{_met(s['cpu_percent'] <= CPU_TARGET)}; load {s['load']:.2f}"))
        if "soak_end_mib" in s:
            start, end = s["soak_start_mib"], s["soak_end_mib"]
            what = {"device-plugin": f"{SOAK_ROUNDS} kubelet restarts, {SOAK_ROUNDS * SOAK_CALLS} Allocate calls",
                    "exporter": f"{SOAK_ROUNDS * SOAK_CALLS} scrapes",
                    "dra-driver": f"{SOAK_ROUNDS * SOAK_PREPARES * 8} one-card claims prepared and "
                                  f"unprepared, 8 a call"}[name]
            rows.append((f"{name} ({stack}): RSS across the churn soak", f"{start:.1f} -> {end:.1f} MiB",
                         f"{what}, after a warm-up; target: the end within {SOAK_SLACK:.0f} MiB of the start: "
                         f"{_met(end - start <= SOAK_SLACK)} ({end - start:+.1f})"))
    return rows


def run(work: Path, daemons: bool = True, cli: bool = True) -> Tuple[Rows, Dict[str, object]]:
    """Rows and samples; the daemons need root (mknod of the fake cards)."""
    fp: Dict[str, Dict[str, float]] = {}
    makers: Dict[str, Callable[[Path, str], Dict[str, float]]] = {
        "device-plugin": device_plugin, "exporter": exporter, "dra-driver": dra_driver}
    if daemons:
        for stack in STACKS:
            for name, make in makers.items():
                try:
                    fp[f"{name}/{stack}"] = make(work, stack)
                except BaseException as err:  # stack_python's pytest.skip: that stack is not installed
                    if type(err).__name__ != "Skipped":
                        raise
                    print(f"{name} on the {stack} stack skipped: {err}", file=sys.stderr)
    rows = rows_of(fp)
    samples: Dict[str, object] = {"footprint": fp}
    if cli:
        times = cli_times(work)
        load = os.getloadavg()[0]
        rows += cli_rows(times, load)
        samples.update(cli_s=times, cli_load=load)
    return rows, samples


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-fp-") as tmp:
        try:
            rows, _ = run(Path(tmp), daemons=os.geteuid() == 0)
        finally:
            fakehost.remove_tree(Path(tmp))
    width = max(len(r[0]) for r in rows)
    for r in rows:
        print(f"{r[0]:<{width}}  {r[1]:>10}  {r[2]}")
