"""Properties of spec directories (cdi/registry): any files in a spec dir give
a registry (broken files reported, one line each) whose devices always merge."""

from __future__ import annotations

import os
import tempfile
from typing import List, Tuple

from fuzzcontract import FUZZ, file_contents, ours, specs
from hypothesis import example, given
from hypothesis import strategies as st

from xpu_cdi.cdi import registry

FILE_NAMES = ["a.json", "b.yaml", "c.yml", "a.json.xpu-cdi", "b.yaml.xpu-cdi", ".a.json.1.xpu-cdi-tmp", "d.json"]
BILLION_LAUGHS = ("cdiVersion: 0.5.0\nkind: a.com/b\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n"
                  + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
                  + "devices:\n- name: a\n  containerEdits:\n    env: *l8\n").encode()
files = st.lists(st.tuples(st.sampled_from(FILE_NAMES), file_contents(specs)), max_size=4)


def load_dir(entries: List[Tuple[str, bytes]]) -> registry.Registry:
    with tempfile.TemporaryDirectory() as d:
        for name, data in entries:
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        return ours(registry.load, [d, d + "/missing"])


class TestLoad:
    @FUZZ
    @given(entries=files)
    @example(entries=[("a.json", b"[" * 5000)])
    @example(entries=[("b.yaml", b"- " * 3000 + b"x")])
    @example(entries=[("b.yaml", BILLION_LAUGHS)])
    @example(entries=[("b.yaml", b"cdiVersion: 0.5.0\nkind: a.com/b\n"
                                 b"devices: &d [{name: a, containerEdits: {env: *d}}]")])
    @example(entries=[("a.json", b'{"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x",'
                                 b'"containerEdits":{"deviceNodes":[{"path":[1]}],"hooks":5}}]}')])
    def test_any_files_load(self, entries: List[Tuple[str, bytes]]) -> None:
        """Whatever the files hold, load never raises and every device kept has checked edits."""
        reg = load_dir(entries)
        assert isinstance(reg, registry.Registry)
        for line in reg.problems:
            assert isinstance(line, str) and line and "\n" not in line
        for dev in reg.devices.values():
            assert dev.qualified == f"{dev.kind}={dev.name}"
            assert all(isinstance(e, str) for e in dev.edits.get("env") or [])
            assert all(isinstance(n["path"], str) for n in dev.edits.get("deviceNodes") or [])
