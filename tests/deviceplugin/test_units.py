"""The device plugin's parts without kubelet: settings, inventory, health, allocation answers.

These need neither the upstream protos nor a second process.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest

from support import fakehost
from support.dpnode import Node, numa_nodes
from test_bounded import LAUGHS

from xpu_cdi import log
from xpu_cdi.deviceplugin import allocation, config, registration
from xpu_cdi.node import health, status
from xpu_cdi.node import inventory as devices
from xpu_cdi.node.inventory import SpecCard, NodeRef
from xpu_cdi.generate import profile as profile_mod

KIND = "kunlunxin.com/xpu"


def load(node: Node) -> devices.KindSet:
    kinds, problems = devices.load([str(node.spec_dir)], {KIND: "kunlunxin"}, str(node.host.root))
    assert not problems
    return kinds[KIND]


@pytest.mark.privileged
class TestInventory:
    def test_cards_from_the_spec(self, node: Node) -> None:
        """One card per spec device but 'all', with index, PCI, NUMA, switch and root port."""
        ks = load(node)
        assert list(ks.cards) == [str(i) for i in range(8)]
        c5 = ks.cards["5"]
        assert (c5.index, c5.pci, c5.numa_node, c5.switch, c5.root_port) == (
            5, node.host.pci[5], 1, node.host.switch[5], node.host.root_port[5])
        assert [n.path for n in c5.nodes] == [str(node.host.path("/dev/xpu5"))]
        assert [n.path for n in ks.shared] == [str(node.host.path("/dev/xpuctrl"))]
        from xpu_cdi.generate import profile

        (kunlunxin,) = profile.select(["kunlunxin"], ())
        assert ks.env_var == kunlunxin.selection.env[0]  # the profile's first selection variable, via the index

    def test_two_names_one_card(self, node: Node) -> None:
        """index and pci names for each card: advertised once (two IDs would let kubelet give a card twice)."""
        node.generate("--device-name-strategy", "index", "--device-name-strategy", "pci")
        assert list(load(node).cards) == [str(i) for i in range(8)]
        node.generate("--device-name-strategy", "pci")
        assert sorted(load(node).cards) == sorted(node.host.pci.values())

    def test_numa_unknown_is_omitted(self, tmp_path: Path, host_root: Path) -> None:
        """sysfs numa_node -1, or a NUMA id the host lacks: no topology rather than a wrong one."""
        host = fakehost.kunlunxin(host_root, cards=8)
        numa_nodes(host_root, 1)  # node1 does not exist here
        n = Node(host, tmp_path / "cdi", tmp_path / "k", tmp_path / "s")
        n.generate()
        cards = load(n).cards
        assert [cards[str(i)].numa_node for i in range(8)] == [0, 0, 0, 0, None, None, None, None]
        assert devices.numa_known(str(host_root), -1) is None

    def test_loop_refresh_reads_only_on_change(self, node: Node) -> None:
        """node.loop.Loop.refresh, the one re-read of the specs of all three daemons: read on a change
        (the daemon's specs_changed told what was there before), a kind that went said once."""
        from xpu_cdi.node.loop import Loop
        from xpu_cdi.node.settings import NodeSettings

        class Probe(Loop):
            def specs_changed(self, before: Dict[str, devices.KindSet]) -> None:
                changes.append((sorted(before), sorted(self.kinds)))

        changes: List[Any] = []
        said: List[Any] = []
        settings = NodeSettings(spec_dirs=(str(node.spec_dir),), sysfs_root=str(node.host.root),
                                profiles=("kunlunxin",))
        loop = Probe(lambda m, level=log.INFO: said.append((level, m)), settings)
        loop.load_profiles()
        assert loop.refresh() and not loop.refresh()  # nothing changed: not read again
        assert loop.refresh(force=True)
        assert changes == [([], [KIND]), ([KIND], [KIND])]
        assert [lv for lv, m in said if m.startswith("reading the specs in ")] == [log.DEBUG] * 2
        lines = [(lv, m) for lv, m in said if lv > log.DEBUG]
        spec = node.spec_dir / "kunlunxin.com-xpu.json"
        assert lines == [(log.INFO, f"{KIND}: 8 card(s) from {spec}: 0, 1, 2, 3, 4, 5, 6, 7")]
        for p in node.spec_dir.iterdir():
            p.unlink()
        assert loop.refresh() and changes[-1] == ([KIND], []) and loop.kinds == {}
        assert [(lv, m) for lv, m in said if lv > log.DEBUG][1:] == [
            (log.WARNING, f"no CDI spec in {node.spec_dir} defines cards of {KIND}: run `xpu-cdi generate` (or "
                          f"`xpu-cdi watch`); nothing is served until a spec appears"),
            (log.INFO, f"{KIND}: no spec defines its cards any more")]
        loop.close_loop("/nonexistent/status.json")

    def test_loop_polls_every_second_without_inotify(self, node: Node) -> None:
        """The daemons poll health every --health-interval (10 s) under the events; where inotify cannot be
        had, nothing but the poll sees a spec, node or socket change: it runs every second then."""
        from xpu_cdi.node import inotify
        from xpu_cdi.node.loop import BLIND_POLL, Loop
        from xpu_cdi.node.settings import HEALTH_INTERVAL, NodeSettings

        loop = Loop(lambda m, level=log.INFO: None, NodeSettings(spec_dirs=(str(node.spec_dir),)))
        assert loop.ino is None and loop.poll_interval(HEALTH_INTERVAL) == BLIND_POLL == 1.0
        assert loop.poll_interval(0.5) == 0.5  # a shorter poll asked for stays
        loop.ino = inotify.open_inotify()
        assert loop.ino is not None and loop.poll_interval(HEALTH_INTERVAL) == HEALTH_INTERVAL == 10.0
        loop.close_loop("/nonexistent/status.json")

    def test_sigterm_to_another_thread_wakes_the_loop(self, node: Node) -> None:
        """SIGTERM delivered to a thread other than the main one (a daemon's gRPC threads take any
        signal) ends the loop's wait at once, not at its 30 s poll."""
        import signal
        import threading
        import time

        from xpu_cdi.node.loop import Loop
        from xpu_cdi.node.settings import NodeSettings

        loop = Loop(lambda m, level=log.INFO: None, NodeSettings(spec_dirs=(str(node.spec_dir),)))
        old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        old_fd = signal.set_wakeup_fd(-1)
        go = threading.Event()

        def sender() -> None:  # this thread does not block SIGTERM: the kernel hands the signal to it
            go.wait()
            time.sleep(0.2)  # the main thread is in its wait by then (a slower start only delays the wait's end)
            os.kill(os.getpid(), signal.SIGTERM)

        t = threading.Thread(target=sender)
        t.start()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            loop.install_signals(on_hup=lambda: None)
            go.set()
            t0 = time.monotonic()
            loop.wait(30.0)
            took = time.monotonic() - t0
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the handler runs here
            assert loop.stop.is_set() and took < 15.0, took
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            t.join()
            signal.set_wakeup_fd(old_fd)
            for s, h in old.items():
                signal.signal(s, h)
            loop.close_loop("/nonexistent/status.json")

    def test_foreign_kinds_ignored(self, node: Node) -> None:
        """A spec of a kind no profile of ours has is not advertised."""
        (node.spec_dir / "vendor.com-gpu.json").write_text(json.dumps({
            "cdiVersion": "0.5.0", "kind": "vendor.com/gpu",
            "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/null"}]}}]}))
        kinds, _ = devices.load([str(node.spec_dir)], {KIND: "kunlunxin"}, str(node.host.root))
        assert list(kinds) == [KIND]

    def test_signature_changes_with_the_spec(self, node: Node) -> None:
        before = devices.signature([str(node.spec_dir)])
        assert devices.signature([str(node.spec_dir)]) == before
        node.generate("--no-all-device")
        assert devices.signature([str(node.spec_dir)]) != before


