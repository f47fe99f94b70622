"""Playing kubelet for ``xpu-cdi device-plugin`` tests.

:class:`FakeKubelet` is kubelet's device manager as a plugin sees it
(``pkg/kubelet/cm/devicemanager``: ``plugin/v1beta1/server.go``,
``handler.go``, ``client.go`` and ``manager.go``), with stubs compiled from
the upstream proto (``tests/support/kubeproto.py``, never the plugin's own message
table):

* **start** (every restart too): delete every socket in the directory, the
  plugins' included (``CleanupPluginDirectory``), then serve ``Registration``
  on a new ``kubelet.sock``;
* **Register**: refuse a version or resource name kubelet refuses; dial the
  plugin's endpoint back and call ``GetDevicePluginOptions`` before answering
  (a plugin that registers before it serves fails here as on a node); the
  new endpoint replaces the resource's previous one, whose connection is
  closed (its ``ListAndWatch`` stream ends); then ``ListAndWatch`` on the new
  one, every list recorded;
* **stop**: as a kubelet process that dies: the registration server goes,
  every connection to the plugins closes, and a dead ``kubelet.sock`` stays
  behind (nobody unlinks it; the next start deletes it).

Registrations are recorded with the kubelet instance (one per start) they
reached, so that tests count registrations per restart.

:class:`PluginProcess` runs the daemon as its own process on one of the two
Python stacks: ``pypi`` (the venv: PyPI's grpcio/protobuf) or ``debian``
(``/usr/bin/python3`` with ``PYTHONPATH=src``: Debian's python3-grpcio and
python3-protobuf, which ``make install`` installs).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest

from . import HANG

REPO = Path(__file__).resolve().parent.parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"
DIAL_TIMEOUT = 10.0  # kubelet's dial of a plugin (client.go)


def stubs() -> Tuple[Any, Any]:
    from support import kubeproto

    return kubeproto.stubs("deviceplugin/v1beta1/api.proto")


def stack_python(stack: str) -> Tuple[str, Dict[str, str]]:
    """The interpreter and environment running the daemon on *stack*; skips saying why when unusable."""
    env = dict(os.environ)
    if stack == "pypi":
        return sys.executable, env
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} is absent: the Debian stack cannot be tested here")
    env["PYTHONPATH"] = str(REPO / "src")
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import grpc, google.protobuf, click, yaml, jsonschema; "
                                                 "print(grpc.__version__, google.protobuf.__version__)"],
                           capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        pytest.skip("Debian's python3-grpcio/python3-protobuf (or click, yaml, jsonschema) are not installed for "
                    f"{SYSTEM_PYTHON}: `make install` installs them ({probe.stderr.strip().splitlines()[-1:]})")
    return SYSTEM_PYTHON, env


@dataclass
class Registration:
    request: Any
    at: float  # when the Register call reached kubelet (time.monotonic)
    instance: int  # the kubelet start it reached
    served: bool  # the endpoint's socket existed when Register arrived


class FakeKubelet:
    """kubelet's registration service and its device-plugin clients, on ``<plugin_dir>/kubelet.sock``."""

    def __init__(self, plugin_dir: Path, refuse: str = "") -> None:
        import grpc

        self.grpc = grpc
        self.pb2, self.grpc_pb2 = stubs()
        self.dir = plugin_dir
        self.refuse = refuse
        self.registrations: List[Registration] = []
        self.lists: List[Tuple[float, Dict[str, Tuple[str, List[int]]]]] = []  # (when, id -> (health, numa ids))
        self.events: List[str] = []  # what happened, for failure messages
        self.options: Optional[Any] = None
        self.cond = threading.Condition()
        self.instance = 0
        self.started_at = 0.0  # when the current instance's kubelet.sock was there
        self.endpoints: Dict[str, Any] = {}  # resource -> channel of its current endpoint
        self.channels: List[Any] = []  # the tests' own channels to plugins
        self.server: Optional[Any] = None
        self.start()

    # -- kubelet's life ------------------------------------------------------------------------------------

    def start(self) -> None:
        """A starting kubelet: every socket in the directory deleted, then kubelet.sock served anew."""
        assert self.server is None, "start() of a running kubelet: stop() it first"
        for p in self.dir.iterdir():
            if p.is_socket():
                p.unlink()
        kubelet = self

        class Registration(self.grpc_pb2.RegistrationServicer):  # type: ignore[name-defined,misc]
            def Register(self, request: Any, context: Any) -> Any:
                return kubelet._register(request, context)

        self.server = self.grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.grpc_pb2.add_RegistrationServicer_to_server(Registration(), self.server)
        self.server.add_insecure_port("unix:" + str(self.dir / "kubelet.sock"))
        self.server.start()
        with self.cond:
            self.instance += 1
            self.started_at = time.monotonic()
            self.events.append(f"{self.started_at:.3f} kubelet #{self.instance} started")
            self.cond.notify_all()

    def stop(self) -> None:
        """A kubelet that dies: no more Register, every plugin connection closed, a dead kubelet.sock left."""
        if self.server is not None:
            self.server.stop(0).wait()  # gRPC unlinks kubelet.sock here; a killed kubelet would not
            self.server = None
            dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                dead.bind(str(self.dir / "kubelet.sock"))  # nobody listens: connecting is refused
            except OSError:
                pass  # the directory went away, or something else is there
            finally:
                dead.close()
        with self.cond:
            endpoints, self.endpoints = list(self.endpoints.values()), {}
            self.events.append(f"{time.monotonic():.3f} kubelet #{self.instance} stopped")
        for ch in endpoints + self.channels:
            ch.close()
        self.channels = []

    def restart(self) -> float:
        """stop() then start(); the time the new kubelet.sock was there."""
        self.stop()
        self.start()
        return self.started_at

    def drop(self, resource: str) -> None:
        """Disconnect a resource's endpoint as kubelet does when it gives a plugin up: its stream ends."""
        with self.cond:
            channel = self.endpoints.pop(resource)
            self.events.append(f"{time.monotonic():.3f} kubelet #{self.instance}: dropped {resource}")
        channel.close()

    # -- Register and ListAndWatch -------------------------------------------------------------------------

    def _register(self, request: Any, context: Any) -> Any:
        arrived = time.monotonic()  # when the plugin's Register reached "kubelet"
        instance = self.instance
        served = (self.dir / request.endpoint).is_socket()
        if self.refuse:
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, self.refuse)
        if request.version != "v1beta1":
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version!r}")
        # kubelet dials the endpoint the plugin names and asks its options before it answers
        channel = self.grpc.insecure_channel("unix:" + str(self.dir / request.endpoint))
        stub = self.grpc_pb2.DevicePluginStub(channel)
        try:
            options = stub.GetDevicePluginOptions(self.pb2.Empty(), timeout=DIAL_TIMEOUT, wait_for_ready=True)
        except self.grpc.RpcError as err:
            channel.close()
            with self.cond:
                self.events.append(f"{time.monotonic():.3f} kubelet #{instance}: failed to dial device plugin "
                                   f"{request.endpoint}: {err.code().name}")
            context.abort(self.grpc.StatusCode.UNKNOWN, f"failed to dial device plugin: {err.code().name}")
        with self.cond:
            old = self.endpoints.get(request.resource_name)
            self.endpoints[request.resource_name] = channel
            self.options = options
            self.registrations.append(Registration(request, arrived, instance, served))
            self.events.append(f"{arrived:.3f} kubelet #{instance}: Register {request.resource_name} "
                               f"({request.endpoint})" + (", replacing the previous endpoint" if old else ""))
            self.cond.notify_all()
        if old is not None:
            old.close()  # the previous endpoint's stream ends
        threading.Thread(target=self._watch, args=(stub, instance), daemon=True).start()
        return self.pb2.Empty()

    def _watch(self, stub: Any, instance: int) -> None:
        try:
            for resp in stub.ListAndWatch(self.pb2.Empty()):
                devs = {d.ID: (d.health, [n.ID for n in d.topology.nodes]) for d in resp.devices}
                with self.cond:
                    self.lists.append((time.monotonic(), devs))
                    self.cond.notify_all()
        except (self.grpc.RpcError, ValueError):
            pass  # the plugin went away, or we closed the channel (ValueError: closed under the iterator)
        with self.cond:
            self.events.append(f"{time.monotonic():.3f} kubelet #{instance}: a ListAndWatch stream ended")

    # -- waiting and calling -------------------------------------------------------------------------------

    @property
    def requests(self) -> List[Any]:
        with self.cond:
            return [r.request for r in self.registrations]

    @property
    def registered_at(self) -> List[float]:
        with self.cond:
            return [r.at for r in self.registrations]

    def count(self, instance: Optional[int] = None) -> int:
        """Registrations so far (that reached *instance*)."""
        with self.cond:
            return sum(1 for r in self.registrations if instance is None or r.instance == instance)

    def history(self) -> str:
        with self.cond:
            return "\n".join(self.events)

    def wait_for(self, what: Callable[[], Any], timeout: float = HANG, message: str = "") -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = what()
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {message or what}; "
                                         f"kubelet saw:\n{self.history()}")
                self.cond.wait(min(left, 0.05))

    def wait_registered(self, count: int = 1, timeout: float = HANG) -> Any:
        """The *count*-th registration's request, once it has arrived."""
        with self.cond:
            self.wait_for(lambda: len(self.registrations) >= count, timeout, f"registration #{count}")
            return self.registrations[count - 1].request

    def wait_registered_with(self, instance: int, timeout: float = HANG) -> Registration:
        """The first registration that reached kubelet instance *instance*."""
        with self.cond:
            return self.wait_for(lambda: next((r for r in self.registrations if r.instance == instance), None),
                                 timeout, f"a registration with kubelet #{instance}")

    def assert_no_registration(self, seconds: float) -> None:
        """No Register arrives for *seconds* (fails at the first one that does)."""
        deadline = time.monotonic() + seconds
        with self.cond:
            before = len(self.registrations)
            while True:
                if len(self.registrations) != before:
                    raise AssertionError(f"{len(self.registrations) - before} registration(s) within {seconds}s "
                                         f"of a quiet kubelet; kubelet saw:\n{self.history()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.cond.wait(min(left, 0.1))

    def latest(self) -> Dict[str, Tuple[str, List[int]]]:
        with self.cond:
            return self.lists[-1][1] if self.lists else {}

    def plugin(self, endpoint: Optional[str] = None) -> Any:
        """A DevicePlugin stub on the endpoint of the last registration."""
        endpoint = endpoint or self.requests[-1].endpoint
        channel = self.grpc.insecure_channel("unix:" + str(self.dir / endpoint))
        self.channels.append(channel)
        return self.grpc_pb2.DevicePluginStub(channel)

    def allocate(self, *containers: List[str]) -> Any:
        req = self.pb2.AllocateRequest(container_requests=[self.pb2.ContainerAllocateRequest(devices_ids=ids)
                                                           for ids in containers])
        return self.plugin().Allocate(req, timeout=HANG)


class PluginProcess:
    """``xpu-cdi device-plugin`` in its own process; stopped (SIGTERM, then SIGKILL) on :meth:`stop`.

    Its stdout and stderr are the log file itself, no pipe and reader between: a line the
    daemon wrote before an event the test saw (a list kubelet got) is in the file by then.
    """

    def __init__(self, stack: str, args: List[str], log: Path, command: str = "device-plugin",
                 prefix: Sequence[str] = ()) -> None:
        """*command*: the subcommand (``dra-driver``); *prefix*: what runs it (``nsenter ... --``, which
        execs it: the process is still :attr:`proc`)."""
        python, env = stack_python(stack)
        self.log = log
        with open(log, "wb") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen([*prefix, python, "-c", "import sys; from xpu_cdi.cli import main; "
                                                                 "sys.argv[0] = 'xpu-cdi'; main()", command, *args],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_log(self, needle: str, timeout: float = HANG) -> str:
        """The log once *needle* is in it; fails when the daemon exits without saying it (*timeout* bounds a hang)."""
        deadline = time.monotonic() + timeout
        while True:
            exited = self.proc.poll() is not None  # before the read: what it wrote before exiting is read
            text = self.text()
            if needle in text:
                return text
            if exited or time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not logged ({'the daemon exited' if exited else f'{timeout}s'}):"
                                     f"\n{text}")
            time.sleep(0.05)

    def terminate(self, timeout: float = HANG) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(HANG)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
