"""The restart state machine (deviceplugin/restart.py) step by step: a fake plugin on a real socket
file, a fake clock and a fake Register, so that every transition is checked without timing."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from xpu_cdi import log
from xpu_cdi.deviceplugin import restart
from xpu_cdi.node.grpcserve import Identity, socket_identity
from xpu_cdi.deviceplugin.restart import BACKOFF, REGISTERED, UNSERVED, WAITING, Registrar

CLOCK_REALTIME_COARSE = 5  # <linux/time.h>; the clock file times come from (the time module lacks the name)


class Plugin:
    """What the registrar uses of a KindPlugin, serving a plain socket file."""

    kind = resource = "kunlunxin.com/xpu"

    def __init__(self, directory: Path) -> None:
        self.socket = str(directory / "xpu-cdi-kunlunxin.com-xpu.sock")
        self.cards: Dict[str, Any] = {"0": None}
        self.server: Optional[socket.socket] = None
        self.bound: Optional[Identity] = None
        self.serving_gen = 0
        self.serves = 0
        self.refuse_serve = ""
        self.vanish = 0  # the next serves whose socket a cleaning kubelet deletes as soon as it is made

    def options(self) -> str:
        return "options"

    def serve(self) -> None:
        if self.refuse_serve:
            raise OSError(self.refuse_serve)
        if self.server is not None:
            self.server.close()
        if socket_identity(self.socket):
            Path(self.socket).unlink()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.socket)
        if self.vanish:
            self.vanish -= 1
            Path(self.socket).unlink()
        self.bound = socket_identity(self.socket)
        self.serving_gen += 1
        self.serves += 1


class Kubelet:
    """kubelet.sock as a socket file whose identity changes on every restart, and its Register.  A restart
    does what a starting kubelet does: it deletes every socket in its directory (the plugin's too), then
    listens on a new kubelet.sock."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "kubelet.sock"
        self.calls: List[Any] = []
        self.refuse = ""
        self.on_connect: Callable[[], None] = lambda: None  # what happens as the plugin first connects
        self.dial_back: Callable[[], None] = lambda: None  # the plugin's GetDevicePluginOptions
        self.during_call: Callable[[], None] = lambda: None  # what happens while Register is in flight
        self.endpoint_at_call: Optional[Identity] = None  # the socket kubelet would dial back
        self.sock: Optional[socket.socket] = None
        self.restart()

    def restart(self) -> None:
        if self.sock is not None:
            self.sock.close()
        for f in self.path.parent.iterdir():
            if f.is_socket():
                f.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))

    def identity(self) -> Optional[Identity]:
        return socket_identity(str(self.path))

    def register(self, plugin_dir: str, endpoint: str, resource: str, options: Any,
                 ours: Callable[[], bool], serve: Callable[[], bool]) -> str:
        self.on_connect()
        for _ in range(3):  # as registration.register: connected, our socket checked, served again if need be
            if ours():
                break
            if not serve():
                return "not sent"
        else:
            return "not sent"
        self.calls.append((endpoint, resource, options))
        self.dial_back()
        self.endpoint_at_call = socket_identity(str(self.path.parent / endpoint))
        self.during_call()
        return self.refuse


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Any]:
    class World:
        plugin = Plugin(tmp_path)
        kubelet = Kubelet(tmp_path)
        clock = Clock()
        logs: List[str] = []
        wakes: List[int] = []
        reg = Registrar(plugin, str(tmp_path), log.into(logs), lambda: World.wakes.append(1),
                        register=kubelet.register, clock=clock)
        kubelet.dial_back = reg.dialed_back

        @classmethod
        def step(cls) -> str:
            return cls.reg.step(cls.kubelet.identity())

    yield World
    if World.plugin.server is not None:
        World.plugin.server.close()


