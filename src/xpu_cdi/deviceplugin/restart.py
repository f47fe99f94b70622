"""One plugin's restart path: serve on our socket, then register once per kubelet.

kubelet forgets a plugin in a few ways.  It restarts: the new kubelet
deletes every socket in its directory (ours too) and creates
``kubelet.sock`` anew.  It ends the ``ListAndWatch`` stream of our
registration (it dropped the endpoint).  Someone deletes our socket.  Or it
refuses a ``Register``.  A single restart shows up as several of these
(the stream ends, our socket goes, a new kubelet.sock comes), in any order
and split over several wake-ups.  So none of them is acted on as such: each
only wakes the daemon's loop, whose pass calls :meth:`Registrar.step` once
per plugin, and the step reads the state from what is there now:

``UNSERVED``
    no server, or the socket at our path is not the one we bound (gone, or
    replaced): serve on a new socket.  A socket that is ours and serving is
    never rebound (rebinding deletes it, and that delete is itself an event).
``WAITING``
    no ``kubelet.sock``: nothing to register with (the daemon says so once).
``REGISTERED``
    the last ``Register`` succeeded for the socket we serve now, and the
    stream kubelet opened for it has not ended: nothing to do.  Every later
    trigger of the same restart finds this, and is folded into the
    registration already made.  A new ``kubelet.sock`` alone is no reason to
    register again: the kubelet that took us is alive while its stream is
    open (a dead one's connections close), and a new one deletes our socket
    before it listens.  Registering twice with one kubelet is what must never
    happen: kubelet 1.37 answers "device plugin already connected", drops the
    connected endpoint too and refuses that socket from then on.
``BACKOFF``
    kubelet refused the last ``Register`` or ended our registration's stream:
    try again after 0.1 s doubling to 10 s.  A ``kubelet.sock`` not tried yet
    (a new kubelet) is tried at once.
``DUE``
    anything else: one ``Register`` now, our socket checked again (and
    served again if need be) once connected to kubelet, before the request
    goes (:mod:`.registration` says why).  What arrives during the call is
    looked at by the next step, which finds ``REGISTERED``.

The registration is recorded for the ``kubelet.sock`` that is there when
kubelet dials us back during the call (``GetDevicePluginOptions``: that
kubelet is alive and handling our ``Register``), not for the one we saw
before: a kubelet can restart while we connect.

Sockets are told apart by inode, not by name: ours is the one its server
bound while the inode at our path is that one (a rename or chmod changes the
ctime, not the inode); each binding gets a new ``serving_gen``, so a freed
inode number handed to our next socket is still a new socket.  kubelet.sock's
identity adds the ctime (:func:`xpu_cdi.node.grpcserve.socket_identity`): it only
says whether a backoff is for the kubelet there now.  Only the first stream opened after
a ``Register`` is its stream: kubelet closes the previous connection when a
plugin registers again, and that stream's end is the result of registering,
never a reason to; nor is a stream whose RPC was over before its handler ran
(a dead kubelet's, run late).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from ..log import ERROR, WARNING, Log
from . import registration
from ..node.grpcserve import Identity, same_inode, socket_identity

UNSERVED, WAITING, REGISTERED, BACKOFF, DUE = "UNSERVED", "WAITING", "REGISTERED", "BACKOFF", "DUE"
STABLE_AFTER = 10.0  # a registration that held this long forgets earlier failures


class Registrar:
    """The restart state machine of one plugin (a :class:`.server.KindPlugin`)."""

    def __init__(self, plugin: Any, plugin_dir: str, log: Log, wake: Callable[[], None],
                 register: Callable[..., str] = registration.register,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.plugin, self.plugin_dir, self.log, self.wake = plugin, plugin_dir, log, wake
        self.register, self.clock = register, clock
        self.lock = threading.Lock()  # stream ends are reported from gRPC threads
        self.state = UNSERVED
        self.epoch = 0  # Register attempts made; the stream opened after one is tagged with it
        self.pending = False  # a Register is in flight
        self.dialed: Optional[Identity] = None  # kubelet.sock when kubelet dialed us back during it
        self.stream_epoch = -1  # the epoch whose stream is open (or ended)
        self.holds: Optional[Tuple[Optional[Identity], int]] = None  # (kubelet.sock, serving_gen) registered
        self.since = 0.0  # when that registration succeeded
        self.lost = False  # kubelet ended its stream
        self.target: Optional[Identity] = None  # the kubelet.sock the failures count against
        self.failures = 0
        self.retry_at = 0.0
        self.serve_failures = 0
        self.serve_at = 0.0
        self.served = False  # served once: serving again is a restart's
        self.error = ""
        self.registrations = 0
        self.why = ""  # what the next registration answers, for its log line

    # -- from the plugin's RPCs (gRPC threads) -------------------------------------------------------------

    def dialed_back(self) -> None:
        """GetDevicePluginOptions: during our Register, that is kubelet dialing us back."""
        if self.pending:  # read without the lock: set and cleared by the loop around the call
            self.dialed = socket_identity(registration.kubelet_socket(self.plugin_dir))

    def stream_opened(self) -> Optional[int]:
        """A tag for the stream kubelet opens after our ``Register``; None for any further stream."""
        with self.lock:
            if self.stream_epoch == self.epoch or self.epoch == 0:
                return None
            self.stream_epoch = self.epoch
            return self.epoch

    def stream_ended(self, tag: Optional[int]) -> None:
        """A stream ended that we did not end; it matters only when it is the current registration's."""
        with self.lock:
            if tag is None or tag != self.epoch or self.lost:
                return  # an earlier registration's stream: kubelet replaced it when we registered again
            self.lost = True
            self.failures += 1
            delay = registration.backoff(self.failures)
            self.retry_at = self.clock() + delay
            self.why = "kubelet had ended the ListAndWatch stream of the previous registration"
        self.log(f"{self.plugin.kind}: kubelet ended the ListAndWatch stream of our registration: "
                 f"registering again in {delay:.1f}s unless kubelet restarts meanwhile")
        self.wake()

    # -- from the daemon's loop ----------------------------------------------------------------------------

    def step(self, kubelet: Optional[Identity]) -> str:
        """Serve if our socket is not ours any more, then register if needed (see the module docstring).

        Args:
            kubelet: the identity of kubelet.sock now (None: there is none).
        """
        if not self.serving() and not self.serve():
            return self.state
        if kubelet is None:
            self.state = WAITING
            return self.state
        mine = self.plugin.serving_gen
        with self.lock:
            now = self.clock()
            if self.holds is not None and self.holds[1] == mine and not self.lost:
                if self.failures and now - self.since >= STABLE_AFTER:
                    self.failures = 0
                self.state = REGISTERED
                return self.state
            if self.holds is not None and not self.why:
                self.why = ("kubelet.sock was created anew (kubelet restarted)" if self.holds[0] != kubelet
                            else "our socket is new")
            if kubelet != self.target:
                self.target, self.failures, self.retry_at = kubelet, 0, 0.0
            if now < self.retry_at:
                self.state = BACKOFF
                return self.state
            self.state = DUE
            self.epoch += 1
            self.holds, self.lost, self.dialed, self.pending = None, False, None, True
        try:
            err = self.register(self.plugin_dir, os.path.basename(self.plugin.socket), self.plugin.resource,
                                self.plugin.options(), self.serving, self.serve)
        finally:
            self.pending = False
        with self.lock:
            if err:
                self.failures += 1
                self.error = err
                delay = registration.backoff(self.failures)
                self.retry_at = self.clock() + delay
                self.state, attempts = BACKOFF, self.failures
            else:
                got = self.dialed or socket_identity(registration.kubelet_socket(self.plugin_dir))
                # the socket served now: the call serves again when ours went while it connected
                self.holds, self.since, self.error = (got, self.plugin.serving_gen), self.clock(), ""
                self.registrations += 1
                self.state = BACKOFF if self.lost else REGISTERED
            why, self.why = self.why, ""
        if err:
            if attempts <= 3 or attempts % 10 == 0:
                self.log(f"{self.plugin.kind}: registering {self.plugin.resource} with kubelet failed "
                         f"(attempt {attempts}): kubelet said: {err}; retrying in {delay:.1f}s", WARNING)
        else:
            self.log(f"{self.plugin.kind}: registered {self.plugin.resource} with kubelet "
                     f"({len(self.plugin.cards)} device(s), endpoint {os.path.basename(self.plugin.socket)})"
                     + (f": {why}" if why else ""))
        return self.state

    def serving(self) -> bool:
        """Our server runs and the socket at our path is the one it bound."""
        return self.plugin.server is not None and same_inode(self.plugin.socket, self.plugin.bound)

    def serve(self) -> bool:
        """Serve on a new socket; on failure retry with backoff.  True when serving."""
        now = self.clock()
        if now < self.serve_at:
            return False
        try:
            self.plugin.serve()
        except OSError as err:
            self.serve_failures += 1
            delay = registration.backoff(self.serve_failures)
            self.serve_at = now + delay
            self.state = UNSERVED
            if self.serve_failures <= 3 or self.serve_failures % 10 == 0:
                self.log(f"{self.plugin.kind}: cannot serve on {self.plugin.socket}: {err} "
                         f"(attempt {self.serve_failures}; retrying in {delay:.1f}s)", ERROR)
            return False
        self.serve_failures, self.serve_at = 0, 0.0
        if self.plugin.bound is None:  # deleted as soon as made (a kubelet cleaning its directory)
            self.state = UNSERVED  # due at once: the next pass serves again
            return False
        self.log(f"{self.plugin.kind}: " + ("our socket is gone (kubelet restarted?): serving again on "
                                            if self.served else f"serving {self.plugin.resource} on ")
                 + self.plugin.socket)
        self.served = True
        return True

    def due(self) -> Optional[float]:
        """When :meth:`step` has something to do again without an event (a retry), or None."""
        return {BACKOFF: self.retry_at, UNSERVED: self.serve_at}.get(self.state)

    def status(self) -> Dict[str, Any]:
        """This plugin's registration, for the status file."""
        return {"registered": self.state == REGISTERED, "state": self.state, "error": self.error,
                "registrations": self.registrations}
