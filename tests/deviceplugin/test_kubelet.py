"""``xpu-cdi device-plugin`` against a fake kubelet built from the upstream proto.

Every test runs the daemon on both Python stacks (``stack``: the venv's PyPI
grpcio/protobuf, and Debian's python3-grpcio/python3-protobuf); the fake
kubelet is the test process itself, with stubs compiled from
the upstream proto (tests/support/kubeproto.py).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import grpc
import pytest

from support import dpnode
from support import fakehost
from support import kubeletkit
from support import npusmi
from support.dpnode import FLOOR, Node
from xpu_cdi.deviceplugin import configselect

pytestmark = pytest.mark.privileged  # mknod of the fake cards

SOCKET = "xpu-cdi-kunlunxin.com-xpu.sock"
#: How soon the daemon reacts to an event (a node gone, kubelet.sock created), in the tests
#: that time it with evented_plugin's 30 s floor: ~0.1-0.3 s here, even beside a CPU hog on
#: both cores; the bound tells an event from the poll without asking for an idle machine.
REACT = 5.0
ALL = [str(i) for i in range(8)]


def healthy(k: kubeletkit.FakeKubelet, card: str) -> bool:
    return k.latest().get(card, ("?",))[0] == "Healthy"


def unhealthy(k: kubeletkit.FakeKubelet, card: str) -> bool:
    return k.latest().get(card, ("?",))[0] == "Unhealthy"


class TestRegistration:
    def test_serves_then_registers(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                   plugin: kubeletkit.PluginProcess) -> None:
        """Version v1beta1, the kind as resource name, our socket as endpoint; kubelet's dial-back inside
        Register worked (the plugin served before it registered) and saw GetPreferredAllocation on."""
        req = kubelet.wait_registered()
        assert (req.version, req.resource_name, req.endpoint) == ("v1beta1", "kunlunxin.com/xpu", SOCKET)
        assert req.options.get_preferred_allocation_available and not req.options.pre_start_required
        assert kubelet.options is not None and kubelet.options.get_preferred_allocation_available
        assert stat.S_ISSOCK(os.lstat(node.plugin_dir / SOCKET).st_mode)

    def test_device_list_with_numa(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                   plugin: kubeletkit.PluginProcess) -> None:
        """Every card of the spec (not 'all'), Healthy, with the NUMA node sysfs gives it."""
        kubelet.wait_registered()
        devs = kubelet.wait_for(lambda: kubelet.latest(), message="a device list")
        assert sorted(devs) == ALL
        assert {d: v for d, v in devs.items()} == {str(i): ("Healthy", [node.host.numa[i]]) for i in range(8)}

    def test_resource_name_and_refusal_quoted(self, node: Node, stack: str, tmp_path: Path) -> None:
        """--resource-name is what registers; kubelet's refusal is quoted in the log and retried."""
        k = kubeletkit.FakeKubelet(node.plugin_dir, refuse="resource name is already taken by another plugin")
        p = kubeletkit.PluginProcess(stack, node.args("--resource-name", "kunlunxin.com/xpu=kunlunxin.com/p800"),
                                     tmp_path / "p.log")
        try:
            p.wait_log("kubelet said: INVALID_ARGUMENT: resource name is already taken by another plugin")
            p.wait_log("(attempt 2)")
            k.stop()
            k2 = kubeletkit.FakeKubelet(node.plugin_dir)
            try:
                assert k2.wait_registered().resource_name == "kunlunxin.com/p800"
            finally:
                k2.stop()
        finally:
            p.stop()
            k.stop()

    def test_kubelet_started_after_the_plugin(self, node: Node, stack: str, tmp_path: Path) -> None:
        """No kubelet.sock yet: one log line saying so; registered when kubelet appears (its event, not
        the 30 s poll)."""
        p = kubeletkit.PluginProcess(stack, node.args("--health-interval", FLOOR), tmp_path / "p.log")
        try:
            p.wait_log("waiting for kubelet")
            time.sleep(1.5)  # well past the first backoff steps
            k = kubeletkit.FakeKubelet(node.plugin_dir)
            try:
                k.wait_registered()
                assert k.registered_at[0] - k.started_at <= REACT, k.history()
                assert p.text().count("waiting for kubelet") == 1  # said once, not per retry
            finally:
                k.stop()
        finally:
            p.stop()


