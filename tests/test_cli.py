"""The xpu-cdi command line, driven through click's CliRunner."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import click
import pytest
from click.testing import CliRunner

from support import HANG, fakehost
from xpu_cdi import cli, clikit, errors
from xpu_cdi.generate import options

pytestmark = pytest.mark.privileged
ROOT = Path(__file__).resolve().parents[1]


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


class TestExitCodes:
    """One table of exit codes for every command (errors.EXIT_CODES), the one docs/cli.md shows."""

    def test_docs_table_is_the_code_s(self) -> None:
        text = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
        rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", text, re.M))
        assert {int(code): meaning for code, meaning in rows.items()} == errors.EXIT_CODES

    def test_every_code_a_command_exits_with_is_in_the_table(self) -> None:
        """sys.exit/ctx.exit with a number in src/: each is a code of the table, and none is 2 (click's
        usage error); the named codes too."""
        found = set()
        for path in (ROOT / "src" / "xpu_cdi").rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "exit" and node.args and isinstance(node.args[0], ast.Constant)):
                    found.add((node.args[0].value, f"{path.name}:{node.lineno}"))
        assert found and {code for code, _ in found} <= set(errors.EXIT_CODES), found
        assert errors.USAGE not in {code for code, _ in found}, found
        assert {clikit.PROFILE_FAILED, errors.ERROR_CODES[errors.ProfileError],
                errors.ERROR_CODES[errors.SpecError]} <= set(errors.EXIT_CODES) - {errors.USAGE}

    def test_usage_error_is_2(self, runner: CliRunner) -> None:
        r = runner.invoke(cli.main, ["list", "--no-such-option"])
        assert r.exit_code == errors.USAGE == 2 and "No such option" in r.stderr

    def test_doctor_warnings_are_not_click_s_2(self) -> None:
        from xpu_cdi.doctor import result

        assert result.exit_code([result.warn("x", "found", "fix")]) == errors.WARNINGS != errors.USAGE


class TestOptionsDocumented:
    """docs/cli.md's "Options by command" names every option of every command, and only those."""

    GROUPS = {"host options": ("--profile", "--profiles-dir", "--dev-root", "--driver-root", "--sysfs-root"),
              "logging options": ("--log-level", "-v", "--verbose", "--log-format")}

    @staticmethod
    def in_code() -> dict:
        ctx = click.Context(cli.main, info_name="xpu-cdi")
        found = {}

        def walk(cmd: click.Command, path: List[str]) -> None:
            if isinstance(cmd, click.Group):
                for name in cmd.list_commands(ctx):
                    sub = cmd.get_command(ctx, name)
                    assert sub is not None
                    walk(sub, [*path, name])
            else:
                found[" ".join(path)] = {o for p in cmd.params if isinstance(p, click.Option)
                                         for o in [*p.opts, *p.secondary_opts]}
        walk(cli.main, [])
        return found

    def in_docs(self) -> dict:
        text = (ROOT / "docs" / "cli.md").read_text().split("## Options by command", 1)[1]
        documented = {}
        for command, cell in re.findall(r"^\| `([a-z -]+)` \| (.+) \|$", text, re.M):
            named = set(re.findall(r"`(-[-\w]+)`", cell))
            for group, members in self.GROUPS.items():
                if group in cell:
                    named |= set(members)
            documented[command] = named
        return documented

    def test_both_ways(self) -> None:
        code, docs = self.in_code(), self.in_docs()
        assert set(docs) == set(code), set(docs) ^ set(code)
        for command in code:
            assert docs[command] == code[command], (command, "undocumented:", code[command] - docs[command],
                                                    "not an option:", docs[command] - code[command])

    def test_the_groups_are_said_in_the_text(self) -> None:
        """The groups' members are named in the section's text, as the test expands them."""
        text = (ROOT / "docs" / "cli.md").read_text().split("## Options by command", 1)[1].split("| command |")[0]
        for group, members in self.GROUPS.items():
            said = text.split(f"**{group}** are", 1)[1].split(";", 1)[0].split("(", 1)[0]
            assert set(re.findall(r"`(-[-\w]+)`", said)) == set(members), group

    def test_a_new_option_is_caught(self, monkeypatch: pytest.MonkeyPatch) -> None:
        code = self.in_code()
        code["list"] = code["list"] | {"--new-flag"}
        monkeypatch.setattr(TestOptionsDocumented, "in_code", staticmethod(lambda: code))
        with pytest.raises(AssertionError, match="--new-flag"):
            self.test_both_ways()


