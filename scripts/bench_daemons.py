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
* on each stack, its gRPC floor (:data:`FLOOR`: a bare server and channel that
  made a call and hold a stream): each daemon's row shows its share above it,
  and judges a stack other than the shipped one by the same room above that
  stack's floor (:func:`rss_target`);
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

import functools
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

from support import fakehost  # noqa: E402

BIN = Path(sys.executable).parent
TARGETS = {"device-plugin": 35.0, "exporter": 35.0, "dra-driver": 45.0}  # MiB
CPU_TARGET = 0.1  # percent, idle
CLI_TARGETS = {"generate": 100.0, "list": 60.0}  # ms, whole process
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


# What a node daemon's process holds before any of its own code runs: the interpreter, grpcio and
# protobuf loaded as the daemons load them, a gRPC server on a unix socket that has answered a call
# and holds a stream open (as kubelet's ListAndWatch), its client's channel.  The same code on each stack: what differs
# between the stacks' floors is the libraries', not ours.
FLOOR = """
import os, sys, threading
from concurrent import futures
import grpc
from google.protobuf import message_factory
done = threading.Event()
def echo(request, context):
    return request
def watch(request, context):
    yield request
    done.wait()
handler = grpc.method_handlers_generic_handler("floor.Floor", {
    "Echo": grpc.unary_unary_rpc_method_handler(echo), "Watch": grpc.unary_stream_rpc_method_handler(watch)})
path = "unix:" + os.path.join(sys.argv[1], "floor.sock")
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
server.add_generic_rpc_handlers((handler,))
server.add_insecure_port(path)
server.start()
channel = grpc.insecure_channel(path)
channel.unary_unary("/floor.Floor/Echo")(b"x", timeout=600, wait_for_ready=True)
stream = channel.unary_stream("/floor.Floor/Watch")(b"y", wait_for_ready=True)
next(stream)
print("ready", flush=True)
sys.stdin.read()
done.set()
channel.close()
server.stop(None)
"""
OPENSSL_KEPT_OUT = {"device-plugin": False, "exporter": False, "dra-driver": False}  # no daemon blocks imports
SHIPPED = "debian"  # the stack of the .deb, the .rpm and the DaemonSets' image: the targets hold on it as they are


def floor_variant(lean: bool) -> str:
    return "lean" if lean else "tls"


