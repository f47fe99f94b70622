"""Doctor checks of the spec files: present, valid, loadable, fresh, unique, paths that exist."""

from __future__ import annotations

import json
import shutil

import pytest

from support import fakehost
from support.doctornode import Node, checks, status, worst

pytestmark = pytest.mark.privileged
SPEC = "kunlunxin.com-xpu.json"


class TestSpecFiles:
    def test_generated_spec_passes(self, node: Node) -> None:
        """After generate: ok, naming the file."""
        node.kunlunxin()
        node.generate()
        _code, res = node.doctor()
        assert status(res, "spec-files") == "ok" and SPEC in worst(res, "spec-files")["found"]

    def test_missing_spec_fails(self, node: Node) -> None:
        """No spec for the kind: fail; the fix runs generate and names the file it writes."""
        node.kunlunxin()
        _code, res = node.doctor()
        r = worst(res, "spec-files")
        assert r["status"] == "fail" and "'kunlunxin.com/xpu'" in r["found"]
        assert "xpu-cdi generate" in r["fix"] and str(node.spec_dir / SPEC) in r["fix"]

    def test_yml_extension_warns(self, node: Node) -> None:
        """A .yml spec is ignored by runtimes: warn, rename to .yaml."""
        node.kunlunxin()
        node.generate()
        fakehost.write(node.spec_dir / "other.yml", "cdiVersion: 0.5.0\n")
        _code, res = node.doctor()
        r = worst(res, "spec-files")
        assert r["status"] == "warn" and "other.yml" in r["found"] and ".yaml" in r["fix"]


class TestSpecValid:
    def test_valid_passes(self, node: Node) -> None:
        """A generated spec is valid."""
        node.kunlunxin()
        node.generate()
        _code, res = node.doctor()
        assert status(res, "spec-valid") == "ok"

    def test_broken_spec_of_ours_fails(self, node: Node) -> None:
        """Our spec with an unknown field: fail (runtimes skip the file); fix regenerates."""
        node.kunlunxin()
        node.generate()
        spec = json.loads((node.spec_dir / SPEC).read_text())
        spec["devices"][0]["containerEdits"]["bogus"] = 1
        (node.spec_dir / SPEC).write_text(json.dumps(spec))
        _code, res = node.doctor()
        r = worst(res, "spec-valid")
        assert r["status"] == "fail" and SPEC in r["found"] and "bogus" in r["found"]
        assert "xpu-cdi generate" in r["fix"]

    def test_unparseable_spec_of_ours_fails(self, node: Node) -> None:
        """Our spec truncated to invalid JSON: fail."""
        node.kunlunxin()
        node.generate()
        (node.spec_dir / SPEC).write_text('{"cdiVersion": ')
        _code, res = node.doctor()
        r = worst(res, "spec-valid")
        assert r["status"] == "fail" and "cannot parse" in r["found"]

    def test_broken_spec_of_another_vendor_warns(self, node: Node) -> None:
        """Another vendor's broken file does not break ours: warn only."""
        node.kunlunxin()
        node.generate()
        fakehost.write(node.spec_dir / "example.com-gpu.json", '{"cdiVersion": "0.5.0", "kind": "example.com/gpu"}')
        _code, res = node.doctor()
        r = worst(res, "spec-valid")
        assert r["status"] == "warn" and "example.com-gpu.json" in r["found"] and "fix or remove" in r["fix"]


class TestSpecVersion:
    def test_default_spec_loads_everywhere(self, node: Node) -> None:
        """The 0.5.0 default loads in podman 4.3 and containerd 1.7.0."""
        node.kunlunxin()
        node.generate()
        _code, res = node.doctor(versions=("podman=4.3.1", "containerd=1.7.0"))
        r = worst(res, "spec-version")
        assert r["status"] == "ok" and "podman 4.3.1" in r["found"] and "containerd 1.7.0" in r["found"]

    def test_topology_spec_too_new_for_old_runtimes(self, node: Node) -> None:
        """A 0.6.0 spec (--with-topology) is ignored by containerd 1.7.5 and podman 4.3: fail for each."""
        node.kunlunxin()
        node.generate("--with-topology")
        _code, res = node.doctor(versions=("podman=4.3.1", "containerd=1.7.5", "docker=27.1.0"))
        fails = [r for r in checks(res, "spec-version") if r["status"] == "fail"]
        assert {r["found"].split(" but ")[1].split(" loads")[0] for r in fails} == {"containerd 1.7.5",
                                                                                     "podman 4.3.1"}
        by = {r["found"].split(" but ")[1].split(" ")[0]: r for r in fails}
        assert "without --with-topology" in by["containerd"]["fix"] and "1.7.12" in by["containerd"]["fix"]

    def test_topology_spec_loads_in_new_runtimes(self, node: Node) -> None:
        """The same 0.6.0 spec is fine for containerd 1.7.12 and Docker 25."""
        node.kunlunxin()
        node.generate("--with-topology")
        _code, res = node.doctor(versions=("containerd=1.7.12", "docker=25.0.0"))
        assert status(res, "spec-version") == "ok"


