"""Vendor profiles: data files validated against schemas/profile.schema.json."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from xpu_cdi.errors import ProfileError
from xpu_cdi.generate import profile


class TestBuiltin:
    def test_all_builtin_profiles_load(self) -> None:
        """Every shipped profile validates and has a unique, valid kind."""
        profs = profile.load_all([])
        assert {"kunlunxin", "ascend"} <= set(profs)
        assert profs["kunlunxin"].kind == "kunlunxin.com/xpu"
        assert profs["ascend"].kind == "huawei.com/npu"
        assert len({p.kind for p in profs.values()}) == len(profs)

    def test_builtin_files_pass_the_schema(self) -> None:
        """Built-ins skip the schema check at run time, so the suite checks every file here."""
        from xpu_cdi import schema_files

        texts = profile.builtin_texts()
        assert len(texts) >= 9
        for name, text in texts.items():
            assert schema_files.errors(profile.SCHEMA, yaml.safe_load(text)) == [], name
            assert profile.parse(yaml.safe_load(text), name).name == name

    def test_builtin_json_is_the_yaml_files(self) -> None:
        """profiles/builtin.json (what the built-ins are read from) holds each YAML file's
        document, byte for byte as scripts/render-profiles.py writes it (edit a YAML file, then run it)."""
        import json

        with open(profile.BUILTIN_JSON, encoding="utf-8") as f:
            shipped = f.read()
        assert shipped == profile.render_builtin_json(), "builtin.json is stale: run scripts/render-profiles.py"
        assert json.loads(shipped) == {n: yaml.safe_load(t) for n, t in profile.builtin_texts().items()}
        assert [p.name for p in profile.load_all([]).values()] == profile.builtin_names()

    def test_experimental_profiles_marked(self) -> None:
        """Profiles for the lower-priority vendors say they are experimental."""
        profs = profile.load_all([])
        assert not profs["kunlunxin"].experimental and not profs["ascend"].experimental
        for name in ("cambricon", "enflame", "iluvatar", "hygon", "mthreads", "metax", "gaudi"):
            assert profs[name].experimental, name

    def test_vendor_facts_are_profile_fields(self) -> None:
        """Watch files, modules, PCI classes, companions and ownership come from the profiles, not code."""
        profs = profile.load_all([])
        assert profs["kunlunxin"].watch_files == ("/usr/local/xpu/version", "/proc/xpu/version")
        assert profs["kunlunxin"].modules == ("kunlun", "xpu_driver")
        assert profs["kunlunxin"].pci_classes == ("0x1200", "0x0780")
        assert profs["ascend"].driver_owned_nodes and profs["ascend"].topology_unknown
        assert profs["enflame"].pci_classes == ("0x1200",)  # the default
        [rule] = profs["cambricon"].cards
        assert [c.path for c in rule.companions][:2] == ["/dev/cambricon_ipcm{index}", "/dev/commu{index}"]
        assert profs["gaudi"].cards[0].require_pci_vendor and not profs["gaudi"].cards[1].require_pci_vendor
        assert [m.path for m in profs["cambricon"].mounts] == ["/usr/bin/cnmon"]  # never the host's neuware

    def test_kunlunxin_selects_with_the_vendor_variable_only(self) -> None:
        """CXPU_VISIBLE_DEVICES only: XPU_VISIBLE_DEVICES is the frameworks' in-process variable."""
        assert profile.load_all([])["kunlunxin"].selection.env == ("CXPU_VISIBLE_DEVICES",)
        for prof in profile.load_all([]).values():
            assert "XPU_VISIBLE_DEVICES" not in prof.selection.env, prof.name

    def test_ascend_selection_syntax(self) -> None:
        """The Ascend profile carries the vendor's selection variable and alias prefixes (data, no regex)."""
        sel = profile.load_all([])["ascend"].selection
        assert sel.env == ("ASCEND_VISIBLE_DEVICES",)
        assert "Ascend910-" in sel.alias_prefixes and "npu-" in sel.alias_prefixes

    def test_selection_rules_are_data(self) -> None:
        """Gaudi's words compare without case (its scripts write ALL); Iluvatar names who sends UUIDs."""
        profiles = profile.load_all([])
        assert profiles["gaudi"].selection.ignore_case
        assert "Iluvatar device plugin" in (profiles["iluvatar"].selection.uuids_from or "")


