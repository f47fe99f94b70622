"""Load vendor profiles (YAML data, not code) and validate them.

Built-in profiles ship in ``xpu_cdi/profiles/``; an admin may drop more in
``/etc/xpu-cdi/profiles.d/*.yaml``.  A file there with the same ``name`` as
a built-in one replaces it, which is how unconfirmed vendor facts (PCI ids,
paths) are corrected on a site without a new release.

The built-in YAML files are the source; ``profiles/builtin.json`` holds their
parsed documents (``scripts/render-profiles.py`` writes it, a test compares), so
that a command reading only built-ins imports no YAML parser (PyYAML's import and
the nine parses were a quarter of ``generate``'s instructions).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .. import profiles as _builtin_package
from .. import schema_files
from ..errors import ProfileError
from ..model import (DEFAULT_TOOL_UNITS, IDENTITY_FIELDS, READING_UNITS, CardModel, CardRule, Companion,
                     DomainRule, MetricFile, MetricSource, MountRule, NodeRule, Profile, Selection, Symlink)

DEFAULT_PROFILE_DIRS = ("/etc/xpu-cdi/profiles.d",)
BUILTIN_DIR = _builtin_package.DIR
BUILTIN_JSON = os.path.join(BUILTIN_DIR, "builtin.json")  # the built-in YAML files' documents, by name
SCHEMA = "profile.schema.json"
MAX_PROFILE_BYTES = 1 << 20  # a profile is a few KiB


def parse(data: Any, source: str, trusted: bool = False) -> Profile:
    """Validate one profile document and turn it into a :class:`Profile`.

    Args:
        data: the parsed YAML document.
        source: where it came from, for messages.
        trusted: skip the JSON-schema check and the compile of the index
            regexes (built-in profiles: the test suite validates them, and
            importing jsonschema costs ~80 ms of every `generate`).

    Raises:
        ProfileError: the document violates ``schemas/profile.schema.json``
            or one of its regexes does not compile.
    """
    if not isinstance(data, dict):
        raise ProfileError(f"profile {source!r}: expected a mapping at the top, got {type(data).__name__}")
    try:
        problems = [] if trusted else schema_files.errors(SCHEMA, data)
    except RecursionError:  # jsonschema descends recursively; no real profile nests this deep
        problems = ["nested too deeply to check"]
    if problems:
        raise ProfileError(f"profile {source!r}: {'; '.join(problems)}")
    name = data.get("name") or os.path.splitext(os.path.basename(source))[0]
    cards = []
    for i, c in enumerate(data["cards"]):
        if not trusted:  # built-ins: test_builtin_files_pass_the_schema compiles them (~0.5 ms each here)
            _check_index_regex(c["index"], f"profile {source!r}: cards[{i}].index")
        cards.append(CardRule(glob=c["glob"], index_regex=c["index"],
                              container_path=c.get("container_path"),
                              index_base=c.get("index_base", 0),
                              companions=tuple(_companion(e) for e in c.get("companions", [])),
                              require_pci_vendor=bool(c.get("require_pci_vendor", False))))
    sel = data.get("selection", {})
    return Profile(
        name=name,
        vendor=data["vendor"],
        device_class=data["class"],
        source=source,
        description=data.get("description", ""),
        experimental=bool(data.get("experimental", False)),
        cards=tuple(cards),
        control_nodes=tuple(_node_rule(n) for n in data.get("control_nodes", [])),
        mounts=tuple(_mount_rule(m) for m in data.get("mounts", [])),
        library_dirs=tuple(data.get("library_dirs", [])),
        env=tuple(data.get("env", [])),
        symlinks=tuple(Symlink(s["target"], s["link"]) for s in data.get("symlinks", [])),
        selection=Selection(env=tuple(sel.get("env", ())),
                            alias_prefixes=tuple(sel.get("aliases", ())),
                            none_values=tuple(sel.get("none", ("", "void", "none"))),
                            all_words=tuple(sel.get("all", ("all",))),
                            ignore_case=bool(sel.get("ignore_case", False)),
                            uuids_from=sel.get("uuids_from")),
        pci_vendor=data.get("pci", {}).get("vendor"),
        pci_devices=tuple(data.get("pci", {}).get("devices", ())),
        pci_classes=tuple(data.get("pci", {}).get("classes", ("0x1200",))),
        watch_files=tuple(data.get("watch_files", ())),
        modules=tuple(data.get("modules", ())),
        health_state_file=(data.get("health_state") or {}).get("file", ""),
        health_running=tuple(v.upper() for v in (data.get("health_state") or {}).get("running", ())),
        driver_owned_nodes=bool(data.get("driver_owned_nodes", False)),
        topology_unknown=data.get("topology_unknown", ""),
        metrics=tuple(_metric_source(m, f"profile {source!r}: metrics[{i}]")
                      for i, m in enumerate(data.get("metrics", []))),
        models=tuple(CardModel(dev.lower(), m["name"], m.get("memory", ""), m.get("resource", ""))
                     for dev, m in ((data.get("dra") or {}).get("models") or {}).items()),
        driver_version_file=(data.get("dra") or {}).get("driver_version_file", ""),
        uuid_file=(data.get("dra") or {}).get("uuid_file", ""),
        device_ip_file=(data.get("interconnect") or {}).get("device_ip_file", ""),
        domains=tuple(DomainRule(d["model"], int(d["size"]), tuple(int(n) for n in d["servers"]))
                      for d in (data.get("interconnect") or {}).get("domains") or ()),
    )


def _check_index_regex(pattern: str, where: str) -> None:
    try:
        rx = re.compile(pattern)
    except re.error as err:
        raise ProfileError(f"{where}: invalid regex {pattern!r}: {err}") from err
    if rx.groups < 1:
        raise ProfileError(f"{where}: regex {pattern!r} needs a group that captures the index")


def _metric_source(entry: Dict[str, Any], where: str) -> MetricSource:
    """One ``metrics:`` entry (the schema has checked its shape); the regexes must compile and
    name only known fields, the card field must be among them, units must fit their reading."""
    for reading, spec in (entry.get("files") or {}).items():
        if spec["unit"] not in READING_UNITS[reading]:
            raise ProfileError(f"{where}.files.{reading}: unit {spec['unit']!r} is not one of "
                               f"{', '.join(READING_UNITS[reading])}")
    for reading, unit in (entry.get("units") or {}).items():
        if unit not in READING_UNITS[reading]:
            raise ProfileError(f"{where}.units.{reading}: {unit!r} is not one of {', '.join(READING_UNITS[reading])}")
    known = set(IDENTITY_FIELDS) | set(READING_UNITS)
    fields: Tuple[str, ...] = ()
    for key in ("regex", "line", "separator"):
        if key in entry:
            try:
                rx = re.compile(entry[key])
            except re.error as err:
                raise ProfileError(f"{where}.{key}: invalid regex {entry[key]!r}: {err}") from err
            if key == "regex":
                fields = tuple(g.partition("__")[0] for g in rx.groupindex)  # index__chip: a second index group
                unknown = sorted(set(fields) - known)
                if unknown:
                    raise ProfileError(f"{where}.regex: unknown group name(s) {', '.join(unknown)}: use "
                                       f"{', '.join(sorted(known))}")
    fields = fields or tuple(entry.get("columns") or ())
    card = entry.get("card", "index")
    if "tool" in entry and card not in fields:
        raise ProfileError(f"{where}: the records never say which card they are: add a {card!r} "
                           f"{'group to the regex' if 'regex' in entry else 'column'} (or change `card`)")
    tool = entry.get("tool") or {}
    units = dict(DEFAULT_TOOL_UNITS, **(entry.get("units") or {}))
    return MetricSource(
        name=entry["name"],
        files=tuple(MetricFile(r, f["path"], f["unit"]) for r, f in (entry.get("files") or {}).items()),
        argv=tuple(tool.get("argv", ())), env=tuple(tool.get("env", ())),
        timeout=float(tool.get("timeout", 5.0)), max_output=int(tool.get("max_output", 1 << 20)),
        card=card, regex=entry.get("regex", ""),
        columns=tuple((k, int(v)) for k, v in (entry.get("columns") or {}).items()),
        line=entry.get("line", ""), separator=entry.get("separator", ""),
        units=tuple(sorted(units.items())) if tool else ())


def _node_rule(entry: Any) -> NodeRule:
    if isinstance(entry, str):
        return NodeRule(paths=(entry,))
    paths = entry["path"]
    return NodeRule(paths=tuple(paths) if isinstance(paths, list) else (paths,),
                    container_path=entry.get("container_path"),
                    optional=bool(entry.get("optional", False)), when=entry.get("when"))


def _companion(entry: Any) -> Companion:
    if isinstance(entry, str):
        return Companion(path=entry)
    return Companion(path=entry["path"], sysfs=entry.get("sysfs"), required=bool(entry.get("required", False)))


def _mount_rule(entry: Any) -> MountRule:
    if isinstance(entry, str):
        return MountRule(path=entry)
    return MountRule(path=entry["path"], container_path=entry.get("container_path"),
                     required=bool(entry.get("required", False)))


def load_file(path: str) -> Profile:
    """Read, validate and return the profile in *path*.

    Raises:
        ProfileError: unreadable file, bad YAML or schema violation.
    """
    import yaml  # here: built-in profiles come from builtin.json

    from .. import bounded

    try:
        data = _load_yaml(bounded.read(path, MAX_PROFILE_BYTES))
    except OSError as err:
        raise ProfileError(f"profile {path!r}: cannot read: {err.strerror}") from err
    except bounded.InputError as err:
        raise ProfileError(f"profile {path!r}: {err}") from err
    except yaml.YAMLError as err:  # also bad UTF-8, deep nesting and alias bombs
        raise ProfileError(f"profile {path!r}: not valid YAML: {_one_line(err)}") from err
    return parse(data, path)


def _load_yaml(text: "str | bytes") -> Any:
    """safe_load with libyaml's C loader when PyYAML has it (several times
    faster), with nesting and alias expansion bounded."""
    from ..cdi import yamlload

    return yamlload.load(text)


def builtin_texts() -> Dict[str, str]:
    """The YAML text of each built-in profile by name (for tests and `doctor`)."""
    return {n: _builtin_text(n) for n in builtin_names()}


def _builtin_text(name: str) -> str:
    with open(os.path.join(BUILTIN_DIR, f"{name}.yaml"), encoding="utf-8") as f:
        return f.read()


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())


def builtin_names() -> List[str]:
    """Names of the profiles shipped in the package."""
    return _builtin_package.yaml_names(BUILTIN_DIR)


def render_builtin_json() -> str:
    """What ``profiles/builtin.json`` must hold: each built-in YAML file's document by name."""
    return _builtin_package.render_json(BUILTIN_DIR, _load_yaml)