class TestHealth:
    def test_node_removed_then_back(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                    evented_plugin: kubeletkit.PluginProcess) -> None:
        """A vanished node marks that card only Unhealthy, on the event (inotify, not the poll);
        re-created, it is Healthy again."""
        kubelet.wait_registered()
        kubelet.wait_for(lambda: healthy(kubelet, "3"), message="card 3 Healthy")
        path = node.host.path("/dev/xpu3")
        path.unlink()
        t0 = time.monotonic()
        kubelet.wait_for(lambda: unhealthy(kubelet, "3"), message="card 3 Unhealthy")
        assert time.monotonic() - t0 <= REACT
        assert all(healthy(kubelet, c) for c in ALL if c != "3")
        fakehost.mknod(path, fakehost.XPU_MAJOR, 3)
        kubelet.wait_for(lambda: healthy(kubelet, "3"), message="card 3 Healthy again")
        assert "kunlunxin.com/xpu=3: Healthy again" in evented_plugin.text()

    def test_driver_reload_marks_unhealthy_never_removes(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                                         plugin: kubeletkit.PluginProcess) -> None:
        """New node numbers (a reloaded driver, the spec not yet rewritten): Unhealthy, still listed;
        the rewritten spec makes them Healthy."""
        kubelet.wait_registered()
        kubelet.wait_for(lambda: healthy(kubelet, "0"), message="card 0 Healthy")
        for i in (0, 1):
            p = node.host.path(f"/dev/xpu{i}")
            p.unlink()
            fakehost.mknod(p, fakehost.NPU_MAJOR, i)
        kubelet.wait_for(lambda: unhealthy(kubelet, "0") and unhealthy(kubelet, "1"),
                         message="cards 0 and 1 Unhealthy")
        assert sorted(kubelet.latest()) == ALL
        assert "but the spec says 240:0" in plugin.text()
        node.generate()
        kubelet.wait_for(lambda: healthy(kubelet, "0") and healthy(kubelet, "1"),
                         message="cards Healthy after the spec was rewritten")

    def test_driver_state_file(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                               plugin: kubeletkit.PluginProcess) -> None:
        """Kunlunxin's /proc/xpu/dev<N>/state: ERROR marks that card, RUNNING clears it."""
        kubelet.wait_registered()
        state = node.host.path("/proc/xpu/dev5/state")
        fakehost.write(state, "ERROR\n")
        kubelet.wait_for(lambda: unhealthy(kubelet, "5"), message="card 5 Unhealthy")
        assert all(healthy(kubelet, c) for c in ALL if c != "5")
        fakehost.write(state, "RUNNING\n")
        kubelet.wait_for(lambda: healthy(kubelet, "5"), message="card 5 Healthy")


