"""End to end: what ``xpu-cdi device-plugin`` answers to Allocate, handed to real podman as
kubelet hands ``cdi_devices`` to a runtime (one ``--device`` per CDI name).

The fake kubelet (tests/deviceplugin/kubeletkit.py, stubs from the upstream
proto) registers the plugin and calls Allocate; the container must see exactly
the allocated cards, usable (a write gives ENXIO: the cgroup allows them), and
none of the others.  podman 4.3 reads specs from /etc/cdi only: each podman
command of the test sees the test's own spec dir there (runtimes.Podman), and
the plugin reads the same dir.  The same answer through containerd 1.7's CRI
is in test_matrix_cri.py (test_device_plugin_allocate_through_cri).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator, List

import pytest


from support import dpnode
from support import fakehost
from support import kubeletkit
from support.runtimes import ENXIO, Podman, install_spec

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]

PROBE = "for i in 0 1 2 3 4 5 6 7; do if [ -e /dev/xpu$i ]; then (echo x > /dev/xpu$i) 2>&1; " \
        "else echo \"/dev/xpu$i absent\"; fi; done; true"


@pytest.fixture
def served(host_root: Path, tmp_path: Path, cdi_dir: Path) -> Iterator[tuple]:
    """(kind, kubelet, plugin): an 8-card host whose spec podman (as its /etc/cdi) and the plugin
    both read from the test's own spec dir."""
    host = fakehost.kunlunxin(host_root, 8)
    kind = install_spec(host, "kunlunxin", cdi_dir)
    # unix socket paths hold 107 bytes: the test's long kind needs a short directory
    plugin_dir = dpnode.short_dir()
    k = kubeletkit.FakeKubelet(plugin_dir)
    proc = kubeletkit.PluginProcess("pypi", [*host.cli_roots, "--profile", "kunlunxin", "--profiles-dir",
                                             "/nonexistent", "--plugin-dir", str(plugin_dir), "--spec-dir",
                                             str(cdi_dir), "--status-file", str(tmp_path / "st.json"),
                                             "--uevents", "none"], tmp_path / "plugin.log")
    try:
        req = k.wait_registered()
        assert req.resource_name == kind
        yield kind, k, proc
    finally:
        proc.stop()
        k.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)


@pytest.mark.parametrize("cards", [["3"], ["1", "4", "6"]])
def test_allocated_cards_and_no_others(podman: Podman, served: tuple, cards: List[str]) -> None:
    kind, k, _proc = served
    resp = k.allocate(cards).container_responses[0]
    names = [d.name for d in resp.cdi_devices]
    assert names == [f"{kind}={c}" for c in cards]
    assert not resp.devices and not resp.envs  # CDI only: no host device paths, no env
    args = [a for n in names for a in ("--device", n)]
    r = podman.run(args, ["sh", "-c", PROBE])
    assert r.returncode == 0, r.stderr
    for i in range(8):
        if str(i) in cards:
            assert f"can't create /dev/xpu{i}: {ENXIO}" in r.stdout, r.stdout
        else:
            assert f"/dev/xpu{i} absent" in r.stdout, r.stdout


def test_the_same_card_named_twice_is_injected_once(podman: Podman, served: tuple) -> None:
    """A runtime given one card twice (cdi_devices plus the annotation, or a repeated name) injects it once:
    CDI replaces a node or mount of the same path.  podman's CDI library is the one containerd uses."""
    kind, k, _proc = served
    (name,) = [d.name for d in k.allocate(["2"]).container_responses[0].cdi_devices]
    r = podman.run(["--device", name, "--device", name],
                   ["sh", "-c", "ls /dev | grep -c '^xpu2$'; grep -c ' /usr/local/xpu ' /proc/mounts; " + PROBE])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["1", "1"], r.stdout
    assert f"can't create /dev/xpu2: {ENXIO}" in r.stdout