@functools.lru_cache(maxsize=None)
def _builtin_profiles() -> Tuple[Profile, ...]:
    """The parsed built-in profiles, once a process: package data does not change under it, and
    generate asks twice (select, then the spec's hook index)."""
    docs = _builtin_package.documents(BUILTIN_DIR)
    return tuple(parse(doc, f"<builtin>/{name}.yaml", trusted=True) for name, doc in docs.items())


def load_all(profile_dirs: Iterable[str] = DEFAULT_PROFILE_DIRS) -> Dict[str, Profile]:
    """All profiles by name: built-in ones, then admin ones (which replace by name).

    Raises:
        ProfileError: a profile file is invalid (naming the file), or two
            profiles claim the same CDI kind.
    """
    out: Dict[str, Profile] = {prof.name: prof for prof in _builtin_profiles()}
    for d in profile_dirs:
        try:
            entries = sorted(os.listdir(d))
        except FileNotFoundError:
            continue
        except OSError as err:
            raise ProfileError(f"profile dir {d!r}: cannot list: {err.strerror}") from err
        for entry in entries:
            if entry.endswith(".yaml"):
                prof = load_file(os.path.join(d, entry))
                out[prof.name] = prof
    kinds: Dict[str, str] = {}
    for prof in out.values():
        if prof.kind in kinds:
            raise ProfileError(f"profiles {kinds[prof.kind]!r} and {prof.name!r} both claim kind "
                               f"{prof.kind!r}: rename the class in one of them")
        kinds[prof.kind] = prof.name
    return out


def select(wanted: Optional[List[str]], profile_dirs: Iterable[str] = DEFAULT_PROFILE_DIRS) -> List[Profile]:
    """Profiles for ``--profile`` values: names or file paths; ``None``/``auto`` means all.

    Raises:
        ProfileError: an unknown name, listing the known ones.
    """
    known = load_all(profile_dirs)
    if not wanted or wanted == ["auto"]:
        return list(known.values())
    chosen = []
    for w in wanted:
        if os.sep in w or w.endswith(".yaml"):
            chosen.append(load_file(w))
        elif w in known:
            chosen.append(known[w])
        else:
            raise ProfileError(f"unknown profile {w!r}: known profiles are {', '.join(sorted(known))}"
                               f" (or give a path to a .yaml file)")
    return chosen
