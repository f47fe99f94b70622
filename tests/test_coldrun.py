"""What a cold run (scripts/cold-run.py) purges: the packages scripts/install-deps.sh installed,
read from apt's history, and no more than that."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from pathlib import Path

from support import coldrun

REPO = Path(__file__).resolve().parent.parent

HISTORY = f"""
Start-Date: 2026-12-07  17:34:10
Commandline: apt-get install -qqy curl git
Install: curl:amd64 (7.88.1-10), libcurl4:amd64 (7.88.1-10, automatic)
End-Date: 2026-12-07  17:34:20

Start-Date: 2026-12-07  17:35:10
Commandline: {coldrun.INSTALL_DEPS_APT} runc libyajl-dev:arm64
Install: runc:amd64 (1.1.5+ds1-1, automatic), libyajl2:arm64 (2.1.0-3, automatic), libyajl-dev:arm64 (2.1.0-3)
Upgrade: libc6:amd64 (2.36-9+deb12u10, 2.36-9+deb12u14)
End-Date: 2026-12-07  17:35:20
"""

LATER = f"""
Start-Date: 2026-12-08  09:00:00
Commandline: {coldrun.INSTALL_DEPS_APT} clang
Install: libclang1-14:amd64 (1:14.0.6-12, automatic), clang:amd64 (1:14.0-55.7~deb12u1), runc:amd64 (1.1.5+ds1-1)
End-Date: 2026-12-08  09:00:30
"""


class TestInstalledByInstallDeps:
    def test_only_install_deps_entries_count(self) -> None:
        """Another apt run's packages, and upgrades, are not the project's to take away."""
        assert coldrun.installed_by_install_deps([HISTORY]) == ["runc:amd64", "libyajl2:arm64", "libyajl-dev:arm64"]

    def test_rotated_history_read_oldest_first(self, tmp_path: Path) -> None:
        """history.log.1.gz is older than history.log; a package named twice is listed once."""
        (tmp_path / "history.log.1.gz").write_bytes(gzip.compress(HISTORY.encode()))
        (tmp_path / "history.log").write_text(LATER)
        texts = coldrun.history_texts(tmp_path)
        assert coldrun.installed_by_install_deps(texts) == [
            "runc:amd64", "libyajl2:arm64", "libyajl-dev:arm64", "libclang1-14:amd64", "clang:amd64"]


def test_unqualified_drops_only_the_native_architecture() -> None:
    native = coldrun.native_arch()
    assert coldrun.unqualified(f"runc:{native}") == "runc"
    foreign = "arm64" if native != "arm64" else "amd64"
    assert coldrun.unqualified(f"libyajl2:{foreign}") == f"libyajl2:{foreign}"


def test_the_plan_on_this_machine_is_installed_and_removes_nothing_else() -> None:
    """On this machine: every package planned is installed now and came from install-deps.sh's
    runs, and purging them (simulated) would remove exactly those."""
    texts = coldrun.history_texts()
    plan = coldrun.purge_plan(texts)
    assert set(plan) <= coldrun.installed_now()
    assert set(plan) <= {coldrun.unqualified(p) for p in coldrun.installed_by_install_deps(texts)}
    if plan:
        assert sorted(coldrun.removals(plan)) == sorted(plan)


def test_dry_run_purges_nothing() -> None:
    """`cold-run.py --dry-run` lists the plan and changes nothing."""
    before = coldrun.installed_now()
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "cold-run.py"), "--dry-run"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("cold-run: ") and "packages install-deps.sh added" in r.stdout
    assert coldrun.installed_now() == before


def test_purge_options_allow_only_a_foreign_architectures_essential_packages() -> None:
    """bash is Essential on every Debian: never purged. A package that is not Essential needs no
    option; a foreign libcrypt1 (Protected; the arm64 cross-build's, when installed) gets
    --allow-remove-essential."""
    with pytest.raises(RuntimeError, match="native Essential or Protected packages .*bash"):
        coldrun.purge_options(["bash", "coreutils"])
    assert coldrun.purge_options(["dpkg-dev"]) == []
    foreign = [p for p in coldrun.installed_now() if p.startswith("libcrypt1:")]
    for name in foreign:
        assert coldrun.essential([name]) == [name]
        assert coldrun.purge_options([name, "dpkg-dev"]) == ["--allow-remove-essential"]
