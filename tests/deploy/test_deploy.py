"""The Kubernetes manifests in deploy/: parsed, every field a real Kubernetes
API field (checked against the models the official Python client generates
from the OpenAPI spec), required fields present, and consistent with the
package (commands the CLI accepts, image tag = version, same-path host
mounts, the spec directory the runtimes read).

Kubernetes itself cannot run here, so this is what "validated" means.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import click
import pytest
import yaml

from support.k8s import builds
from xpu_cdi import cli
from xpu_cdi._version import VERSION

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SPEC_DIR = "/var/run/cdi"


def docs(name: str) -> List[Dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


@pytest.fixture(scope="module")
def daemonset() -> Dict[str, Any]:
    (ds,) = docs("daemonset.yaml")
    return ds


@pytest.fixture(scope="module")
def runtimeclass() -> Dict[str, Any]:
    (rc,) = docs("runtimeclass.yaml")
    return rc


def pod(ds: Dict[str, Any]) -> Dict[str, Any]:
    return ds["spec"]["template"]["spec"]


def all_containers(ds: Dict[str, Any]) -> List[Dict[str, Any]]:
    return pod(ds).get("initContainers", []) + pod(ds)["containers"]


def container(ds: Dict[str, Any], name: str) -> Dict[str, Any]:
    (c,) = [c for c in all_containers(ds) if c["name"] == name]
    return c


# what each container may write on the host; everything else it mounts is read-only
WRITABLE = {"generate": {SPEC_DIR}, "watch": {SPEC_DIR}, "node-config": {"/etc/xpu-cdi"},
            "install-binaries": {"/usr/local/xpu-cdi"},
            "device-plugin": {"/var/lib/kubelet/device-plugins", "/run/xpu-cdi"}}
HOST_BIN_DIR = "/usr/local/xpu-cdi/bin"


def cli_accepts(args: List[str]) -> click.Context:
    """Parse *args* with the real xpu-cdi CLI (without running the command)."""
    group: click.Group = cli.main
    while True:  # down through groups (`host install-binaries ...`)
        sub = group.get_command(click.Context(group), args[0])
        assert sub is not None, f"xpu-cdi has no command {args[0]!r}"
        if not isinstance(sub, click.Group):
            return sub.make_context(args[0], list(args[1:]))
        group, args = sub, args[1:]


# --- OpenAPI field names -----------------------------------------------------

def api_problems(obj: Dict[str, Any], type_name: str) -> List[str]:
    """Unknown fields and missing required ones of *obj* as the Kubernetes type *type_name*.

    The official client's models are generated from the API's OpenAPI spec;
    its current releases make them pydantic models that forbid unknown fields.
    """
    client = pytest.importorskip("kubernetes.client", reason="the kubernetes client (test extra) is not installed")
    model = getattr(client, type_name)
    if not hasattr(model, "model_validate"):
        pytest.skip("kubernetes client too old: its models do not validate (pydantic models needed)")
    try:
        model.model_validate(obj)
    except ValueError as err:
        return [line for line in str(err).splitlines() if not line.startswith(" ")]
    return []


class TestOpenAPIFields:
    @pytest.mark.parametrize("name, model", [("daemonset.yaml", "V1DaemonSet"),
                                             ("runtimeclass.yaml", "V1RuntimeClass"),
                                             ("node-config.yaml", "V1ConfigMap")])
    def test_every_field_is_an_api_field(self, name: str, model: str) -> None:
        """Every key is a field of the Kubernetes type at that place, and no required field is missing."""
        for doc in docs(name):
            assert api_problems(doc, model) == []

    def test_checker_catches_typos(self) -> None:
        """The check really checks: a misspelt field and a container without a name are reported."""
        bad = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
               "spec": {"selector": {}, "template": {"spec": {"containers": [{"image": "i", "comand": ["x"]}]}}}}
        problems = " ".join(api_problems(bad, "V1DaemonSet"))
        assert "comand" in problems and "name" in problems


# --- the DaemonSet -------------------------------------------------------------

class TestDaemonSet:
    def test_identity_and_selector(self, daemonset: Dict[str, Any]) -> None:
        """apps/v1 DaemonSet whose selector matches its pod template's labels."""
        assert (daemonset["apiVersion"], daemonset["kind"]) == ("apps/v1", "DaemonSet")
        labels = daemonset["spec"]["template"]["metadata"]["labels"]
        assert daemonset["spec"]["selector"]["matchLabels"].items() <= labels.items()

    def test_rbac_free(self, daemonset: Dict[str, Any]) -> None:
        """No token: the pod never talks to the API server (its own account, bound to no role:
        test_each_daemonset_runs_as_its_own_account)."""
        spec = pod(daemonset)
        assert spec["automountServiceAccountToken"] is False
        assert spec["serviceAccountName"] == "xpu-cdi"

    def test_scheduling(self, daemonset: Dict[str, Any]) -> None:
        """A node selector and tolerations for the accelerator taints."""
        spec = pod(daemonset)
        assert spec["nodeSelector"]
        keys = {t.get("key") for t in spec["tolerations"]}
        assert {"kunlunxin.com/xpu", "huawei.com/Ascend910"} <= keys
        for t in spec["tolerations"]:
            assert t["operator"] in ("Exists", "Equal") and t.get("effect", "NoSchedule") in (
                "NoSchedule", "PreferNoSchedule", "NoExecute")

    def test_uevents_need_host_network(self, daemonset: Dict[str, Any]) -> None:
        """watch listens to uevents, which only the host's network namespace receives."""
        assert pod(daemonset)["hostNetwork"] is True

    def test_resources_and_security(self, daemonset: Dict[str, Any]) -> None:
        """Every container has CPU and memory requests, a memory limit, and no privileges."""
        for c in all_containers(daemonset):
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
            assert "memory" in c["resources"]["limits"], c["name"]
            sc = c["securityContext"]
            assert sc.get("privileged") is not True and sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"] and sc["readOnlyRootFilesystem"] is True

    def test_init_generates_main_watches(self, daemonset: Dict[str, Any]) -> None:
        """Init: `xpu-cdi generate` into /var/run/cdi; main: `xpu-cdi watch` on the same dir and options."""
        init, main = container(daemonset, "generate"), container(daemonset, "watch")
        assert init["command"] == main["command"] == ["/usr/bin/xpu-cdi"]
        gen, wat = cli_accepts(init["args"]), cli_accepts(main["args"])
        assert init["args"][0] == "generate" and main["args"][0] == "watch"
        assert gen.params["spec_dir"] == wat.params["spec_dir"] == SPEC_DIR
        # the same spec options, or the watch would rewrite what the init container wrote; the libraries
        # through the update-ldcache hook installed on the host, never LD_LIBRARY_PATH
        assert gen.params["ld_library_path_env"] == wat.params["ld_library_path_env"] is False
        assert gen.params["hook_path"] == wat.params["hook_path"] == f"{HOST_BIN_DIR}/xpu-cdi-hook"
        assert init["image"] == main["image"]

    def test_the_hook_is_installed_where_the_specs_name_it(self, daemonset: Dict[str, Any]) -> None:
        """install-binaries runs first and installs into the directory whose hook the specs name, mounted
        at its host path (with the host's /usr/local above it, read-only, for the ownership check)."""
        inits = [c["name"] for c in pod(daemonset)["initContainers"]]
        assert inits.index("install-binaries") < inits.index("generate")
        c = container(daemonset, "install-binaries")
        params = cli_accepts(c["args"]).params
        assert c["args"][:2] == ["host", "install-binaries"] and params["dest"] == HOST_BIN_DIR
        mounts = {m["mountPath"]: m.get("readOnly", False) for m in c["volumeMounts"]}
        assert mounts == {"/usr/local": True, "/usr/local/xpu-cdi": False}
        from xpu_cdi.host import install

        assert params["source"] == install.IMAGE_DIR

    def test_no_container_asks_for_ld_library_path(self, daemonset: Dict[str, Any]) -> None:
        for c in all_containers(daemonset):
            assert "--ld-library-path-env" not in c.get("args", []) + c.get("command", []), c["name"]

    def test_host_paths_are_mounted_at_the_same_path(self, daemonset: Dict[str, Any]) -> None:
        """Specs name host paths, so host dirs appear at their host path; each container writes only
        what it must (the spec dir; kubelet's plugin dir and the status dir; the node config dir)."""
        volumes = {v["name"]: v for v in pod(daemonset)["volumes"]}
        assert {c["name"] for c in all_containers(daemonset)} == set(WRITABLE)
        for c in all_containers(daemonset):
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            for m in c["volumeMounts"]:
                vol = volumes[m["name"]]
                if "hostPath" not in vol:
                    assert m.get("readOnly") is True, m  # the ConfigMap
                    continue
                assert vol["hostPath"]["path"] == m["mountPath"], m
                assert m.get("readOnly", False) == (m["mountPath"] not in WRITABLE[c["name"]]), (c["name"], m)
            if c["name"] not in ("node-config", "install-binaries"):
                assert {"/dev", "/usr/local", SPEC_DIR} <= set(mounts), c["name"]
        assert volumes["host-cdi"]["hostPath"]["type"] == "DirectoryOrCreate"

    def test_device_plugin_container(self, daemonset: Dict[str, Any]) -> None:
        """`xpu-cdi device-plugin` on the spec dir, kubelet's dir and the status dir it defaults to mounted,
        /sys for health and topology, Ready only when registered (--probe), node-critical priority."""
        c = container(daemonset, "device-plugin")
        assert c["command"] == ["/usr/bin/xpu-cdi"] and c["args"][0] == "device-plugin"
        params = cli_accepts(c["args"]).params
        assert params["spec_dirs"] == (SPEC_DIR,)
        mounts = {m["mountPath"] for m in c["volumeMounts"]}
        assert {params["plugin_dir"], os.path.dirname(params["status_file"]), "/sys"} <= mounts
        probe = c["readinessProbe"]["exec"]["command"]
        assert probe[0] == c["command"][0] and "--probe" in probe
        assert cli_accepts(probe[1:]).params["status_file"] == params["status_file"]
        assert c["readinessProbe"]["timeoutSeconds"] >= 5  # a Python start; kubelet's 1 s fails on a busy node
        assert pod(daemonset)["priorityClassName"] == "system-node-critical"

    def test_node_config_turns_env_selection_off(self, daemonset: Dict[str, Any]) -> None:
        """The ConfigMap is a valid node config saying false; the init container installs it
        atomically (temp + mv; test_node_config_script runs it)."""
        from xpu_cdi import nodeconfig

        (cm,) = docs("node-config.yaml")
        c = container(daemonset, "node-config")
        volumes = {v["name"]: v for v in pod(daemonset)["volumes"]}
        (cm_mount,) = [m for m in c["volumeMounts"] if "configMap" in volumes[m["name"]]]
        assert volumes[cm_mount["name"]]["configMap"]["name"] == cm["metadata"]["name"]
        script = " ".join(c["args"])
        assert "$d/.config.yaml.new" in script and "mv " in script
        assert f"{cm_mount['mountPath']}/config.yaml" in script
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(cm["data"]["config.yaml"])
            f.flush()
            assert nodeconfig.read(f.name).accept_env_selection_when_unprivileged is False

    @pytest.mark.parametrize("path", ["daemonset.yaml", "dra/daemonset.yaml"])
    def test_node_config_script(self, tmp_path: Path, path: str) -> None:
        """Each DaemonSet's node-config script, run by sh on a stand-in /etc/xpu-cdi: it writes the
        ConfigMap's file where there is none, rewrites one whose first line is ours (this release's
        mark, or the DRA DaemonSet's earlier file that gave every kind to DRA: such a node could not
        switch back to the plugin), and leaves an admin's file (no mark) alone."""
        (ds,) = [d for d in docs(path) if d["kind"] == "DaemonSet"]
        (cm,) = [d for d in docs(path.replace("daemonset.yaml", "node-config.yaml") if path == "daemonset.yaml"
                              else path) if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("node-config")]
        etc, given = tmp_path / "etc", tmp_path / "node-config"
        etc.mkdir()
        given.mkdir()
        (given / "config.yaml").write_text(cm["data"]["config.yaml"])
        script = " ".join(container(ds, "node-config")["args"])
        assert script.startswith("d=/etc/xpu-cdi;"), script
        script = script.replace("d=/etc/xpu-cdi;", f"d={etc};").replace("/node-config/", f"{given}/")
        target = etc / "config.yaml"
        earlier_dra = ("# written to /etc/xpu-cdi/config.yaml by the DRA DaemonSet where the host has none\n"
                       "accept-env-selection-when-unprivileged: false\nkubernetes-allocation: dra\n")
        admins = "# mine\nkubernetes-allocation: dra\n"
        for before, after in ((None, cm["data"]["config.yaml"]), (earlier_dra, cm["data"]["config.yaml"]),
                              (cm["data"]["config.yaml"] + "configure-containerd: true\n", cm["data"]["config.yaml"]),
                              (admins, admins), ("", "")):
            if before is not None:
                target.write_text(before)
            subprocess.run(["sh", "-c", script], check=True, capture_output=True)
            assert target.read_text() == after, before
            assert sorted(p.name for p in etc.iterdir()) == ["config.yaml"]
            target.unlink()
        assert "kubernetes-allocation" not in cm["data"]["config.yaml"]

    def test_image_is_this_version(self, daemonset: Dict[str, Any]) -> None:
        """The image tag is the package version."""
        for c in all_containers(daemonset):
            assert c["image"] == f"xpu-cdi:{VERSION}"


