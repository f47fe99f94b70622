"""The image cache's clean-up (tests/support/imagebuild.py, drop_stale): a checkout removes the images
of the sources it moved on from once stale, never another checkout's, nor files it cannot place."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List

import pytest

from support import imagebuild

KEYS = {"mine-old": "a" * 16, "theirs": "b" * 16, "now": "c" * 16, "gone": "d" * 16, "legacy": "e" * 16,
        "fresh": "f" * 16, "arm64": "0" * 16}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Dict[str, List[Path]]:
    """Two checkouts (this one and another that exists) and one removed; every key's files made stale but
    the fresh one's."""
    me, other = tmp_path / "me", tmp_path / "other"
    me.mkdir()
    other.mkdir()
    d = tmp_path / "cache"
    d.mkdir()
    monkeypatch.setattr(imagebuild, "DIR", d)
    monkeypatch.setattr(imagebuild, "REPO", me)
    owners = {"mine-old": [me], "theirs": [other], "now": [me], "gone": [tmp_path / "removed"], "fresh": [me],
              "arm64": [me]}
    files: Dict[str, List[Path]] = {}
    old = time.time() - imagebuild.STALE_SECONDS - 60
    for name, key in KEYS.items():
        files[name] = [d / f"xpu-cdi-{key}.oci.tar", d / f"xpu-cdi-{key}-v2.oci.tar", d / f"xpu-cdi-{key}.built",
                       d / f"framework-{key}.oci.tar", d / f"podman-build-{key}.json"]
        for f in files[name]:
            f.write_text(name)
            if name != "fresh":
                os.utime(f, (old, old))
        if name in owners:
            imagebuild.set_owners(key, {f"{'arm64' if name == 'arm64' else 'amd64'} {p}" for p in owners[name]})
    return files


def test_drop_stale_keeps_other_checkouts_images(cache: Dict[str, List[Path]]) -> None:
    imagebuild.drop_stale(KEYS["now"], "amd64")
    left = {name for name, files in cache.items() if all(f.exists() for f in files)}
    gone = {name for name, files in cache.items() if not any(f.exists() for f in files)}
    # this checkout's earlier sources and a removed checkout's go; another checkout's stays however
    # old, as do files no owner record places, this checkout's earlier sources still in use, and its
    # image of another architecture
    assert (left, gone) == ({"theirs", "now", "legacy", "fresh", "arm64"}, {"mine-old", "gone"})
    assert imagebuild.owners(KEYS["now"]) == {f"amd64 {imagebuild.REPO}"}
    assert imagebuild.owners(KEYS["arm64"]) == {f"arm64 {imagebuild.REPO}"}
    assert imagebuild.owners(KEYS["fresh"]) == set()  # moved on from: goes once stale
    assert not imagebuild.owners_file(KEYS["mine-old"]).exists()


def test_a_key_two_checkouts_share_stays_while_one_holds_it(cache: Dict[str, List[Path]], tmp_path: Path) -> None:
    imagebuild.set_owners(KEYS["mine-old"], {f"amd64 {imagebuild.REPO}", f"amd64 {tmp_path / 'other'}"})
    imagebuild.drop_stale(KEYS["now"], "amd64")
    assert all(f.exists() for f in cache["mine-old"])
    assert imagebuild.owners(KEYS["mine-old"]) == {f"amd64 {tmp_path / 'other'}"}
