"""Properties of vendor profile files (generate/profile): any document or file
gives a Profile or a ProfileError naming the file."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import yaml
from fuzzcontract import FUZZ, file_contents, json_values, mutated, ours
from hypothesis import example, given
from hypothesis import strategies as st
from test_registry_properties import BILLION_LAUGHS

from xpu_cdi.errors import ProfileError
from xpu_cdi.generate import profile
from xpu_cdi.model import Profile

BUILTIN = {name: yaml.safe_load(text) for name, text in profile.builtin_texts().items()}
profiles = st.sampled_from(sorted(BUILTIN)).map(BUILTIN.__getitem__).flatmap(mutated)


class TestParse:
    @FUZZ
    @given(data=st.one_of(profiles, json_values))
    @example(data=dict(BUILTIN["ascend"], selection={"env": ["X"], "aliases": "a-string"}))
    @example(data=dict(BUILTIN["ascend"], selection={"env": ["X"], "aliases": ["ends-in-digit-1"]}))
    @example(data=dict(BUILTIN["kunlunxin"], cards=[{"glob": "/dev/x*", "index": "(" * 400}]))
    def test_any_document(self, data: Any) -> None:
        """parse() gives a Profile whose kind is valid, or a ProfileError naming the source."""
        got = ours(profile.parse, data, "/etc/xpu-cdi/profiles.d/site.yaml")
        if isinstance(got, ProfileError):
            assert "site.yaml" in str(got)
        else:
            assert isinstance(got, Profile) and got.cards and "/" in got.kind

    @FUZZ
    @given(name=st.sampled_from(sorted(BUILTIN)))
    def test_builtin_profiles_pass_the_schema(self, name: str) -> None:
        """The shipped profiles (trusted at run time) also pass the untrusted path."""
        assert isinstance(profile.parse(BUILTIN[name], name), Profile)


class TestLoadFile:
    @FUZZ
    @given(data=file_contents(profiles))
    @example(data=b"vendor: a.com\nclass: \xff\xfe\n")
    @example(data=b"\xff\xfe\x00\x00")
    @example(data=BILLION_LAUGHS)
    @example(data=b"&a [*a]")
    def test_any_file(self, data: bytes) -> None:
        """load_file() on any bytes gives a Profile or a one-line ProfileError naming the file."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "site.yaml")
            with open(path, "wb") as f:
                f.write(data)
            got = ours(profile.load_file, path)
            assert isinstance(got, Profile) or "site.yaml" in str(got)
