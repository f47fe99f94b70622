"""The contract every parser of outside input keeps, and the strategies that
feed them: any input gives a valid result or one of our own errors with a
non-empty one-line message; never another exception, never a hang.

Bounded for CI: ``XPU_CDI_FUZZ_PROFILE=ci`` (default) runs a fixed number
of examples per property; ``deep`` runs many more for a local soak.
"""

from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from xpu_cdi.errors import XpuCdiError

settings.register_profile("xpu-cdi-ci", max_examples=int(os.environ.get("XPU_CDI_FUZZ_EXAMPLES", "120")),
                          deadline=None, database=None, derandomize=False,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("xpu-cdi-deep", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# explicit per test (not load_profile) so other test modules keep their own settings
FUZZ = settings.get_profile("xpu-cdi-" + os.environ.get("XPU_CDI_FUZZ_PROFILE", "ci"))

HANG_SECONDS = 10.0


class Hang(BaseException):
    """A parser ran longer than HANG_SECONDS on one input (BaseException: no parser may swallow it)."""


@contextmanager
def no_hang(seconds: float = HANG_SECONDS) -> Iterator[None]:
    """Fail with :class:`Hang` when the body runs longer than *seconds* (main thread only)."""
    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check_message(err: XpuCdiError) -> str:
    """The error's message, asserted non-empty and on one line."""
    msg = str(err)
    assert msg.strip(), f"{type(err).__name__} with an empty message"
    assert "\n" not in msg and "\r" not in msg, f"{type(err).__name__} message spans lines: {msg!r}"
    return msg


def ours(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args)``'s result, or the :class:`XpuCdiError` it raised (message checked).

    Any other exception propagates and fails the property, with the input
    that caused it shown by hypothesis.
    """
    with no_hang():
        try:
            return fn(*args, **kwargs)
        except XpuCdiError as err:
            check_message(err)
            return err


# ---- strategies -------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=False), st.text(max_size=20))
json_values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=5), st.dictionaries(st.text(max_size=12), kids, max_size=5)), max_leaves=25)

KINDS = ["kunlunxin.com/xpu", "huawei.com/npu", "a.com/b", "x/y", "nokind", "", "a.com/b/c", "A1.b-c/d_e"]
NAMES = ["0", "1", "all", "0000:03:00.0", "", "-x", "a\n", "a=b", "é"]


def _mutate(draw: Any, value: Any, depth: int = 0) -> Any:
    """*value* with a few subtrees replaced by arbitrary JSON (a near-valid document)."""
    if depth > 6 or not draw(st.booleans()):
        return value
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        out = dict(value)
        if draw(st.integers(0, 3)) == 0:
            out.pop(key)
        elif draw(st.booleans()):
            out[key] = draw(json_values)
        else:
            out[key] = _mutate(draw, value[key], depth + 1)
        return out
    if isinstance(value, list) and value:
        i = draw(st.integers(0, len(value) - 1))
        out = list(value)
        out[i] = draw(json_values) if draw(st.booleans()) else _mutate(draw, value[i], depth + 1)
        return out
    return draw(json_values)


@st.composite
def mutated(draw: Any, valid: Any) -> Any:
    """A valid document, maybe mutated in a few places."""
    return _mutate(draw, valid)


node = st.fixed_dictionaries({"path": st.sampled_from(["/dev/xpu0", "/dev/xpu1", "/dev/xpuctrl", "x"])},
                             optional={"hostPath": st.just("/dev/xpu0"), "type": st.sampled_from(["c", "b", "q"]),
                                       "major": st.integers(0, 300), "minor": st.integers(0, 300),
                                       "fileMode": st.integers(0, 0o777), "permissions": st.sampled_from(["rwm", "z"])})
mount = st.fixed_dictionaries({"hostPath": st.sampled_from(["/usr/local/xpu", "rel"]),
                               "containerPath": st.sampled_from(["/usr/local/xpu", "/opt/x"])},
                              optional={"options": st.lists(st.sampled_from(["ro", "bind", "nosuid"])),
                                        "type": st.just("bind")})
hook = st.fixed_dictionaries({"hookName": st.sampled_from(["createContainer", "prestart", "bogus"]),
                              "path": st.sampled_from(["/usr/bin/xpu-cdi-hook", "rel"])},
                             optional={"args": st.lists(st.text(max_size=8), max_size=3),
                                       "env": st.lists(st.just("PATH=/bin"), max_size=1),
                                       "timeout": st.integers(-1, 30)})
edits = st.fixed_dictionaries({}, optional={
    "env": st.lists(st.sampled_from(["A=1", "=x", "B", "LD_LIBRARY_PATH=/usr/local/xpu/lib64"]), max_size=3),
    "deviceNodes": st.lists(node, max_size=3), "mounts": st.lists(mount, max_size=2),
    "hooks": st.lists(hook, max_size=2)})
device = st.fixed_dictionaries({"name": st.sampled_from(NAMES) | st.text(max_size=6), "containerEdits": edits},
                               optional={"annotations": st.dictionaries(st.text(max_size=5), st.text(max_size=5),
                                                                        max_size=2)})
good_specs = st.fixed_dictionaries({
    "cdiVersion": st.sampled_from(["0.3.0", "0.5.0", "0.6.0", "1.1.0", "v0.5.0", "9.9.9"]),
    "kind": st.sampled_from(KINDS),
    "devices": st.lists(device, min_size=1, max_size=4)}, optional={"containerEdits": edits})
specs = good_specs.flatmap(mutated)


def dumps(value: Any, fmt: str) -> bytes:
    """*value* as JSON or YAML bytes (YAML through PyYAML's emitter)."""
    if fmt == "json":
        return json.dumps(value).encode()
    import yaml

    return yaml.safe_dump(value).encode()


DEEP = [b"[" * 5000, b"{\"a\":" * 3000, b"- " * 3000 + b"x", b"a: " + b"[" * 5000]


def file_contents(valid: Optional[st.SearchStrategy] = None, deep: bool = True) -> st.SearchStrategy:
    """Bytes a hostile or broken file could hold: noise, JSON/YAML of anything,
    near-valid documents, truncations and (unless *deep* is false) deep nesting."""
    docs = valid if valid is not None else json_values
    serial = st.tuples(docs, st.sampled_from(["json", "yaml"])).map(lambda t: dumps(*t))
    odd = [b"\xef\xbb\xbf{}", b"\x00" * 64, "k: \ud800".encode("utf-8", "surrogatepass")]
    return st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass")),
        serial,
        st.tuples(serial, st.integers(0, 400)).map(lambda t: t[0][:t[1]]),  # truncated write
        st.sampled_from(odd + (DEEP if deep else [])),
    )
