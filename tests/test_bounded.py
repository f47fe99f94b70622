"""xpu_cdi.bounded: the one bounded reader of outside input (files, JSON/YAML trees, seconds)."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
import yaml

from xpu_cdi import bounded
from xpu_cdi.cdi import yamlload
from xpu_cdi.errors import InputError, XpuCdiError

HOTPATH = Path(bounded.__file__).resolve().parent / "_native" / "hotpath" / "lib"
#: ~300 bytes of YAML aliases that expand to 9**6 nodes (the issue's 58 MB error line, 257 MiB)
LAUGHS = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['x'] * 9)}]\n"
                 for p, c in zip(["", *"abcde"], "abcdef"))


def deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_the_hook_has_the_same_bounds() -> None:
    """The C hook reads the same specs: depth and node bounds are the same numbers (its headers)."""
    defines = dict(re.findall(r"#define (F[JY]_MAX_\w+) (\d+)", (HOTPATH / "json.h").read_text()
                              + (HOTPATH / "yaml.h").read_text()))
    assert int(defines["FJ_MAX_DEPTH"]) == bounded.MAX_DEPTH
    assert int(defines["FY_MAX_NODES"]) == bounded.MAX_NODES


def test_input_error_is_ours_and_a_value_error() -> None:
    assert issubclass(InputError, XpuCdiError) and issubclass(InputError, ValueError)


def test_read_a_regular_file_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_bytes(b"abc")
    (tmp_path / "link").symlink_to("data/f")  # a ConfigMap's mount is links all the way
    assert bounded.read(str(tmp_path / "link"), 3) == b"abc"


def test_read_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    """A FIFO with no writer blocks a plain open() for ever; this one returns at once."""
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="^a FIFO, not a regular file$"):
        bounded.read(str(tmp_path / "fifo"), 100)


@pytest.mark.parametrize("path,kind", [("/dev/zero", "a character device"), ("/", "a directory")])
def test_read_refuses_what_is_no_regular_file(path: str, kind: str) -> None:
    with pytest.raises(InputError, match=f"^{kind}, not a regular file$"):
        bounded.read(path, 100)


def test_read_refuses_an_oversized_file_unread(tmp_path: Path) -> None:
    with open(tmp_path / "big", "wb") as f:
        f.truncate(1 << 40)  # sparse: reading it would take a long time
    with pytest.raises(InputError, match=r"^1099511627776 bytes is over the 100-byte limit$"):
        bounded.read(str(tmp_path / "big"), 100)


def test_read_absent_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        bounded.read(str(tmp_path / "none"), 100)


def test_json_nested_1000_deep_is_one_line_not_a_recursion_error() -> None:
    """The C parser recurses: 1,000 levels (2 KB) raised RecursionError, which no reader caught."""
    for levels in (bounded.MAX_DEPTH + 1, 1000, 100_000):
        with pytest.raises(InputError, match=f"^nested deeper than {bounded.MAX_DEPTH} levels$"):
            bounded.json_loads(deep_json(levels))
    assert bounded.json_loads(deep_json(bounded.MAX_DEPTH)) == json.loads(deep_json(bounded.MAX_DEPTH))


def test_yaml_aliases_bounded_by_the_callers_limit() -> None:
    assert len(LAUGHS) < 300
    assert yamlload.load(LAUGHS)["f"][0][0][0][0][0] == ["x"] * 9  # a spec's bound: 2,000,000 nodes
    with pytest.raises(yaml.YAMLError, match=r"more than 10000 nodes \(YAML aliases expand at each use\)"):
        yamlload.load(LAUGHS, max_nodes=bounded.MAX_SETTINGS_NODES)


def test_yaml_depth_counts_what_aliases_nest() -> None:
    """An alias used deep inside counts at the depth it lands, not where its anchor was."""
    text = "a: &a " + deep_json(60) + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n"
    with pytest.raises(yaml.YAMLError, match=f"nested deeper than {bounded.MAX_DEPTH} levels"):
        yamlload.load(text)


def test_a_tree_that_contains_itself() -> None:
    loop: list = []
    loop.append(loop)
    with pytest.raises(InputError, match="contains itself"):
        bounded.check_tree(loop)


@pytest.mark.parametrize("value", [0, -1, 0.04, 61, math.nan, math.inf, -math.inf, True, "1", None, [1]])
def test_seconds_refused(value: object) -> None:
    with pytest.raises(InputError, match=r"^must be a number of seconds between 0.05 and 60$"):
        bounded.seconds(value, 0.05, 60)


@pytest.mark.parametrize("value", [0.05, 1, 10.5, 60])
def test_seconds_accepted(value: float) -> None:
    assert bounded.seconds(value, 0.05, 60) == float(value)


def test_short_cuts_a_long_value() -> None:
    assert bounded.short("x" * 1000, 20) == "'" + "x" * 16 + "..."
    assert bounded.short([1]) == "[1]"


# ---- every loader of a file, the same bad inputs ------------------------------------------------

def _registry(path: str) -> None:
    from xpu_cdi.cdi import registry
    from xpu_cdi.errors import SpecError

    reg = registry.load([os.path.dirname(path)])
    assert not reg.devices
    raise SpecError(reg.problems[0])  # the one line it keeps for the file, checked as the others


def _loaders() -> dict:
    from xpu_cdi import nodeconfig
    from xpu_cdi.deviceplugin import config
    from xpu_cdi.errors import ConfigError, ProfileError, SpecError
    from xpu_cdi.generate import check, profile

    return {"node config": (nodeconfig.read, ConfigError), "device-plugin config": (
        lambda p: config.build(p, {}), ConfigError), "profile": (profile.load_file, ProfileError),
        "spec (registry)": (_registry, SpecError), "spec (generate --check)": (check.read, SpecError)}


BAD = {"fifo": None, "deep": "a: " + "[" * 500 + "]" * 500 + "\n",
       "aliases": LAUGHS + "g: [" + ", ".join(["*f"] * 9) + "]\n"}  # 9**7 nodes: past a spec's bound too


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("loader", sorted(_loaders()))
def test_every_loader_refuses_in_one_line(tmp_path: Path, loader: str, bad: str) -> None:
    """A FIFO, nesting past the bound, YAML aliases past the bound: each loader's own error, one line
    naming the file, at once (no hang, no RecursionError, no line of megabytes)."""
    fn, error = _loaders()[loader]
    path = tmp_path / "x.yaml"
    if BAD[bad] is None:
        os.mkfifo(path)
    else:
        path.write_text(BAD[bad])
    with pytest.raises(error) as err:
        fn(str(path))
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 600 and "x.yaml" in msg, msg
    assert {"fifo": "a FIFO, not a regular file", "deep": "nested deeper than 100 levels",
            "aliases": "nodes (YAML aliases expand at each use)"}[bad] in msg, msg