def test_serves_then_registers_once(world: Any) -> None:
    """First step: serve, then one Register (endpoint, resource, the plugin's options); every further step
    (whatever woke the loop) finds the registration holding."""
    assert world.step() == REGISTERED
    assert world.plugin.serves == 1
    assert world.kubelet.calls == [("xpu-cdi-kunlunxin.com-xpu.sock", "kunlunxin.com/xpu", "options")]
    for _ in range(5):
        assert world.step() == REGISTERED
    assert len(world.kubelet.calls) == 1 and world.plugin.serves == 1
    assert world.reg.status() == {"registered": True, "state": REGISTERED, "error": "", "registrations": 1}


def test_new_kubelet_sock_registers_once(world: Any) -> None:
    """A kubelet.sock created anew: one Register, however many steps follow."""
    world.step()
    world.kubelet.restart()
    assert [world.step() for _ in range(3)] == [REGISTERED] * 3
    assert len(world.kubelet.calls) == 2 and world.plugin.serves == 2
    assert "kubelet.sock was created anew (kubelet restarted)" in world.logs[-1]


def test_same_kubelet_touched_registers_nothing(world: Any) -> None:
    """kubelet.sock and our socket renamed away and back, chmod'ed (their ctimes move, their inodes stay)
    while the kubelet that took us runs: no second Register (kubelet 1.37 would answer "already
    connected" and drop us) and no rebind of our socket."""
    world.step()
    for path in (world.kubelet.path, Path(world.plugin.socket)):
        aside = path.with_name(path.name + ".aside")
        path.rename(aside)
        aside.rename(path)
        path.chmod(0o600)
    assert [world.step() for _ in range(3)] == [REGISTERED] * 3
    assert len(world.kubelet.calls) == 1 and world.plugin.serves == 1


def test_own_socket_gone_or_replaced(world: Any) -> None:
    """Our socket deleted, or another file put at our name: serve on a new one, register once; never
    rebind a socket that is ours and serving."""
    world.step()
    Path(world.plugin.socket).unlink()
    assert world.step() == REGISTERED and world.step() == REGISTERED
    assert world.plugin.serves == 2 and len(world.kubelet.calls) == 2
    assert "our socket is gone (kubelet restarted?): serving again" in "\n".join(world.logs)
    Path(world.plugin.socket).unlink()
    other = socket.socket(socket.AF_UNIX)
    other.bind(world.plugin.socket)  # same name, another socket
    try:
        assert world.step() == REGISTERED
        assert world.plugin.serves == 3 and len(world.kubelet.calls) == 3
    finally:
        other.close()


def test_kubelet_gone_waits(world: Any) -> None:
    world.kubelet.sock.close()
    world.kubelet.path.unlink()
    assert world.step() == WAITING and not world.kubelet.calls
    assert world.plugin.serves == 1  # served anyway: kubelet dials back as soon as it is there
    world.kubelet.sock = None
    world.kubelet.restart()
    assert world.step() == REGISTERED and len(world.kubelet.calls) == 1


def test_stream_of_the_registration_ended(world: Any) -> None:
    """Only the first stream after a Register is its stream; when kubelet ends it the plugin registers
    again after the backoff; the previous registration's stream ending (kubelet replaced it) is nothing."""
    world.step()
    tag = world.reg.stream_opened()
    assert tag is not None and world.reg.stream_opened() is None  # a second stream (a client, doctor) is not it
    world.kubelet.restart()
    world.step()  # registered again: a new epoch
    world.reg.stream_ended(tag)  # kubelet closed the replaced endpoint's connection
    assert world.step() == REGISTERED and len(world.kubelet.calls) == 2 and not world.wakes
    tag2 = world.reg.stream_opened()
    world.reg.stream_ended(tag2)
    assert world.wakes and world.step() == BACKOFF and world.reg.due() == pytest.approx(world.clock.now + 0.1)
    world.clock.now += 0.1
    assert world.step() == REGISTERED and len(world.kubelet.calls) == 3
    assert "kubelet had ended the ListAndWatch stream" in world.logs[-1]