class TestVerbosity:
    """-v is klog's verbosity in the forms other device plugins' charts pass (-v=4)."""

    DAEMONS = ("device-plugin", "dra-driver", "exporter", "watch", "labels", "device-plugin-config")

    @pytest.mark.parametrize("args, debug", [(["-v=4"], True), (["-v", "4"], True), (["-v4"], True),
                                             (["--verbose=5"], True), (["-v"], True),
                                             (["-v", "--log-format", "json"], True), (["-v=2"], False),
                                             (["-v", "0"], False), ([], False)])
    @pytest.mark.parametrize("name", DAEMONS)
    def test_forms(self, name: str, args: List[str], debug: bool) -> None:
        """Parsed, not run: 4 and above, or -v alone, is --log-level debug."""
        cmd = cli.main.get_command(click.Context(cli.main), name)
        assert cmd is not None
        ctx = cmd.make_context(name, list(args))
        assert clikit.level_of(ctx.params["log_level"], ctx.params["verbose"]) == ("debug" if debug else "info")

    @pytest.mark.parametrize("args", [["-v=x"], ["-v=-1"], ["-v="], ["-v", "four"], ["--verbose=4.5"]])
    def test_not_a_level_is_a_usage_error(self, runner: CliRunner, args: List[str]) -> None:
        r = runner.invoke(cli.main, ["exporter", *args, "--once"])
        assert r.exit_code == errors.USAGE and "is not a verbosity level" in r.stderr, r.output


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

    def test_list_missing_spec_dir(self, runner: CliRunner, tmp_path: Path) -> None:
        """A --spec-dir that does not exist: one line naming it, non-zero; an empty one lists nothing."""
        r = runner.invoke(cli.main, ["list", "--spec-dir", str(tmp_path), "--spec-dir", "/nonexistent"])
        assert (r.exit_code, r.stdout) == (5, "")
        assert r.stderr == ("xpu-cdi: spec dir '/nonexistent' does not exist: name the directory the specs are "
                            "in, or write them there first (`xpu-cdi generate --spec-dir /nonexistent`)\n")
        r = runner.invoke(cli.main, ["list", "--spec-dir", str(tmp_path)])
        assert (r.exit_code, r.stdout, r.stderr) == (0, "", "")

    def test_list_no_default_spec_dir(self, runner: CliRunner, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
        """The defaults: one of them missing is usual (/var/run/cdi), none of them there is not."""
        here, gone = tmp_path / "etc-cdi", tmp_path / "run-cdi"
        here.mkdir()
        params = cli.main.get_command(click.Context(cli.main), "list").params
        (spec_dirs,) = [p for p in params if p.name == "spec_dirs"]
        monkeypatch.setattr(spec_dirs, "default", (str(here), str(gone)))
        assert runner.invoke(cli.main, ["list"]).exit_code == 0
        here.rmdir()
        r = runner.invoke(cli.main, ["list"])
        assert r.exit_code == 5 and r.stderr == (f"xpu-cdi: no spec dir exists ('{here}', '{gone}'): write the "
                                                 "specs first (`xpu-cdi generate`)\n")

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

    def test_version_is_the_binary_s(self) -> None:
        """The installed hook's version, the package's (build_bin.py passes it in)."""
        from xpu_cdi._version import VERSION

        r = subprocess.run([self.XPU_CDI, "hook", "--version"], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert (r.returncode, r.stdout, r.stderr) == (0, f"xpu-cdi-hook, version {VERSION}\n", "")

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


class TestEnvironment:
    """Every daemon setting also reads XPU_CDI_<LONG_FLAG>, shown in --help; a flag wins over it."""

    DAEMONS = TestVerbosity.DAEMONS
    # per daemon: a setting, a value for its variable, another for its flag, the param and what each gives
    CASES = {"device-plugin": ("--plugin-dir", "/from-env", "/from-flag", "plugin_dir"),
             "dra-driver": ("--run-dir", "/from-env", "/from-flag", "run_dir"),
             "exporter": ("--listen", ":1111", ":2222", "listen"),
             "labels": ("--removal-grace", "7", "9", "removal_grace"),
             "watch": ("--profile", "kunlunxin ascend", "ascend", "profiles"),
             "device-plugin-config": ("--node-label", "example.com/env", "example.com/flag", "node_label")}

    @staticmethod
    def command(name: str) -> click.Command:
        cmd = cli.main.get_command(click.Context(cli.main), name)
        assert cmd is not None
        return cmd

    @pytest.mark.parametrize("name", DAEMONS)
    def test_one_rule_for_every_setting(self, name: str) -> None:
        """XPU_CDI_ and the long flag in capitals, for each option but the ones that say what a run does."""
        for p in self.command(name).params:
            if not isinstance(p, click.Option) or p.hidden:
                continue
            long = next(o for o in p.opts if o.startswith("--"))
            if long in clikit.NOT_FROM_ENV:
                assert not p.envvar, (name, long)
            else:
                assert p.envvar[0] == "XPU_CDI_" + long[2:].upper().replace("-", "_") and p.show_envvar, (name, long)

    @pytest.mark.parametrize("name", DAEMONS)
    def test_shown_in_help(self, runner: CliRunner, name: str) -> None:
        flag = self.CASES[name][0]
        text = " ".join(runner.invoke(cli.main, [name, "--help"]).output.split())
        assert f"env var: {clikit.env_name(flag)}" in text and "env var: XPU_CDI_LOG_LEVEL" in text
        assert "XPU_CDI_PROBE" not in text and "XPU_CDI_ONCE" not in text

    @pytest.mark.parametrize("name", DAEMONS)
    def test_flag_over_env_over_default(self, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        flag, env_value, flag_value, param = self.CASES[name]
        cmd = self.command(name)
        default = cmd.make_context(name, []).params[param]
        monkeypatch.setenv(clikit.env_name(flag), env_value)
        from_env = cmd.make_context(name, []).params[param]
        from_flag = cmd.make_context(name, [flag, flag_value]).params[param]
        as_given = (lambda v: tuple(v.split())) if param == "profiles" else type(default)  # repeatable: by spaces
        assert from_env == as_given(env_value) != default
        assert from_flag == as_given(flag_value) != from_env

    def test_existing_variable_still_read(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """labels --node read NODE_NAME before: still, after XPU_CDI_NODE."""
        cmd = self.command("labels")
        monkeypatch.setenv("NODE_NAME", "n1")
        assert cmd.make_context("labels", []).params["node"] == "n1"
        monkeypatch.setenv("XPU_CDI_NODE", "n2")
        assert cmd.make_context("labels", []).params["node"] == "n2"

    def test_a_mode_is_never_from_env(self, runner: CliRunner, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
        """XPU_CDI_PROBE in the pod's env neither makes the daemon a probe nor is read by it."""
        monkeypatch.setenv("XPU_CDI_PROBE", "1")
        cmd = self.command("device-plugin")
        assert cmd.make_context("device-plugin", []).params["probe"] is False

    def test_device_plugin_flag_over_env_over_file(self, runner: CliRunner, tmp_path: Path) -> None:
        """Run, not parsed: --probe names the status file the three layers settle on."""
        cfg = tmp_path / "dp.yaml"
        cfg.write_text(f"version: v1\nflags:\n  statusFile: {tmp_path}/file.json\n")
        env = {"XPU_CDI_CONFIG": str(cfg)}
        probe = ["device-plugin", "--probe"]

        def said(extra_env: dict, args: List[str]) -> str:
            r = runner.invoke(cli.main, [*probe, *args], env={**env, **extra_env})
            assert r.exit_code == 1, r.output
            return re.search(r"no status file (\S+)", r.stderr).group(1)  # type: ignore[union-attr]

        assert said({}, []) == f"{tmp_path}/file.json"
        assert said({"XPU_CDI_STATUS_FILE": f"{tmp_path}/env.json"}, []) == f"{tmp_path}/env.json"
        assert said({"XPU_CDI_STATUS_FILE": f"{tmp_path}/env.json"},
                    ["--status-file", f"{tmp_path}/flag.json"]) == f"{tmp_path}/flag.json"

    def test_dra_driver_flag_over_env(self, runner: CliRunner, tmp_path: Path) -> None:
        """Run: --probe looks for the status file in the --run-dir the variable or the flag gives."""
        args = ["dra-driver", "--probe", "--pod-uid", "u1", "--node-name", "n"]
        r = runner.invoke(cli.main, args, env={"XPU_CDI_RUN_DIR": str(tmp_path / "env")})
        assert r.exit_code == 1 and f"{tmp_path}/env/dra-driver-u1.json" in r.stderr, r.output
        r = runner.invoke(cli.main, [*args, "--run-dir", str(tmp_path / "flag")],
                          env={"XPU_CDI_RUN_DIR": str(tmp_path / "env")})
        assert r.exit_code == 1 and f"{tmp_path}/flag/dra-driver-u1.json" in r.stderr, r.output

    def test_every_variable_the_docs_name_exists(self) -> None:
        """docs/cli.md and device-plugin.md name only variables a daemon reads (or the hook's)."""
        read = {e for name in self.DAEMONS for p in self.command(name).params for e in p.envvar or ()
                if isinstance(p, click.Option) and isinstance(p.envvar, list)}
        for page in ("cli.md", "device-plugin.md"):
            named = set(re.findall(r"XPU_CDI_[A-Z_]*[A-Z]", (ROOT / "docs" / page).read_text()))
            assert named and named - read <= {"XPU_CDI_SPEC_DIRS"}, (page, named - read)
