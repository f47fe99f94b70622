"""`xpu-cdi-hook update-ldcache` and `create-symlinks`, the compiled binary
alone, black-box: run as a createContainer hook is run (already in the
container's mount namespace: state pid 0 as crun gives it), each bad input
gives one line naming what is wrong, exit 1, and leaves the rootfs as it was."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from support.hookkit import hook_binary, tree

HOOK = "xpu-cdi-hook"


def bundle(base: Path, config: Any = None) -> Path:
    """A bundle dir with a rootfs holding /usr/local/xpu/lib64 and *config* (default: root.path rootfs)."""
    b = base / "bundle"
    (b / "rootfs" / "usr" / "local" / "xpu" / "lib64").mkdir(parents=True, exist_ok=True)
    (b / "rootfs" / "etc").mkdir(exist_ok=True)
    text = config if isinstance(config, (str, bytes)) else json.dumps(config or {"root": {"path": "rootfs"}})
    (b / "config.json").write_bytes(text.encode() if isinstance(text, str) else text)
    return b


def run(args: Sequence[str], state: Any, log: Optional[Path] = None) -> subprocess.CompletedProcess:
    data = state if isinstance(state, bytes) else json.dumps(state).encode()
    extra: List[str] = ["--log", str(log)] if log else []
    return subprocess.run([hook_binary(HOOK), *args, *extra], input=data, capture_output=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})


def state(b: Path, **extra: Any) -> Dict[str, Any]:
    return {"ociVersion": "1.0.2", "id": "c1", "pid": 0, "bundle": str(b), "status": "created", **extra}


def one_line_error(r: subprocess.CompletedProcess, message: str) -> None:
    assert r.returncode == 1, r
    assert r.stderr.decode() == f"{HOOK}: {message}\n"
    assert r.stdout == b""


LDCACHE = ["update-ldcache", "--folder", "/usr/local/xpu/lib64"]


class TestUsage:
    @pytest.mark.parametrize("args, message", [
        (["update-ldcache"], "update-ldcache: needs at least one --folder "
                             "(usage: xpu-cdi-hook update-ldcache --folder VALUE...)"),
        (["update-ldcache", "--folder"], "update-ldcache: option --folder needs a value"),
        (["update-ldcache", "--folder", "lib"], "update-ldcache: --folder 'lib' must be an absolute container path"),
        (["update-ldcache", "--folder=/a", "x"], "update-ldcache: unexpected argument 'x' "
                                                  "(usage: xpu-cdi-hook update-ldcache --folder VALUE...)"),
        (["create-symlinks", "--link", "a::b"], "create-symlinks: --link 'a::b' must be TARGET::LINK "
                                                "(LINK an absolute container path)"),
        (["create-symlinks", "--link", "::/b"], "create-symlinks: --link '::/b' must be TARGET::LINK "
                                                "(LINK an absolute container path)"),
        (["create-symlinks", "--link", "a::/x/../b"], "create-symlinks: --link 'a::/x/../b' must be TARGET::LINK "
                                                      "(LINK an absolute container path)"),
    ])
    def test_bad_arguments(self, tmp_path: Path, args: List[str], message: str) -> None:
        """A usage error is found before the state is read, and said in one line."""
        b = bundle(tmp_path)
        before = tree(b)
        one_line_error(run(args, state(b)), message)
        assert tree(b) == before


class TestBadState:
    @pytest.mark.parametrize("raw, message", [
        (b"", "no OCI state on stdin: the hook must be run by a container runtime (as an OCI hook), not by hand"),
        (b"{", None),
        (b"[]", "OCI state on stdin must be a JSON object, got a list"),
        (b'{"id": 5}', "OCI state: 'id' must be a non-empty string, got a number"),
        (b'{"id": "c1", "bundle": "rel"}', "OCI state of 'c1': 'bundle' must be an absolute path, got 'rel'"),
        (b'{"id": "c1", "bundle": "/b", "pid": -1}', "OCI state of 'c1': 'pid' must be a non-negative integer, "
                                                     "got -1"),
        (b'{"id": "c1", "bundle": "/b", "pid": 1.5}', "OCI state of 'c1': 'pid' must be a non-negative integer, "
                                                      "got 1.5"),
        (b'{"id": "c1", "bundle": "/b", "annotations": []}', "OCI state of 'c1': 'annotations' must be an object, "
                                                             "got a list"),
        (b" " * ((1 << 20) + 1), "the OCI state on stdin is larger than 1048576 bytes: refusing to parse it"),
    ])
    def test_state(self, raw: bytes, message: Optional[str]) -> None:
        r = run(LDCACHE, raw)
        if message is None:  # the parser's own words after the fixed part
            assert r.returncode == 1 and r.stderr.decode().startswith(f"{HOOK}: OCI state on stdin is not valid "
                                                                      "JSON ("), r.stderr
            assert r.stderr.decode().endswith("): is the runtime OCI compliant?\n") and r.stderr.count(b"\n") == 1
        else:
            one_line_error(r, message)

    def test_missing_bundle(self, tmp_path: Path) -> None:
        one_line_error(run(LDCACHE, state(tmp_path / "gone")),
                       f"bundle '{tmp_path}/gone': cannot open config.json: No such file or directory")

    @pytest.mark.parametrize("config, message", [
        ("{", "'{b}/config.json' is not valid JSON: "),
        ("[1]", "'{b}/config.json' must hold a JSON object, got a list"),
        ({"process": {}}, "'{b}/config.json' has no root.path: cannot find the container's rootfs"),
        ({"root": {"path": ""}}, "'{b}/config.json' has no root.path: cannot find the container's rootfs"),
        ({"root": {"path": "rootfs"}, "process": {"env": {}}}, "config.json of 'c1': process.env must be a list, "
                                                               "got an object"),
        ({"root": {"path": "rootfs"}, "annotations": 3}, "config.json of 'c1': annotations must be an object, "
                                                         "got a number"),
        ('{"pad": "' + "x" * (4 << 20) + '"}', "'{b}/config.json' is larger than 4194304 bytes: refusing to parse it"),
    ])
    def test_config(self, tmp_path: Path, config: Any, message: str) -> None:
        b = bundle(tmp_path, config)
        before = tree(b / "rootfs")
        r = run(LDCACHE, state(b))
        want = f"{HOOK}: {message.format(b=b)}"
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1 and err.startswith(want), err
        assert tree(b / "rootfs") == before

    def test_missing_rootfs(self, tmp_path: Path) -> None:
        b = bundle(tmp_path, {"root": {"path": "nowhere"}})
        one_line_error(run(LDCACHE, state(b)), f"the container's rootfs: '{b}/nowhere' cannot be opened: "
                                               "No such file or directory (root.path of config.json)")


class TestInPlace:
    def test_no_ldconfig_touches_nothing(self, tmp_path: Path) -> None:
        """An image without ldconfig (busybox, alpine, distroless): nothing written, a note in the log."""
        b = bundle(tmp_path)
        before = tree(b)
        log = tmp_path / "log"
        r = run(LDCACHE, state(b), log)
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        assert tree(b) == before
        assert "update-ldcache: no ldconfig in the image: ld cache left alone" in log.read_text()

    def test_links_made_in_the_rootfs(self, tmp_path: Path) -> None:
        b = bundle(tmp_path)
        log = tmp_path / "log"
        r = run(["create-symlinks", "--link", "libx.so.1::/usr/lib/libx.so", "--link=../a::/usr/lib/a"], state(b), log)
        assert r.returncode == 0, r.stderr
        assert os.readlink(b / "rootfs" / "usr" / "lib" / "libx.so") == "libx.so.1"
        assert os.readlink(b / "rootfs" / "usr" / "lib" / "a") == "../a"
        assert "create-symlinks: 2 link(s) created" in log.read_text()

    def test_link_conflict_undoes_the_links_made(self, tmp_path: Path) -> None:
        """The second link clashes with a file of the image: the first is taken back, one line said."""
        b = bundle(tmp_path)
        (b / "rootfs" / "usr" / "lib").mkdir(parents=True)
        (b / "rootfs" / "usr" / "lib" / "taken").write_text("image file")
        before = tree(b)
        r = run(["create-symlinks", "--link", "x::/usr/lib/new", "--link", "y::/usr/lib/taken"], state(b))
        one_line_error(r, "create-symlinks: '/usr/lib/taken' already exists in the container and is not a link "
                          "to 'y'")
        assert tree(b) == before

    def test_link_escaping_the_rootfs_stays_inside(self, tmp_path: Path) -> None:
        """An image symlink pointing out of the rootfs: the link is made inside it, never on the host."""
        b = bundle(tmp_path)
        outside = tmp_path / "outside"
        outside.mkdir()
        os.symlink(str(outside), b / "rootfs" / "escape")
        r = run(["create-symlinks", "--link", "t::/escape/l"], state(b))
        assert r.returncode == 0, r.stderr
        assert list(outside.iterdir()) == []
        assert os.readlink(b / "rootfs" / str(outside).lstrip("/") / "l") == "t"