KUNLUNXIN = profile_mod.select(["kunlunxin"], [])[0]  # its health_state: /proc/xpu/dev{index}/state


@pytest.mark.privileged
class TestHealth:
    def test_each_check(self, node: Node) -> None:
        ks = load(node)
        root = str(node.host.root)
        card = ks.cards["2"]
        assert health.problem(card, ks.shared, KUNLUNXIN, root, root) == ""
        fakehost.write(node.host.path("/proc/xpu/dev2/state"), "ERROR\n")
        assert "driver reports state 'ERROR'" in health.problem(card, ks.shared, KUNLUNXIN, root, root)
        fakehost.write(node.host.path("/proc/xpu/dev2/state"), "normal\n")
        assert health.problem(card, ks.shared, KUNLUNXIN, root, root) == ""
        pci = node.host.path(f"/sys/bus/pci/devices/{card.pci}")
        pci.unlink()
        assert "PCI function" in health.problem(card, ks.shared, KUNLUNXIN, root, root)
        assert health.problem(ks.cards["3"], ks.shared, KUNLUNXIN, root, root) == ""

    def test_node_type_and_numbers(self, tmp_path: Path) -> None:
        regular = tmp_path / "file"
        regular.write_text("")
        assert "not a character device" in health.node_problem(NodeRef(str(regular), "c"))
        assert "missing" in health.node_problem(NodeRef(str(tmp_path / "none"), "c"))
        assert "spec says 1:99" in health.node_problem(NodeRef("/dev/null", "c", 1, 99))
        assert health.node_problem(NodeRef("/dev/null", "c", 1, 3)) == ""

    def test_shared_node_missing_marks_every_card(self, node: Node) -> None:
        """/dev/xpuctrl gone (driver unloaded): no card is usable."""
        ks = load(node)
        node.host.path("/dev/xpuctrl").unlink()
        root = str(node.host.root)
        assert all("xpuctrl is missing" in health.problem(c, ks.shared, KUNLUNXIN, root, root)
                   for c in ks.cards.values())