def test_stream_ended_during_the_register_call(world: Any) -> None:
    """kubelet opened and ended the stream before our Register returned: not registered, retried."""
    def opened_and_ended() -> None:
        world.reg.stream_ended(world.reg.stream_opened())

    world.kubelet.during_call = opened_and_ended
    assert world.step() == BACKOFF
    world.kubelet.during_call = lambda: None
    world.clock.now += 0.1
    assert world.step() == REGISTERED


def test_refusals_back_off_until_a_new_kubelet(world: Any) -> None:
    """A refused Register: 0.1 s, then 0.2 s, each logged with kubelet's words; a new kubelet.sock is tried
    at once; a registration that holds for 10 s forgets the failures."""
    world.kubelet.refuse = "INVALID_ARGUMENT: resource name taken"
    assert world.step() == BACKOFF and world.reg.due() == pytest.approx(world.clock.now + 0.1)
    assert "(attempt 1): kubelet said: INVALID_ARGUMENT: resource name taken; retrying in 0.1s" in world.logs[-1]
    assert world.step() == BACKOFF and len(world.kubelet.calls) == 1  # not due yet
    world.clock.now += 0.1
    assert world.step() == BACKOFF and world.reg.due() == pytest.approx(world.clock.now + 0.2)
    assert world.reg.status()["error"] == "INVALID_ARGUMENT: resource name taken"
    world.kubelet.refuse = ""
    world.kubelet.restart()
    assert world.step() == REGISTERED and len(world.kubelet.calls) == 3 and world.reg.status()["error"] == ""
    world.reg.stream_ended(world.reg.stream_opened())
    assert world.reg.failures == 1
    world.clock.now += 0.1
    world.step()
    world.clock.now += restart.STABLE_AFTER
    world.step()
    assert world.reg.failures == 0


def test_kubelet_restarting_as_we_connect(world: Any) -> None:
    """The step saw the old kubelet.sock and our socket in place; as it connects, a new kubelet has deleted
    every socket and listens: our socket is served again before the request goes (kubelet dials back one
    that exists), and the registration is the new kubelet's."""
    world.step()

    def new_kubelet() -> None:
        world.kubelet.restart()

    world.kubelet.on_connect = new_kubelet
    old = world.kubelet.identity()
    world.reg.stream_ended(world.reg.stream_opened())  # the old kubelet died: its stream ended
    world.clock.now += 0.1
    assert world.reg.step(old) == REGISTERED
    assert world.plugin.serves == 2 and world.kubelet.endpoint_at_call == world.plugin.bound
    world.kubelet.on_connect = lambda: None
    assert world.step() == REGISTERED and len(world.kubelet.calls) == 2  # the new kubelet's: folded


def test_serve_failure_is_retried(world: Any) -> None:
    world.plugin.refuse_serve = "another process serves on it"
    assert world.step() == UNSERVED and not world.kubelet.calls
    assert "cannot serve on" in world.logs[-1] and "retrying in 0.1s" in world.logs[-1]
    world.plugin.refuse_serve = ""
    assert world.step() == UNSERVED  # not yet
    world.clock.now += 0.1
    assert world.step() == REGISTERED


def test_kubelet_restarting_while_we_serve_again(world: Any) -> None:
    """Connected to a new kubelet, our socket gone: while we serve again (it takes a while), that kubelet
    dies and another one deletes the sockets and listens. The plugin serves again, and registers with the
    kubelet that dials it back: recorded as that one's, so the next step does not register again."""
    world.step()
    restarts = []

    def serve_and_restart() -> None:
        Plugin.serve(world.plugin)
        if not restarts:
            restarts.append(1)
            world.kubelet.restart()

    world.plugin.serve = serve_and_restart
    world.kubelet.on_connect = lambda: Path(world.plugin.socket).unlink(missing_ok=True)
    world.kubelet.restart()
    assert world.step() == REGISTERED
    assert world.plugin.serves == 3 and world.kubelet.endpoint_at_call == world.plugin.bound
    world.kubelet.on_connect = lambda: None
    assert world.step() == REGISTERED and len(world.kubelet.calls) == 2


