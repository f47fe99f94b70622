"""`xpu-cdi runtime configure --runtime containerd` on real-world config
files: the right tables per version, everything else kept (comments too),
a second run is a no-op, broken files are refused."""

from __future__ import annotations

import difflib
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner

from xpu_cdi.cli import main
from xpu_cdi.runtime import containerd

DATA = Path(__file__).resolve().parent.parent / "data" / "runtime-configs"
WRAPPER = "/opt/xpu-cdi/bin/xpu-container-runtime"
CRI = {1: ["plugins", "cri"], 2: ["plugins", "io.containerd.grpc.v1.cri"],
       3: ["plugins", "io.containerd.cri.v1.runtime"], 4: ["plugins", "io.containerd.cri.v1.runtime"]}
# file -> (version, the runc options a copied handler must keep)
FIXTURES = {
    "containerd-1.6-default.toml": (2, {"SystemdCgroup": False, "NoPivotRoot": False}),
    "containerd-1.7-k8s.toml": (2, {"SystemdCgroup": True}),
    "containerd-2.x-default.toml": (3, {"SystemdCgroup": False, "CriuWorkPath": ""}),
    # containerd 2.3 moved to version 4 (only the server tables moved): the CRI tables are version 3's
    "containerd-2.4-default.toml": (4, {"SystemdCgroup": False, "CriuWorkPath": ""}),
    "containerd-custom.toml": (2, {"SystemdCgroup": True}),
    "containerd-v1.toml": (1, {"SystemdCgroup": True}),
    "containerd-debian.toml": (2, {}),
    # `containerd config default` of Debian 13's containerd 1.7.24: has enable_cdi = false
    "containerd-1.7.24-debian13-default.toml": (2, {"SystemdCgroup": False}),
}
# what `configure --enable-cdi --set-as-default` may change in a line that was already there
CHANGED_KEYS = ("default_runtime_name", "enable_cdi", "cdi_spec_dirs")


def at(doc: Dict[str, Any], keys: List[str]) -> Any:
    for k in keys:
        doc = doc[k]
    return doc


def configure(path: Path, *extra: str) -> Any:
    r = CliRunner().invoke(main, ["runtime", "configure", "--runtime", "containerd", "--config", str(path),
                                  "--wrapper-path", WRAPPER, *extra])
    return r