class TestRestart:
    """kubelet restarts as its device manager does (kubeletkit): one registration per kubelet, then quiet.

    Each registration is counted per kubelet instance; a quiet window fails at the first registration
    that arrives in it (a storm is hundreds a second)."""

    def test_kubelet_restart_reregisters_on_the_event(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                                      evented_plugin: kubeletkit.PluginProcess) -> None:
        """kubelet dies, a new one wipes every socket and creates kubelet.sock: registered again on that
        event (within a second on an idle node), from a socket that served when Register arrived, and the
        list comes on the new stream."""
        kubelet.wait_registered()
        for _round in range(2):
            t0 = kubelet.restart()
            reg = kubelet.wait_registered_with(kubelet.instance)
            assert reg.at - t0 <= REACT, evented_plugin.text()
            assert reg.served and (node.plugin_dir / SOCKET).is_socket(), evented_plugin.text()
            kubelet.wait_for(lambda: kubelet.lists and kubelet.lists[-1][0] > reg.at
                             and sorted(kubelet.latest()) == ALL, message="the list on the new stream")

    def test_one_restart_one_registration(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                          plugin: kubeletkit.PluginProcess) -> None:
        """The restart's three signs (stream ended, our socket deleted, kubelet.sock created) give one
        registration, not one each."""
        kubelet.wait_registered()
        kubelet.restart()
        kubelet.wait_registered_with(2)
        kubelet.assert_no_registration(2.0)
        assert (kubelet.count(1), kubelet.count(2)) == (1, 1), kubelet.history()

    @pytest.mark.parametrize("gap", [0.1, 1.0])
    def test_two_restarts_then_quiet(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                     plugin: kubeletkit.PluginProcess, gap: float) -> None:
        """Two restarts *gap* apart (a crash loop, an upgrade restarting twice): one registration with each
        kubelet, then none for 5 s."""
        kubelet.wait_registered()
        t0 = kubelet.restart()
        kubelet.wait_registered_with(2)
        time.sleep(max(0.0, t0 + gap - time.monotonic()))  # the schedule of the restarts, not a wait on the plugin
        kubelet.restart()
        kubelet.wait_registered_with(3)
        kubelet.assert_no_registration(5.0)
        assert [kubelet.count(i) for i in (1, 2, 3)] == [1, 1, 1], kubelet.history()

    def test_restart_while_registering(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                       plugin: kubeletkit.PluginProcess) -> None:
        """Back-to-back restarts, the second while the plugin may be registering with the first: at most one
        registration per kubelet, exactly one with the last, then none for 5 s."""
        kubelet.wait_registered()
        kubelet.restart()
        kubelet.restart()
        kubelet.wait_registered_with(3)
        kubelet.assert_no_registration(5.0)
        assert kubelet.count(2) <= 1 and kubelet.count(3) == 1, kubelet.history()

    def test_fifty_restarts(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                            evented_plugin: kubeletkit.PluginProcess) -> None:
        """50 restarts in a row: each re-registered on its kubelet.sock's event; as many registrations
        as restarts."""
        kubelet.wait_registered()
        late = []
        for _ in range(50):
            t0 = kubelet.restart()
            reg = kubelet.wait_registered_with(kubelet.instance)
            if reg.at - t0 > REACT:
                late.append((kubelet.instance, round(reg.at - t0, 3)))
        kubelet.assert_no_registration(2.0)
        assert not late, f"(kubelet, seconds) registered later than {REACT} s: {late}; kubelet saw:\n" \
                         f"{kubelet.history()}"
        assert kubelet.count() == 51 and all(kubelet.count(i) == 1 for i in range(1, 52)), kubelet.history()

    def test_own_socket_deleted(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                plugin: kubeletkit.PluginProcess) -> None:
        """Our socket removed (kubelet.sock kept): served again and registered again, once."""
        kubelet.wait_registered()
        (node.plugin_dir / SOCKET).unlink()
        kubelet.wait_registered(2)
        assert (node.plugin_dir / SOCKET).is_socket()
        kubelet.assert_no_registration(2.0)
        assert kubelet.count() == 2, kubelet.history()

    def test_stream_ended_by_kubelet(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                     plugin: kubeletkit.PluginProcess) -> None:
        """kubelet drops our endpoint (its ListAndWatch stream ends) and stays: registered again, once; also
        after the stream has sent later lists (a card Unhealthy, then Healthy again)."""
        kubelet.wait_registered()
        kubelet.wait_for(lambda: healthy(kubelet, "3"), message="card 3 Healthy")
        node.host.path("/dev/xpu3").unlink()
        kubelet.wait_for(lambda: unhealthy(kubelet, "3"), message="card 3 Unhealthy")
        fakehost.mknod(node.host.path("/dev/xpu3"), fakehost.XPU_MAJOR, 3)
        kubelet.wait_for(lambda: healthy(kubelet, "3"), message="card 3 Healthy again")
        kubelet.drop("kunlunxin.com/xpu")
        kubelet.wait_registered(2)
        kubelet.assert_no_registration(2.0)
        assert kubelet.count() == 2, kubelet.history()
        plugin.wait_log("kubelet ended the ListAndWatch stream of our registration")


