"""The daemons' log lines (:mod:`xpu_cdi.log`): a level and a timestamp on every line, klog's
text shape or one JSON object a line, --log-level / -v / --log-format on every daemon."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from xpu_cdi import cli, log

KLOG = re.compile(r"^(?P<level>[DIWE])(?P<mmdd>\d{4}) (?P<time>\d\d:\d\d:\d\d\.\d{6}) (?P<pid>\d+) "
                  r"(?P<logger>[^\]]+)\] (?P<msg>.*)$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def record(level: int, msg: str, created: float = 1796408401.123456) -> logging.LogRecord:
    r = logging.LogRecord("xpu-cdi device-plugin", level, __file__, 1, msg, None, None)
    r.created = created
    return r


def test_text_is_klogs_shape() -> None:
    line = log.formatter("text").format(record(log.WARNING, "kunlunxin.com/xpu=3: Unhealthy: gone"))
    m = KLOG.match(line)
    assert m, line
    assert (m["level"], m["pid"], m["logger"], m["msg"]) == (
        "W", str(os.getpid()), "xpu-cdi device-plugin", "kunlunxin.com/xpu=3: Unhealthy: gone")
    assert m["time"].endswith(".123456") or m["time"].endswith(".123455")  # float seconds: the last digit rounds
    assert [KLOG.match(log.formatter("text").format(record(lv, "x")))["level"]  # type: ignore[index]
            for lv in (log.DEBUG, log.INFO, log.WARNING, log.ERROR)] == ["D", "I", "W", "E"]


def test_json_is_one_object_a_line() -> None:
    line = log.formatter("json").format(record(log.ERROR, 'cannot listen on :1 "quoted"\nsecond line'))
    assert "\n" not in line
    doc = json.loads(line)
    assert sorted(doc) == ["level", "logger", "msg", "ts"]
    assert (doc["level"], doc["logger"], doc["msg"]) == ("error", "xpu-cdi device-plugin",
                                                          'cannot listen on :1 "quoted"\nsecond line')
    assert ISO.match(doc["ts"]) and doc["ts"].startswith("2026-12-04T"), doc["ts"]


def test_unknown_format_refused() -> None:
    with pytest.raises(ValueError, match="log format 'xml' is not one of text, json"):
        log.formatter("xml")


def test_level_drops_lines_below(capsys: pytest.CaptureFixture[str]) -> None:
    say = log.to_stderr("xpu-cdi test-daemon", "warning", "text")
    say("quiet")
    say("loud", log.WARNING)
    say("louder", log.ERROR)
    lines = capsys.readouterr().err.splitlines()
    assert [KLOG.match(ln)["msg"] for ln in lines] == ["loud", "louder"], lines  # type: ignore[index]
    say = log.to_stderr("xpu-cdi test-daemon", "debug", "json")  # built again: one handler, the new format
    say("detail", log.DEBUG)
    assert [json.loads(ln)["msg"] for ln in capsys.readouterr().err.splitlines()] == ["detail"]


def test_into_collects_messages() -> None:
    lines: List[str] = []
    say = log.into(lines)
    say("a")
    say("b", log.WARNING)
    assert lines == ["a", "b"]


@pytest.mark.parametrize("command", ["device-plugin", "dra-driver", "exporter", "watch"])
def test_every_daemon_takes_the_log_options(command: str) -> None:
    from click.testing import CliRunner

    out = CliRunner().invoke(cli.main, [command, "--help"]).output
    assert "--log-level [debug|info|warning|error]" in out and "-v, --verbose" in out, out
    assert "--log-format [text|json]" in out, out


def exporter(tmp_path: Path, *flags: str) -> List[str]:
    """The stderr lines of `xpu-cdi exporter --once` on a host with no spec (a warning) and no kubelet."""
    proc = subprocess.run([sys.executable, "-m", "xpu_cdi.cli", "exporter", "--once", "--profile", "kunlunxin",
                           "--spec-dir", str(tmp_path / "cdi"), "--pod-resources-socket", str(tmp_path / "no.sock"),
                           "--status-file", str(tmp_path / "status.json"), *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.splitlines()


def test_daemon_lines_have_a_level_and_a_time(tmp_path: Path) -> None:
    lines = exporter(tmp_path)
    parsed = [KLOG.match(ln) for ln in lines]
    assert lines and all(parsed), lines
    assert any(m["level"] == "W" and m["msg"].startswith(f"no CDI spec in {tmp_path / 'cdi'} defines cards")
               for m in parsed if m), lines
    assert all(m["logger"] == "xpu-cdi exporter" for m in parsed if m)


def test_daemon_json_and_verbosity(tmp_path: Path) -> None:
    docs = [json.loads(ln) for ln in exporter(tmp_path, "--log-format", "json", "-v")]
    assert {d["level"] for d in docs} >= {"debug", "warning"}, docs
    assert all(ISO.match(d["ts"]) and d["logger"] == "xpu-cdi exporter" for d in docs), docs
    quiet = [json.loads(ln) for ln in exporter(tmp_path, "--log-format", "json", "--log-level", "error")]
    assert quiet == []