@pytest.fixture(params=[*FIXTURES, "live"])
def config_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A copy of a fixture, or `containerd config default` of the installed containerd."""
    dest = tmp_path / "config.toml"
    if request.param == "live":
        if not shutil.which("containerd"):
            pytest.fail("containerd is not installed: run `make deps`")
        dest.write_text(subprocess.run(["containerd", "config", "default"], capture_output=True, text=True,
                                       check=True).stdout)
    else:
        shutil.copy(DATA / request.param, dest)
    return dest


def expected(name: str) -> Any:
    return FIXTURES.get(name, (2, {"SystemdCgroup": False}))


class TestInPlace:
    def test_handler_cdi_and_default(self, config_file: Path, request: pytest.FixtureRequest) -> None:
        """The handler (runc options + BinaryName + annotations), CDI and the default land in the version's tables."""
        version, runc_options = expected(request.node.callspec.params["config_file"])
        r = configure(config_file, "--enable-cdi", "--set-as-default")
        assert r.exit_code == 0, r.output
        doc = tomllib.loads(config_file.read_text())  # an independent parser must accept it
        assert doc.get("version", 1) == version
        cri = at(doc, CRI[version])
        handler = cri["containerd"]["runtimes"]["xpu"]
        assert handler["runtime_type"] == "io.containerd.runc.v2"
        assert handler["options"]["BinaryName"] == WRAPPER
        assert "cdi.k8s.io/*" in handler["container_annotations"]
        for key, value in runc_options.items():
            assert handler["options"][key] == value, key
        assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
        assert cri["containerd"]["default_runtime_name"] == "xpu"
        assert "runc" in cri["containerd"]["runtimes"], "containerd's built-in runc handler must survive"

    def test_everything_else_is_kept(self, config_file: Path) -> None:
        """Only lines are added (comments, order and quoting stay), except the values asked
        for: the default runtime's, and enable_cdi / cdi_spec_dirs where the file has them."""
        before = config_file.read_text()
        assert configure(config_file, "--enable-cdi", "--set-as-default").exit_code == 0
        after = config_file.read_text()
        removed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line.startswith("- ")]
        assert all(line.split("=")[0].strip("- ").strip() in CHANGED_KEYS for line in removed), removed
        old, new = tomllib.loads(before), tomllib.loads(after)
        version = old.get("version", 1)
        cri_new = at(new, CRI[version])
        del cri_new["containerd"]["runtimes"]["xpu"]
        if "runtimes" not in at(old, CRI[version]).get("containerd", {}):
            assert cri_new["containerd"]["runtimes"].pop("runc") == {"runtime_type": "io.containerd.runc.v2"}
            del cri_new["containerd"]["runtimes"]
        if "containerd" not in at(old, CRI[version]) and set(cri_new["containerd"]) == {"default_runtime_name"}:
            del cri_new["containerd"]["default_runtime_name"]
        for key in ("enable_cdi", "cdi_spec_dirs"):
            if key not in at(old, CRI[version]):
                del cri_new[key]
            else:  # containerd 1.7's own default has both (enable_cdi = false)
                cri_new[key] = at(old, CRI[version])[key]
        old_default = at(old, CRI[version]).get("containerd", {}).get("default_runtime_name")
        if old_default is None:
            cri_new["containerd"].pop("default_runtime_name", None)
        else:
            cri_new["containerd"]["default_runtime_name"] = old_default
        if not cri_new["containerd"]:
            del cri_new["containerd"]
        assert new == old

    def test_second_run_is_a_no_op(self, config_file: Path) -> None:
        """Running it again reports unchanged and writes nothing, not even a backup."""
        assert configure(config_file, "--enable-cdi", "--set-as-default").exit_code == 0
        once = config_file.read_text()
        files = sorted(p.name for p in config_file.parent.iterdir())
        r = configure(config_file, "--enable-cdi", "--set-as-default")
        assert r.exit_code == 0 and f"unchanged {config_file}" in r.output
        assert config_file.read_text() == once
        assert sorted(p.name for p in config_file.parent.iterdir()) == files

    def test_backup_holds_the_original(self, config_file: Path) -> None:
        """The first write leaves a backup with the old text and the file's mode."""
        before = config_file.read_text()
        config_file.chmod(0o600)
        assert configure(config_file).exit_code == 0
        (backup,) = config_file.parent.glob("config.toml.bak-*")
        assert backup.read_text() == before
        assert config_file.stat().st_mode & 0o777 == 0o600 and backup.stat().st_mode & 0o777 == 0o600

    def test_dry_run_prints_a_diff_and_writes_nothing(self, config_file: Path) -> None:
        """--dry-run shows the added handler and leaves the directory as it was."""
        before = config_file.read_text()
        r = configure(config_file, "--dry-run")
        assert r.exit_code == 0
        assert f"+++ {config_file}" in r.output and f'BinaryName = "{WRAPPER}"' in r.output
        assert config_file.read_text() == before
        assert [p.name for p in config_file.parent.iterdir()] == ["config.toml"]


class TestSpecialCases:
    def test_existing_handler_keeps_admin_settings(self, tmp_path: Path) -> None:
        """A handler that is already there is fixed up, keeping what an admin added to it."""
        path = tmp_path / "config.toml"
        path.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.xpu]\n'
                        '  runtime_type = "io.containerd.runc.v2"\n  pod_annotations = ["a/*"]  # keep\n'
                        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.xpu.options]\n'
                        '    BinaryName = "/old/path"\n    SystemdCgroup = true\n')
        assert configure(path).exit_code == 0
        text = path.read_text()
        h = tomllib.loads(text)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["xpu"]
        assert h["options"] == {"BinaryName": WRAPPER, "SystemdCgroup": True}
        assert h["pod_annotations"] == ["a/*"] and h["container_annotations"] == ["cdi.k8s.io/*"]
        assert "# keep" in text

    def test_missing_file_is_created_for_the_installed_version(self, tmp_path: Path) -> None:
        """No config yet: a new one with the version the installed containerd reads (2 for 1.x)."""
        path = tmp_path / "new" / "config.toml"
        assert configure(path).exit_code == 0
        doc = tomllib.loads(path.read_text())
        want = containerd.version_for_release(containerd.installed_version())
        assert doc["version"] == want
        assert at(doc, CRI[want])["containerd"]["runtimes"]["xpu"]["options"]["BinaryName"] == WRAPPER

    def test_version_1_file_uses_short_plugin_names(self, tmp_path: Path) -> None:
        """A file without `version` is version 1: [plugins.cri], with a note saying so."""
        path = tmp_path / "config.toml"
        shutil.copy(DATA / "containerd-v1.toml", path)
        r = configure(path)
        assert r.exit_code == 0 and "reads it as version 1" in r.output
        assert "io.containerd.grpc.v1.cri" not in path.read_text()

    @pytest.mark.parametrize("text", ["version = 2\n[plugins\n", 'version = 2\nroot = "a"\nroot = "b"\n',
                                      "\xff\xfe"])
    def test_unparseable_file_is_refused(self, tmp_path: Path, text: str) -> None:
        """A file that is not TOML: exit 1, one line naming the file, nothing written."""
        path = tmp_path / "config.toml"
        path.write_bytes(text.encode("latin-1"))
        r = configure(path)
        assert r.exit_code == 1
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"xpu-cdi: cannot parse '{path}'"), r.output
        assert path.read_bytes() == text.encode("latin-1")
        assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]

    def test_table_that_is_a_value_is_refused(self, tmp_path: Path) -> None:
        """A key where a table must go is an error, not a crash."""
        path = tmp_path / "config.toml"
        path.write_text('version = 2\n[plugins]\n"io.containerd.grpc.v1.cri" = 5\n')
        r = configure(path)
        assert r.exit_code == 1 and "not a table" in r.output


