"""The DRA driver's remediation settings: its config file, --evict and XPU_CDI_EVICT, the flag winning."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner

from xpu_cdi.cli import main
from xpu_cdi.dra import command, config
from xpu_cdi.errors import ConfigError, exit_code
from xpu_cdi.remedy import Policy


def test_config_file(tmp_path: Path) -> None:
    f = tmp_path / "dra-driver.yaml"
    f.write_text("version: v1\nremediation:\n  kunlunxin.com/xpu: {grace: 5, holdDown: 60}\n"
                 "  huawei.com/npu: {evict: false}\n")
    assert config.read_config(str(f), True) == {"kunlunxin.com/xpu": Policy(True, 5.0, 60.0),
                                                "huawei.com/npu": Policy()}
    assert config.read_config(str(tmp_path / "absent.yaml"), False) == {}
    f.write_text("")
    assert config.read_config(str(f), True) == {}


@pytest.mark.parametrize("text, says", [
    ("- a\n", "expected a mapping"),
    ("version: v2\n", "version 'v2' is not v1"),
    ("remediaton: {}\n", "unknown key 'remediaton' (known: version, remediation)"),
    ("remediation: {kunlunxin.com/xpu: {grace: -1}}\n",
     "remediation.kunlunxin.com/xpu: grace must be a number of seconds between 0 and 86400"),
    ("remediation: [kunlunxin.com/xpu]\n", "remediation: must be a mapping of CDI kind"),
    ("remediation: {a: [\n", "not valid YAML"),
])
def test_config_file_refused_with_one_line(tmp_path: Path, text: str, says: str) -> None:
    f = tmp_path / "dra-driver.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        config.read_config(str(f), True)
    assert says in str(err.value) and str(f) in str(err.value) and "\n" not in str(err.value)


def test_config_file_named_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist: create it or drop --config"):
        config.read_config(str(tmp_path / "absent.yaml"), True)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> List[config.Settings]:
    """The settings the command built, caught at --probe (which then answers ready)."""
    got: List[config.Settings] = []

    def probe(settings: config.Settings) -> Any:
        got.append(settings)
        return True, "caught"

    monkeypatch.setattr(command, "probe", probe)
    return got


def run(args: List[str], env: Dict[str, str]) -> Any:
    return CliRunner().invoke(main, ["dra-driver", "--probe", "--pod-uid", "p", "--node-name", "n1", *args], env=env)


def test_flag_env_and_file_merge(tmp_path: Path, seen: List[config.Settings]) -> None:
    f = tmp_path / "dra-driver.yaml"
    f.write_text("remediation: {kunlunxin.com/xpu: {grace: 5}, huawei.com/npu: {}}\n")
    res = run(["--config", str(f), "--evict", "huawei.com/npu:grace=1,hold-down=2"], {})
    assert res.exit_code == 0, res.output
    assert seen[-1].remedy == {"kunlunxin.com/xpu": Policy(True, 5.0, 300.0), "huawei.com/npu": Policy(True, 1.0, 2.0)}
    res = run([], {"XPU_CDI_EVICT": "a.com/x b.com/y:grace=0", "XPU_CDI_CONFIG": str(f)})
    assert res.exit_code == 0, res.output
    assert seen[-1].remedy == {"kunlunxin.com/xpu": Policy(True, 5.0, 300.0), "huawei.com/npu": Policy(True),
                               "a.com/x": Policy(True), "b.com/y": Policy(True, 0.0, 300.0)}
    assert seen[-1].policy("c.com/z") == Policy()


def test_bad_flag_is_one_line_and_the_config_error_code(seen: List[config.Settings]) -> None:
    res = run(["--config", "/nonexistent/dra.yaml"], {})
    assert res.exit_code == exit_code(ConfigError("x")) and "does not exist" in res.output
    res = run(["--evict", "kunlunxin.com/xpu:grace=soon"], {})
    assert res.exit_code == exit_code(ConfigError("x")), res.output
    assert "--evict 'kunlunxin.com/xpu:grace=soon': grace must be a number of seconds" in res.output
    assert seen == []
