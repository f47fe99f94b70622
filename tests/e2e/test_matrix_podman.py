"""podman with CDI on both Debian release lines: the host's (4.3 on Debian 12) and the
other release's in its tree (5.4 on Debian 13), each with a private store, config and
CDI spec dir (nothing is written to /etc/cdi); and crun 1.21 behind podman 5.4 where the
cgroup layout allows it (crun refuses a hybrid v1 + v2 layout; on this kind of machine
the cgroup2 half has no controllers, so crun runs on the v1 half alone: the unified
mount hidden in its mount namespace).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from support import matrix
from support.matrix import Cards, PlacePodman, check_cards

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
LINES = ["host-runc", "tree-runc", "tree-crun"]


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cards]:
    c = Cards(tmp_path_factory.mktemp("podman-cards"))
    yield c
    c.close()


@pytest.fixture(scope="module", params=LINES)
def podman(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           cards: Cards) -> Iterator[PlacePodman]:
    where, runtime = request.param.split("-")
    # a short path: podman 4.3 waits 20 s for each container's exit when its store's paths
    # are as long as xdist's tmp paths (conmon's sockets live there)
    base = matrix.short_dir("xp-")
    if where == "host":
        place: matrix.Place = matrix.Place()
    else:
        place = matrix.TreePlace(request.getfixturevalue("other_tree"), matrix.releasetree.other_release(),
                                 [base, cards.base])
    cgroups = ""
    if runtime == "crun":
        version = matrix.release_of(matrix.version_line(place, ["crun", "--version"]))
        if version[:2] < (1, 9):
            pytest.skip(f"crun {'.'.join(map(str, version))} of the {place.name}: the crun line tested "
                        "with podman here is Debian 13's 1.21 (Debian 12's 1.8 runs under tests/e2e/test_hook_runc.py)")
        # crun refuses a hybrid layout ("cgroups in hybrid mode not supported"); its cgroup2
        # half has no controllers here (all bound to v1), so crun runs on the v1 half alone
        cgroups = "v1-only" if matrix.hybrid_cgroups() else ""
    p = PlacePodman(place, base, cards.spec_dir, runtime=runtime, cgroups=cgroups)
    try:
        yield p
    finally:
        p.close()


def test_release_line(podman: PlacePodman) -> None:
    want = {"bookworm": (4, 3), "trixie": (5, 4)}.get(podman.place.release)
    assert want is None or podman.version[:2] == want, podman.version
    info = podman.podman("info", "--format", "{{.Host.OCIRuntime.Name}}")
    assert info.returncode == 0, info.stderr
    assert info.stdout.strip() in ("runc", "crun")


@pytest.mark.parametrize("devices,asked", [(["3"], [3]), (["1", "6"], [1, 6]), (["all"], list(range(matrix.CARDS)))])
def test_cdi(podman: PlacePodman, cards: Cards, devices: list, asked: list) -> None:
    args = [a for d in devices for a in ("--device", f"{cards.kind}={d}")]
    r = podman.run(args, ["sh", "-c", matrix.SCRIPT])
    assert r.returncode == 0, r.stderr
    check_cards(r.stdout, asked)


def test_no_cards(podman: PlacePodman) -> None:
    r = podman.run([], ["sh", "-c", matrix.SCRIPT])
    assert r.returncode == 0, r.stderr
    check_cards(r.stdout, [])


def test_unknown_device_refused(podman: PlacePodman, cards: Cards) -> None:
    r = podman.run(["--device", f"{cards.kind}=9"], ["true"])
    assert r.returncode != 0 and "kunlunxin.com/xpu=9" in r.stderr, r.stderr


def test_doctor(podman: PlacePodman, cards: Cards) -> None:
    """doctor, run where podman runs, reports that podman's release and CDI."""
    checks = matrix.doctor(podman.place, cards)
    release = ".".join(map(str, podman.version))
    assert f"podman {release} (CDI up to " in checks["runtimes"]["found"], checks["runtimes"]


def test_highest_cdi_version_is_doctors(podman: PlacePodman, cards: Cards) -> None:
    """The highest cdiVersion this podman loads, measured, is the one doctor's table gives
    for its release."""
    base = matrix.short_dir("xv-")
    specs = matrix.version_specs(cards, base / "cdi")
    podman.place.bind(base)
    p = PlacePodman(podman.place, base, specs)
    try:
        loaded = [v for v in matrix.CDI_VERSIONS
                  if p.run(["--device", f"{matrix.version_kind(v)}=1"], ["true"]).returncode == 0]
    finally:
        p.close()
    matrix.check_highest("podman", podman.version, loaded)
