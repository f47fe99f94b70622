"""``xpu-cdi watch`` and its refresh step (:mod:`xpu_cdi.watch.refresh`): event
matching, the refresh, debouncing, and the loop fed by a fake monitor (the
seam: anything with pyudev's ``Monitor.poll``) and by real kernel uevents.

This machine has no udevd and no loadable modules, so "real" here means
kernel uevents read through pyudev's ``kernel`` source, caused by writing
to a sysfs ``uevent`` file; module (re)loads and PCI binds go through the
fake monitor.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from click.testing import CliRunner

from support import HANG, fakehost
from xpu_cdi import cli, watch
from xpu_cdi.watch import refresh
from xpu_cdi.generate import edits, options, profile, spec
from xpu_cdi.model import CardRule, Profile
from xpu_cdi.node import uevents

pytestmark = pytest.mark.privileged  # fake hosts have mknod'ed nodes

HOOK = "/usr/bin/xpu-cdi-hook"
NO_ADMIN = ("/nonexistent",)


@dataclass
class Event:
    """A uevent as pyudev's Device shows it: an action and a property map."""

    action: str
    properties: Dict[str, str] = field(default_factory=dict)


class FakeMonitor:
    """Stands in for ``pyudev.Monitor``: ``poll(timeout)`` returns queued events."""

    def __init__(self) -> None:
        self.q: "queue.Queue[Event]" = queue.Queue()

    def send(self, action: str, **props: str) -> None:
        self.q.put(Event(action, dict(props, ACTION=action)))

    def poll(self, timeout: Optional[float] = None) -> Optional[Event]:
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None


def target(host: fakehost.FakeHost, spec_dir: Path, fmt: str = "json", manifest: Optional[Path] = None,
           select: Any = None) -> refresh.Target:
    roots = options.roots_of(*(str(host.root),) * 3)
    return refresh.Target(
        plan=functools.partial(options.plan, (), NO_ADMIN, roots),
        select=select or functools.partial(profile.select, None, NO_ADMIN),
        spec_dir=str(spec_dir), fmt=fmt,
        options=spec.SpecOptions(edit=edits.EditOptions(hook_path=HOOK)),
        manifest=str(manifest) if manifest else None)


class Log(list):
    def __call__(self, line: str, level: int = 20) -> None:  # a xpu_cdi.log.Log: the level is not kept
        self.append(line)


def ident(path: Path) -> tuple:
    st = path.stat()
    return (st.st_ino, st.st_mtime_ns)


class TestClassify:
    m = watch.Matchers.of(profile.select(None, NO_ADMIN))

    def test_card_node_kernel_and_udev_names(self) -> None:
        """A card node's add is relevant whether DEVNAME is relative (kernel) or absolute (udev)."""
        assert watch.classify("add", {"DEVNAME": "xpu3"}, self.m) == "add /dev/xpu3"
        assert watch.classify("remove", {"DEVNAME": "/dev/davinci0"}, self.m) == "remove /dev/davinci0"

    def test_control_node(self) -> None:
        """Control nodes of a profile count too."""
        assert watch.classify("add", {"DEVNAME": "davinci_manager"}, self.m) == "add /dev/davinci_manager"

    def test_unrelated_device(self) -> None:
        """Disks, ttys and the like are ignored."""
        assert watch.classify("add", {"DEVNAME": "sda", "SUBSYSTEM": "block"}, self.m) is None

    def test_pci_of_profile_vendor(self) -> None:
        """A PCI bind/unbind of a profile's vendor (a driver load) is relevant; other vendors are not."""
        ev = {"SUBSYSTEM": "pci", "PCI_ID": "1D22:3684", "PCI_SLOT_NAME": "0000:03:00.0"}
        assert watch.classify("bind", ev, self.m) == "bind pci 0000:03:00.0"
        assert watch.classify("bind", dict(ev, PCI_ID="8086:1234"), self.m) is None
        assert watch.classify("change", ev, self.m) is None

    def test_module_any_or_named(self) -> None:
        """The profiles' driver modules are relevant (any module when no profile or --module names one)."""
        ev = {"SUBSYSTEM": "module", "DEVPATH": "/module/kunlun"}
        assert watch.classify("add", ev, self.m) == "add module kunlun"
        assert watch.classify("add", {"SUBSYSTEM": "module", "DEVPATH": "/module/e1000e"}, self.m) is None
        assert watch.classify("add", {"SUBSYSTEM": "module", "DEVPATH": "/module/e1000e"},
                              watch.Matchers.of([])) == "add module e1000e"
        only = watch.Matchers.of([], ["drv_davinci_intf"])
        assert watch.classify("add", ev, only) is None
        assert watch.classify("remove", {"SUBSYSTEM": "module", "DEVPATH": "/module/drv_davinci_intf"},
                              only) == "remove module drv_davinci_intf"