class TestAllocation:
    def test_preferred_two_switches(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                    plugin: kubeletkit.PluginProcess) -> None:
        """8 cards, two PCIe switches: 4 cards under one switch; the fuller group is kept whole;
        must_include is honoured; unknown offered IDs are ignored."""
        kubelet.wait_registered()
        pb2 = kubelet.pb2

        def ask(available: list, size: int, must: tuple = ()) -> list:
            req = pb2.PreferredAllocationRequest(container_requests=[pb2.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=list(must), allocation_size=size)])
            resp = kubelet.plugin().GetPreferredAllocation(req, timeout=kubeletkit.HANG)
            return list(resp.container_responses[0].deviceIDs)

        assert ask(ALL, 4) == ["0", "1", "2", "3"]
        assert ask(["0", "1", "4", "5", "6", "7"], 4) == ["4", "5", "6", "7"]
        assert ask(["0", "1", "4", "5", "6", "7"], 2) == ["0", "1"]
        assert ask(ALL, 2, must=("6",)) in (["4", "6"], ["5", "6"], ["6", "7"])
        assert ask(ALL + ["99"], 8) == ALL

    def test_allocate_one_and_several(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                      plugin: kubeletkit.PluginProcess) -> None:
        """cdi_devices and the cdi.k8s.io annotation name exactly the cards, per container; no host
        device paths, no env."""
        kubelet.wait_registered()
        resp = kubelet.allocate(["2"], ["4", "5", "7"])
        one, several = resp.container_responses
        assert [d.name for d in one.cdi_devices] == ["kunlunxin.com/xpu=2"]
        assert [d.name for d in several.cdi_devices] == [f"kunlunxin.com/xpu={i}" for i in (4, 5, 7)]
        assert dict(several.annotations) == {"cdi.k8s.io/kunlunxin.xpu_4-5-7":
                                             "kunlunxin.com/xpu=4,kunlunxin.com/xpu=5,kunlunxin.com/xpu=7"}
        assert not one.devices and not one.mounts and not one.envs

    def test_allocate_unknown_and_unhealthy(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                            plugin: kubeletkit.PluginProcess) -> None:
        """An ID no spec defines and an Unhealthy card: the call fails naming each."""
        kubelet.wait_registered()
        with pytest.raises(grpc.RpcError) as err:
            kubelet.allocate(["1", "9"])
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "unknown device ID(s) '9'" in err.value.details()
        node.host.path("/dev/xpu6").unlink()
        kubelet.wait_for(lambda: unhealthy(kubelet, "6"), message="card 6 Unhealthy")
        with pytest.raises(grpc.RpcError) as err:
            kubelet.allocate(["6", "7"])
        assert "device '6' is Unhealthy" in err.value.details() and "'7'" not in err.value.details()

    def test_allocate_follows_the_spec_on_disk(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                               plugin: kubeletkit.PluginProcess) -> None:
        """A card gone from the spec is refused at once (even before the list was re-sent), and stays listed
        Unhealthy for the removal grace: a driver reload must not take cards away from kubelet."""
        kubelet.wait_registered()
        node.host.remove_card(7)
        node.generate()
        with pytest.raises(grpc.RpcError) as err:
            kubelet.allocate(["7"])
        assert "device '7' is Unhealthy: no spec in" in err.value.details()
        kubelet.wait_for(lambda: unhealthy(kubelet, "7"), message="card 7 Unhealthy")
        assert sorted(kubelet.latest()) == ALL and all(healthy(kubelet, c) for c in ALL[:7])

    def test_card_dropped_after_the_grace(self, node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
                                          tmp_path: Path) -> None:
        """--removal-grace: a card no spec defines is listed Unhealthy, then dropped; back in the spec
        before that, it is Healthy again."""
        p = kubeletkit.PluginProcess(stack, node.args("--removal-grace", "1.5"), tmp_path / "p.log")
        try:
            kubelet.wait_registered()
            kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="8 cards")
            node.generate("--profile", "kunlunxin", "--no-all-device")  # unchanged cards: a rewrite only
            saved = {f: f.read_bytes() for f in node.spec_dir.iterdir()}
            node.host.path("/dev/xpu6").unlink()
            node.host.path("/dev/xpu7").unlink()
            node.host.cards.remove(6)
            node.host.cards.remove(7)
            node.generate()
            kubelet.wait_for(lambda: unhealthy(kubelet, "6") and unhealthy(kubelet, "7"),
                             message="6 and 7 Unhealthy")
            for f, data in saved.items():  # the old spec is back within the grace: 6 is fine again
                f.write_bytes(data)
            fakehost.mknod(node.host.path("/dev/xpu6"), fakehost.XPU_MAJOR, 6)
            kubelet.wait_for(lambda: healthy(kubelet, "6"), message="6 Healthy again")
            node.generate()  # the spec without 6 and 7 (6's node is there again: only 7 goes)
            kubelet.wait_for(lambda: sorted(kubelet.latest()) == ALL[:7], message="7 dropped")
            p.wait_log("kunlunxin.com/xpu=7: dropped: no spec has defined it for 1.5s")
        finally:
            p.stop()

    def test_envvar_only_when_asked(self, node: Node, stack: str, tmp_path: Path) -> None:
        """--device-list-strategy envvar adds the profile's selection variable."""
        k = kubeletkit.FakeKubelet(node.plugin_dir)
        p = kubeletkit.PluginProcess(stack, node.args("--device-list-strategy", "cdi-cri,envvar"),
                                     tmp_path / "p.log")
        try:
            k.wait_registered()
            c = k.allocate(["3", "1"]).container_responses[0]
            assert len(dict(c.envs)) == 1 and list(dict(c.envs).values()) == ["1,3"]
            assert not c.annotations and [d.name for d in c.cdi_devices] == ["kunlunxin.com/xpu=3",
                                                                             "kunlunxin.com/xpu=1"]
        finally:
            p.stop()
            k.stop()


