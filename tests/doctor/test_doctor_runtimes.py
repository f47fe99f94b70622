"""Runtime detection: release parsing, --runtime-version, CDI support per release."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support import fakehost
from xpu_cdi.doctor import runtimes
from xpu_cdi.errors import XpuCdiError


class TestParseRelease:
    @pytest.mark.parametrize("text, want", [
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", (1, 6, 20)),
        ("containerd github.com/containerd/containerd/v2 v2.0.5 fb4c30d4ede3531652d86197bf3fc9515e5276d9",
         (2, 0, 5)),
        ("podman version 4.3.1", (4, 3, 1)),
        ("Docker version 28.2.2, build e6534b4", (28, 2, 2)),
        ("crio version 1.30.4\nGitCommit: abc", (1, 30, 4)),
        ("no version here", None),
    ])
    def test_real_outputs(self, text: str, want: object) -> None:
        """The release is the first X.Y.Z of each runtime's real --version output."""
        assert runtimes.parse_release(text) == want


class TestOption:
    def test_values(self) -> None:
        """NAME=X.Y.Z pairs become releases; 'none' adds nothing."""
        assert runtimes.parse_option(["containerd=1.7.20", "none", "docker=27.1"]) == {
            "containerd": (1, 7, 20), "docker": (27, 1, 0)}

    @pytest.mark.parametrize("bad", ["runc=1.1.5", "containerd", "containerd=latest"])
    def test_bad_values(self, bad: str) -> None:
        """Unknown runtimes and non-releases are refused, quoting the value."""
        with pytest.raises(XpuCdiError, match=re.escape(repr(bad))):
            runtimes.parse_option([bad])


class TestDetect:
    def test_runs_each_binary(self, tmp_path: Path) -> None:
        """Each runtime on PATH is asked for --version; missing ones are left out."""
        fakehost.write(tmp_path / "containerd", "#!/bin/sh\necho containerd x 1.7.27\n", 0o755)
        fakehost.write(tmp_path / "podman", "#!/bin/sh\necho podman version 5.0.0\n", 0o755)
        found = runtimes.detect(which=lambda n: str(tmp_path / n) if (tmp_path / n).exists() else None)
        assert found == {"containerd": (1, 7, 27), "podman": (5, 0, 0)}


class TestCdiSupport:
    @pytest.mark.parametrize("name, release, cdi, top", [
        ("containerd", (1, 6, 20), False, ""), ("containerd", (1, 7, 11), True, "0.5.0"),
        ("containerd", (2, 2, 1), True, "1.1.0"), ("docker", (24, 0, 7), False, ""),
        ("docker", (28, 0, 1), True, "0.8.0"), ("crio", (1, 28, 0), True, "0.6.0"),
    ])
    def test_per_release(self, name: str, release: tuple, cdi: bool, top: str) -> None:
        """CDI support and highest cdiVersion follow the release tables."""
        assert runtimes.has_cdi(name, release) is cdi and runtimes.highest(name, release) == top

    def test_first_release_for(self) -> None:
        """The upgrade target named in fixes is the first release loading the version."""
        assert runtimes.first_release_for("containerd", "0.6.0") == "1.7.12"
        assert runtimes.first_release_for("docker", "1.0.0") == "28.1.0"
        assert runtimes.first_release_for("podman", "0.6.0") == "5.4.0"  # measured: 4.3 no, 5.4 yes
        assert runtimes.first_release_for("podman", "1.0.0") == ""


def test_docker_client_without_dockerd_is_no_docker() -> None:
    """A stray docker client binary (no dockerd) does not count as an installed Docker."""
    from xpu_cdi.doctor import runtimes as rt

    client_only = {"docker": "/usr/local/bin/docker"}
    assert rt.detect(client_only.get, ["docker"]) == {}
    assert list(rt.detect({"dockerd": "/no/such/dockerd"}.get, ["docker"])) == ["docker"]