class TestProfileFacts:
    def test_watch_files_come_from_the_profiles(self) -> None:
        """Kunlunxin's XRE version file is /usr/local/xpu/version (no version.txt) and the driver's
        /proc/xpu/version; Ascend's is version.info; the kernel's module list comes first."""
        files = watch.watch_files(profile.select(None, NO_ADMIN), ["/opt/site/version"])
        assert files[0] == "/lib/modules/%v/modules.dep" and files[-1] == "/opt/site/version"
        assert {"/usr/local/xpu/version", "/proc/xpu/version", "/usr/local/Ascend/driver/version.info"} <= set(files)
        assert not any(f.endswith("version.txt") for f in files)

    def test_an_admin_profile_adds_a_watch_file(self, tmp_path: Path) -> None:
        """A site's profile in profiles.d names its own version file: watch follows it, no code change."""
        (tmp_path / "k.yaml").write_text(
            "name: kunlunxin\nvendor: kunlunxin.com\nclass: xpu\n"
            "cards: [{glob: '/dev/xpu[0-9]*', index: '^/dev/xpu([0-9]+)$'}]\n"
            "watch_files: [/opt/xre/VERSION]\nmodules: [kunlun_site]\n")
        profs = profile.select(["kunlunxin"], [str(tmp_path)])
        assert "/opt/xre/VERSION" in watch.watch_files(profs)
        assert watch.Matchers.of(profs).modules == frozenset({"kunlun_site"})

    def test_companion_nodes_are_matched(self) -> None:
        """A uevent for a per-card companion node (Gaudi's accel_controlD3) asks for a refresh."""
        m = watch.Matchers.of([profile.select(["gaudi"], NO_ADMIN)[0]])
        assert watch.classify("add", {"DEVNAME": "accel/accel_controlD3"}, m) == "add /dev/accel/accel_controlD3"


