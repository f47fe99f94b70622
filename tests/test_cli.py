"""The xpu-cdi command line, driven through click's CliRunner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest
from click.testing import CliRunner

from support import HANG, fakehost
from xpu_cdi import cli, clikit, errors
from xpu_cdi.generate import options

pytestmark = pytest.mark.privileged


def gen(runner: CliRunner, host: fakehost.FakeHost, *args: str):
    return runner.invoke(cli.main, ["generate", "--profiles-dir", "/nonexistent", *host.cli_roots,
                                    "--hook-path", "/usr/bin/xpu-cdi-hook", *args])


class TestGenerate:
    def test_writes_spec_and_index(self, runner: CliRunner, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """Default: <vendor>-<class>.json in --spec-dir, plus the hook index, summary on stdout."""
        r = gen(runner, xpu_host, "--spec-dir", str(tmp_path / "cdi"))
        assert r.exit_code == 0, r.output
        spec = json.loads((tmp_path / "cdi/kunlunxin.com-xpu.json").read_text())
        assert spec["cdiVersion"] == "0.5.0" and len(spec["devices"]) == 9
        assert (tmp_path / "cdi/kunlunxin.com-xpu.json.xpu-cdi").exists()
        assert "kunlunxin.com/xpu: 8 card(s) [0,1,2,3,4,5,6,7], cdiVersion 0.5.0" in r.stdout

    def test_stdout(self, runner: CliRunner, npu_host: fakehost.FakeHost) -> None:
        """--output - prints the spec (json) and nothing else on stdout."""
        r = gen(runner, npu_host, "--output", "-")
        assert r.exit_code == 0
        assert json.loads(r.stdout)["kind"] == "huawei.com/npu"

    def test_yaml_from_extension(self, runner: CliRunner, npu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """--output x.yaml writes YAML."""
        r = gen(runner, npu_host, "--output", str(tmp_path / "x.yaml"))
        assert r.exit_code == 0 and (tmp_path / "x.yaml").read_text().startswith("cdiVersion: 0.5.0")

    def test_no_cards_exit_1(self, runner: CliRunner, host_root: Path) -> None:
        """No cards: exit 1 and one line saying where it looked."""
        r = runner.invoke(cli.main, ["generate", "--dev-root", str(host_root), "--profiles-dir", "/nonexistent",
                                     "--output", "-"])
        assert r.exit_code == 1
        assert r.stderr.startswith("xpu-cdi: no accelerator cards found under") and r.stderr.count("\n") == 1

    def test_bad_profile_exit_3(self, runner: CliRunner, xpu_host: fakehost.FakeHost) -> None:
        """An unknown profile is a profile error: exit 3."""
        r = gen(runner, xpu_host, "--profile", "nosuch", "--output", "-")
        assert r.exit_code == 3 and "unknown profile 'nosuch'" in r.stderr

    def test_unwritable_exit_5(self, runner: CliRunner, xpu_host: fakehost.FakeHost) -> None:
        """A spec that cannot be written is a spec error: exit 5."""
        r = gen(runner, xpu_host, "--output", "/proc/xpu.json")
        assert r.exit_code == 5 and "cannot write spec '/proc/xpu.json'" in r.stderr

    def test_relative_hook_path_refused(self, runner: CliRunner, xpu_host: fakehost.FakeHost) -> None:
        """Runtimes never search PATH for hooks: a relative --hook-path is refused."""
        r = runner.invoke(cli.main, ["generate", *xpu_host.cli_roots, "--hook-path", "xpu-cdi-hook", "-o", "-"])
        assert r.exit_code == 5 and "must be absolute" in r.stderr

    def test_one_output_for_two_kinds_refused(self, runner: CliRunner, host_root: Path) -> None:
        """--output FILE with cards of two kinds asks for --profile or --spec-dir."""
        fakehost.kunlunxin(host_root, 1, sysfs=False)
        fakehost.ascend(host_root, 1, sysfs=False)
        r = runner.invoke(cli.main, ["generate", "--dev-root", str(host_root), "--driver-root", str(host_root),
                                     "-o", str(host_root / "x.json")])
        assert r.exit_code == 5 and "choose one with --profile" in r.stderr

    def test_check(self, runner: CliRunner, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """--check: 1 when missing or stale (with a summary), 0 when up to date; writes nothing."""
        d = str(tmp_path / "cdi")
        r = gen(runner, xpu_host, "--spec-dir", d, "--check")
        assert r.exit_code == 1 and "no spec on disk" in r.stdout and not os.path.exists(d)
        assert gen(runner, xpu_host, "--spec-dir", d).exit_code == 0
        r = gen(runner, xpu_host, "--spec-dir", d, "--check")
        assert r.exit_code == 0 and "up to date" in r.stdout
        xpu_host.remove_card(7)
        r = gen(runner, xpu_host, "--spec-dir", d, "--check")
        assert r.exit_code == 1 and "devices no longer present: 7" in r.stdout

    def test_exit_code_table(self) -> None:
        """The error classes map to their documented codes."""
        assert clikit.exit_code(errors.ProfileError("x")) == 3
        assert clikit.exit_code(errors.SpecError("x")) == 5
        assert clikit.exit_code(errors.DiscoveryError("x")) == 1
        assert clikit.exit_code(errors.SelectionError("x")) == 1


class TestListValidate:
    def test_list_with_conflict_warning(self, runner: CliRunner, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """list prints qualified names; a conflicting copy drops the device with a warning."""
        d = tmp_path / "cdi"
        assert gen(runner, xpu_host, "--spec-dir", str(d), "--no-all-device").exit_code == 0
        r = runner.invoke(cli.main, ["list", "--spec-dir", str(d)])
        assert r.stdout.split() == [f"kunlunxin.com/xpu={i}" for i in range(8)]
        spec = json.loads((d / "kunlunxin.com-xpu.json").read_text())
        spec["devices"] = spec["devices"][:1]
        (d / "copy.json").write_text(json.dumps(spec))
        r = runner.invoke(cli.main, ["list", "--spec-dir", str(d)])
        assert "kunlunxin.com/xpu=0" not in r.stdout.split() and "conflicting device" in r.stderr

    def test_validate(self, runner: CliRunner, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """validate: ok for our output; one line per problem and exit 1 otherwise."""
        out = tmp_path / "k.json"
        assert gen(runner, xpu_host, "--output", str(out)).exit_code == 0
        r = runner.invoke(cli.main, ["validate", str(out)])
        assert r.exit_code == 0 and "ok (kunlunxin.com/xpu, cdiVersion 0.5.0, 9 devices)" in r.stdout
        bad = json.loads(out.read_text())
        bad["cdiVersion"] = "v0.5.0"
        bad["devices"][0]["containerEdits"]["deviceNodes"][0]["hostpath"] = "/x"
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        (tmp_path / "broken.yaml").write_text("kind: [")
        r = runner.invoke(cli.main, ["validate", str(out), str(tmp_path / "bad.json"), str(tmp_path / "broken.yaml")])
        assert r.exit_code == 1
        lines = r.stdout.strip().splitlines()
        assert any("bad.json" in ln and "without the 'v'" in ln for ln in lines)
        assert any("bad.json" in ln and "hostpath" in ln for ln in lines)
        assert any("broken.yaml: cannot parse" in ln for ln in lines)

    def test_validate_missing_file(self, runner: CliRunner, tmp_path: Path) -> None:
        """A missing file is a problem line, exit 1."""
        r = runner.invoke(cli.main, ["validate", str(tmp_path / "none.json")])
        assert r.exit_code == 1 and "cannot read" in r.stdout

    def test_version(self, runner: CliRunner) -> None:
        """--version prints the package version."""
        r = runner.invoke(cli.main, ["--version"])
        assert r.exit_code == 0 and "0.1.0" in r.stdout


class TestHookCommand:
    """`xpu-cdi hook ...` is the compiled hook: exec'd with the arguments as given, its exit code and
    its words are the command's."""

    XPU_CDI = str(Path(sys.executable).parent / "xpu-cdi")

    @pytest.mark.parametrize("args, code, err", [
        ([], 1, "xpu-cdi-hook: no subcommand given: register `xpu-cdi-hook prestart` as the hook (see "
                "`xpu-cdi-hook --help`)\n"),
        (["future-hook", "--x=1"], 0, "xpu-cdi-hook: warning: unknown subcommand 'future-hook' ignored (this is "
                                      "xpu-cdi-hook from an older release?)\n"),
        (["prestart", "--spec-dir"], 1, "xpu-cdi-hook: option --spec-dir needs a value (see `xpu-cdi-hook "
                                        "--help`)\n"),
    ])
    def test_arguments_and_exit_code_passed_through(self, args: List[str], code: int, err: str) -> None:
        r = subprocess.run([self.XPU_CDI, "hook", *args], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert (r.returncode, r.stdout, r.stderr) == (code, "", err)

    def test_help_is_the_binary_s(self) -> None:
        r = subprocess.run([self.XPU_CDI, "hook", "--help"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("usage: xpu-cdi-hook [--spec-dir DIR]...")

    def test_the_process_becomes_the_binary(self) -> None:
        """exec, not a child: while the hook waits for its state on stdin, the command's own pid runs
        the installed binary, and no interpreter is left behind."""
        p = subprocess.Popen([self.XPU_CDI, "hook", "prestart"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + HANG  # bounds a hang: the exec takes CPU
            while os.path.basename(os.readlink(f"/proc/{p.pid}/exe")) != "xpu-cdi-hook":
                assert time.monotonic() < deadline, os.readlink(f"/proc/{p.pid}/exe")
                time.sleep(0.02)
            assert os.readlink(f"/proc/{p.pid}/exe") == options.default_hook_path()
        finally:
            _out, err = p.communicate(b"", timeout=HANG)
        assert p.returncode == 1 and err.startswith(b"xpu-cdi-hook: no OCI state on stdin")

    def test_default_hook_path_is_the_installed_binary(self) -> None:
        """What generate writes by default: the compiled hook make install put beside xpu-cdi."""
        path = options.default_hook_path()
        assert path == str(Path(sys.executable).parent / "xpu-cdi-hook")
        with open(path, "rb") as f:
            assert f.read(4) == b"\x7fELF"

    def test_missing_binary_is_one_line(self) -> None:
        """An installation without the binary (neither beside the scripts nor in the package): one
        line naming the path and the fix, exit 1."""
        code = ("import sys; from xpu_cdi import binaries\n"
                "binaries.scripts_path = binaries.packaged_path = lambda name: '/nonexistent/' + name\n"
                "from xpu_cdi.cli import main; sys.argv = ['xpu-cdi', 'hook', 'prestart']; main()")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stdout) == (1, "")
        assert r.stderr == ("xpu-cdi: cannot run '/nonexistent/xpu-cdi-hook': No such file or directory: reinstall "
                            "xpu-cdi (`make install`, or the distribution package)\n")


SECONDS_FLAGS = [("device-plugin", "--health-interval", "0.05", "60"),
                 ("dra-driver", "--health-interval", "0.05", "60"),
                 ("device-plugin", "--removal-grace", "0", "86400"), ("exporter", "--interval", "1", "3600"),
                 ("labels", "--interval", "0.1", "3600"), ("watch", "--poll-interval", "0.1", "3600")]


@pytest.mark.parametrize("command,name,low,high,value", [
    (*flag, value) for flag in SECONDS_FLAGS for value in ("0", "-1", "nan", "inf", "-inf", "1e999", "ten")
    if value != "0" or flag[2] != "0"])
def test_seconds_flags_range_checked_alike(runner: CliRunner, command: str, name: str, low: str, high: str,
                                           value: str) -> None:
    """--health-interval 0 busy-looped, -1 and nan were taken, inf crashed after serving started: every
    flag of seconds is checked by bounded.seconds, as the config file is (one usage line, exit 2)."""
    r = runner.invoke(cli.main, [command, name, value])
    assert r.exit_code == 2, r.output
    assert f"must be a number of seconds between {low} and {high}" in r.output, r.output
    assert "Traceback" not in r.output