def cards8() -> Dict[str, SpecCard]:
    """An 8-card host with two switches of four, NUMA 0 and 1."""
    return {str(i): SpecCard(str(i), KIND, (NodeRef(f"/dev/xpu{i}"),), i, f"pci{i}", i // 4, f"sw{i // 4}",
                         f"rp{i // 4}") for i in range(8)}


class TestAllocation:
    def test_preferred(self) -> None:
        cards = cards8()
        assert allocation.preferred(cards, list(cards), [], 4) == ["0", "1", "2", "3"]
        assert allocation.preferred(cards, ["0", "1", "2", "4", "5", "6", "7"], [], 4) == ["4", "5", "6", "7"]
        assert allocation.preferred(cards, list(cards), ["5"], 4) == ["4", "5", "6", "7"]
        assert allocation.preferred(cards, list(cards), ["3", "4"], 2) == ["3", "4"]
        assert allocation.preferred(cards, ["0", "x"], [], 2) == []  # what remains cannot make 2
        assert allocation.preferred(cards, list(cards), [], 0) == []

    @pytest.mark.parametrize("cards, pci, used, size, want", [
        # 910: a 4-NPU job from one ring of 4, the ring with the fewest free for a 1-NPU job
        (8, "0xd801", [], 4, ["0", "1", "2", "3"]),
        (8, "0xd801", ["1"], 4, ["4", "5", "6", "7"]),
        (8, "0xd801", ["0", "1", "2"], 1, ["3"]),
        (8, "0xd801", ["0", "4"], 2, ["1", "2"]),
        # 16-NPU 910B "A+X": an 8-NPU job from one domain of 8
        (16, "0xd802", [], 8, [str(i) for i in range(8)]),
        (16, "0xd802", ["3"], 8, [str(i) for i in range(8, 16)]),
        (16, "0xd802", ["3", "12"], 4, ["0", "1", "2", "4"]),
    ])
    def test_preferred_keeps_a_job_in_one_hccs_domain(self, host_root: Path, cards: int, pci: str,
                                                      used: List[str], size: int, want: List[str]) -> None:
        """The cards kubelet is told to prefer on fake Ascend servers, from the specs generate wrote and the
        domains the profile's rules give (xpu_cdi.interconnect): never across a ring when one fits."""
        from click.testing import CliRunner
        from xpu_cdi.cli import main

        host = fakehost.kunpeng_npu_server(host_root, cards, pci_device=pci)
        spec_dir = host_root / "cdi"
        res = CliRunner().invoke(main, ["generate", *host.cli_roots, "--spec-dir", str(spec_dir)])
        assert res.exit_code == 0, res.output
        profiles = profile_mod.load_all([])
        kinds, problems = devices.load([str(spec_dir)], {"huawei.com/npu": "ascend"}, str(host_root))
        assert not problems
        kinds = devices.with_domains(kinds, lambda name: profiles.get(name or ""), str(host_root))
        ks = kinds["huawei.com/npu"]
        assert {c.hccs_domain for c in ks.cards.values()} == {0, 1}
        free = [c for c in ks.cards if c not in used]
        assert allocation.preferred(ks.cards, free, [], size) == want

    def test_check_names_every_bad_id(self) -> None:
        cards = cards8()
        with pytest.raises(allocation.AllocationError,
                           match=r"unknown device ID\(s\) '8', 'x'.*device '1' is Unhealthy: gone"):
            allocation.check(KIND, cards, {"1": "gone"}, ["1", "8", "x"])
        allocation.check(KIND, cards, {"1": "gone"}, ["0", "2"])

    def test_container_response(self) -> None:
        cards = cards8()
        got = allocation.container_response(KIND, cards, {}, ["1", "0"], ("cdi-cri", "cdi-annotations"), "V")
        assert got == {"cdi_devices": [{"name": "kunlunxin.com/xpu=1"}, {"name": "kunlunxin.com/xpu=0"}],
                       "annotations": {"cdi.k8s.io/kunlunxin.xpu_1-0": "kunlunxin.com/xpu=1,kunlunxin.com/xpu=0"}}
        assert allocation.container_response(KIND, cards, {}, ["1", "0"], ("envvar",), "V") == {"envs": {"V": "0,1"}}
        with pytest.raises(allocation.AllocationError, match="no selection variable"):
            allocation.container_response(KIND, cards, {}, ["1"], ("envvar",), None)

    def test_annotation_key_fits_for_long_ids(self) -> None:
        """Many PCI names still give a valid key (hashed allocation id)."""
        cards = {f"0000:{i:02x}:00.0": SpecCard(f"0000:{i:02x}:00.0", KIND, ()) for i in range(16)}
        got = allocation.container_response(KIND, cards, {}, list(cards), ("cdi-annotations",), None)
        (key,) = got["annotations"]  # type: ignore[misc]
        assert len(key.split("/", 1)[1]) <= 63