class Context:
    """The gRPC servicer context of one ListAndWatch: add_callback says whether the RPC is still on."""

    def __init__(self, alive: bool) -> None:
        self.alive, self.callbacks = alive, []

    def add_callback(self, callback: Callable[[], None]) -> bool:
        if self.alive:
            self.callbacks.append(callback)
        return self.alive

    def end(self) -> None:  # kubelet closed the stream
        for callback in self.callbacks:
            callback()


def kind_plugin(tmp_path: Path) -> Any:
    from xpu_cdi.deviceplugin.server import KindPlugin

    return KindPlugin("kunlunxin.com/xpu", "kunlunxin.com/xpu", str(tmp_path), ("cdi-cri",), log.into([]))


def test_late_stream_of_a_dead_kubelet_is_nobodys(tmp_path: Path) -> None:
    """A ListAndWatch whose RPC was over before its handler ran (a dead kubelet's, picked up after our next
    Register began) is not tagged as that Register's stream, so its end is nothing."""
    p = kind_plugin(tmp_path)
    p.registrar.epoch = 2  # a Register in flight
    stream = p.list_and_watch(None, Context(alive=False))
    assert next(stream, None) is None  # nothing sent, the handler is done
    assert p.registrar.stream_opened() == 2  # the tag is still free for kubelet's own stream


def test_stream_end_counts_after_later_lists(tmp_path: Path) -> None:
    """The registration's stream ends after it sent a later list (a health change): the end still counts;
    a stream of a server we stopped does not."""
    from xpu_cdi.node.inventory import SpecCard

    p = kind_plugin(tmp_path)
    p.registrar.epoch = 1
    ctx = Context(alive=True)
    stream = p.list_and_watch(None, ctx)
    assert len(next(stream).devices) == 0
    p.update({"0": SpecCard(id="0", kind="kunlunxin.com/xpu", nodes=(), index=0)}, {}, None)
    assert len(next(stream).devices) == 1
    ctx.end()
    assert list(stream) == [] and p.registrar.lost
    p.registrar.lost, p.registrar.epoch = False, 2
    ctx = Context(alive=True)
    stream = p.list_and_watch(None, ctx)
    next(stream)
    p.serving_gen += 1  # we served on a new socket: this stream's server was stopped by us
    ctx.end()
    assert list(stream) == [] and not p.registrar.lost


def test_socket_deleted_as_soon_as_made(world: Any) -> None:
    """A kubelet cleaning its directory deletes the socket we just bound: not taken for ours (its identity
    could not be read), served again on the next pass, which is due at once."""
    world.plugin.vanish = 1
    assert world.step() == UNSERVED and world.reg.due() == 0.0 and not world.kubelet.calls
    assert world.step() == REGISTERED and world.plugin.serves == 2
    assert world.plugin.bound is not None and world.kubelet.endpoint_at_call == world.plugin.bound


def test_socket_identity_tells_recreated_sockets_apart(tmp_path: Path) -> None:
    """Same name, new socket: another identity (inode and creation time); a plain file is no socket."""
    path = tmp_path / "kubelet.sock"
    first = socket.socket(socket.AF_UNIX)
    first.bind(str(path))
    before = socket_identity(str(path))
    first.close()
    path.unlink()
    # Linux before 6.13 stamps files from a clock that ticks every few ms; a restarted kubelet is far slower
    while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= before[2]:
        time.sleep(0.001)
    second = socket.socket(socket.AF_UNIX)
    second.bind(str(path))
    try:
        assert before is not None and socket_identity(str(path)) not in (None, before)
    finally:
        second.close()
    path.unlink()
    path.write_text("")
    assert socket_identity(str(path)) is None and socket_identity(str(tmp_path / "none")) is None