class TestDropIn:
    def test_version_2_drop_in_carries_the_cri_table(self, tmp_path: Path) -> None:
        """containerd 1.x replaces plugin tables on import: the drop-in has the main file's CRI settings too."""
        main_path, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-xpu.toml"
        shutil.copy(DATA / "containerd-1.7-k8s.toml", main_path)
        before = main_path.read_text()
        r = configure(main_path, "--drop-in", str(drop), "--enable-cdi")
        assert r.exit_code == 0 and "replaces a plugin's whole table" in r.output
        main_doc, drop_doc = tomllib.loads(main_path.read_text()), tomllib.loads(drop.read_text())
        assert main_doc["imports"] == [str(drop)]
        assert {k: v for k, v in main_doc.items() if k != "imports"} == tomllib.loads(before)
        cri = drop_doc["plugins"]["io.containerd.grpc.v1.cri"]
        assert drop_doc["version"] == 2 and cri["enable_cdi"] is True
        assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"
        assert cri["containerd"]["runtimes"]["xpu"]["options"] == {"SystemdCgroup": True, "BinaryName": WRAPPER}
        assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
        r = configure(main_path, "--drop-in", str(drop), "--enable-cdi")
        assert r.output.count("unchanged") == 2, r.output

    def test_version_3_drop_in_has_only_ours(self, tmp_path: Path) -> None:
        """containerd 2.x merges imports key by key: the drop-in holds just the handler."""
        main_path, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-xpu.toml"
        shutil.copy(DATA / "containerd-2.x-default.toml", main_path)
        assert configure(main_path, "--drop-in", str(drop)).exit_code == 0
        drop_doc = tomllib.loads(drop.read_text())
        cri = drop_doc["plugins"]["io.containerd.cri.v1.runtime"]
        assert list(cri) == ["containerd"] and list(cri["containerd"]["runtimes"]) == ["xpu"]
        assert cri["containerd"]["runtimes"]["xpu"]["options"]["CriuWorkPath"] == "", "runc's options are copied"
        assert tomllib.loads(main_path.read_text())["imports"] == [str(drop)]

    def test_existing_glob_import_is_enough(self, tmp_path: Path) -> None:
        """An imports glob that already covers the drop-in leaves the main file untouched."""
        main_path, drop = tmp_path / "config.toml", tmp_path / "conf.d" / "99-xpu.toml"
        main_path.write_text(f'version = 3\nimports = ["{tmp_path}/conf.d/*.toml"]\n')
        before = main_path.read_text()
        r = configure(main_path, "--drop-in", str(drop))
        assert r.exit_code == 0 and f"unchanged {main_path}" in r.output
        assert main_path.read_text() == before and drop.exists()


class TestReaders:
    @pytest.mark.parametrize("name, version, cdi, default", [
        ("containerd-1.6-default.toml", 2, False, "runc"),
        ("containerd-2.x-default.toml", 3, True, "runc"),
        ("containerd-2.4-default.toml", 4, True, "runc"),
        ("containerd-custom.toml", 2, False, "kata"),
        ("containerd-v1.toml", 1, False, "runc"),
    ])
    def test_readers(self, name: str, version: int, cdi: bool, default: str) -> None:
        """version, cdi_enabled, default_runtime and handlers read what containerd would."""
        doc = containerd.load(str(DATA / name))
        assert containerd.version(doc) == version
        assert containerd.cdi_enabled(doc) is cdi
        assert containerd.default_runtime(doc) == default
        assert "runc" in containerd.handlers(doc)
        assert containerd.cdi_spec_dirs(doc) == ["/etc/cdi", "/var/run/cdi"]

    def test_custom_runc_binary_is_noted(self, tmp_path: Path) -> None:
        """A runc handler with its own BinaryName: the note says to set XPU_CDI_RUNTIME."""
        path = tmp_path / "config.toml"
        shutil.copy(DATA / "containerd-custom.toml", path)
        r = configure(path)
        assert "XPU_CDI_RUNTIME=/usr/local/sbin/runc" in r.output
