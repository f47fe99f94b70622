"""What a cold run (scripts/cold-run.py, docs/testing.md#a-cold-run) takes away so that the suite
sees the machine as a fresh one does: the Debian packages the project's own install steps added
(scripts/install-deps.sh, found in apt's history by its command line) and the test cache (a new,
empty ``XPU_CDI_TEST_CACHE``: the Go toolchain, modules and builds, the image, the release trees)."""

from __future__ import annotations

import functools
import gzip
import re
import subprocess
from pathlib import Path
from typing import Iterable, List, Set

#: How scripts/install-deps.sh calls apt-get: the entries of apt's history it made.
INSTALL_DEPS_APT = "apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends"
HISTORY = Path("/var/log/apt")
_PACKAGE = re.compile(r"([^\s,():]+(?::[a-z0-9]+)?) \([^)]*\)")


def history_texts(where: Path = HISTORY) -> List[str]:
    """apt's history, oldest first (history.log.N.gz rotated away, then history.log)."""
    rotated = sorted(where.glob("history.log.*.gz"), key=lambda p: -int(p.name.split(".")[2]))
    texts = [gzip.decompress(p.read_bytes()).decode(errors="replace") for p in rotated]
    if (where / "history.log").is_file():
        texts.append((where / "history.log").read_text(errors="replace"))
    return texts


def installed_by_install_deps(texts: Iterable[str]) -> List[str]:
    """Every package an install-deps.sh run installed (its own and their dependencies), in order."""
    out: List[str] = []
    for text in texts:
        for entry in text.split("\n\n"):
            fields = dict(line.split(": ", 1) for line in entry.strip().splitlines() if ": " in line)
            if INSTALL_DEPS_APT not in fields.get("Commandline", ""):
                continue
            for name in _PACKAGE.findall(fields.get("Install", "")):
                if name not in out:
                    out.append(name)
    return out


def installed_now() -> Set[str]:
    """Every installed package: ``name``, or ``name:arch`` for a foreign architecture."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${binary:Package} ${db:Status-Status}\n"],
                       capture_output=True, text=True, check=True)
    return {unqualified(name) for name, _, status in (line.partition(" ") for line in r.stdout.splitlines())
            if status == "installed"}


def unqualified(name: str) -> str:
    """*name* without the native architecture (apt's history always adds it, dpkg for Multi-Arch: same)."""
    native = ":" + native_arch()
    return name[: -len(native)] if name.endswith(native) else name


@functools.lru_cache(maxsize=None)
def native_arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


def purge_plan(texts: Iterable[str]) -> List[str]:
    """What to purge: what install-deps.sh added and is still there, in apt's history's order,
    without the native architecture."""
    have = installed_now()
    return [p for p in map(unqualified, installed_by_install_deps(texts)) if p in have]


def essential(packages: List[str]) -> List[str]:
    """Which of *packages* are Essential or Protected. A foreign architecture's libcrypt1 and
    libgcc-s1 (arm64, from the cross-build) are Protected: apt refuses to purge them (and libc6
    with them) without --allow-remove-essential, though nothing of the native system needs them."""
    if not packages:
        return []
    r = subprocess.run(["dpkg-query", "-W", "-f", "${binary:Package} ${Essential}${Protected}\n", *packages],
                       capture_output=True, text=True)
    return [unqualified(name) for name, _, flag in (line.partition(" ") for line in r.stdout.splitlines())
            if "yes" in flag]


def purge_options(packages: List[str]) -> List[str]:
    """apt-get options the purge of *packages* needs: --allow-remove-essential when the only
    Essential or Protected packages in it are a foreign architecture's; a native one is refused."""
    marked = essential(packages)
    native = [p for p in marked if ":" not in p]
    if native:
        raise RuntimeError("cold run: would purge the native Essential or Protected packages "
                           + " ".join(native))
    return ["--allow-remove-essential"] if marked else []


def removals(packages: List[str]) -> List[str]:
    """What ``apt-get purge`` of *packages* would remove (a simulation): more than *packages*
    means something installed since depends on them."""
    r = subprocess.run(["apt-get", "-s", "purge", *purge_options(packages), *packages],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"apt-get -s purge failed: {r.stderr.strip()}")
    return [m.group(1) for m in re.finditer(r"^Purg (\S+)", r.stdout, re.M)]
