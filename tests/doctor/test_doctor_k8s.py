"""Doctor check of a RuntimeClass manifest against this node's runtime handlers."""

from __future__ import annotations

import json

import pytest

from support import fakehost
from support.doctornode import Node, status, worst

pytestmark = pytest.mark.privileged


@pytest.fixture
def ready(node: Node) -> Node:
    node.kunlunxin()
    node.generate()
    node.containerd_config()
    return node


class TestRuntimeClass:
    def test_matching_handler_passes(self, ready: Node) -> None:
        """handler: xpu and containerd defines xpu: ok, naming where."""
        _code, res = ready.doctor("--runtimeclass", str(ready.runtimeclass("xpu")))
        r = worst(res, "runtimeclass")
        assert r["status"] == "ok" and "defined by containerd" in r["found"]

    def test_mismatched_handler_fails(self, ready: Node) -> None:
        """handler: ascend-runtime while the runtime calls it xpu: fail; the fix sets handler: xpu."""
        _code, res = ready.doctor("--runtimeclass", str(ready.runtimeclass("ascend-runtime", name="ascend")))
        r = worst(res, "runtimeclass")
        assert r["status"] == "fail" and "'ascend-runtime'" in r["found"] and "runc, xpu" in r["found"]
        assert "set handler: xpu" in r["fix"] and "--runtime-name ascend-runtime" in r["fix"]

    def test_invalid_handler_fails(self, ready: Node) -> None:
        """A handler that is not a DNS label can never match."""
        _code, res = ready.doctor("--runtimeclass", str(ready.runtimeclass("XPU_Runtime")))
        assert "not a lowercase DNS label" in worst(res, "runtimeclass")["found"]

    @pytest.mark.parametrize("bad,why", [("fifo", "a FIFO, not a regular file"),
                                         ("aliases", "more than 10000 nodes")])
    def test_unreadable_manifest_fails_in_one_line(self, ready: Node, bad: str, why: str) -> None:
        """A FIFO (it hung the read) or an alias bomb: one fail line, doctor goes on."""
        import os

        from test_bounded import LAUGHS

        path = ready.tmp / "rc.yaml"
        if bad == "fifo":
            os.mkfifo(path)
        else:
            fakehost.write(path, LAUGHS + "kind: RuntimeClass\nhandler: *f\n")
        _code, res = ready.doctor("--runtimeclass", str(path))
        r = worst(res, "runtimeclass")
        assert r["status"] == "fail" and why in r["found"] and len(r["found"]) < 600, r

    def test_file_without_runtimeclass_fails(self, ready: Node) -> None:
        """A manifest with no RuntimeClass in it: fail, say what to pass."""
        path = ready.tmp / "pod.yaml"
        fakehost.write(path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n")
        _code, res = ready.doctor("--runtimeclass", str(path))
        r = worst(res, "runtimeclass")
        assert r["status"] == "fail" and "holds no RuntimeClass" in r["found"]
        assert "kubectl get runtimeclass" in r["fix"]

    def test_multi_document_and_list(self, ready: Node) -> None:
        """Every RuntimeClass of a multi-document file (and of a List) is checked."""
        path = ready.tmp / "rcs.yaml"
        fakehost.write(path, "kind: RuntimeClass\nmetadata: {name: a}\nhandler: xpu\n---\n"
                             "kind: List\nitems:\n- kind: RuntimeClass\n  metadata: {name: b}\n  handler: nope\n")
        _code, res = ready.doctor("--runtimeclass", str(path))
        found = {r["found"].split("'")[1]: r["status"] for r in res if r["check"] == "runtimeclass"}
        assert found == {"a": "ok", "b": "fail"}

    def test_crio_handler_counts(self, node: Node) -> None:
        """A handler defined only by CRI-O matches too."""
        node.kunlunxin()
        node.generate()
        fakehost.write(node.crio, f"[crio.runtime]\ncdi_spec_dirs = {json.dumps([str(node.spec_dir)])}\n"
                                  f"[crio.runtime.runtimes.npu]\nruntime_path = \"{node.wrapper}\"\n")
        _code, res = node.doctor("--runtimeclass", str(node.runtimeclass("npu")), versions=("crio=1.30.0",))
        assert status(res, "runtimeclass") == "ok"