class TestSettings:
    def test_flags_win_over_the_file(self, tmp_path: Path) -> None:
        cfg = tmp_path / "dp.yaml"
        cfg.write_text("plugin-dir: /k\nspec-dir: [/a, /b]\nresource-name: {huawei.com/npu: huawei.com/Ascend910}\n"
                       "device-list-strategy: cdi-cri\n")
        s = config.build(str(cfg), {"plugin_dir": "/flag"})
        assert (s.plugin_dir, s.spec_dirs, s.strategies) == ("/flag", ("/a", "/b"), ("cdi-cri",))
        assert s.resource("huawei.com/npu") == "huawei.com/Ascend910" and s.resource(KIND) == KIND

    def test_defaults_without_a_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(config, "DEFAULT_CONFIG", str(tmp_path / "absent.yaml"))
        s = config.build(None, {})
        assert s.plugin_dir == "/var/lib/kubelet/device-plugins" and s.spec_dirs == ("/etc/cdi", "/var/run/cdi")
        assert s.strategies == ("cdi-cri", "cdi-annotations") and s.proc == "/"

    @pytest.mark.parametrize("text, message", [
        ("nope: 1\n", "unknown setting 'nope'"),
        ("device-list-strategy: [cdi, envvar]\n", "unknown strategy 'cdi'"),
        ("resource-name: [kunlunxin.com/xpu]\n", "is not KIND=NAME"),
        ("resource-name: {kunlunxin.com/xpu: XPU}\n", "not an extended resource name"),
        ("health-interval: 0\n", "between 0.05 and 60"),
        ("health-interval: -1\n", "between 0.05 and 60"),
        ("health-interval: .nan\n", "between 0.05 and 60"),
        ("health-interval: .inf\n", "between 0.05 and 60"),
        ("removal-grace: .nan\n", "between 0 and 86400"),
        ("sharing: " + "[" * 500 + "]" * 500 + "\n", "nested deeper than 100 levels"),  # SIGHUP killed the plugin
        ("sharing: " + "[" * 1000 + "]" * 1000 + "\n", "maximum nesting depth"),  # libyaml's own bound
        (LAUGHS + "nope: *f\n", "more than 10000 nodes"),  # was a 58 MB error line and 257 MiB
        ("- a\n", "expected a mapping"),
        ("a: [\n", "not valid YAML"),
    ])
    def test_bad_file_is_one_line(self, tmp_path: Path, text: str, message: str) -> None:
        cfg = tmp_path / "dp.yaml"
        cfg.write_text(text)
        with pytest.raises(config.ConfigError, match=message) as err:
            config.build(str(cfg), {})
        assert "\n" not in str(err.value) and str(cfg) in str(err.value)

    def test_bad_file_line_is_short(self, tmp_path: Path) -> None:
        """A value or key quoted in the line is cut: the line stays one short line whatever the file holds."""
        cfg = tmp_path / "dp.yaml"
        cfg.write_text("resource-name: {" + "k" * 5000 + ": x}\n" + "x" * 5000 + ": 1\n")
        with pytest.raises(config.ConfigError) as err:
            config.build(str(cfg), {})
        assert len(str(err.value)) < 500, str(err.value)

    def test_a_fifo_is_refused_at_once(self, tmp_path: Path) -> None:
        os.mkfifo(tmp_path / "dp.yaml")
        with pytest.raises(config.ConfigError, match="a FIFO, not a regular file"):
            config.build(str(tmp_path / "dp.yaml"), {})

    def test_explicit_file_must_exist(self, tmp_path: Path) -> None:
        with pytest.raises(config.ConfigError, match="does not exist"):
            config.build(str(tmp_path / "absent.yaml"), {})

    # NVIDIA's k8s-device-plugin config (api/config/v1) as a GPU node has it, but for what has no
    # meaning here: its failOnInitError default (true) and the gfd: section
    NVIDIA_FILE = """version: v1
flags:
  migStrategy: none
  failOnInitError: false
  nvidiaDriverRoot: /run/nvidia/driver
  plugin:
    passDeviceSpecs: false
    deviceListStrategy: [envvar, cdi-cri]
sharing:
  timeSlicing:
    resources:
    - name: huawei.com/npu
      replicas: 4
"""

    def test_nvidia_shaped_file_works_unchanged(self, tmp_path: Path) -> None:
        cfg = tmp_path / "dp.yaml"
        cfg.write_text(self.NVIDIA_FILE)
        warned: List[str] = []
        s = config.build(str(cfg), {}, warned.append)
        assert (s.driver_root, s.strategies) == ("/run/nvidia/driver", ("envvar", "cdi-cri")) and not warned
        assert s.replication("huawei.com/npu").replicas == 4  # type: ignore[union-attr]

    def test_v1_flags_are_ours_in_camel_case(self, tmp_path: Path) -> None:
        """Every long flag of the file has its camelCase key under flags:, read as the old key was."""
        cfg = tmp_path / "dp.yaml"
        cfg.write_text("version: v1\nflags:\n  pluginDir: /k\n  specDir: [/a]\n  resourceNaming: model\n"
                       "  removalGrace: 5\n  nodeConfig: /n.yaml\n  healthInterval: 2\n")
        s = config.build(str(cfg), {"plugin_dir": "/flag"})
        assert (s.plugin_dir, s.spec_dirs, s.resource_naming, s.removal_grace, s.node_config, s.health_interval) \
            == ("/flag", ("/a",), "model", 5.0, "/n.yaml", 2.0)
        assert set(config.FLAG_KEYS.values()) == set(config.KEYS) - {"sharing"}

    def test_old_keys_read_with_one_warning(self, tmp_path: Path) -> None:
        cfg = tmp_path / "dp.yaml"
        cfg.write_text("plugin-dir: /k\nresource-naming: model\n")
        warned: List[str] = []
        s = config.build(str(cfg), {}, warned.append)
        assert (s.plugin_dir, s.resource_naming) == ("/k", "model")
        (line,) = warned
        assert "deprecated" in line and "pluginDir, resourceNaming" in line and str(cfg) in line

    def test_sharing_alone_is_not_deprecated(self, tmp_path: Path) -> None:
        cfg = tmp_path / "dp.yaml"
        cfg.write_text("sharing: {timeSlicing: {resources: [{name: huawei.com/npu, replicas: 2}]}}\n")
        warned: List[str] = []
        config.build(str(cfg), {}, warned.append)
        assert warned == []

    @pytest.mark.parametrize("text, message", [
        ("version: v2\n", "version: 'v2' is not known: write version: v1"),
        ("version: v1\nflags:\n  failOnInitError: true\n", "flags.failOnInitError: only false is supported"),
        ("version: v1\nflags:\n  migStrategy: single\n", "flags.migStrategy: only none is supported"),
        ("version: v1\nflags:\n  plugin: {passDeviceSpecs: true}\n", "flags.plugin.passDeviceSpecs: only false"),
        ("version: v1\nflags:\n  gdsEnabled: 0\n", "flags.gdsEnabled: only false"),  # a bool, not a number
        ("version: v1\nflags:\n  plugin: {deviceIDStrategy: uuid}\n",
         "unknown setting 'flags.plugin.deviceIDStrategy'"),
        ("version: v1\nflags:\n  gfd: {oneshot: false}\n", "unknown setting 'flags.gfd'"),
        ("version: v1\nflags:\n  plugin: {deviceListStrategy: volume-mounts}\n",
         "flags.plugin.deviceListStrategy: unknown strategy 'volume-mounts'"),
        ("version: v1\nresources: {gpus: []}\n", "unknown setting 'resources' in a version: v1 file"),
        ("version: v1\nplugin-dir: /k\n", "under flags: as 'pluginDir'"),
        ("flags: []\n", "flags: expected a mapping"),
        ("version: v1\nflags:\n  plugin: 3\n", "flags.plugin: expected a mapping"),
        ("version: v1\nflags:\n  pluginDir: ''\n", "flags.pluginDir: must be a non-empty string"),
        ("version: v1\nflags:\n  driverRoot: /a\n  nvidiaDriverRoot: /b\n",
         "flags.nvidiaDriverRoot and flags.driverRoot are the same setting: keep one"),
    ])
    def test_v1_refusals_name_the_key(self, tmp_path: Path, text: str, message: str) -> None:
        cfg = tmp_path / "dp.yaml"
        cfg.write_text(text)
        with pytest.raises(config.ConfigError, match=re.escape(message)) as err:
            config.build(str(cfg), {})
        assert "\n" not in str(err.value) and str(cfg) in str(err.value)

    def test_flag_parsers(self) -> None:
        assert config.parse_flag("strategies", ["cdi-cri,envvar", "cdi-cri"]) == ("cdi-cri", "envvar")
        assert config.parse_flag("resource_names", ["huawei.com/npu=huawei.com/Ascend910"]) == {
            "huawei.com/npu": "huawei.com/Ascend910"}
        with pytest.raises(config.ConfigError, match="--resource-name"):
            config.parse_flag("resource_names", ["huawei.com/npu"])