def grpc_floor(work: Path, stack: str, lean: bool) -> Dict[str, float]:
    """:data:`FLOOR` on *stack*'s interpreter and libraries, measured as the daemons are (no idle CPU)."""
    from support.kubeletkit import stack_python

    python, env = stack_python(stack)
    d = work / stack / f"floor-{floor_variant(lean)}"
    d.mkdir(parents=True)
    proc = subprocess.Popen([python, "-c", FLOOR, str(d), floor_variant(lean)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""  # the event itself: it prints once settled
        if line.strip() != "ready":
            raise AssertionError(f"the gRPC floor on the {stack} stack did not start (exit {proc.wait()})")
        return footprint(proc.pid, idle=False)
    finally:
        if proc.stdin:
            proc.stdin.close()  # its read ends: it stops
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
        return footprint(proc.proc.pid)
    finally:
        proc.stop()
        kubelet.stop()


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
        return footprint(proc.proc.pid)
    finally:
        proc.stop()
        if kubelet is not None:
            kubelet.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)


def _api_server(kube: object) -> "Tuple[object, int]":
    """tests/support/fakeapi.FakeKube behind plain HTTP on loopback, for a driver run as its own
    process: calls answered from its tables, watches held open until their timeout (an idle cluster)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qsl, urlsplit

    from xpu_cdi.dra.kube import ApiError

    quiet = threading.Event()  # set at the end: held watches return

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def handle(self) -> None:
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):  # the driver stopped mid-watch
                pass

        def _answer(self, status: int, doc: object) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _call(self) -> None:
            url = urlsplit(self.path)
            query = dict(parse_qsl(url.query))
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            if query.get("watch"):
                quiet.wait(float(query.get("timeoutSeconds", "60")))
                return self._answer(200, {})  # no newline: no event, the watch just ends
            try:
                self._answer(200, kube.request(self.command, url.path, body, query))  # type: ignore[attr-defined]
            except ApiError as err:
                self._answer(err.status or 500, {"message": str(err), "reason": err.reason})

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _call

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.quiet = quiet  # type: ignore[attr-defined]
    return server, server.server_address[1]


def dra_driver(work: Path, stack: str) -> Dict[str, float]:
    """Against the HTTP stand-in of the API (_api_server), kubelet's directories empty: published, idle."""
    import json
    import uuid

    from support import kubeletkit
    from support.fakeapi import FakeKube

    host = fakehost.kunlunxin(work / stack / "fp-dra-host", cards=8)
    d = work / stack / "fp-dra"
    for sub in ("registry", "plugins", "run", "cdi"):
        (d / sub).mkdir(parents=True)
    from support.dpnode import Node

    Node(host, d / "cdi", d / "plugins", d / "unused").generate()
    server, port = _api_server(FakeKube())
    kubeconfig = d / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
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
        return footprint(proc.proc.pid)
    finally:
        proc.stop()
        server.quiet.set()  # type: ignore[attr-defined]
        server.shutdown()  # type: ignore[attr-defined]


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


def rss_target(fp: Dict[str, Dict[str, float]], name: str, stack: str) -> Tuple[float, str]:
    """The RSS target of daemon *name* on *stack*, and how it was reached.

    On the shipped stack, issue 30's figure as it is.  On another stack the daemon gets the same
    room above its gRPC floor: the figure plus that stack's floor over the shipped one's, both
    measured in this run (a bare gRPC server on PyPI's grpcio holds ~2.5 MiB more than on Debian's
    before any code of ours runs); without the shipped stack here, the figure as it is."""
    target = TARGETS[name]
    variant = floor_variant(OPENSSL_KEPT_OUT[name])
    ours, shipped = fp.get(f"floor-{variant}/{stack}"), fp.get(f"floor-{variant}/{SHIPPED}")
    if stack == SHIPPED or ours is None or shipped is None:
        return target, f"{target:.0f} MiB"
    extra = ours["rss_mib"] - shipped["rss_mib"]
    how = f"{target:.0f} + {extra:.1f} (this stack's gRPC floor over {SHIPPED}'s) = {target + extra:.1f} MiB"
    return target + extra, how


def rows_of(fp: Dict[str, Dict[str, float]]) -> Rows:
    rows: Rows = []
    for key, s in fp.items():
        name, _, stack = key.partition("/")
        if name.startswith("floor-"):
            rows.append((f"  gRPC floor, {'OpenSSL kept out' if name == 'floor-lean' else 'with OpenSSL'} ({stack})",
                         f"{s['rss_mib']:.1f} MiB",
                         f"VmRSS of a bare gRPC server and channel that made a call and hold a stream, on "
                         f"the same interpreter and libraries (private anon {s['anon_mib']:.1f}, grpc's core "
                         f"{s['grpc_mib']:.1f}): what every daemon holds before its own code; load {s['load']:.2f}"))
            continue
        target, how = rss_target(fp, name, stack)
        floor = fp.get(f"floor-{floor_variant(OPENSSL_KEPT_OUT[name])}/{stack}")
        above = f", {s['rss_mib'] - floor['rss_mib']:.1f} above the gRPC floor" if floor else ""
        rows.append((f"{name} ({stack}): resident memory after start", f"{s['rss_mib']:.1f} MiB",
                     f"VmRSS (HWM {s['hwm_mib']:.1f}, private anon {s['anon_mib']:.1f}, grpc's core "
                     f"{s['grpc_mib']:.1f}{above}), 8 cards, fake host; "
                     f"target <= {how}: {_met(s['rss_mib'] <= target)}; load {s['load']:.2f}"))
        rows.append((f"{name} ({stack}): idle CPU", f"{s['cpu_percent']:.3f} %",
                     f"run time over {IDLE_S:.0f} s idle (its cgroup's); target <= {CPU_TARGET} %: "
                     f"{_met(s['cpu_percent'] <= CPU_TARGET)}; load {s['load']:.2f}"))
    return rows


def run(work: Path, daemons: bool = True, cli: bool = True) -> Tuple[Rows, Dict[str, object]]:
    """Rows and samples; the daemons need root (mknod of the fake cards)."""
    fp: Dict[str, Dict[str, float]] = {}
    makers: Dict[str, Callable[[Path, str], Dict[str, float]]] = {
        "device-plugin": device_plugin, "exporter": exporter, "dra-driver": dra_driver}
    floors: Dict[str, Callable[[Path, str], Dict[str, float]]] = {
        f"floor-{floor_variant(lean)}": functools.partial(grpc_floor, lean=lean)
        for lean in (False,)}
    if daemons:
        for stack in STACKS:
            for name, make in {**floors, **makers}.items():  # each stack's floors beside its daemons
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
