"""The entry point: options, subcommands, messages, the log, the launcher."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xpu_cdi.cdi import names, registry
from hookkit import fast_binary
from xpu_cdi.hook import launcher, main, select

BIN = Path(sys.executable).parent


def run(capfd: pytest.CaptureFixture, *args: str) -> "tuple[int, str, str]":
    code = main.main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


class TestArguments:
    def test_help(self, capfd: pytest.CaptureFixture) -> None:
        """--help prints the usage and succeeds."""
        code, out, _ = run(capfd, "--help")
        assert code == 0 and "usage: xpu-cdi-hook" in out and "update-ldcache --folder DIR" in out

    @pytest.mark.parametrize("args, needle", [
        ([], "no subcommand given"),
        (["--bogus", "prestart"], "unknown option '--bogus'"),
        (["prestart", "extra"], "prestart: unexpected argument 'extra'"),
        (["update-ldcache"], "update-ldcache: needs at least one --folder"),
        (["update-ldcache", "--folder"], "option --folder needs a value"),
        (["create-symlinks", "--link", "a::b", "c"], "create-symlinks: unexpected argument 'c'"),
        (["install-launcher"], "install-launcher: needs exactly one PATH"),
        (["install-launcher", "--force"], "install-launcher: needs exactly one PATH"),
    ])
    def test_usage_errors(self, capfd: pytest.CaptureFixture, args: list, needle: str) -> None:
        """Usage errors: exit 1, one line on stderr."""
        code, _, err = run(capfd, *args)
        assert code == 1 and err.startswith("xpu-cdi-hook: ") and needle in err and err.count("\n") == 1

    def test_install_launcher_help_writes_nothing(self, capfd: pytest.CaptureFixture, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        """install-launcher --help prints the usage instead of writing a file named '--help'."""
        monkeypatch.chdir(tmp_path)
        code, out, _ = run(capfd, "install-launcher", "--help")
        assert code == 0 and "usage: xpu-cdi-hook" in out and list(tmp_path.iterdir()) == []

    def test_unknown_subcommand_is_a_warning(self, capfd: pytest.CaptureFixture, tmp_path: Path) -> None:
        """A subcommand from a newer spec: warning, exit 0 (the container still starts), logged."""
        log = tmp_path / "log"
        code, _, err = run(capfd, "--log", str(log), "frobnicate", "--x")
        assert code == 0 and "warning: unknown subcommand 'frobnicate' ignored" in err
        assert "unknown subcommand 'frobnicate'" in log.read_text()

    def test_equals_form_and_order(self) -> None:
        """--opt=value and options after the subcommand work."""
        opts, rest = main._split(["prestart", "--spec-dir=/a", "--spec-dir", "/b", "--log=/l"], main._GLOBAL)
        assert opts == {"spec_dir": ["/a", "/b"], "log": ["/l"], "config": []} and rest == ["prestart"]

    def test_tool_args(self) -> None:
        """update-ldcache collects every --folder."""
        assert main.parse_tool_args("update-ldcache", ["--folder", "/a", "--folder=/b"]) == {"folder": ["/a", "/b"]}


class TestSpecDirs:
    def test_flag_wins(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """--spec-dir beats the environment."""
        monkeypatch.setenv("XPU_CDI_SPEC_DIRS", "/env")
        assert main.spec_dirs({"spec_dir": ["/flag"], "log": []}) == ["/flag"]

    def test_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """XPU_CDI_SPEC_DIRS of the hook's own env, colon-separated, empty parts dropped."""
        monkeypatch.setenv("XPU_CDI_SPEC_DIRS", "/a::/b:")
        assert main.spec_dirs({"spec_dir": [], "log": []}) == ["/a", "/b"]

    def test_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Neither: /etc/cdi then /var/run/cdi, as the registry's defaults."""
        monkeypatch.delenv("XPU_CDI_SPEC_DIRS", raising=False)
        assert main.spec_dirs({"spec_dir": [], "log": []}) == list(registry.DEFAULT_DIRS)
        assert main.DEFAULT_DIRS == registry.DEFAULT_DIRS
        assert select.ANNOTATION_PREFIX == names.ANNOTATION_PREFIX


class TestReporting:
    def test_internal_error_is_one_line(self, capfd: pytest.CaptureFixture, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
        """A bug still gives runc one line; the traceback goes to the log."""
        from xpu_cdi.hook import state

        def boom(fd: int = 0) -> None:
            raise ZeroDivisionError("boom")

        monkeypatch.setattr(state, "load", boom)
        log = tmp_path / "log"
        code, _, err = run(capfd, "prestart", "--log", str(log))
        assert code == 1 and err == "xpu-cdi-hook: internal error: ZeroDivisionError: boom\n"
        assert "Traceback" in log.read_text() and "boom" in log.read_text()

    def test_unwritable_log(self, capfd: pytest.CaptureFixture) -> None:
        """A log that cannot be written is a warning, not a failure of the hook."""
        code, _, err = run(capfd, "--log", "/nonexistent/dir/log", "frobnicate")
        assert code == 0 and "cannot write log '/nonexistent/dir/log'" in err

    def test_xpu_cdi_hook_runs_the_same_code(self) -> None:
        """`xpu-cdi hook` is the same entry point."""
        r = subprocess.run([str(BIN / "xpu-cdi"), "hook", "frobnicate"], capture_output=True, text=True)
        assert r.returncode == 0 and "unknown subcommand 'frobnicate'" in r.stderr


class TestLauncher:
    def test_install_and_run(self, tmp_path: Path) -> None:
        """install-launcher puts the compiled front end at PATH and the Python
        launcher (the real interpreter with -IS) at PATH.py; --help, which the
        front end hands to Python, works through the pair."""
        path = tmp_path / "xpu-cdi-hook"
        assert "wrote" in launcher.install(str(path), fast_binary("xpu-cdi-hook"))
        assert path.read_bytes()[:4] == b"\x7fELF"
        text = Path(f"{path}.py").read_text()
        assert text.startswith(f"#!{os.path.realpath(sys.executable)} -IS\n")
        assert os.stat(path).st_mode & 0o777 == 0o755 and os.stat(f"{path}.py").st_mode & 0o777 == 0o755
        r = subprocess.run([str(path), "--help"], capture_output=True, text=True, env={})
        assert r.returncode == 0 and "usage: xpu-cdi-hook" in r.stdout

    def test_binary_without_the_python_beside_it(self, tmp_path: Path) -> None:
        """The binary needs nothing beside it: with PATH.py gone it still answers."""
        path = tmp_path / "xpu-cdi-hook"
        launcher.install(str(path), fast_binary("xpu-cdi-hook"))
        os.unlink(f"{path}.py")
        r = subprocess.run([str(path), "--help"], capture_output=True, text=True, env={})
        assert r.returncode == 0 and r.stdout.startswith("usage: xpu-cdi-hook") and r.stderr == ""

    def test_ignores_python_env(self, tmp_path: Path) -> None:
        """PYTHONPATH/PYTHONSTARTUP in the hook's env cannot inject code (-I)."""
        path = tmp_path / "xpu-cdi-hook"
        launcher.install(str(path), fast_binary("xpu-cdi-hook"))
        evil = tmp_path / "evil"
        evil.mkdir()
        (evil / "xpu_cdi").mkdir()
        (evil / "xpu_cdi" / "__init__.py").write_text("raise SystemExit('hijacked')\n")
        r = subprocess.run([str(path), "--help"], capture_output=True, text=True,
                           env={"PYTHONPATH": str(evil), "PYTHONSTARTUP": str(evil / "x.py")})
        assert r.returncode == 0 and "hijacked" not in r.stderr