class TestSpecFresh:
    def test_fresh_spec_passes(self, node: Node) -> None:
        """Right after generate: ok."""
        node.kunlunxin()
        node.generate()
        _code, res = node.doctor()
        assert status(res, "spec-fresh") == "ok"

    @pytest.mark.parametrize("opts", [["--device-name-strategy", "pci"], ["--no-all-device"],
                                      ["--with-topology"], ["--ld-library-path-env"],
                                      ["--vendor", "baidu.com"],
                                      ["--device-name-strategy", "index", "--device-name-strategy", "pci"]])
    def test_generate_options_are_read_back(self, node: Node, opts: list) -> None:
        """A spec generated with non-default options is not called stale for them."""
        node.kunlunxin()
        node.generate(*opts)
        _code, res = node.doctor(versions=("containerd=2.2.1",))
        assert status(res, "spec-fresh") == "ok", res

    def test_renumbered_node_is_stale(self, node: Node) -> None:
        """A node recreated with another minor after generate: fail naming the device."""
        host = node.kunlunxin()
        node.generate()
        host.path("/dev/xpu5").unlink()
        fakehost.mknod(host.path("/dev/xpu5"), fakehost.XPU_MAJOR, 55)
        _code, res = node.doctor()
        r = worst(res, "spec-fresh")
        assert r["status"] == "fail" and "devices changed" in r["found"] and "5" in r["found"]
        assert "xpu-cdi generate" in r["fix"]

    def test_no_cards_left_fails(self, node: Node) -> None:
        """Every node gone after generate: the spec describes unusable cards."""
        host = node.kunlunxin()
        node.generate()
        for i in list(host.cards):
            host.remove_card(i)
        _code, res = node.doctor()
        r = worst(res, "spec-fresh")
        assert r["status"] == "fail" and "cannot rebuild" in r["found"]


class TestSpecConflicts:
    def test_single_definition_passes(self, node: Node) -> None:
        """One file per kind: ok with the device count (8 cards + all)."""
        node.kunlunxin()
        node.generate()
        _code, res = node.doctor()
        assert worst(res, "spec-conflicts") == {"check": "spec-conflicts", "status": "ok",
                                                 "found": "9 device(s), each defined once", "fix": ""}

    def test_same_device_twice_in_one_dir_fails(self, node: Node) -> None:
        """A copy of the spec under another name in the same dir: both dropped; fail."""
        node.kunlunxin()
        node.generate()
        shutil.copy(node.spec_dir / SPEC, node.spec_dir / "old-xpu.json")
        _code, res = node.doctor()
        r = worst(res, "spec-conflicts")
        assert r["status"] == "fail" and "old-xpu.json" in r["found"] and "keep each device in one file" in r["fix"]

    def test_shadowed_across_dirs_warns(self, node: Node) -> None:
        """The same devices in /etc/cdi and /var/run/cdi: the later wins; warn."""
        node.kunlunxin()
        node.generate()
        later = node.tmp / "var-run-cdi"
        later.mkdir()
        shutil.copy(node.spec_dir / SPEC, later / SPEC)
        _code, res = node.doctor("--spec-dir", str(node.spec_dir), "--spec-dir", str(later))
        r = worst(res, "spec-conflicts")
        assert r["status"] == "warn" and f"{later / SPEC}' wins" in r["found"] and "stale copy" in r["fix"]


class TestSpecPaths:
    def test_existing_paths_pass(self, node: Node) -> None:
        """Hook, mounts and nodes all exist: ok."""
        node.kunlunxin()
        node.generate()
        _code, res = node.doctor()
        assert status(res, "spec-paths") == "ok"

    def test_missing_hook_fails(self, node: Node) -> None:
        """The spec's hook binary is gone: every container fails to start; fix names --hook-path."""
        node.kunlunxin()
        node.generate()
        node.hook.unlink()
        _code, res = node.doctor()
        r = worst(res, "spec-paths")
        assert r["status"] == "fail" and str(node.hook) in r["found"] and "--hook-path" in r["fix"]

    def test_missing_mount_source_fails(self, node: Node) -> None:
        """xpu-smi removed after generate: the mount source is gone; fail, regenerate."""
        host = node.kunlunxin()
        node.generate()
        host.path("/usr/local/bin/xpu-smi").unlink()
        _code, res = node.doctor()
        r = worst(res, "spec-paths")
        assert r["status"] == "fail" and "xpu-smi" in r["found"] and "xpu-cdi generate" in r["fix"]
