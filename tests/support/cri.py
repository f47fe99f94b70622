"""A small CRI client that drives a container runtime the way kubelet does: a pod sandbox,
containers created in it from a ContainerConfig (env, annotations, ``CDI_devices``), started,
waited for, their CRI log read back, everything removed.  The message classes and stubs
are compiled from the upstream proto (tests/support/kubeproto.py).
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import HANG, kubeproto


class CRI:
    """The RuntimeService of a CRI endpoint (``unix://...``)."""

    def __init__(self, address: str, log_dir: Path) -> None:
        import grpc

        self.pb2, grpc_pb2 = kubeproto.stubs("cri/runtime/v1/api.proto")
        self.channel = grpc.insecure_channel(address)
        self.runtime = grpc_pb2.RuntimeServiceStub(self.channel)
        self.log_dir = log_dir
        self.pods: List[str] = []

    def version(self):  # type: ignore[no-untyped-def]
        return self.runtime.Version(self.pb2.VersionRequest(version="v1"), timeout=30)

    def sandbox_config(self, share_pid: bool, cgroup_parent: str):  # type: ignore[no-untyped-def]
        """A host-network pod (no CNI needed; no hostname: the node's is used), as kubelet
        builds it; share_pid: ``shareProcessNamespace: true`` (pid namespace per pod)."""
        pb = self.pb2
        name = f"xpu-{uuid.uuid4().hex[:8]}"
        ns = pb.NamespaceOption(network=pb.NODE, pid=pb.POD if share_pid else pb.CONTAINER, ipc=pb.POD)
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uuid.uuid4().hex, namespace="default", attempt=0),
            log_directory=str(self.log_dir),
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns)))

    def run_pod(self, handler: str, share_pid: bool = False, cgroup_parent: str = ""):  # type: ignore[no-untyped-def]
        config = self.sandbox_config(share_pid, cgroup_parent)
        pod = self.runtime.RunPodSandbox(self.pb2.RunPodSandboxRequest(config=config, runtime_handler=handler),
                                         timeout=120).pod_sandbox_id
        self.pods.append(pod)
        return pod, config

    def run_container(self, pod: str, pod_config, image: str, command: Sequence[str],  # type: ignore[no-untyped-def]
                      last: str, env: Optional[Dict[str, str]] = None, annotations: Optional[Dict[str, str]] = None,
                      cdi_devices: Sequence[str] = (), timeout: float = 60) -> str:
        """Create, start and wait for one container; its output (the CRI log's messages) once the
        line *last*, the command's final output, is in it (see :func:`read_cri_log`)."""
        pb = self.pb2
        name = f"c-{uuid.uuid4().hex[:8]}"
        ns = pod_config.linux.security_context.namespace_options
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0), image=pb.ImageSpec(image=image),
            command=list(command), log_path=f"{name}.log",
            # bytes since CRI v0.37 (env values need not be UTF-8); on the wire the same as the
            # string of older protos, so containerd 1.7 reads it unchanged
            envs=[pb.KeyValue(key=k, value=v.encode()) for k, v in (env or {}).items()],
            annotations=dict(annotations or {}), CDI_devices=[pb.CDIDevice(name=d) for d in cdi_devices],
            linux=pb.LinuxContainerConfig(security_context=pb.LinuxContainerSecurityContext(
                namespace_options=pb.NamespaceOption(network=ns.network, pid=ns.pid, ipc=ns.ipc))))
        cid = self.runtime.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod, config=config, sandbox_config=pod_config), timeout=120).container_id
        try:
            self.runtime.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=120)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                status = self.runtime.ContainerStatus(pb.ContainerStatusRequest(container_id=cid), timeout=30).status
                if status.state == pb.CONTAINER_EXITED:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"container {name} still running after {timeout} s")
            return read_cri_log(self.log_dir / f"{name}.log", last)
        finally:
            self.runtime.RemoveContainer(pb.RemoveContainerRequest(container_id=cid), timeout=60)

    def close(self) -> None:
        for pod in self.pods:
            try:
                self.runtime.StopPodSandbox(self.pb2.StopPodSandboxRequest(pod_sandbox_id=pod), timeout=60)
                self.runtime.RemovePodSandbox(self.pb2.RemovePodSandboxRequest(pod_sandbox_id=pod), timeout=60)
            except Exception:  # noqa: BLE001 - the daemon's stop cleans up what is left
                pass
        self.pods.clear()
        self.channel.close()


def cri_messages(path: Path) -> str:
    """The messages of a CRI log file (``<time> <stream> <P|F> <message>`` per line), joined;
    P marks a partial line continued by the next entry.  Empty while the file is not there."""
    out: List[str] = []
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    for line in text.splitlines():
        m = re.match(r"\S+ (?:stdout|stderr) ([PF]) ?(.*)$", line)
        if m:
            out.append(m.group(2) + ("" if m.group(1) == "P" else "\n"))
    return "".join(out)


def read_cri_log(path: Path, last: str) -> str:
    """:func:`cri_messages` of *path* once the full line *last* is among them: the runtime reports the
    exit while its shim may still be copying the output into the log (or not have made the file yet)."""
    deadline = time.monotonic() + HANG
    while True:
        text = cri_messages(path)
        if last in text.splitlines():
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: no line {last!r} after {HANG:.0f} s; the log so far:\n{text}")
        time.sleep(0.1)
