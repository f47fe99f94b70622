"""Playing kubelet for ``xpu-cdi device-plugin`` tests.

:class:`FakeKubelet` serves ``/v1beta1.Registration/Register`` on
``<dir>/kubelet.sock`` with stubs compiled from the upstream proto
(``tests/support/kubeproto.py``, never the plugin's own message table), and, as
kubelet does, dials the plugin back while handling ``Register``: a plugin
that registers before it serves fails here exactly as it fails on a node.
It then keeps a ``ListAndWatch`` stream open and records every list.

:class:`PluginProcess` runs the daemon as its own process on one of the two
Python stacks: ``pypi`` (the venv: PyPI's grpcio/protobuf) or ``debian``
(``/usr/bin/python3`` with ``PYTHONPATH=src``: Debian's python3-grpcio and
python3-protobuf, which ``make install`` installs).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"


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


class FakeKubelet:
    """kubelet's registration service and its ListAndWatch client, on ``<plugin_dir>/kubelet.sock``."""

    def __init__(self, plugin_dir: Path, dial_back: bool = True, refuse: str = "") -> None:
        import grpc

        self.grpc = grpc
        self.pb2, self.grpc_pb2 = stubs()
        self.dir = plugin_dir
        self.dial_back, self.refuse = dial_back, refuse
        self.requests: List[Any] = []
        self.registered_at: List[float] = []
        self.lists: List[Tuple[float, Dict[str, Tuple[str, List[int]]]]] = []  # (when, id -> (health, numa ids))
        self.options: Optional[Any] = None
        self.cond = threading.Condition()
        self.channels: List[Any] = []
        self.server: Optional[Any] = None
        self.start()

    # -- the server side: Register -------------------------------------------------------------------------

    def start(self) -> None:
        kubelet = self

        class Registration(self.grpc_pb2.RegistrationServicer):  # type: ignore[name-defined,misc]
            def Register(self, request: Any, context: Any) -> Any:
                return kubelet._register(request, context)

        self.server = self.grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.grpc_pb2.add_RegistrationServicer_to_server(Registration(), self.server)
        self.server.add_insecure_port("unix:" + str(self.dir / "kubelet.sock"))
        self.server.start()

    def _register(self, request: Any, context: Any) -> Any:
        arrived = time.monotonic()  # when the plugin's Register reached "kubelet"
        if self.refuse:
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, self.refuse)
        if request.version != "v1beta1":
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version!r}")
        if self.dial_back:
            # kubelet connects to the endpoint the plugin names before it answers
            channel = self.grpc.insecure_channel("unix:" + str(self.dir / request.endpoint))
            stub = self.grpc_pb2.DevicePluginStub(channel)
            try:
                self.options = stub.GetDevicePluginOptions(self.pb2.Empty(), timeout=2)
            except self.grpc.RpcError as err:
                channel.close()
                context.abort(self.grpc.StatusCode.UNAVAILABLE,
                              f"failed to dial device plugin: {err.code().name}")
            self.channels.append(channel)
            threading.Thread(target=self._watch, args=(stub,), daemon=True).start()
        with self.cond:
            self.requests.append(request)
            self.registered_at.append(arrived)
            self.cond.notify_all()
        return self.pb2.Empty()

    def _watch(self, stub: Any) -> None:
        try:
            for resp in stub.ListAndWatch(self.pb2.Empty()):
                devs = {d.ID: (d.health, [n.ID for n in d.topology.nodes]) for d in resp.devices}
                with self.cond:
                    self.lists.append((time.monotonic(), devs))
                    self.cond.notify_all()
        except (self.grpc.RpcError, ValueError):
            pass  # the plugin went away, or we stopped (grpc raises ValueError on a channel closed under it)

    # -- waiting and calling -------------------------------------------------------------------------------

    def wait_for(self, what: Callable[[], Any], timeout: float = 10.0, message: str = "") -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = what()
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {message or what}")
                self.cond.wait(min(left, 0.05))

    def wait_registered(self, count: int = 1, timeout: float = 10.0) -> Any:
        return self.wait_for(lambda: len(self.requests) >= count and self.requests[count - 1], timeout,
                             f"registration #{count}")

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
        return self.plugin().Allocate(req, timeout=5)

    def stop(self, wipe: bool = False) -> None:
        """Stop as kubelet does when it exits; *wipe*: also delete every socket as a starting kubelet does."""
        for ch in self.channels:
            ch.close()
        self.channels = []
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None
        if wipe:
            for p in self.dir.iterdir():
                if p.is_socket():
                    p.unlink()


class PluginProcess:
    """``xpu-cdi device-plugin`` in its own process; stopped (SIGTERM, then SIGKILL) on :meth:`stop`."""

    def __init__(self, stack: str, args: List[str], log: Path) -> None:
        python, env = stack_python(stack)
        self.log = log
        self.out = open(log, "wb")
        self.proc = subprocess.Popen([python, "-c", "import sys; from xpu_cdi.cli import main; "
                                                    "sys.argv[0] = 'xpu-cdi'; main()", "device-plugin", *args],
                                     stdout=self.out, stderr=subprocess.STDOUT, env=env)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_log(self, needle: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{needle!r} not logged:\n{self.text()}")
            time.sleep(0.05)

    def terminate(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.out.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.out.closed:
            self.out.close()
