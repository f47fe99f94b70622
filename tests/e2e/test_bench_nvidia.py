"""`make bench` times our update-ldcache and create-symlinks against NVIDIA's own nvidia-cdi-hook:
the real component (built from github.com/NVIDIA/nvidia-container-toolkit at the pinned release,
tests/support/k8s/go/nvidia-cdi-hook/), doing the same job on the same rootfs inside `runc run`
as ours, or the comparison would not be like for like."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Tuple

import pytest

from support import fakehost, runtimes
from support.hookkit import host_mounts
from support.k8s import builds

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Tuple[Any, Dict[str, Callable[[], float]]]]:
    """scripts/bench.py and its `inside` variants, made (and each tool run once, checked) in
    *tmp_path*; its mounts and trees removed afterwards."""
    runtimes.require("runc")
    builds.ensure_or_skip(builds.COMPONENTS["nvidia-cdi-hook"].name)
    import bench as module

    work = tmp_path / "work"
    work.mkdir()
    try:
        yield module, module.hook_inside_variants(work)
    finally:
        for mount in reversed(module.MOUNTS):
            subprocess.run(["umount", str(mount)], check=False)
        del module.MOUNTS[:]
        module.TOOLS.clear()
        fakehost.remove_tree(work)


def test_nvidia_hook_is_the_pinned_release(bench: Tuple[Any, Dict[str, Callable[[], float]]]) -> None:
    """The binary timed is NVIDIA's, built from the toolkit module at the release go.mod pins."""
    module, variants = bench
    assert module.PEERS["nvidia-cdi-hook"] == builds.COMPONENTS["nvidia-cdi-hook"].version()
    assert {"inside/nv-ldconfig", "inside/nv-symlinks", "inside/ldconfig", "inside/symlinks"} <= set(variants)


@pytest.mark.parametrize("ours, theirs", [("ldconfig", "nv-ldconfig"), ("symlinks", "nv-symlinks")])
def test_both_hooks_do_the_same_job(bench: Tuple[Any, Dict[str, Callable[[], float]]], ours: str,
                                    theirs: str) -> None:
    """Run again as the bench runs them: each hook leaves the library in the rootfs's ld.so.cache
    (the same ldconfig ran) or the link in place; and it is each hook's own doing (the rootfs is
    reset before a run)."""
    module, variants = bench
    for name in (ours, theirs):
        rootfs = module.TOOLS[name]
        assert str(rootfs) in host_mounts(str(rootfs))  # a mount point, as runtimes give it (a bind of itself)
        module.reset_tool_job(rootfs)
        assert module.tool_job(name, rootfs) is not None  # undone
        assert variants[f"inside/{name}"]() > 0  # the timed run
        assert module.tool_job(name, rootfs) is None, name