class TestAdminProfiles:
    def test_override_by_name(self, tmp_path: Path) -> None:
        """A file in profiles.d with a built-in's name replaces it (fixing unconfirmed facts)."""
        (tmp_path / "k.yaml").write_text(
            "name: kunlunxin\nvendor: kunlunxin.com\nclass: xpu\n"
            "cards: [{glob: '/dev/kunlun/dev[0-9]*', index: '^/dev/kunlun/dev([0-9]+)$'}]\n")
        prof = profile.load_all([str(tmp_path)])["kunlunxin"]
        assert prof.cards[0].glob == "/dev/kunlun/dev[0-9]*"
        assert prof.source == str(tmp_path / "k.yaml")

    def test_missing_dir_is_fine(self, tmp_path: Path) -> None:
        """A profiles.d that does not exist adds nothing."""
        assert "ascend" in profile.load_all([str(tmp_path / "none")])

    def test_duplicate_kind_rejected(self, tmp_path: Path) -> None:
        """Two profiles claiming one kind would make both specs conflict: refused."""
        (tmp_path / "dup.yaml").write_text(
            "name: other\nvendor: kunlunxin.com\nclass: xpu\ncards: [{glob: /dev/q*, index: '^/dev/q([0-9]+)$'}]\n")
        with pytest.raises(ProfileError, match="both claim kind 'kunlunxin.com/xpu'"):
            profile.load_all([str(tmp_path)])


class TestInvalid:
    @pytest.mark.parametrize("body, message", [
        ("vendor: x.com\nclass: xpu\ncards: []\n", r"at cards: \[\] should be non-empty"),
        ("vendor: X.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a(1)$'}]\n", "at vendor"),
        ("vendor: ab.com\nclass: x.pu\ncards: [{glob: /dev/a*, index: '^a(1)$'}]\n", "at class"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: dev/a*, index: '^a(1)$'}]\n", r"at cards\[0\]\.glob"),
        ("vendor: ab.com\nclass: xpu\ncard: []\n", "'cards' is a required property"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a1$'}]\n", "needs a group"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a(1$'}]\n", "invalid regex"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a(1)$'}]\nenv: [NOEQUALS]\n", r"at env\[0\]"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a(1)$', "
         "companions: [{path: /dev/x, sysfs: ../drm}]}]\n", r"at cards\[0\]\.companions\[0\]"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a(1)$'}]\nmodules: ['two words']\n",
         r"at modules\[0\]"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a(1)$'}]\npci: {classes: ['0x12']}\n",
         r"at pci\.classes\[0\]"),
        ("vendor: ab.com\nclass: xpu\ncards: [{glob: /dev/a*, index: '^a(1)$'}]\nwatch_files: [relative]\n",
         r"at watch_files\[0\]"),
        ("- just\n- a list\n", "expected a mapping"),
        ("vendor: [unclosed\n", "not valid YAML"),
    ])
    def test_one_clear_line(self, tmp_path: Path, body: str, message: str) -> None:
        """Each broken profile gives one line naming the file and what is wrong."""
        p = tmp_path / "bad.yaml"
        p.write_text(body)
        with pytest.raises(ProfileError, match=message) as err:
            profile.load_file(str(p))
        assert str(p) in str(err.value) and "\n" not in str(err.value)

    def test_unknown_profile_name_lists_known(self) -> None:
        """A typo in --profile names the known profiles."""
        with pytest.raises(ProfileError, match="unknown profile 'kunlun'.*ascend.*kunlunxin"):
            profile.select(["kunlun"], [])

    def test_select_by_path(self, tmp_path: Path) -> None:
        """--profile also takes a path to a profile file."""
        p = tmp_path / "mine.yaml"
        p.write_text("vendor: example.com\nclass: acc\ncards: [{glob: /dev/acc*, index: '^/dev/acc([0-9]+)$'}]\n")
        [prof] = profile.select([str(p)], [])
        assert prof.kind == "example.com/acc" and prof.name == "mine"
