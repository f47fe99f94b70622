"""Concurrency: 50 containers started in parallel through real runc, each
asking for a different subset of a fake 8-card host's cards, once with the
prestart hook and once through the wrapper runtime, while `xpu-cdi generate`
rewrites the spec and its index over and over.  Every container sees exactly
its cards (allowed by the cgroup), none fails, no reader ever meets a
partial file, and nothing stays mounted or running afterwards."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from support import runtimes
from support.runtimes import ENXIO
from support.hookkit import HookHost, container_output, host_mounts

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

BIN = Path(sys.executable).parent
CONTAINERS = 50
PARALLEL = 8  # two cores: more only queues in the kernel
# one line per node: "ok N" when present and allowed by the cgroup, "denied N" when present but not allowed
PROBE = ("for i in 0 1 2 3 4 5 6 7; do [ -e /dev/xpu$i ] || continue; "
         "if (echo x > /dev/xpu$i) 2>&1 | grep -q '" + ENXIO + "'; then echo ok $i; else echo denied $i; fi; done; "
         "[ -e /dev/xpuctrl ] && (echo x > /dev/xpuctrl) 2>&1 | grep -q '" + ENXIO + "' && echo ctrl")


def subsets(seed: int) -> List[List[int]]:
    """CONTAINERS distinct non-empty subsets of the 8 cards (all singletons, all 8, then random)."""
    rng = random.Random(seed)
    chosen = [[i] for i in range(8)] + [list(range(8))]
    while len(chosen) < CONTAINERS:
        s = sorted(rng.sample(range(8), rng.randint(2, 7)))
        if s not in chosen:
            chosen.append(s)
    return chosen


def value(cards: List[int], rng: random.Random) -> str:
    """CXPU_VISIBLE_DEVICES for *cards* in one of the syntaxes (list, ranges, shuffled with repeats)."""
    form = rng.randrange(3)
    if form == 0:
        return ",".join(map(str, cards))
    if form == 1:
        extra = cards + [rng.choice(cards)]
        rng.shuffle(extra)
        return " , ".join(map(str, extra))
    runs, start = [], cards[0]
    for a, b in zip(cards, cards[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}-{a}" if a != start else str(a))
            start = b
    return ",".join(runs)


class Rewriter:
    """Two `xpu-cdi generate` loops (alternating two outputs, so the files
    really change) until stopped: also two writers racing each other."""

    def __init__(self, host: HookHost) -> None:
        self.host = host
        self.stop = threading.Event()
        self.rewrites = 0
        self.progress = threading.Condition()
        self.failures: List[str] = []
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True) for n in range(2)]

    def run(self, n: int) -> None:
        flags = [[], ["--no-all-device"]]
        while not self.stop.is_set():
            r = subprocess.run([str(BIN / "xpu-cdi"), "generate", *self.host.host.cli_roots, "--spec-dir",
                                str(self.host.spec_dir), "--hook-path", str(self.host.hook),
                                *flags[(self.rewrites + n) % 2]], capture_output=True, text=True)
            if r.returncode != 0:
                self.failures.append(r.stderr)
            with self.progress:
                self.rewrites += 1
                self.progress.notify_all()

    def wait_for(self, count: int, timeout: float = 60) -> None:
        """Block until *count* rewrites have happened: starts are spread over the
        rewrites however fast the hook is, so the race really happens."""
        with self.progress:
            self.progress.wait_for(lambda: self.rewrites >= count or self.stop.is_set(), timeout=timeout)

    def __enter__(self) -> "Rewriter":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def leftovers(prefix: str) -> Tuple[List[str], List[str]]:
    """Mounts under *prefix* in the host namespace, and runc containers of this test process."""
    listed = subprocess.run(["runc", "list", "-q"], capture_output=True, text=True).stdout.split()
    return host_mounts(prefix), [c for c in listed if c.startswith(f"xc-{os.getpid()}-")]


def run_all(host: HookHost, runtime: str, via_hook: bool) -> None:
    seed = int(os.environ.get("XPU_CDI_CONCURRENCY_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    jobs = []
    for cards in subsets(seed):
        env = [f"CXPU_VISIBLE_DEVICES={value(cards, rng)}"]
        b = host.bundle(["sh", "-c", PROBE], env=env) if via_hook else runtimes.Bundle(host.base)
        if not via_hook:
            b.set_process(["sh", "-c", PROBE], env=env)
        jobs.append((cards, env[0], b))
    mounts_before = host_mounts(str(host.base))

    def start(numbered: Tuple[int, Tuple[List[int], str, "runtimes.Bundle"]]
              ) -> Tuple[List[int], str, subprocess.CompletedProcess]:
        i, (cards, env, b) = numbered
        rw.wait_for(i // 10 + 1)  # the 50 starts spread across at least 5 rewrites
        return cards, env, runtimes.run_runc(b, runtime=runtime, timeout=120)

    with Rewriter(host) as rw, ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(start, enumerate(jobs)))
    assert not rw.failures, f"generate failed while containers started: {rw.failures[0]}"
    assert rw.rewrites >= 5, f"only {rw.rewrites} rewrites overlapped the starts: the test did not race"
    for cards, env, r in results:
        want = [f"ok {i}" for i in cards] + ["ctrl"]
        assert r.returncode == 0, f"{env} (seed {seed}): {container_output(r)}"
        assert r.stdout.splitlines() == want, f"{env} (seed {seed}) wanted {want}: {container_output(r)}"
    mounts, running = leftovers(str(host.base))
    assert mounts == mounts_before, f"mounts left behind: {sorted(set(mounts) - set(mounts_before))}"
    assert running == [], f"containers left behind: {running}"


def test_hook_under_load(xpu: HookHost) -> None:
    """50 parallel runc starts with the prestart hook during spec rewrites: each sees exactly its cards."""
    runtimes.require("runc")
    run_all(xpu, "runc", via_hook=True)
    log = xpu.log_text()
    assert log.count("injected ") == CONTAINERS, log[-2000:]
    assert "warning" not in log and "error" not in log, "a hook met a broken spec or index:\n" + log[-2000:]


@pytest.fixture
def wrapper_env(xpu: HookHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[HookHost]:
    """The wrapper reads the spec dir from its own environment, which runc's children inherit from us."""
    monkeypatch.setenv("XPU_CDI_SPEC_DIRS", str(xpu.spec_dir))
    monkeypatch.delenv("XPU_CDI_RUNTIME", raising=False)
    yield xpu


def test_wrapper_under_load(wrapper_env: HookHost) -> None:
    """50 parallel starts through xpu-container-runtime during spec rewrites: each sees exactly its cards."""
    runtimes.require("runc")
    run_all(wrapper_env, str(BIN / "xpu-container-runtime"), via_hook=False)