class TestLifecycle:
    def test_sigterm_removes_sockets_exits_0(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                             plugin: kubeletkit.PluginProcess) -> None:
        kubelet.wait_registered()
        kubelet.wait_for(node.status.exists, message="the status file")
        assert plugin.terminate() == 0
        assert not (node.plugin_dir / SOCKET).exists() and not node.status.exists()
        assert (node.plugin_dir / "kubelet.sock").exists()  # never touches kubelet's own socket

    def test_no_spec_then_spec(self, node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
                               tmp_path: Path) -> None:
        """No spec: one line saying what to run, nothing registered; a spec appears: registered."""
        for f in node.spec_dir.iterdir():
            f.unlink()
        p = kubeletkit.PluginProcess(stack, node.args(), tmp_path / "p.log")
        try:
            p.wait_log("run `xpu-cdi generate`")
            # the pass that said it ends writing the status file: no plugin, so nothing can register
            kubelet.wait_for(node.status.exists, message="the status file")
            assert json.loads(node.status.read_text())["kinds"] == {} and not kubelet.requests
            node.generate()
            kubelet.wait_registered()
        finally:
            p.stop()

    def test_kind_disappears_advertised_empty_first(self, node: Node, stack: str,
                                                    kubelet: kubeletkit.FakeKubelet, tmp_path: Path) -> None:
        """The spec deleted for good: every card Unhealthy for the removal grace, then an empty list,
        then the socket goes."""
        p = kubeletkit.PluginProcess(stack, node.args("--removal-grace", "1"), tmp_path / "p.log")
        try:
            kubelet.wait_registered()
            kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="8 cards")
            for f in node.spec_dir.iterdir():
                f.unlink()
            kubelet.wait_for(lambda: all(unhealthy(kubelet, c) for c in ALL), message="all Unhealthy")
            kubelet.wait_for(lambda: kubelet.lists and kubelet.lists[-1][1] == {}, message="empty list")
            kubelet.wait_for(lambda: not (node.plugin_dir / SOCKET).exists(), message="our socket removed")
        finally:
            p.stop()

    def test_probe_and_status(self, node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
                              plugin: kubeletkit.PluginProcess) -> None:
        """--probe: ready once registered; the status file names the devices; not ready after SIGTERM."""
        kubelet.wait_registered()

        def probe() -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "xpu_cdi.cli", "device-plugin", "--probe",
                                   "--status-file", str(node.status)], capture_output=True, text=True)

        deadline = time.monotonic() + kubeletkit.HANG
        while probe().returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        res = probe()
        assert res.returncode == 0, res.stderr
        assert "registered as kunlunxin.com/xpu with 8 device(s)" in res.stdout
        doc = json.loads(node.status.read_text())
        assert doc["kinds"]["kunlunxin.com/xpu"]["devices"] == ALL
        plugin.terminate()
        res = probe()
        assert res.returncode == 1 and "not ready" in res.stderr

    def test_sighup_reloads(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                            plugin: kubeletkit.PluginProcess) -> None:
        kubelet.wait_registered()
        plugin.proc.send_signal(1)
        plugin.wait_log("SIGHUP: reloading")
        assert plugin.proc.poll() is None

    def test_bad_reload_keeps_the_last_good_settings(self, node: Node, stack: str,
                                                     kubelet: kubeletkit.FakeKubelet, tmp_path: Path) -> None:
        """The config file edited into deep nesting, then SIGHUP: this killed the plugin and left its
        socket (a RecursionError); now one line, and it keeps serving what it served."""
        cfg = tmp_path / "dp.yaml"
        cfg.write_text("device-list-strategy: cdi-cri\n")
        p = kubeletkit.PluginProcess(stack, node.args("--config", str(cfg)), tmp_path / "p.log")
        try:
            kubelet.wait_registered()
            kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="8 cards")
            # the keys of before still read, with one line saying how to write them now
            assert p.text().count("are deprecated: write version: v1") == 1, p.text()
            cfg.write_text("sharing: " + "[" * 500 + "]" * 500 + "\n")
            p.proc.send_signal(1)
            line = p.wait_log("reload refused, keeping the running settings")
            assert "nested deeper than 100 levels" in line and "Traceback" not in p.text(), p.text()
            assert p.proc.poll() is None and (node.plugin_dir / SOCKET).exists()
            assert len(kubelet.latest()) == 8
        finally:
            p.stop()

    def test_a_configmap_update_is_followed(self, node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
                                            tmp_path: Path) -> None:
        """The config file mounted from a ConfigMap: kubelet updates it by swapping the ..data
        symlink (its AtomicWriter). The plugin, polling only every 30 s, re-reads it on the
        event and registers the new resource name: no SIGHUP, no pod restart."""
        mount = tmp_path / "cm"
        renamed = "version: v1\nflags:\n  resourceName: {kunlunxin.com/xpu: kunlunxin.com/p800}\n"
        for version, text in (("..v1", "version: v1\n"), ("..v2", renamed)):
            (mount / version).mkdir(parents=True)
            (mount / version / "config.yaml").write_text(text)
        (mount / "..data").symlink_to("..v1")
        (mount / "config.yaml").symlink_to("..data/config.yaml")
        p = kubeletkit.PluginProcess(stack, node.args("--config", str(mount / "config.yaml"),
                                                      "--health-interval", FLOOR), tmp_path / "p.log")
        try:
            assert kubelet.wait_registered().resource_name == "kunlunxin.com/xpu"
            (mount / "..data_tmp").symlink_to("..v2")
            os.replace(mount / "..data_tmp", mount / "..data")
            kubelet.wait_for(lambda: kubelet.count() >= 2 and kubelet.requests[-1].resource_name ==
                             "kunlunxin.com/p800", message="the renamed resource registered")
            assert f"config file {mount / 'config.yaml'} changed: reloading" in p.text(), p.text()
        finally:
            p.stop()

    def test_the_config_a_node_label_picks_is_served(self, node: Node, stack: str,
                                                     kubelet: kubeletkit.FakeKubelet, tmp_path: Path) -> None:
        """device-plugin-config's file as the plugin's --config (the chart's emptyDir): the config a label
        picks, 4 replicas of each card, is served without a restart; the label gone, the default again."""
        configs = tmp_path / "configs"
        configs.mkdir()
        (configs / "default").write_text("version: v1\n")
        (configs / "shared-4").write_text(
            "version: v1\nsharing: {timeSlicing: {resources: [{name: kunlunxin.com/xpu, replicas: 4}]}}\n")
        out = tmp_path / "plugin-config" / "config.yaml"
        out.parent.mkdir()
        lines: list = []
        selector = configselect.Selector(str(configs), str(out), "default", configselect.DEFAULT_LABEL,
                                         lambda line, level=0: lines.append(line))
        assert selector.apply(None)
        p = kubeletkit.PluginProcess(stack, node.args("--config", str(out), "--health-interval", FLOOR),
                                     tmp_path / "p.log")
        try:
            kubelet.wait_registered()
            kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="8 cards")
            assert selector.apply("shared-4")
            kubelet.wait_for(lambda: len(kubelet.latest()) == 32, message="4 replicas of each of the 8 cards")
            assert selector.apply(None)
            kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="the default's 8 cards again")
            assert p.proc.poll() is None and p.text().count("changed: reloading") == 2, p.text()
        finally:
            p.stop()


