"""The Ascend vNPU templates (profiles/partitions/ascend.yaml): valid data, consistent with their chips,
and chosen by the chip name npu-smi prints."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
import yaml

from xpu_cdi import partitions
from xpu_cdi.errors import ProfileError


@pytest.fixture(scope="module")
def ascend() -> partitions.Partitions:
    p = partitions.builtin("ascend")
    assert p is not None and p.tool == "npu-smi"
    return p


def test_310p_has_the_vendors_seven_templates(ascend: partitions.Partitions) -> None:
    chip = ascend.chip("310P3")
    assert chip is not None and chip.model == "310P"
    assert set(chip.templates) == {"vir01", "vir02", "vir02_1c", "vir04", "vir04_3c", "vir04_3c_ndvpp",
                                   "vir04_4c_dvpp"}


def test_310p_memory_follows_the_cores(ascend: partitions.Partitions) -> None:
    """Every 310P template's memory share is its share of the AI cores; the dvpp one has all the media,
    the ndvpp one none; the name's digits are the cores (and the AI CPUs before c)."""
    chip = ascend.chip("310P")
    assert chip is not None
    for t in chip.templates.values():
        assert t.memory_share == Fraction(t.aicore, chip.aicore), t
        assert int(t.name[3:5]) == t.aicore, t
        if "_" in t.name and t.name.split("_")[1].endswith("c"):
            assert int(t.name.split("_")[1][:-1]) == t.aicpu, t
    assert chip.templates["vir04_4c_dvpp"].media == chip.media
    assert not any(chip.templates["vir04_3c_ndvpp"].media.values())
    assert chip.memory_of(chip.templates["vir02"], 24576) == 6144


def test_910_family_names_say_cores_cpus_memory(ascend: partitions.Partitions) -> None:
    """vir<cores>_<cpus>c_<GB>g: the numbers in the name are the template's."""
    seen = 0
    for chip in ascend.chips:
        for t in chip.templates.values():
            parts = t.name[3:].split("_")
            if len(parts) >= 3 and parts[2].endswith("g"):
                seen += 1
                assert (int(parts[0]), int(parts[1][:-1]), int(parts[2][:-1]) * 1024) == \
                    (t.aicore, t.aicpu, t.memory_mib), (chip.model, t)
    assert seen >= 10


@pytest.mark.parametrize("name, model", [
    ("310P3", "310P"), ("310P", "310P"), ("910B4", "910B4"), ("910B4-1", "910B4-1"), ("910B2C", "910B1/910B2/910B2C"),
    ("910B3", "910B3"), ("910A", "910"), ("910", "910"), ("310B1", None), ("950", None),
])
def test_chip_chosen_by_its_name(ascend: partitions.Partitions, name: str, model: object) -> None:
    chip = ascend.chip(name)
    assert (chip.model if chip else None) == model


def test_vnpu_id_range(ascend: partitions.Partitions) -> None:
    """310P: [phy*16 + 100, phy*16 + 107]; the training chips 16 ids."""
    chip = ascend.chip("310P3")
    assert chip is not None and list(chip.ids_of(2)) == list(range(132, 140))
    b = ascend.chip("910B3")
    assert b is not None and len(b.ids_of(0)) == 16


def shipped() -> dict:
    from importlib import resources

    return yaml.safe_load(resources.files("xpu_cdi.profiles").joinpath("partitions", "ascend.yaml").read_text())


def test_shipped_file_is_valid() -> None:
    """builtin() trusts the shipped file: this is where it is checked against the schema."""
    assert partitions.parse(shipped(), "ascend.yaml") == partitions.builtin("ascend")


def test_builtin_json_is_the_yaml_files() -> None:
    """profiles/partitions/builtin.json (what builtin() reads, no YAML parser in the daemons) holds
    each YAML file's document, as scripts/render-profiles.py writes it (edit the YAML, then run it)."""
    import json

    with open(partitions.BUILTIN_JSON, encoding="utf-8") as f:
        text = f.read()
    assert text == partitions.render_builtin_json(), "partitions/builtin.json is stale: run scripts/render-profiles.py"
    assert json.loads(text) == {"ascend": shipped()}
    assert partitions.builtin_names() == ["ascend"] and partitions.builtin("kunlunxin") is None


def test_builtin_json_is_read_once_for_every_profile() -> None:
    """The daemons ask builtin() for each profile at every spec change: the file is parsed once."""
    from xpu_cdi import profiles

    partitions.builtin.cache_clear()
    profiles.documents.cache_clear()
    for name in ("ascend", "kunlunxin", "cambricon", "ascend"):
        partitions.builtin(name)
    assert profiles.documents.cache_info().misses == 1


def test_template_larger_than_its_chip_is_refused() -> None:
    data = shipped()
    bad = copy.deepcopy(data)
    bad["chips"][0]["templates"][0]["aicore"] = 9
    with pytest.raises(ProfileError, match=r"^x: chip 310P: template vir01 takes more aicore than the chip has$"):
        partitions.parse(bad, "x")
    bad = copy.deepcopy(data)
    bad["chips"][0]["templates"][0]["memory"] = {"share": "1/8", "mib": 3}
    with pytest.raises(ProfileError, match=r"^x: at chips\[0\]\.templates\[0\]\.memory: .*too many properties"):
        partitions.parse(bad, "x")
