"""The front end's YAML loader (fast/fyaml.c: libyaml parses) as a black box.

Through ``xpu-cdi-fast-test json yaml|cdiyaml|yamlfile`` (fjson_test.c):
the tree each document gives, written as compact JSON, or the one-line
refusal.  The typing rules are the CDI Go library's (sigs.k8s.io/yaml:
go-yaml v2, then JSON, into typed structs), written out here case by case.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, List

import pytest
import yaml

from test_fjson import run


@pytest.fixture(scope="module")
def fast(fast_bin: Path) -> Path:
    exe = fast_bin / "xpu-cdi-fast-test"
    assert exe.exists(), f"{exe} is not built (build.py --out DIR xpu-cdi-fast-test; XPU_CDI_FAST_BIN=DIR)"
    return exe


def load(exe: Path, docs: List[str], mode: str = "yaml") -> List[Any]:
    """Each document's tree, or its error line as a str starting "ERR "."""
    out = []
    for line in run(exe, mode, [d.encode() for d in docs]):
        out.append(json.loads(line[3:]) if line.startswith("OK ") else line)
    return out


# -- typing ---------------------------------------------------------------------

SCALARS = [  # plain scalar, what go-yaml v2 makes of it (as JSON)
    ("1", 1), ("-7", -7), ("+5", 5), ("0x1F", 31), ("0o17", 15), ("0777", 511), ("0b101", 5), ("-0b101", -5),
    ("1_000", 1000), ("08", 8), ("1.5", 1.5), ("1.0", 1), (".5", 0.5), ("1e3", 1000), ("-1.5e-3", -0.0015),
    ("18446744073709551615", 18446744073709551615), ("1e400", "1e400"), ("0x", "0x"),
    ("true", True), ("False", False), ("yes", True), ("No", False), ("on", True), ("OFF", False), ("y", True),
    ("N", False), ("~", None), ("null", None), ("NULL", None), ("", None), ("2001-12-14", "2001-12-14"),
    ("1:20", "1:20"), ("yess", "yess"), ("0.1.2", "0.1.2"), ("-.NaN", "-.NaN"), ("_1", "_1"), ("a b", "a b"),
]


def test_plain_scalars_typed_as_go_yaml_v2(fast: Path) -> None:
    docs = [f"v: {text}\n" for text, _ in SCALARS]
    assert load(fast, docs) == [{"v": want} for _, want in SCALARS]


def test_quoted_and_block_scalars_are_strings(fast: Path) -> None:
    docs = ["v: '1'", 'v: "yes"', "v: |\n  1\n", "v: >-\n  true\n", "v: !!str 5", "v: ! 5", 'v: "a\\0b"']
    assert load(fast, docs) == [{"v": "1"}, {"v": "yes"}, {"v": "1\n"}, {"v": "true"}, {"v": "5"}, {"v": "5"},
                                {"v": "a\u0000b"}]


def test_keys_become_strings(fast: Path) -> None:
    assert load(fast, ["1: a\ntrue: b\nno: c\n0x10: d\n1.5: e\n'x': f\n"]) == [
        {"1": "a", "true": "b", "false": "c", "16": "d", "1.5": "e", "x": "f"}]