class TestRegistrationRules:
    def test_backoff(self) -> None:
        assert [registration.backoff(n) for n in (1, 2, 3)] == [0.1, 0.2, 0.4]
        assert registration.backoff(50) == registration.BACKOFF_MAX

    def test_inotify_sees_a_socket_recreated(self, tmp_path: Path) -> None:
        """The kubelet restart pattern (delete, create with the same name) gives both events: each wakes the
        daemon's loop, which then looks at the sockets (restart.py)."""
        import socket

        from xpu_cdi.node import inotify

        ino = inotify.open_inotify()
        assert ino is not None
        try:
            path = tmp_path / "kubelet.sock"
            s1 = socket.socket(socket.AF_UNIX)
            s1.bind(str(path))
            assert ino.watch(str(tmp_path))
            path.unlink()
            s2 = socket.socket(socket.AF_UNIX)
            s2.bind(str(path))
            events = ino.read()
            assert any(name == "kubelet.sock" and mask & inotify.IN_DELETE for _d, name, mask in events)
            assert any(name == "kubelet.sock" and mask & inotify.IN_CREATE for _d, name, mask in events)
            assert {d for d, _name, _mask in events} == {str(tmp_path)}
            s1.close()
            s2.close()
        finally:
            ino.close()


class TestStatus:
    def test_probe(self, tmp_path: Path) -> None:
        path = tmp_path / "st.json"
        assert status.probe(str(path)) == (False, status.read(str(path))[1])
        sock = tmp_path / "x.sock"
        import os
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.bind(str(sock))
        s.listen()
        doc = {"pid": os.getpid(), "kinds": {KIND: {"registered": True, "socket": str(sock), "resource": KIND,
                                                   "devices": ["0"]}}}
        path.write_text(json.dumps(doc))
        assert status.probe(str(path))[0]
        doc["kinds"][KIND]["registered"] = False
        doc["kinds"][KIND]["error"] = "UNAVAILABLE: no"
        path.write_text(json.dumps(doc))
        assert status.probe(str(path)) == (False, f"{KIND}: not registered (UNAVAILABLE: no)")
        doc["pid"] = 2 ** 22 + 12345
        path.write_text(json.dumps(doc))
        assert "which is not running" in status.probe(str(path))[1]
        path.write_text(json.dumps({"pid": os.getpid(), "kinds": {}}))
        assert "run `xpu-cdi generate`" in status.probe(str(path))[1]
        # written in another pid namespace (the plugin in a pod, read on the host): its pid means
        # nothing here, its socket answers for it
        doc = {"pid": 1, "pid_namespace": "pid:[1]", "kinds": {KIND: {"registered": True, "socket": str(sock),
                                                                     "resource": KIND, "devices": ["0"]}}}
        assert status.alive(doc)
        s.close()
        assert not status.alive(doc)
        path.write_text(json.dumps(doc))
        assert not status.probe(str(path))[0]


def test_socket_path_too_long_is_one_line(tmp_path: Path) -> None:
    from xpu_cdi.deviceplugin.server import KindPlugin

    long_dir = tmp_path / ("d" * 90)
    long_dir.mkdir()
    p = KindPlugin("kunlunxin.com/xpu", "kunlunxin.com/xpu", str(long_dir), ("cdi-cri",), log.into([]))
    with pytest.raises(OSError, match="over the 107-byte limit of unix sockets: use a shorter --plugin-dir"):
        p.serve()
    p.shutdown()


def test_resource_problem() -> None:
    assert config.resource_problem("kunlunxin.com/xpu") == "" and config.resource_problem("huawei.com/Ascend910") == ""
    assert "not an extended resource name" in config.resource_problem("Vendor.com/xpu")
    assert config.resource_problem("kubernetes.io/xpu") != ""
