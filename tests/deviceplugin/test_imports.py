"""What the running device plugin imports (issue 30: each module is resident memory of every
node): nothing of validation, archives or another daemon's stack, on either Python stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import importlog, kubeletkit
from support.dpnode import Node


def test_the_device_plugin_serving_8_cards_imports_only_its_own(node: Node, stack: str,
                                                                  kubelet: kubeletkit.FakeKubelet, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in importlog.ENV.items():
        monkeypatch.setenv(k, v)
    p = kubeletkit.PluginProcess(stack, node.args("--uevents", "kernel"), tmp_path / "plugin.log")
    try:
        kubelet.wait_registered()
        kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="8 cards listed")
        maps = Path(f"/proc/{p.proc.pid}/maps").read_text()
    finally:
        assert p.terminate() == 0
    mods = importlog.imported(p.text()) - importlog.at_start(*kubeletkit.stack_python(stack))
    assert {"grpc", "pyudev", "xpu_cdi.deviceplugin.daemon", "xpu_cdi.generate.check"} <= mods  # its own path ran
    not_here = importlog.NOT_IN_DAEMONS | importlog.YAML | {"prometheus_client", "urllib3", "fractions"}
    assert importlog.loaded(mods, not_here) == []
    assert "/_ssl." in maps  # grpc's asyncio imports ssl, and nothing keeps it out (issue 41)