def test_cdi_spec_fields_typed_as_the_go_structs(fast: Path) -> None:
    """String fields take a scalar's text (as sigs.k8s.io/yaml coerces for a
    string target); the number and boolean fields keep their type."""
    doc = """\
cdiVersion: 0.6
kind: example.com/npu
annotations: {a: on, b: 1.0, c: 1e8, d: 100000000}
devices:
- name: 0
  containerEdits:
    env: [A=1, yes, 7, 0.1, 1e7]
    deviceNodes:
    - {path: /dev/npu0, major: 0x10, minor: 0, fileMode: 0660, uid: 1000, gid: 0, type: c}
    additionalGids: [5, 0o7]
    hooks:
    - {hookName: createContainer, path: /bin/h, timeout: 5, args: [h, 1]}
"""
    [tree] = load(fast, [doc], "cdiyaml")
    assert tree == {
        "cdiVersion": "0.6", "kind": "example.com/npu",
        "annotations": {"a": "true", "b": "1", "c": "1e+08", "d": "100000000"},
        "devices": [{"name": "0", "containerEdits": {
            "env": ["A=1", "true", "7", "0.1", "1e+07"],
            "deviceNodes": [{"path": "/dev/npu0", "major": 16, "minor": 0, "fileMode": 432, "uid": 1000, "gid": 0,
                             "type": "c"}],
            "additionalGids": [5, 7],
            "hooks": [{"hookName": "createContainer", "path": "/bin/h", "timeout": 5, "args": ["h", "1"]}]}}]}
    # the same document without FY_CDI_SPEC: plain typing everywhere
    [plain] = load(fast, [doc])
    assert plain["cdiVersion"] == 0.6 and plain["devices"][0]["name"] == 0


def test_spec_written_by_another_tool(fast: Path) -> None:
    """A spec as Go's yaml.Marshal writes it (sigs.k8s.io/yaml: keys sorted, strings
    bare unless they would read as something else, 2-space sequences), read into
    the same tree as its JSON form."""
    text = """\
cdiVersion: 0.6.0
containerEdits:
  env:
  - VENDOR_VISIBLE=all
  mounts:
  - containerPath: /usr/lib/vendor
    hostPath: /opt/vendor/lib
    options:
    - ro
    - nosuid
    - bind
devices:
- containerEdits:
    deviceNodes:
    - path: /dev/accel0
      permissions: rw
  name: "0"
- containerEdits:
    deviceNodes:
    - path: /dev/accel1
  name: "1"
kind: vendor.example/accel
"""
    want = {"cdiVersion": "0.6.0", "containerEdits": {
        "env": ["VENDOR_VISIBLE=all"],
        "mounts": [{"containerPath": "/usr/lib/vendor", "hostPath": "/opt/vendor/lib",
                    "options": ["ro", "nosuid", "bind"]}]},
        "devices": [{"containerEdits": {"deviceNodes": [{"path": "/dev/accel0", "permissions": "rw"}]}, "name": "0"},
                    {"containerEdits": {"deviceNodes": [{"path": "/dev/accel1"}]}, "name": "1"}],
        "kind": "vendor.example/accel"}
    assert load(fast, [text], "cdiyaml") == [want]
    assert yaml.safe_load(text) == want
    # PyYAML's safe_dump (what `generate --format yaml` writes), anchors and all
    shared = ["ro", "bind"]
    spec = {"cdiVersion": "0.6.0", "kind": "a.b/c", "devices": [
        {"name": str(i), "containerEdits": {"mounts": [{"hostPath": "/h", "containerPath": "/c", "options": shared}]}}
        for i in range(3)]}
    dumped = yaml.safe_dump(spec, sort_keys=False)
    assert "&id001" in dumped  # the shared list is an anchor and two aliases
    assert load(fast, [dumped], "cdiyaml") == [spec]


# -- refusals ------------------------------------------------------------------

