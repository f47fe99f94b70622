"""kube/client.py's client as client-go behaves: its own rate (QPS and burst), the wait a 429 or 5xx
answer's Retry-After asks for, and HTTP(S)_PROXY / NO_PROXY on its plain path; against
tests/support/fakeapi.py's API over loopback HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, List

import pytest

from xpu_cdi.kube import client as _kube
from xpu_cdi.kube.client import ApiError, Kube, RateLimit, proxy_for, slices_path
from support.fakeapi import FakeKube, HttpFront

PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture()
def front(monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpFront]:
    for name in PROXY_VARS:  # the machine's own proxy settings play no part
        monkeypatch.delenv(name, raising=False)
    f = HttpFront(FakeKube())
    yield f
    f.close()


def client(tmp_path: Path, server: str, slept: List[float], limit: RateLimit = None) -> Kube:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    return Kube(str(path), limit=limit, sleep=slept.append)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_the_rate_limit_lets_a_burst_through_then_qps() -> None:
    clock = FakeClock()
    limit = RateLimit(qps=2.0, burst=3, clock=clock, sleep=clock.sleep)
    assert [limit.wait() for _ in range(5)] == [0.0, 0.0, 0.0, 0.5, 1.0]  # each caller its own slot
    clock.now += 10.0  # idle: the bucket fills up to the burst again, no further
    assert [limit.wait() for _ in range(4)] == [0.0, 0.0, 0.0, 0.5]
    assert clock.slept == [0.5, 1.0, 0.5]


def test_calls_go_through_the_clients_rate_limit(tmp_path: Path, front: HttpFront) -> None:
    clock = FakeClock()
    kube = client(tmp_path, front.url, [], RateLimit(qps=1.0, burst=2, clock=clock, sleep=clock.sleep))
    for _ in range(3):
        kube.get(slices_path())
    assert clock.slept == [1.0] and len(front.seen) == 3
    assert (_kube.QPS, _kube.BURST) == (5.0, 10)  # client-go's rest.Config defaults


def test_a_429_is_waited_out_as_retry_after_says(tmp_path: Path, front: HttpFront) -> None:
    slept: List[float] = []
    kube = client(tmp_path, front.url, slept)
    front.throttle = [(429, {"Retry-After": "2"}), (503, {"Retry-After": "1"})]
    assert kube.get(slices_path())["items"] == []
    assert slept == [2.0, 1.0] and [s[1] for s in front.seen] == [slices_path()] * 3


def test_without_retry_after_the_answer_is_the_callers(tmp_path: Path, front: HttpFront) -> None:
    """client-go retries only when the server says when: a bare 429 or 500 is an error at once."""
    slept: List[float] = []
    kube = client(tmp_path, front.url, slept)
    for status in (429, 500):
        front.throttle = [(status, {})]
        with pytest.raises(ApiError) as err:
            kube.get(slices_path())
        assert err.value.status == status
    front.throttle = [(429, {"Retry-After": "soon"})]  # not whole seconds: not a wait either
    with pytest.raises(ApiError):
        kube.get(slices_path())
    assert slept == []


def test_a_long_retry_after_is_capped_and_retries_end(tmp_path: Path, front: HttpFront) -> None:
    slept: List[float] = []
    kube = client(tmp_path, front.url, slept)
    front.throttle = [(429, {"Retry-After": "3600"})] * (_kube.MAX_RETRIES + 1)
    with pytest.raises(ApiError) as err:
        kube.get(slices_path())
    assert err.value.status == 429
    assert slept == [_kube.MAX_RETRY_AFTER] * _kube.MAX_RETRIES and len(front.seen) == _kube.MAX_RETRIES + 1


def test_a_throttled_watch_is_started_again_after_the_wait(tmp_path: Path, front: HttpFront) -> None:
    slept: List[float] = []
    kube = client(tmp_path, front.url, slept)
    front.throttle = [(429, {"Retry-After": "1"})]
    assert list(kube.watch(slices_path(), {"resourceVersion": "1"}, timeout_seconds=1)) == []
    assert slept == [1.0] and len(front.seen) == 2


def test_http_proxy_carries_the_calls(tmp_path: Path, front: HttpFront, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server name that resolves nowhere: only the proxy (the front, taking absolute-form requests)
    can answer."""
    monkeypatch.setenv("HTTP_PROXY", front.url)
    kube = client(tmp_path, "http://api.cluster.invalid:6443", [])
    assert kube.get(slices_path())["items"] == []
    assert front.seen == [("GET", slices_path(), True)]


def test_loopback_is_never_proxied(tmp_path: Path, front: HttpFront, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    kube = client(tmp_path, front.url, [])
    assert kube.get(slices_path())["items"] == []
    assert front.seen == [("GET", slices_path(), False)]


@pytest.mark.parametrize("server, env, proxy", [
    ("https://10.96.0.1:443", {"HTTPS_PROXY": "proxy:3128"}, "http://proxy:3128"),
    ("https://10.96.0.1:443", {"https_proxy": "http://p:1"}, "http://p:1"),
    ("https://10.96.0.1:443", {"HTTPS_PROXY": "http://P:1", "https_proxy": "http://p:1"}, "http://P:1"),
    ("https://10.96.0.1:443", {"HTTP_PROXY": "http://p:1"}, None),  # https takes HTTPS_PROXY only
    ("http://api.example:80", {"HTTP_PROXY": "http://p:1"}, "http://p:1"),
    ("https://10.96.0.1", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.96.0.0/12"}, None),
    ("https://10.96.0.1", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.97.0.0/16"}, "http://p:1"),
    ("https://10.96.0.1", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.96.0.1"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"}, None),
    ("https://example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"}, None),
    ("https://notexample.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"}, "http://p:1"),
    ("https://example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".example.com"}, "http://p:1"),
    ("https://a.example.com", {"HTTPS_PROXY": "http://p:1", "no_proxy": ".example.com"}, None),
    ("https://a.example.com:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "a.example.com:443"}, "http://p:1"),
    ("https://a.example.com:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "x, a.example.com:6443"}, None),
    ("https://a.example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}, None),
    ("https://localhost:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://[::1]:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://[fd00::1]:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "fd00::/8"}, None),
])
def test_proxy_for_follows_gos_rules(server: str, env: dict, proxy: str) -> None:
    assert proxy_for(server, env) == proxy
