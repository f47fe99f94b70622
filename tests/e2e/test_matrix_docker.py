"""Docker, live, on both Debian release lines: the host's docker.io and the other
release's in its tree (Debian 12: Docker 20.10, no CDI; Debian 13: Docker 26, CDI behind
``features.cdi``).  Each line gets one private dockerd (tests/support/matrix.py: own socket,
data-root, exec-root, pidfile, ``--iptables=false --bridge=none``, its managed containerd)
configured by ``xpu-cdi runtime configure --runtime docker`` itself, which writes the
``xpu`` runtime (the wrapper) and, on Docker >= 25, ``features.cdi``.  dockerd runs
``RUNTIME features`` on each configured runtime at start, so the wrapper's pass-through
of ``features`` is exercised by the start itself.
"""

from __future__ import annotations

import json
import subprocess
from typing import Iterator

import pytest

from support import matrix
from support.matrix import Cards, Dockerd, check_cards

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
FIRST_CDI = (25, 0, 0)


class Line:
    def __init__(self, place: matrix.Place, cards: Cards, dockerd: Dockerd, version: tuple) -> None:
        self.place, self.cards, self.dockerd, self.version = place, cards, dockerd, version

    @property
    def cdi(self) -> bool:
        return self.version >= FIRST_CDI


@pytest.fixture(scope="module", params=["host", "tree"])
def line(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Line]:
    base = tmp_path_factory.mktemp(f"docker-{request.param}")
    if request.param == "host":
        place: matrix.Place = matrix.Place()
        if not place.which("dockerd"):
            pytest.fail("dockerd missing on the host: run `make deps` (scripts/install-runtime-matrix-deps.sh)")
    else:
        place = matrix.TreePlace(request.getfixturevalue("other_tree"), matrix.releasetree.other_release(), [base])
    version = matrix.release_of(matrix.version_line(place, ["dockerd", "--version"]))
    cards = Cards(base / "cards")
    config = base / "daemon.json"
    args = ["runtime", "configure", "--runtime", "docker", "--config", str(config), "--wrapper-path", matrix.WRAPPER]
    r = subprocess.run([matrix.XPU_CDI, *args, *(["--enable-cdi"] if version >= FIRST_CDI else [])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    daemon = json.loads(config.read_text())
    if version >= FIRST_CDI:
        # not /etc/cdi: the tests write nothing there
        daemon["cdi-spec-dirs"] = [str(cards.spec_dir), str(matrix.version_specs(cards, base / "versions"))]
    d = Dockerd(place, base, daemon, env=[f"XPU_CDI_SPEC_DIRS={cards.spec_dir}"])
    try:
        d.load_busybox()
        yield Line(place, cards, d, version)
    finally:
        d.stop()
        cards.close()


def test_daemon_is_the_release_line(line: Line) -> None:
    """The running daemon is the release's Docker (20.10 on Debian 12, 26 on Debian 13) and
    knows the `xpu` runtime configure wrote."""
    want = {"bookworm": (20, 10), "trixie": (26, 1)}.get(line.place.release)
    assert want is None or line.version[:2] == want, line.version
    assert matrix.release_of(line.dockerd.server_version())[:2] == line.version[:2]
    runtimes = json.loads(line.dockerd.docker("info", "--format", "{{json .Runtimes}}").stdout)
    assert runtimes["xpu"]["path"] == matrix.WRAPPER


@pytest.mark.parametrize("asked,device", [([3], "3"), (list(range(matrix.CARDS)), "all")])
def test_cdi_device(line: Line, asked: list, device: str) -> None:
    """--device kunlunxin.com/xpu=3 and =all through Docker's own CDI (features.cdi); Docker
    20.10 has no CDI and refuses the name (there the `xpu` runtime is the route)."""
    r = line.dockerd.run(["--device", f"{line.cards.kind}={device}"], ["sh", "-c", matrix.SCRIPT])
    if not line.cdi:
        assert r.returncode != 0 and "kunlunxin.com/xpu" in r.stderr, r.stdout + r.stderr
        return
    assert r.returncode == 0, r.stderr
    check_cards(r.stdout, asked)


@pytest.mark.parametrize("value,asked", [("3", [3]), ("1,6", [1, 6]), ("all", list(range(matrix.CARDS)))])
def test_xpu_runtime_env(line: Line, value: str, asked: list) -> None:
    """--runtime xpu with the profile's selection variable: the wrapper edits config.json."""
    r = line.dockerd.run(["--runtime", "xpu", "-e", f"{matrix.selection_env()}={value}"], ["sh", "-c", matrix.SCRIPT])
    assert r.returncode == 0, r.stderr
    check_cards(r.stdout, asked)


def test_xpu_runtime_nothing_asked(line: Line) -> None:
    """--runtime xpu without a selection: no card, no driver mount, the container runs."""
    r = line.dockerd.run(["--runtime", "xpu"], ["sh", "-c", matrix.SCRIPT])
    assert r.returncode == 0, r.stderr
    check_cards(r.stdout, [])


def test_xpu_runtime_refuses_unknown_card(line: Line) -> None:
    """A card the spec lacks stops the container, with the wrapper's one-line reason."""
    r = line.dockerd.run(["--runtime", "xpu", "-e", f"{matrix.selection_env()}=9"], ["true"])
    assert r.returncode != 0 and "no card 9" in r.stderr, r.stderr


def test_doctor(line: Line) -> None:
    """doctor, run where the daemon runs, reports the running Docker's release (not the
    client's: a stray newer client is on this machine's PATH) and what it means for CDI."""
    checks = matrix.doctor(line.place, line.cards, "--docker-config", str(line.dockerd.config),
                           env=[f"DOCKER_HOST=unix://{line.dockerd.sock}"])
    server = line.dockerd.server_version()
    runtimes = checks["runtimes"]["found"]
    release = ".".join(map(str, matrix.release_of(server)))
    assert f"docker {release} ({'CDI up to' if line.cdi else 'no CDI'}" in runtimes, runtimes
    assert checks["docker-handler"]["status"] == "ok", checks["docker-handler"]
    if line.cdi:
        assert checks["docker-cdi"]["status"] == "ok", checks["docker-cdi"]


def test_highest_cdi_version_is_doctors(line: Line) -> None:
    """The highest cdiVersion this Docker loads, measured, is the one doctor's table gives."""
    if not line.cdi:
        assert matrix.releasetree.host_release() and line.version < FIRST_CDI  # 20.10: no CDI at all
        return
    loaded = [v for v in matrix.CDI_VERSIONS
              if line.dockerd.run(["--device", f"{matrix.version_kind(v)}=1"], ["true"]).returncode == 0]
    matrix.check_highest("docker", line.version, loaded)
