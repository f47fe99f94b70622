"""The doctor command: one line per check, JSON shape, exit codes."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from support.doctornode import Node
from xpu_cdi.cli import main
from xpu_cdi.doctor import result

pytestmark = pytest.mark.privileged


class TestExitCode:
    @pytest.mark.parametrize("statuses, code", [(["ok", "ok"], 0), (["ok", "warn"], 6),
                                                (["warn", "fail", "ok"], 1), ([], 0)])
    def test_worst_status_decides(self, statuses: list, code: int) -> None:
        """0 all ok, 1 any fail, 6 warnings only (2 is click's usage error: docs/cli.md)."""
        assert result.exit_code([result.result("x", s, "f", "fix") for s in statuses]) == code

    def test_unknown_status_refused(self) -> None:
        """A check cannot invent a status."""
        with pytest.raises(ValueError, match="'maybe'"):
            result.result("x", "maybe", "f")

    def test_warnings_only_exit_6(self, node: Node) -> None:
        """A healthy node with one 0660 node (the spec generated after the chmod) exits 6."""
        node.kunlunxin()
        os.chmod(node.root / "dev/xpu0", 0o660)
        node.generate()
        node.containerd_config()
        code, res = node.doctor()
        assert code == 6 and {r["status"] for r in res} == {"ok", "warn"}


class TestOutput:
    def test_json_shape(self, node: Node) -> None:
        """--json prints a list of objects with exactly check, status, found, fix (strings)."""
        node.kunlunxin()
        _code, res = node.doctor()
        assert isinstance(res, list) and res
        for r in res:
            assert set(r) == {"check", "status", "found", "fix"} and all(isinstance(v, str) for v in r.values())
            assert r["status"] in ("ok", "warn", "fail")
            assert r["status"] == "ok" or r["fix"], r

    def test_text_is_one_line_per_check(self, node: Node) -> None:
        """Without --json: one line per result, status first, fix after '-> fix:'; summary on stderr."""
        node.kunlunxin()
        node.containerd_config()
        _code, res = node.doctor()
        args = ["doctor", *node.roots, "--spec-dir", str(node.spec_dir), "--containerd-config",
                str(node.containerd), "--crio-config", str(node.crio), "--docker-config", str(node.docker),
                "--hooks-dir", str(node.hooks_dir), "--runtime-version", "containerd=1.7.20"]
        out = CliRunner().invoke(main, args)
        lines = out.stdout.splitlines()
        assert len(lines) == len(res) and out.exit_code == 1
        for line, r in zip(lines, res):
            assert line.startswith(f"{r['status']:<4}  {r['check']}: {r['found']}")
            assert (f"-> fix: {r['fix']}" in line) == (r["status"] != "ok")
        assert out.stderr.strip() == result.summary(res)

    def test_bad_runtime_version_is_an_error(self, node: Node) -> None:
        """A malformed --runtime-version stops with exit 1 and quotes it."""
        out = CliRunner().invoke(main, ["doctor", *node.roots, "--runtime-version", "containerd=new"])
        assert out.exit_code == 1 and "'containerd=new'" in out.stderr

    def test_unknown_profile_is_a_profile_error(self, node: Node) -> None:
        """--profile nosuch exits 3 like generate."""
        out = CliRunner().invoke(main, ["doctor", *node.roots, "--profile", "nosuch",
                                        "--runtime-version", "none"])
        assert out.exit_code == 3 and "nosuch" in out.stderr

    def test_explicit_profile_without_cards_fails(self, node: Node) -> None:
        """--profile ascend on a Kunlunxin host: the ascend driver check fails, naming its globs."""
        node.kunlunxin()
        _code, res = node.doctor("--profile", "ascend")
        drivers = [r for r in res if r["check"] == "driver"]
        assert len(drivers) == 1 and drivers[0]["status"] == "fail" and "davinci" in drivers[0]["found"]
        assert json.dumps(res).count("kunlunxin:") == 0