class TestSpecChecks:
    def test_stale_spec_is_logged(self, node: Node, kubelet: kubeletkit.FakeKubelet,
                                  plugin: kubeletkit.PluginProcess) -> None:
        """A card added after `generate`: the spec is stale for the host, and the log says so on reload."""
        kubelet.wait_registered()
        fakehost.mknod(node.host.path("/dev/xpu8"), fakehost.XPU_MAJOR, 8)
        plugin.proc.send_signal(1)  # SIGHUP: re-read everything
        plugin.wait_log("is stale for this host")
        assert "run `xpu-cdi generate`" in plugin.text()

    def test_uevent_source_starts(self, node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
                                  tmp_path: Path) -> None:
        """With uevents on (the default), the plugin starts and registers; where netlink is refused it says so
        once and keeps polling."""
        args = [a for a in node.args() if a not in ("--uevents", "none")]
        p = kubeletkit.PluginProcess(stack, [*args, "--uevents", "kernel"], tmp_path / "p.log")
        try:
            kubelet.wait_registered()
            text = p.text()
            assert "Traceback" not in text
        finally:
            p.stop()

    def test_kind_that_is_no_resource_name(self, node: Node, stack: str, kubelet: kubeletkit.FakeKubelet,
                                           tmp_path: Path) -> None:
        """A kind kubelet would refuse as a resource name (upper case): one line with the fix, not served."""
        for f in node.spec_dir.iterdir():
            f.unlink()
        node.generate("--vendor", "KunLun.com")
        p = kubeletkit.PluginProcess(stack, node.args(), tmp_path / "p.log")
        try:
            p.wait_log("KunLun.com/xpu: not served: resource name 'KunLun.com/xpu' is not an extended resource name")
            assert "--resource-name KunLun.com/xpu=<domain>/<name>" in p.text()
            assert not kubelet.requests
        finally:
            p.stop()


def test_ascend_node(stack: str, tmp_path: Path, host_root: Path) -> None:
    """Every profile, not just Kunlunxin: a 4-NPU Ascend node registers its kind under the vendor
    plugin's resource name when asked, and Allocate names the NPUs.  The Ascend driver registers
    davinciN with no parent device (docs/vendors.md), so sysfs gives no NUMA node: none is sent."""
    host = fakehost.ascend(host_root, cards=4)
    dpnode.numa_nodes(host_root, 1)
    node = dpnode.Node(host, tmp_path / "cdi", dpnode.short_dir(), tmp_path / "st.json")
    node.generate()
    (spec,) = node.spec_dir.glob("*.json")
    kind = json.loads(spec.read_text())["kind"]
    k = kubeletkit.FakeKubelet(node.plugin_dir)
    p = kubeletkit.PluginProcess(stack, node.args("--resource-name", f"{kind}=huawei.com/Ascend910"),
                                 tmp_path / "p.log")
    try:
        assert k.wait_registered().resource_name == "huawei.com/Ascend910"
        assert k.wait_for(lambda: k.latest()) == {str(i): ("Healthy", []) for i in range(4)}
        names = [d.name for d in k.allocate(["1", "3"]).container_responses[0].cdi_devices]
        assert names == [f"{kind}=1", f"{kind}=3"]
    finally:
        p.stop()
        k.stop()
        shutil.rmtree(node.plugin_dir, ignore_errors=True)