REFUSED = [
    ("a: 1\na: 2\n", 'duplicate key "a" at line 2, column 1'),
    ("1: a\n'1': b\n", 'duplicate key "1" at line 2, column 1'),
    ("".join(f"k{i % 40}: {i}\n" for i in range(50)), 'duplicate key "k0" at line 1, column 1'),
    ("<<: {a: 1}\n", "a YAML merge key (<<): write the merged members out at line 1, column 1"),
    ("a: !!binary aGk=\n", "YAML tag tag:yaml.org,2002:binary, which a CDI spec or config file has no use for"
                           " at line 1, column 4"),
    ("a: !vendor x\n", "YAML tag !vendor, which a CDI spec or config file has no use for at line 1, column 4"),
    ("a: !!set {x}\n", "YAML tag tag:yaml.org,2002:set, which a CDI spec or config file has no use for"
                       " at line 1, column 4"),
    ("a: !!int x\n", "a value that is not what its tag tag:yaml.org,2002:int says at line 1, column 4"),
    ("a: .inf\n", "an infinite or NaN number, which JSON cannot hold at line 1, column 4"),
    ("a: [.NaN]\n", "an infinite or NaN number, which JSON cannot hold at line 1, column 5"),
    ("a: 1\n---\nb: 2\n", "a second YAML document (a spec or config file is one document) at line 2, column 1"),
    ("a: *x\n", "alias *x names no complete anchor (undefined, or used inside itself) at line 1, column 4"),
    ("a: &x [1, *x]\n", "alias *x names no complete anchor (undefined, or used inside itself) at line 1, column 11"),
    ("? [1]\n: x\n", "a mapping or sequence (or an alias) as a mapping key at line 1, column 3"),
    ("~: x\n", "a null mapping key at line 1, column 1"),
    ("18446744073709551615: x\n", "a mapping key beyond the signed 64-bit range at line 1, column 1"),
    ("[" * 101, "nested deeper than 100 levels at line 1, column 101"),
    ("a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 45 + "*a" + "]" * 45,
     "aliases nest the document deeper than 100 levels at line 2, column 49"),
    ("a: [\n", "did not find expected node content at line 2, column 1 (while parsing a flow node at line 2)"),
    ("a: b\n\tc: d\n", "found a tab character that violates indentation at line 2, column 1"
                       " (while scanning a plain scalar at line 1)"),
    ("a: '\xed\xa0\x80'\n", None),
    ('a: "\\ud800"\n', "found invalid Unicode character escape code at line 1, column 7"
                       " (while parsing a quoted scalar at line 1)"),
]


@pytest.mark.parametrize("doc, line", REFUSED, ids=[str(i) for i in range(len(REFUSED))])
def test_refused_with_one_line(fast: Path, doc: str, line: str) -> None:
    data = doc.encode("utf-8", "surrogatepass") if "\xed" not in doc else doc.encode("latin-1")
    [got] = run(fast, "yaml", [data])
    assert got.startswith("ERR ") and "\n" not in got, got
    if line is not None:
        assert got == "ERR " + line


def test_billion_laughs_refused_quickly(fast: Path) -> None:
    """Ten levels of ten aliases would expand to 10**10 nodes: refused as soon as the
    expanded size passes FY_MAX_NODES, in milliseconds, before any walk."""
    doc = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
    start = time.monotonic()
    [got] = run(fast, "yaml", [doc.encode()])
    assert got == "ERR aliases expand the document to more than 2000000 nodes at line 7, column 15"
    assert time.monotonic() - start < 2
    # a few levels are fine: aliases share their anchor's node
    small = "a0: &a0 [x, x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, 5))
    [tree] = load(fast, [small])
    assert json.dumps(tree["a4"]).count('"x"') == 32


def test_empty_documents_are_null(fast: Path) -> None:
    assert load(fast, ["", "# a comment only\n", "---\n", "~\n"]) == [None, None, None, None]


# -- xf_yaml_load_file (the node config file) ------------------------------------


def test_load_file(fast: Path, tmp_path: Path) -> None:
    good = tmp_path / "config.yaml"
    good.write_text("accept-env-selection-when-unprivileged: no\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("accept-env-selection-when-unprivileged: [\n")
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 5000 + "\n")
    link = tmp_path / "link.yaml"
    os.symlink(good, link)  # a ConfigMap's files are symlinks
    frames = [str(p).encode() for p in (good, link, tmp_path / "missing.yaml", bad, big, tmp_path)]
    assert run(fast, "yamlfile", frames) == [
        'OK {"accept-env-selection-when-unprivileged":false}',
        'OK {"accept-env-selection-when-unprivileged":false}',
        f"ENOENT {tmp_path}/missing.yaml: cannot open: No such file or directory",
        f"ERR {bad}: not valid YAML: did not find expected node content at line 2, column 1"
        " (while parsing a flow node at line 2)",
        f"ERR {big}: 5004 bytes, more than the 4096 it may have",
        f"ERR {tmp_path}: not a regular file"]