# --- RuntimeClass, kustomization, Containerfile ---------------------------------

class TestRuntimeClass:
    def test_handler_matches_runtime_configure(self, runtimeclass: Dict[str, Any]) -> None:
        """The handler is the runtime name `xpu-cdi runtime configure` registers by default."""
        assert (runtimeclass["apiVersion"], runtimeclass["kind"]) == ("node.k8s.io/v1", "RuntimeClass")
        runtime = cli.main.get_command(click.Context(cli.main), "runtime")
        configure = runtime.get_command(click.Context(runtime), "configure")  # type: ignore[union-attr]
        default = next(p.default for p in configure.params if p.name == "runtime_name")
        assert runtimeclass["handler"] == default
        assert runtimeclass["scheduling"]["nodeSelector"]


class TestKustomization:
    def test_lists_the_manifests(self) -> None:
        """Both manifests, existing files, and an image entry for the DaemonSet's image."""
        (k,) = docs("kustomization.yaml")
        assert (k["apiVersion"], k["kind"]) == ("kustomize.config.k8s.io/v1beta1", "Kustomization")
        assert {"daemonset.yaml", "runtimeclass.yaml", "node-config.yaml"} <= set(k["resources"])
        assert all((DEPLOY / r).is_file() for r in k["resources"])
        (image,) = k["images"]
        assert image["name"] == "xpu-cdi" and image["newTag"] == VERSION

    def test_kubectl_kustomize_renders(self) -> None:
        """kubectl's built-in kustomize (the suite's kubectl, of the cluster's pinned release, not
        whatever the machine has) renders the DaemonSets, their ConfigMaps and service accounts,
        the Service and the RuntimeClass."""
        kubectl = builds.ensure_or_skip("kubernetes") / "kubectl"
        out = subprocess.run([str(kubectl), "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        kinds = sorted(d["kind"] for d in yaml.safe_load_all(out.stdout) if d)
        assert kinds == ["ConfigMap", "ConfigMap", "DaemonSet", "DaemonSet", "RuntimeClass", "Service",
                         "ServiceAccount", "ServiceAccount"]


class TestContainerfile:
    text = (DEPLOY / "Containerfile").read_text()

    def test_installs_the_deb_this_build_makes(self) -> None:
        """The build stage makes the .deb with packaging/deb/build.sh and the static binaries with
        build_bin.py --static, for the target's architecture (a cross build where it is not the build
        machine's); the image installs the .deb the build names for this version and keeps the static
        copies where install-binaries takes them from."""
        from xpu_cdi.host import install

        assert re.search(rf"^ARG VERSION={re.escape(VERSION)}$", self.text, re.M)
        assert "ARCH=$TARGETARCH LINTIAN=0 BUILD_DEPS=0 sh packaging/deb/build.sh" in self.text
        assert 'build_bin.py --static --cross "$triplet" --out /out/host' in self.text
        assert "COPY --from=build /out/xpu-cdi_${VERSION}_${TARGETARCH}.deb /tmp/" in self.text
        assert "apt-get install -y --no-install-recommends /tmp/xpu-cdi_${VERSION}_${TARGETARCH}.deb" in self.text
        assert f"COPY --from=build /out/host/ {install.IMAGE_DIR}/" in self.text

    def test_default_command_is_the_watch(self, daemonset: Dict[str, Any]) -> None:
        """ENTRYPOINT + CMD is the DaemonSet's main container, and the CLI accepts it."""
        import json

        entry = json.loads(re.search(r"^ENTRYPOINT (.+)$", self.text, re.M).group(1))  # type: ignore[union-attr]
        cmd = json.loads(re.search(r"^CMD (.+)$", self.text, re.M).group(1))  # type: ignore[union-attr]
        main = container(daemonset, "watch")
        assert entry == main["command"] and cmd == main["args"]
        cli_accepts(cmd)


# --- what the DaemonSet's containers write, run here -----------------------------

@pytest.mark.privileged
@pytest.mark.parametrize("kind", ["kunlunxin", "ascend"])
def test_the_specs_it_writes_never_set_ld_library_path(daemonset: Dict[str, Any], tmp_path: Path,
                                                       kind: str) -> None:
    """The generate init container's and the watch container's own arguments, run on a fake host (its
    roots added): every spec they write has no LD_LIBRARY_PATH anywhere, and the driver's library dirs
    reach containers through an update-ldcache hook at the installed hook's path."""
    import json
    import sys

    from support import fakehost

    host = (fakehost.kunlunxin if kind == "kunlunxin" else fakehost.ascend)(tmp_path / "host")
    xpu_cdi = str(Path(sys.executable).parent / "xpu-cdi")
    try:
        for name, extra in (("generate", []), ("watch", ["--once", "--source", "none"])):
            c = container(daemonset, name)
            spec_dir = tmp_path / name
            args = [a if a != SPEC_DIR else str(spec_dir) for a in c["args"]]
            r = subprocess.run([xpu_cdi, *args, *extra, *host.cli_roots], capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
            (spec_file,) = spec_dir.glob("*.json")
            text = spec_file.read_text()
            assert "LD_LIBRARY_PATH" not in text, name
            hooks = [h for h in json.loads(text)["containerEdits"]["hooks"] if "update-ldcache" in h["args"]]
            assert len(hooks) == 1 and hooks[0]["path"] == f"{HOST_BIN_DIR}/xpu-cdi-hook", hooks
            assert hooks[0]["args"].count("--folder") >= 1
    finally:
        fakehost.remove_tree(host.root)


# --- the optional runtime wiring (deploy/runtime-wiring, a kustomize component) ----------

@pytest.fixture(scope="module")
def wiring() -> Dict[str, Any]:
    (ds,) = docs("runtime-wiring/daemonset.yaml")
    return ds


class TestRuntimeWiring:
    def test_off_by_default(self, daemonset: Dict[str, Any]) -> None:
        """deploy/ alone: no wiring container, no hostPID, and its node config leaves containerd alone."""
        from xpu_cdi import nodeconfig

        assert "wire-runtime" not in [c["name"] for c in all_containers(daemonset)]
        assert not pod(daemonset).get("hostPID")
        (cm,) = docs("node-config.yaml")
        cfg = nodeconfig.NodeConfig  # the defaults apply to what the file does not name
        assert "configure-containerd" not in cm["data"]["config.yaml"] and cfg("x", True).configure_containerd is False

    def test_component_adds_its_daemonset_and_turns_it_on(self) -> None:
        import tempfile

        (k,) = docs("runtime-wiring/kustomization.yaml")
        assert (k["apiVersion"], k["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
        files = k["resources"] + [p["path"] for p in k["patches"]]
        assert all((DEPLOY / "runtime-wiring" / f).is_file() for f in files)
        (patch,) = docs("runtime-wiring/node-config.yaml")
        (base,) = docs("node-config.yaml")
        assert {k: patch["metadata"][k] for k in ("name", "namespace")} == \
            {k: base["metadata"][k] for k in ("name", "namespace")}
        from xpu_cdi import nodeconfig

        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(patch["data"]["config.yaml"])
            f.flush()
            cfg = nodeconfig.read(f.name)
        assert (cfg.configure_containerd, cfg.restart_containerd, cfg.accept_env_selection_when_unprivileged,
                cfg.unknown) == (True, True, False, ())

    @pytest.mark.parametrize("trees", [["deploy"], ["deploy", "deploy/dra"]])
    def test_component_turns_it_on_for_every_node_config(self, trees: List[str], tmp_path: Path) -> None:
        """kubectl's own kustomize, as a user's kustomization uses the component: with deploy/dra too, the
        DRA driver's node config gets the wiring as well (both DaemonSets rewrite the node's file when they
        start: a node switched between them must not lose it); without deploy/dra, no error."""
        import shutil

        kubectl = builds.ensure_or_skip("kubernetes") / "kubectl"
        shutil.copytree(DEPLOY, tmp_path / "deploy")
        (tmp_path / "user").mkdir()
        (tmp_path / "user" / "kustomization.yaml").write_text(yaml.safe_dump(
            {"resources": [f"../{t}" for t in trees], "components": ["../deploy/runtime-wiring"]}))
        out = subprocess.run([str(kubectl), "kustomize", str(tmp_path / "user")], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        configs = {d["metadata"]["name"]: d["data"]["config.yaml"] for d in yaml.safe_load_all(out.stdout)
                   if d and d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("node-config")}
        assert sorted(configs) == sorted({"deploy": "xpu-cdi-node-config",
                                          "deploy/dra": "xpu-cdi-dra-node-config"}[t] for t in trees)
        assert all("configure-containerd: true" in text for text in configs.values()), configs

    def test_its_pod_alone_has_hostpid(self, wiring: Dict[str, Any]) -> None:
        """hostPID (to signal containerd) only in the wiring's pod, whose long-running container is an idle
        sleep as nobody; the work is one init container's, no capabilities, no token; on the host's
        network, as the main pod."""
        spec = pod(wiring)
        assert spec["hostPID"] is True and spec["automountServiceAccountToken"] is False
        assert spec["hostNetwork"] is True  # as the main pod: node plumbing, independent of the pod network
        (init,) = spec["initContainers"]
        (idle,) = spec["containers"]
        assert idle["command"] == ["/bin/sleep", "infinity"] and idle["securityContext"]["runAsUser"] == 65534
        assert "volumeMounts" not in idle
        for c in (init, idle):
            sc = c["securityContext"]
            assert sc["capabilities"]["drop"] == ["ALL"] and sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True

    def test_wire_runtime_arguments(self, daemonset: Dict[str, Any], wiring: Dict[str, Any]) -> None:
        """The CLI accepts them; the handler runs the wrapper install-binaries installs; the node config is
        the host's, the ConfigMap's the fallback; containerd's dir the only writable mount, at its host path."""
        (init,) = pod(wiring)["initContainers"]
        params = cli_accepts(init["args"]).params
        assert params["wrapper_path"] == f"{HOST_BIN_DIR}/xpu-container-runtime"
        assert params["hook_path"] == f"{HOST_BIN_DIR}/xpu-cdi-hook"
        assert params["node_config"] == "/etc/xpu-cdi/config.yaml"
        volumes = {v["name"]: v for v in pod(wiring)["volumes"]}
        mounts = {m["mountPath"]: m for m in init["volumeMounts"]}
        assert os.path.dirname(params["config"]) == os.path.dirname(os.path.dirname(params["drop_in"])) == \
            "/etc/containerd"
        assert [p for p, m in mounts.items() if not m.get("readOnly")] == ["/etc/containerd"]
        assert os.path.dirname(params["socket"]) in mounts
        for path, m in mounts.items():
            vol = volumes[m["name"]]
            if "hostPath" in vol:
                assert vol["hostPath"]["path"] == path
            else:
                assert vol["configMap"]["name"] == "xpu-cdi-node-config"
                assert params["fallback_config"] == f"{path}/config.yaml"
        assert pod(wiring)["nodeSelector"] == pod(daemonset)["nodeSelector"]
        assert pod(wiring)["tolerations"] == pod(daemonset)["tolerations"]

    def test_every_field_is_an_api_field(self, wiring: Dict[str, Any]) -> None:
        assert api_problems(wiring, "V1DaemonSet") == []


DAEMONSETS = ["daemonset.yaml", "dra/daemonset.yaml", "exporter.yaml", "labels/daemonset.yaml",
              "runtime-wiring/daemonset.yaml"]


@pytest.mark.parametrize("path", DAEMONSETS)
def test_each_daemonset_runs_as_its_own_account(path: str) -> None:
    """Not the namespace's `default` (an audit log could not tell the daemons apart, and every pod
    of that account would share its rights): an account of the DaemonSet's own, made in its tree;
    a pod without a token is bound to no role, one with a token only by its own tree's binding."""
    tree = DEPLOY / Path(path).parent
    objs = [d for f in sorted(tree.glob("*.yaml")) if f.name != "kustomization.yaml"
            for d in yaml.safe_load_all(f.read_text()) if d]
    (ds,) = [d for d in docs(path) if d["kind"] == "DaemonSet"]
    spec = pod(ds)
    account = spec.get("serviceAccountName", "default")
    assert account == ds["metadata"]["name"], account
    (sa,) = [o for o in objs if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == account]
    assert sa["metadata"]["namespace"] == ds["metadata"]["namespace"]
    # deploy/device-plugin-evict binds the plugin's account only where an admin turns --evict on, and gives
    # its pod the token then (the chart's devicePlugin.evict: tests/deploy/test_chart.py)
    opt_in = {"device-plugin-evict"}
    every = [d for f in sorted(DEPLOY.rglob("*.yaml")) if "chart" not in f.parts and not opt_in & set(f.parts)
             for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict)]
    bound = [b["metadata"]["name"] for b in every if b.get("kind") in ("RoleBinding", "ClusterRoleBinding")
             and any(s.get("kind") == "ServiceAccount" and s.get("name") == account for s in b.get("subjects", []))]
    if spec.get("automountServiceAccountToken", True) is False:
        assert sa.get("automountServiceAccountToken") is False and bound == [], bound
    else:
        assert bound == [account], bound


@pytest.mark.parametrize("path", DAEMONSETS)
def test_no_termination_log_in_the_hosts_dev(path: str) -> None:
    """A container with the host's /dev mounted (read-only) at /dev writes its termination message
    elsewhere: runc cannot create kubelet's default /dev/termination-log mount point in a read-only /dev
    (found on the suite's node: the container never started; deploy/dra's and the exporter's too)."""
    (ds,) = [d for d in docs(path) if d["kind"] == "DaemonSet"]
    for c in all_containers(ds):
        if "/dev" in {m["mountPath"] for m in c.get("volumeMounts", [])}:
            path = c.get("terminationMessagePath", "/dev/termination-log")
            assert not path.startswith("/dev/"), c["name"]
            assert c["terminationMessagePolicy"] == "FallbackToLogsOnError", c["name"]