def test_resource_naming_model(stack: str, tmp_path: Path, host_root: Path) -> None:
    """resourceNaming: model (the config file's key): a node with P800s and 310Ps registers one
    resource per model as the vendors' plugins name them -- the P800 has no name of its own and
    stays kunlunxin.com/xpu, the 310Ps are huawei.com/Ascend310P (mind-cluster's name) -- each on
    its own socket, and Allocate / GetPreferredAllocation answer per resource with the kind's CDI names."""
    fakehost.kunlunxin(host_root, cards=2)
    host = fakehost.ascend(host_root, cards=4, pci_device="0xd500", proc=False)
    fakehost.proc_devices(host_root, {fakehost.XPU_MAJOR: "xpu", fakehost.NPU_MAJOR: "devdrv-cdev"})
    dpnode.numa_nodes(host_root, 1)
    node = dpnode.Node(host, tmp_path / "cdi", dpnode.short_dir(), tmp_path / "st.json")
    node.generate()
    config = tmp_path / "dp.yaml"
    # NVIDIA's shape, with its settings that mean what ours do (and deviceListStrategy: cdi-cri alone)
    config.write_text("version: v1\nflags:\n  resourceNaming: model\n  migStrategy: none\n  failOnInitError: false\n"
                      "  plugin: {passDeviceSpecs: false, deviceListStrategy: cdi-cri}\n")
    k = kubeletkit.FakeKubelet(node.plugin_dir)
    p = kubeletkit.PluginProcess(stack, node.args("--config", str(config)), tmp_path / "p.log")
    try:
        k.wait_registered(count=2)
        by_name = {r.resource_name: r.endpoint for r in k.requests}
        assert sorted(by_name) == ["huawei.com/Ascend310P", "kunlunxin.com/xpu"], k.history()
        assert by_name["huawei.com/Ascend310P"] != by_name["kunlunxin.com/xpu"]
        pb2 = k.pb2
        npu = k.plugin(by_name["huawei.com/Ascend310P"])
        req = pb2.AllocateRequest(container_requests=[pb2.ContainerAllocateRequest(devices_ids=["1", "3"])])
        got = npu.Allocate(req, timeout=kubeletkit.HANG).container_responses[0]
        assert [d.name for d in got.cdi_devices] == ["huawei.com/npu=1", "huawei.com/npu=3"]
        assert not got.annotations and "deprecated" not in p.text()  # plugin.deviceListStrategy was read
        pref = pb2.PreferredAllocationRequest(container_requests=[pb2.ContainerPreferredAllocationRequest(
            available_deviceIDs=["0", "1", "2", "3"], allocation_size=2)])
        chosen = list(npu.GetPreferredAllocation(pref, timeout=kubeletkit.HANG).container_responses[0].deviceIDs)
        assert len(chosen) == 2 and set(chosen) <= {"0", "1", "2", "3"}, chosen
        with pytest.raises(grpc.RpcError) as err:  # the P800s' resource has only cards 0 and 1
            req = pb2.AllocateRequest(container_requests=[pb2.ContainerAllocateRequest(devices_ids=["3"])])
            k.plugin(by_name["kunlunxin.com/xpu"]).Allocate(req, timeout=kubeletkit.HANG)
        assert "unknown device ID(s) '3'" in err.value.details()

        def both() -> Dict[str, Any]:
            kinds = node.status_kinds()
            return kinds if sorted(kinds) == ["huawei.com/Ascend310P", "kunlunxin.com/xpu"] else {}

        # the pass that registered writes the status file after it: waited for, not the registration
        kinds = k.wait_for(both, message=f"both resources in {node.status}")
        assert kinds["huawei.com/Ascend310P"]["kind"] == "huawei.com/npu"  # what doctor checks names by
    finally:
        p.stop()
        k.stop()
        shutil.rmtree(node.plugin_dir, ignore_errors=True)


