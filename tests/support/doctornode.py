"""A fake node for doctor tests (used by tests/doctor/ and the seed scenarios):
a fake host tree plus spec dir, runtime configs, hook and wrapper binaries,
all under the test's tmp dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from click.testing import CliRunner

from . import fakehost
from xpu_cdi.cli import main

Results = List[Dict[str, str]]


class Node:
    """A fake node: ``host`` (built by the test), spec dir, runtime configs, binaries."""

    def __init__(self, tmp: Path, root: Path) -> None:
        self.tmp, self.root = tmp, root
        self.host: Optional[fakehost.FakeHost] = None
        self.spec_dir = tmp / "etc-cdi"
        self.spec_dir.mkdir()
        self.containerd = tmp / "containerd" / "config.toml"
        self.crio = tmp / "crio" / "crio.conf"
        self.docker = tmp / "docker" / "daemon.json"
        self.hooks_dir = tmp / "hooks.d"
        self.hook = self.binary("xpu-cdi-hook")
        self.wrapper = self.binary("xpu-container-runtime")

    def binary(self, name: str) -> Path:
        path = self.tmp / "bin" / name
        fakehost.write(path, "#!/bin/sh\nexit 0\n", 0o755)
        return path

    def kunlunxin(self, dev_char: bool = True, **kw: Any) -> fakehost.FakeHost:
        """The host with udev's /dev/char links unless *dev_char* is false."""
        self.host = fakehost.kunlunxin(self.root, **kw)
        if dev_char:
            fakehost.dev_char_all(self.host)
        return self.host

    def ascend(self, dev_char: bool = True, **kw: Any) -> fakehost.FakeHost:
        self.host = fakehost.ascend(self.root, **kw)
        if dev_char:
            fakehost.dev_char_all(self.host)
        return self.host

    @property
    def roots(self) -> List[str]:
        r = str(self.root)
        return ["--dev-root", r, "--driver-root", r, "--sysfs-root", r]

    def generate(self, *extra: str) -> str:
        res = CliRunner().invoke(main, ["generate", *self.roots, "--spec-dir", str(self.spec_dir),
                                        "--hook-path", str(self.hook), *extra])
        assert res.exit_code == 0, res.output
        return res.output

    def doctor(self, *extra: str, versions: Sequence[str] = ("containerd=1.7.20",)) -> Tuple[int, Results]:
        args = ["doctor", *self.roots, "--spec-dir", str(self.spec_dir),
                "--containerd-config", str(self.containerd), "--crio-config", str(self.crio),
                "--docker-config", str(self.docker), "--hooks-dir", str(self.hooks_dir), "--json"]
        args += [a for v in (versions or ("none",)) for a in ("--runtime-version", v)]
        res = CliRunner().invoke(main, args + list(extra))
        assert res.exit_code in (0, 1, 6), res.output + repr(res.exception)  # 6: warnings only
        return res.exit_code, json.loads(res.stdout)

    def containerd_config(self, version: int = 2, cdi: Optional[bool] = True, handler: Optional[str] = "xpu",
                          binary: Optional[str] = None, spec_dirs: Optional[Sequence[str]] = None,
                          top: str = "", runc: str = "") -> Path:
        """A containerd config.toml: version 2 (1.6/1.7) or 3 (2.x) layout; *top* goes before
        the first table, *runc* into the runc handler's table."""
        plugin = '"io.containerd.grpc.v1.cri"' if version == 2 else "'io.containerd.cri.v1.runtime'"
        lines = [f"version = {version}", top, f"[plugins.{plugin}]"]
        if cdi is not None:
            lines.append(f"  enable_cdi = {'true' if cdi else 'false'}")
        dirs = spec_dirs if spec_dirs is not None else [str(self.spec_dir)]
        lines.append(f"  cdi_spec_dirs = {json.dumps(list(dirs))}")
        lines += [f"[plugins.{plugin}.containerd.runtimes.runc]",
                  '  runtime_type = "io.containerd.runc.v2"', runc]
        if handler:
            lines += [f"[plugins.{plugin}.containerd.runtimes.{handler}]",
                      '  runtime_type = "io.containerd.runc.v2"',
                      f"[plugins.{plugin}.containerd.runtimes.{handler}.options]",
                      f"  BinaryName = {json.dumps(binary or str(self.wrapper))}"]
        fakehost.write(self.containerd, "\n".join(lines) + "\n")
        return self.containerd

    def runtimeclass(self, handler: str, name: str = "xpu") -> Path:
        path = self.tmp / f"runtimeclass-{name}.yaml"
        fakehost.write(path, f"apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: {name}\n"
                             f"handler: {handler}\n")
        return path


def checks(results: Results, name: str) -> Results:
    """The results of one check."""
    return [r for r in results if r["check"] == name]


def status(results: Results, name: str) -> str:
    """The worst status of one check ("" when it did not run)."""
    found = {r["status"] for r in checks(results, name)}
    for s in ("fail", "warn", "ok"):
        if s in found:
            return s
    return ""


def worst(results: Results, name: str) -> Dict[str, str]:
    """The result of one check with the worst status."""
    want = status(results, name)
    return next(r for r in checks(results, name) if r["status"] == want)