class TestRefresh:
    def test_writes_then_leaves_unchanged_spec_alone(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """The first run writes the spec and its index; a second run with nothing changed rewrites nothing."""
        log, cdi = Log(), tmp_path / "cdi"
        assert refresh.refresh(target(xpu_host, cdi), log) == 1
        f = cdi / "kunlunxin.com-xpu.json"
        before = (ident(f), ident(Path(str(f) + ".xpu-cdi")))
        assert refresh.refresh(target(xpu_host, cdi), log) == 0
        assert (ident(f), ident(Path(str(f) + ".xpu-cdi"))) == before
        assert len(log) == 1 and log[0].startswith(f"wrote {f}: kunlunxin.com/xpu, 8 card(s)")

    def test_same_as_generate(self, xpu_host: fakehost.FakeHost, tmp_path: Path, runner: CliRunner) -> None:
        """What watch writes is what generate would: generate --check finds it up to date."""
        refresh.refresh(target(xpu_host, tmp_path), Log())
        r = runner.invoke(cli.main, ["generate", "--check", "--profiles-dir", NO_ADMIN[0], *xpu_host.cli_roots,
                                     "--hook-path", HOOK, "--spec-dir", str(tmp_path)])
        assert r.exit_code == 0, r.output

    def test_card_gone_rewrites_with_summary(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """A vanished card rewrites the spec, and the log line says what changed."""
        refresh.refresh(target(xpu_host, tmp_path), Log())
        xpu_host.remove_card(5)
        log = Log()
        assert refresh.refresh(target(xpu_host, tmp_path), log) == 1
        assert "devices no longer present: 5" in log[0]

    def test_all_cards_gone_removes_only_ours(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """With every card gone our spec and index go; a foreign spec in the same dir stays."""
        manifest = tmp_path / "state/generated"
        refresh.refresh(target(xpu_host, tmp_path / "cdi", manifest=manifest), Log())
        # the directory is listed too (trailing /): watch created it, so the package may remove it
        assert refresh.read_manifest(str(manifest)) == [f"{tmp_path}/cdi/", f"{tmp_path}/cdi/kunlunxin.com-xpu.json",
                                                        f"{tmp_path}/cdi/kunlunxin.com-xpu.json.xpu-cdi"]
        foreign = tmp_path / "cdi/vendor.example-gpu.json"
        foreign.write_text("{}")
        for i in list(xpu_host.cards):
            xpu_host.remove_card(i)
        log = Log()
        assert refresh.refresh(target(xpu_host, tmp_path / "cdi", manifest=manifest), log) == 1
        assert sorted(os.listdir(tmp_path / "cdi")) == ["vendor.example-gpu.json"]
        assert log == [f"removed {tmp_path / 'cdi/kunlunxin.com-xpu.json'}: its cards are gone"]
        assert refresh.read_manifest(str(manifest)) == [f"{tmp_path}/cdi/"]

    def test_other_format_of_same_kind_removed(self, npu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """Switching to YAML removes our JSON spec of the kind (both would define the same devices)."""
        cdi = tmp_path / "cdi"
        refresh.refresh(target(npu_host, cdi), Log())
        log = Log()
        assert refresh.refresh(target(npu_host, cdi, fmt="yaml"), log) == 2
        assert sorted(os.listdir(cdi)) == ["huawei.com-npu.yaml", "huawei.com-npu.yaml.xpu-cdi"]
        assert log[1].endswith("same kind written as yaml")
        assert refresh.refresh(target(npu_host, cdi, fmt="yaml"), Log()) == 0  # YAML index compares equal


class TestFailedProfile:
    def test_failing_profile_keeps_its_spec(self, host_root: Path, tmp_path: Path) -> None:
        """A half-loaded Ascend driver (manager node gone) is logged and skipped: its spec stays, the
        Kunlunxin spec is still refreshed."""
        host = fakehost.kunlunxin(host_root, cards=2)
        fakehost.ascend(host_root, cards=1)
        cdi = tmp_path / "cdi"
        assert refresh.refresh(target(host, cdi), Log()) == 2
        os.unlink(host_root / "dev/davinci_manager")
        log = Log()
        refresh.refresh(target(host, cdi), log)
        assert (cdi / "huawei.com-npu.json").exists() and (cdi / "kunlunxin.com-xpu.json").exists()
        [line] = [ln for ln in log if ln.startswith("skipped: profile 'ascend'")]
        assert "davinci_manager" in line and not any(ln.startswith("removed") for ln in log)


class TestWatcher:
    def make(self, host: fakehost.FakeHost, tmp_path: Path, **kw: Any) -> "tuple[watch.Watcher, Log]":
        log = Log()
        version = host.path("/usr/local/xpu/version")
        w = watch.Watcher(target(host, tmp_path / "cdi"), [str(version)], log,
                          **dict(dict(debounce=0.15, poll_interval=0.05, max_delay=5.0), **kw))
        return w, log

    def run(self, w: watch.Watcher, mon: Any) -> threading.Thread:
        t = threading.Thread(target=w.loop, args=(mon,), daemon=True)
        t.start()
        return t

    def wait_runs(self, w: watch.Watcher, n: int, log: Log, timeout: float = HANG) -> None:
        """Until *n* runs are done (*timeout* bounds a hang, never a measure)."""
        end = time.monotonic() + timeout
        while w.runs < n:
            assert time.monotonic() < end, f"{w.runs} run(s) of {n} after {timeout}s: {log}"
            time.sleep(0.02)

    def quiet(self, w: watch.Watcher, seconds: float, log: Log) -> None:
        """No further run starts for *seconds* (several debounce windows): fails at the first."""
        runs, end = w.runs, time.monotonic() + seconds
        while time.monotonic() < end:
            assert w.runs == runs, f"a run after the last expected one: {log}"
            time.sleep(0.02)

    def test_burst_of_events_is_one_run(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """A driver load (module add, PCI binds, 8 node adds) within the debounce window runs the pipeline once.

        The watcher's clock stands still while the burst is sent: on a loaded machine the sender can be
        off the CPU for longer than the debounce between two events, which would be two bursts."""
        clock = [0.0]
        w, log = self.make(xpu_host, tmp_path, clock=lambda: clock[0])
        mon = FakeMonitor()
        t = self.run(w, mon)
        self.wait_runs(w, 1, log)
        mon.send("add", SUBSYSTEM="module", DEVPATH="/module/kunlun")
        for i in range(8):
            mon.send("bind", SUBSYSTEM="pci", PCI_ID="1D22:3684", PCI_SLOT_NAME=f"0000:0{i}:00.0")
            mon.send("add", DEVNAME=f"xpu{i}", SUBSYSTEM="xpu")
        end = time.monotonic() + HANG
        while len(w.reasons) < 17:  # the watcher has taken in the whole burst
            assert time.monotonic() < end and w.runs == 1, f"{w.reasons}: {log}"
            time.sleep(0.02)
        clock[0] += w.debounce  # then quiet for the debounce
        self.wait_runs(w, 2, log)
        w.stop.set()
        t.join(HANG)
        assert w.runs == 2, log
        assert log[-1].startswith("checked (add module kunlun, bind pci 0000:00:00.0")  # nothing changed

    def test_irrelevant_events_run_nothing(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """Events for other devices never start the pipeline."""
        w, log = self.make(xpu_host, tmp_path)
        mon = FakeMonitor()
        t = self.run(w, mon)
        self.wait_runs(w, 1, log)
        for name in ("sda", "tty1", "loop0"):
            mon.send("add", DEVNAME=name)
        end = time.monotonic() + HANG
        while not mon.q.empty():  # the watcher has read them all
            assert time.monotonic() < end, "the watcher never read the events"
            time.sleep(0.02)
        self.quiet(w, 0.5, log)
        w.stop.set()
        t.join(HANG)
        assert w.runs == 1  # the start-up run only

    def test_version_file_change_is_exactly_one_regeneration(self, xpu_host: fakehost.FakeHost,
                                                             tmp_path: Path) -> None:
        """A driver update (new version file, nodes renumbered) runs the pipeline once and rewrites once."""
        w, log = self.make(xpu_host, tmp_path)
        t = self.run(w, FakeMonitor())
        self.wait_runs(w, 1, log)
        spec_file = tmp_path / "cdi/kunlunxin.com-xpu.json"
        first = ident(spec_file)
        # the new driver got another major: nodes are re-created, then the version file written
        for i in range(8):
            os.unlink(xpu_host.path(f"/dev/xpu{i}"))
            fakehost.mknod(xpu_host.path(f"/dev/xpu{i}"), 242, i)
        self.quiet(w, 0.2, log)  # the node changes alone trigger nothing: no uevent reached the fake monitor
        xpu_host.path("/usr/local/xpu/version").write_text("version:5.0.22\n")
        self.wait_runs(w, 2, log)
        self.quiet(w, 0.6, log)
        w.stop.set()
        t.join(HANG)
        assert w.runs == 2, log
        assert ident(spec_file) != first and '"major": 242' in spec_file.read_text()
        wrote = [line for line in log if line.startswith("wrote")]
        assert len(wrote) == 2 and "devices changed" in wrote[1]

    def test_touch_without_content_change_rewrites_nothing(self, xpu_host: fakehost.FakeHost,
                                                           tmp_path: Path) -> None:
        """A version file rewritten with the same driver: one run, and the spec file is left alone."""
        w, log = self.make(xpu_host, tmp_path)
        t = self.run(w, FakeMonitor())
        self.wait_runs(w, 1, log)
        spec_file = tmp_path / "cdi/kunlunxin.com-xpu.json"
        first = ident(spec_file)
        version = xpu_host.path("/usr/local/xpu/version")
        os.utime(version, ns=(time.time_ns(), time.time_ns() + 10**9))  # one change (two could be two runs)
        self.wait_runs(w, 2, log)
        self.quiet(w, 0.6, log)
        w.stop.set()
        t.join(HANG)
        assert w.runs == 2 and ident(spec_file) == first
        assert log[-1] == f"checked (changed {version}): specs up to date"

    def test_debounce_waits_for_quiet(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """Events spaced closer than the debounce keep postponing the run; max_delay caps the wait."""
        clock = [0.0]
        w, _log = self.make(xpu_host, tmp_path, debounce=2.0, max_delay=10.0, clock=lambda: clock[0])
        w.trigger("add /dev/xpu0")
        for _ in range(4):
            clock[0] += 1.5
            assert not w.due()
            w.trigger("add /dev/xpu1")
        clock[0] += 2.0
        assert w.due()  # quiet for the debounce
        w.run_once()
        w.trigger("a")
        for _ in range(7):
            clock[0] += 1.5
            w.trigger("b")
        assert w.due()  # 10.5 s after the first event: max_delay reached despite the stream

    def test_failed_refresh_is_logged_and_watch_goes_on(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """An unwritable spec dir is one log line, not a crash."""
        (tmp_path / "cdi").write_text("not a directory")
        w, log = self.make(xpu_host, tmp_path)
        w.run_once()
        assert w.runs == 1 and log and log[0].startswith("refresh failed (start): ")


NULL_UEVENT = Path("/sys/class/mem/null/uevent")  # a uevent we can cause without a driver


def overflowed(monitor: Any) -> Any:
    """*monitor* (a started kernel one) after more uevents than its smallest buffer holds: lost
    ones, the error pending on its socket; the buffer then made large, so that nothing more is lost."""
    monitor.set_receive_buffer_size(1)  # the kernel's floor: a few uevents
    for _ in range(64):
        NULL_UEVENT.write_text("change")
    monitor.set_receive_buffer_size(1 << 20)
    return monitor


class TestRealUevents:
    def test_kernel_uevent_triggers_refresh(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """A real kernel uevent, read by pyudev's kernel monitor, for a watched node starts one refresh.

        The fake host's cards are not real devices, so the watched glob is
        /dev/null, whose uevent we can cause without a driver."""
        monitor = uevents.open_source("kernel", Log())
        if monitor is None:
            pytest.skip("no uevent netlink socket here")
        trigger = NULL_UEVENT
        if not os.access(trigger, os.W_OK):
            pytest.skip("cannot cause a uevent: /sys/class/mem/null/uevent not writable")
        null = Profile(name="kunlunxin", vendor="kunlunxin.com", device_class="xpu", source="test",
                       cards=(CardRule(glob="/dev/null", index_regex=r"^/dev/(null)$"),))
        log = Log()
        w = watch.Watcher(target(xpu_host, tmp_path, select=lambda: [null]), [], log,
                          debounce=0.1, poll_interval=0.1)
        t = threading.Thread(target=w.loop, args=(monitor,), daemon=True)
        t.start()
        TestWatcher().wait_runs(w, 1, log)
        xpu_host.remove_card(7)
        trigger.write_text("change")
        TestWatcher().wait_runs(w, 2, log)
        w.stop.set()
        t.join(HANG)
        assert w.runs == 2, log
        assert log[-1].startswith(f"wrote {tmp_path}/kunlunxin.com-xpu.json: kunlunxin.com/xpu, 7 card(s)")

    def test_lost_uevents_refresh_once(self, xpu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """Lost uevents (ENOBUFS) are one line and one refresh: the error pending on the socket is
        taken, not met again by every poll (a loop spinning on it, a line each time)."""
        log = Log()
        w = watch.Watcher(target(xpu_host, tmp_path), [], log, debounce=0.1, poll_interval=HANG)
        monitor = overflowed(uevents.open_source("kernel", log))
        t = threading.Thread(target=w.loop, args=(monitor,), daemon=True)
        t.start()
        TestWatcher().wait_runs(w, 2, log)
        w.stop.set()
        t.join(HANG)
        lost = [line for line in log if line.startswith("uevents lost")]
        assert lost == ["uevents lost (No buffer space available): refreshing to be safe"], log
        assert "checked (lost uevents): specs up to date" in log, log

    def test_lost_uevents_said_once_by_the_node_loop(self) -> None:
        """The node daemons' wait (device plugin, labeller) says lost uevents, once, and wakes."""
        from xpu_cdi.node.loop import Loop
        from xpu_cdi.node.settings import NodeSettings

        log = Log()
        loop = Loop(log, NodeSettings())
        loop.open_events(HANG, "kernel")
        overflowed(loop.monitor)
        loop.wait(HANG)  # ready at once: the pending error
        loop.wait(0)  # what the overflow left queued, read; nothing said again
        loop.close_events()
        assert [line for line in log if line.startswith("uevents lost")] == [
            "uevents lost (No buffer space available): re-checking everything"], log


class TestCommand:
    def test_once_and_manifest(self, runner: CliRunner, npu_host: fakehost.FakeHost, tmp_path: Path) -> None:
        """watch --once writes the spec, records it in the manifest, and exits 0."""
        r = runner.invoke(cli.main, ["watch", "--once", "--profiles-dir", NO_ADMIN[0], *npu_host.cli_roots,
                                     "--hook-path", HOOK, "--spec-dir", str(tmp_path / "cdi"),
                                     "--manifest", str(tmp_path / "m")])
        assert r.exit_code == 0, r.output
        assert (tmp_path / "m").read_text().splitlines() == [
            f"{tmp_path}/cdi/", f"{tmp_path}/cdi/huawei.com-npu.json", f"{tmp_path}/cdi/huawei.com-npu.json.xpu-cdi"]

    def test_once_without_cards_is_fine(self, runner: CliRunner, host_root: Path, tmp_path: Path) -> None:
        """No cards is not an error for the refresh unit or the package scripts."""
        r = runner.invoke(cli.main, ["watch", "--once", "--profiles-dir", NO_ADMIN[0], "--dev-root", str(host_root),
                                     "--driver-root", str(host_root), "--sysfs-root", str(host_root),
                                     "--hook-path", HOOK, "--spec-dir", str(tmp_path / "cdi")])
        assert r.exit_code == 0, r.output
        assert not (tmp_path / "cdi").exists()

    def test_relative_hook_path_refused(self, runner: CliRunner, npu_host: fakehost.FakeHost) -> None:
        """As generate: a relative hook path is a spec error (exit 5)."""
        r = runner.invoke(cli.main, ["watch", "--once", *npu_host.cli_roots, "--hook-path", "xpu-cdi-hook"])
        assert r.exit_code == 5

    def test_import_order_does_not_matter(self) -> None:
        """watch can be imported before cli (cli imports watch to register the command)."""
        import subprocess
        import sys

        code = "import xpu_cdi.watch, xpu_cdi.cli; print(xpu_cdi.cli.main.get_command(None, 'watch').name)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "watch"