def test_ascend_carved_chip_not_offered_whole(stack: str, tmp_path: Path, host_root: Path) -> None:
    """A static vNPU carved from chip 0 (/dev/vdavinci100, ids 100 + 16 * phy id: docs/vendors.md) that
    no npu-smi describes: chip 0 is not offered (node.carved, the DRA driver's rule too), nor the vNPU,
    whose template, so its resource name, is unknown; the plugin says both once; destroying the vNPU
    offers the chip again."""
    host = fakehost.ascend(host_root, cards=4, pci_device="0xd500")
    fakehost.mknod(host_root / "dev/vdavinci100", fakehost.NPU_MAJOR, 1100)
    dpnode.numa_nodes(host_root, 1)
    node = dpnode.Node(host, tmp_path / "cdi", dpnode.short_dir(), tmp_path / "st.json")
    node.generate()
    k = kubeletkit.FakeKubelet(node.plugin_dir)
    p = kubeletkit.PluginProcess(stack, node.args(), tmp_path / "p.log")
    try:
        k.wait_registered()
        assert k.wait_for(lambda: k.latest()) == {i: ("Healthy", []) for i in ("1", "2", "3")}
        p.wait_log("huawei.com/npu=0: not offered whole: vNPU(s) 100 carved from it")
        p.wait_log("huawei.com/npu=100: vNPU 100 not offered: its template is unknown: ")
        assert [r.resource_name for r in k.requests] == ["huawei.com/npu"]
        (host_root / "dev/vdavinci100").unlink()
        node.generate()
        assert k.wait_for(lambda: "0" in k.latest() and k.latest()) == {i: ("Healthy", []) for i in "0123"}
    finally:
        p.stop()
        k.stop()
        shutil.rmtree(node.plugin_dir, ignore_errors=True)


def test_ascend_static_vnpus_under_mind_cluster_names(stack: str, tmp_path: Path, host_root: Path) -> None:
    """An admin's vir02 (id 100) and vir04_3c (id 101) on chip 0, made with the stand-in npu-smi at
    <driver root>/usr/local/bin: each is its own resource under mind-cluster's name, learned from
    ``npu-smi info -t info-vnpu``; Allocate gives the vNPU's own CDI device (/dev/davinci100 in the
    container); chip 0 is offered under no name."""
    host = fakehost.ascend(host_root, cards=4, pci_device="0xd500")
    tool, state = host_root / "usr/local/bin/npu-smi", tmp_path / "npu-smi.json"
    npusmi.init_state(state, [{"card": i, "chip": 0, "name": "310P3"} for i in range(4)], fakehost.NPU_MAJOR)
    npusmi.install(tool, state, host_root)
    for template, vnpu_id in (("vir02", "100"), ("vir04_3c", "101")):
        r = subprocess.run([str(tool), "set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", template, "-v", vnpu_id],
                           capture_output=True, text=True, timeout=kubeletkit.HANG)
        assert r.returncode == 0, r.stdout
    dpnode.numa_nodes(host_root, 1)
    node = dpnode.Node(host, tmp_path / "cdi", dpnode.short_dir(), tmp_path / "st.json")
    node.generate()
    k = kubeletkit.FakeKubelet(node.plugin_dir)
    p = kubeletkit.PluginProcess(stack, node.args(), tmp_path / "p.log")
    try:
        k.wait_registered(count=3)
        by_name = {r.resource_name: r.endpoint for r in k.requests}
        assert sorted(by_name) == ["huawei.com/Ascend310P-2c", "huawei.com/Ascend310P-4c.3cpu", "huawei.com/npu"]
        kinds = k.wait_for(lambda: len(node.status_kinds()) == 3 and node.status_kinds(), message="the status")
        assert {n: sorted(v["devices"]) for n, v in kinds.items()} == {
            "huawei.com/Ascend310P-2c": ["100"], "huawei.com/Ascend310P-4c.3cpu": ["101"],
            "huawei.com/npu": ["1", "2", "3"]}, kinds
        pb2 = k.pb2
        vnpu = k.plugin(by_name["huawei.com/Ascend310P-2c"])
        req = pb2.AllocateRequest(container_requests=[pb2.ContainerAllocateRequest(devices_ids=["100"])])
        got = vnpu.Allocate(req, timeout=kubeletkit.HANG)
        assert [d.name for d in got.container_responses[0].cdi_devices] == ["huawei.com/npu=100"]
        with pytest.raises(grpc.RpcError) as err:  # chip 0 is no device of the vNPU's resource
            req = pb2.AllocateRequest(container_requests=[pb2.ContainerAllocateRequest(devices_ids=["0"])])
            vnpu.Allocate(req, timeout=kubeletkit.HANG)
        assert "unknown device ID(s) '0'" in err.value.details()
    finally:
        p.stop()
        k.stop()
        shutil.rmtree(node.plugin_dir, ignore_errors=True)
