"""The pod-volume conformance tests of sig-storage for the kubelet's own volume kinds —
configMap, secret, downwardAPI, projected, subPath into them, the emptyDir wrappers —
mirrored with busybox in place of upstream's mounttest image: each pod prints what
mounttest checks (`content of <file>: …`, `mode of <file>: …` as `stat -L` gives it,
the atomic writer's files being links). The variants run as pods side by side in one
cluster per test; each upstream codename maps to the pod that checks it (the docstrings
and docs/conformance.md say which)."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from kubeling.quantity import parse_quantity
from protos.kubeling.v1 import core_pb2, meta_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.e2e.kubectl import Kubectl
from tests.e2e.test_node_conformance import _finished, _logs
from tests.wait import until

DEFAULT, R400, R440, R444 = "-rw-r--r--", "-r--------", "-r--r-----", "-r--r--r--"


def _reader(name: str, files: Iterable[str], *volumes: tuple[core_pb2.Volume, str], uid: int | None = None,
            fs_group: int | None = None) -> core_pb2.Pod:
    """A pod printing each file's content and mode (mounttest's --file_content, --file_mode)."""
    script = "; ".join(f"echo \"content of {f}: $(cat {f})\"; stat -L -c 'mode of {f}: %A' {f}" for f in files)
    c = container("agnhost-container", "sh", "-c", script)
    for volume, path in volumes:
        c.volumeMounts.add(name=volume.name, mountPath=path, readOnly=True)
    made = pod(name, c, restart_policy="Never")
    for volume, _ in volumes:
        if volume.name not in {v.name for v in made.spec.volumes}:
            made.spec.volumes.append(volume)
    if uid is not None:
        made.spec.securityContext.runAsUser = uid
    if fs_group is not None:
        made.spec.securityContext.fsGroup = fs_group
    return made


def _expect(*pairs: tuple[str, str, str]) -> list[str]:
    out = []
    for path, content, mode in pairs:
        out += [f"content of {path}: {content}", f"mode of {path}: {mode}"]
    return out


def _items(*triples: tuple[str, str, int | None]) -> list[core_pb2.KeyToPath]:
    return [core_pb2.KeyToPath(key=k, path=p, mode=m) if m is not None else core_pb2.KeyToPath(key=k, path=p)
            for k, p, m in triples]


def _cm(name: str, volume: str = "configmap-volume", mode: int | None = None,
        items: list[core_pb2.KeyToPath] | None = None, optional: bool | None = None) -> core_pb2.Volume:
    source = core_pb2.ConfigMapVolumeSource(name=name, items=items or [])
    if mode is not None:
        source.defaultMode = mode
    if optional is not None:
        source.optional = optional
    return core_pb2.Volume(name=volume, configMap=source)


def _secret(name: str, volume: str = "secret-volume", mode: int | None = None,
            items: list[core_pb2.KeyToPath] | None = None, optional: bool | None = None) -> core_pb2.Volume:
    source = core_pb2.SecretVolumeSource(secretName=name, items=items or [])
    if mode is not None:
        source.defaultMode = mode
    if optional is not None:
        source.optional = optional
    return core_pb2.Volume(name=volume, secret=source)


def _downward_files(resource_container: str = "") -> list[core_pb2.DownwardAPIVolumeFile]:
    files = [core_pb2.DownwardAPIVolumeFile(path="podname", fieldRef=core_pb2.ObjectFieldSelector(
        fieldPath="metadata.name"))]
    for path, resource in (("cpu_limit", "limits.cpu"), ("memory_limit", "limits.memory"),
                           ("cpu_request", "requests.cpu"), ("memory_request", "requests.memory")):
        files.append(core_pb2.DownwardAPIVolumeFile(path=path, resourceFieldRef=core_pb2.ResourceFieldSelector(
            containerName=resource_container or "agnhost-container", resource=resource)))
    return files


def _downward(volume: str = "podinfo", mode: int | None = None, item_mode: int | None = None,
              projected: bool = False) -> core_pb2.Volume:
    files = _downward_files()
    if item_mode is not None:
        files[0].mode = item_mode
    if projected:
        source = core_pb2.ProjectedVolumeSource(sources=[core_pb2.VolumeProjection(
            downwardAPI=core_pb2.DownwardAPIProjection(items=files))])
        if mode is not None:
            source.defaultMode = mode
        return core_pb2.Volume(name=volume, projected=source)
    api = core_pb2.DownwardAPIVolumeSource(items=files)
    if mode is not None:
        api.defaultMode = mode
    return core_pb2.Volume(name=volume, downwardAPI=api)


def _projected(volume: str, *sources: core_pb2.VolumeProjection, mode: int | None = None) -> core_pb2.Volume:
    source = core_pb2.ProjectedVolumeSource(sources=list(sources))
    if mode is not None:
        source.defaultMode = mode
    return core_pb2.Volume(name=volume, projected=source)


def _pcm(name: str, items: list[core_pb2.KeyToPath] | None = None,
         optional: bool | None = None) -> core_pb2.VolumeProjection:
    source = core_pb2.ConfigMapProjection(name=name, items=items or [])
    if optional is not None:
        source.optional = optional
    return core_pb2.VolumeProjection(configMap=source)


def _psecret(name: str, items: list[core_pb2.KeyToPath] | None = None,
             optional: bool | None = None) -> core_pb2.VolumeProjection:
    source = core_pb2.SecretProjection(name=name, items=items or [])
    if optional is not None:
        source.optional = optional
    return core_pb2.VolumeProjection(secret=source)


async def _objects(cluster: Cluster) -> None:
    client = cluster.client
    await client.configmaps.create(core_pb2.ConfigMap(
        metadata=meta_pb2.ObjectMeta(name="configmap-test-volume", namespace="default"),
        data={"data-1": "value-1", "data-2": "value-2", "data-3": "value-3"}))
    await client.configmaps.create(core_pb2.ConfigMap(
        metadata=meta_pb2.ObjectMeta(name="configmap-test-upd", namespace="default"),
        data={"data": "value"}, binaryData={"dump.bin": bytes(range(0xde, 0xe4))}))
    for namespace, value in (("default", b"value-1"), ("secret-namespace", b"value-in-other-namespace")):
        if namespace != "default":
            await client.namespaces.create(core_pb2.Namespace(metadata=meta_pb2.ObjectMeta(name=namespace)))
        await client.secrets.create(core_pb2.Secret(
            metadata=meta_pb2.ObjectMeta(name="secret-test", namespace=namespace),
            data={"data-1": value, "data-2": b"value-2", "data-3": b"value-3"}))


async def _check(cluster: Cluster, expected: dict[str, list[str]]) -> None:
    for name, lines in expected.items():
        done = await _finished(cluster, name)
        text = await _logs(cluster, name)
        assert done.status.phase == "Succeeded", (name, text)
        assert text.splitlines() == lines, (name, text)


async def test_configmap_and_secret_volumes(cluster: Cluster) -> None:
    """ConfigMap Volume, without mapping / without mapping, non-root user / without mapping,
    volume mode set / with mapping / with mapping, volume mode set / with mapping, non-root
    user / multiple volume maps / text data, binary data ('[sig-storage] ConfigMap should
    be consumable from pods in volume …, binary data should be reflected in volume');
    Secrets Volume, default / volume mode 0400 / volume mode 0440, fsGroup 1001 and uid
    1000 / mapping / mapping, volume mode 0400 / mapping multiple volume paths / volume mode
    default, secret with same name in different namespace ('[sig-storage] Secrets should be
    consumable from pods in volume …'); EmptyDir Wrapper Volume, Secret and ConfigMap
    volumes, no conflict ('[sig-storage] EmptyDir wrapper volumes should not conflict')."""
    await cluster.add_node(1)
    await _objects(cluster)
    cm_dir, s_dir, f1 = "/etc/configmap-volume", "/etc/secret-volume", "data-1"
    mapped = _items(("data-2", "path/to/data-2", None))
    mapped_400 = _items(("data-2", "path/to/data-2", 0o400))
    cases: dict[str, tuple[core_pb2.Pod, list[str]]] = {
        "pod-configmaps-default": (_reader("pod-configmaps-default", [f"{cm_dir}/{f1}"],
                                           (_cm("configmap-test-volume"), cm_dir)),
                                   _expect((f"{cm_dir}/{f1}", "value-1", DEFAULT))),
        "pod-configmaps-nonroot": (_reader("pod-configmaps-nonroot", [f"{cm_dir}/{f1}"],
                                           (_cm("configmap-test-volume"), cm_dir), uid=1000),
                                   _expect((f"{cm_dir}/{f1}", "value-1", DEFAULT))),
        "pod-configmaps-mode": (_reader("pod-configmaps-mode", [f"{cm_dir}/{f1}"],
                                        (_cm("configmap-test-volume", mode=0o400), cm_dir)),
                                _expect((f"{cm_dir}/{f1}", "value-1", R400))),
        "pod-configmaps-mapped": (_reader("pod-configmaps-mapped", [f"{cm_dir}/path/to/data-2"],
                                          (_cm("configmap-test-volume", items=mapped), cm_dir)),
                                  _expect((f"{cm_dir}/path/to/data-2", "value-2", DEFAULT))),
        "pod-configmaps-mapped-mode": (_reader("pod-configmaps-mapped-mode", [f"{cm_dir}/path/to/data-2"],
                                               (_cm("configmap-test-volume", items=mapped_400), cm_dir)),
                                       _expect((f"{cm_dir}/path/to/data-2", "value-2", R400))),
        "pod-configmaps-mapped-nonroot": (_reader("pod-configmaps-mapped-nonroot", [f"{cm_dir}/path/to/data-2"],
                                                  (_cm("configmap-test-volume", items=mapped), cm_dir), uid=1000),
                                          _expect((f"{cm_dir}/path/to/data-2", "value-2", DEFAULT))),
        "pod-configmaps-two": (_reader("pod-configmaps-two", [f"{cm_dir}/{f1}", f"{cm_dir}-2/{f1}"],
                                       (_cm("configmap-test-volume"), cm_dir),
                                       (_cm("configmap-test-volume", "configmap-volume-2"), f"{cm_dir}-2")),
                               _expect((f"{cm_dir}/{f1}", "value-1", DEFAULT), (f"{cm_dir}-2/{f1}", "value-1",
                                                                                DEFAULT))),
        "pod-secrets-default": (_reader("pod-secrets-default", [f"{s_dir}/{f1}"], (_secret("secret-test"), s_dir)),
                                _expect((f"{s_dir}/{f1}", "value-1", DEFAULT))),
        "pod-secrets-mode": (_reader("pod-secrets-mode", [f"{s_dir}/{f1}"],
                                     (_secret("secret-test", mode=0o400), s_dir)),
                             _expect((f"{s_dir}/{f1}", "value-1", R400))),
        "pod-secrets-fsgroup": (_reader("pod-secrets-fsgroup", [f"{s_dir}/{f1}"],
                                        (_secret("secret-test", mode=0o440), s_dir), uid=1000, fs_group=1001),
                                _expect((f"{s_dir}/{f1}", "value-1", R440))),
        "pod-secrets-mapped": (_reader("pod-secrets-mapped", [f"{s_dir}/new-path-data-1"], (_secret(
            "secret-test", items=_items(("data-1", "new-path-data-1", None))), s_dir)),
            _expect((f"{s_dir}/new-path-data-1", "value-1", DEFAULT))),
        "pod-secrets-mapped-mode": (_reader("pod-secrets-mapped-mode", [f"{s_dir}/new-path-data-1"], (_secret(
            "secret-test", items=_items(("data-1", "new-path-data-1", 0o444))), s_dir)),
            _expect((f"{s_dir}/new-path-data-1", "value-1", R444))),
        "pod-secrets-two": (_reader("pod-secrets-two", [f"{s_dir}/{f1}", f"{s_dir}-2/{f1}"],
                                    (_secret("secret-test"), s_dir),
                                    (_secret("secret-test", "secret-volume-2"), f"{s_dir}-2")),
                            _expect((f"{s_dir}/{f1}", "value-1", DEFAULT), (f"{s_dir}-2/{f1}", "value-1", DEFAULT))),
        "pod-configmap-and-secret": (_reader("pod-configmap-and-secret", [f"{s_dir}/{f1}", f"{cm_dir}/{f1}"],
                                             (_secret("secret-test"), s_dir), (_cm("configmap-test-volume"), cm_dir)),
                                     _expect((f"{s_dir}/{f1}", "value-1", DEFAULT),
                                             (f"{cm_dir}/{f1}", "value-1", DEFAULT))),
    }
    binary = _reader("pod-configmaps-binary", [f"{cm_dir}/data"], (_cm("configmap-test-upd"), cm_dir))
    binary.spec.containers[0].command[2] += f"; hexdump -C {cm_dir}/dump.bin | head -1 | cut -c 11-27"
    cases["pod-configmaps-binary"] = (binary, [*_expect((f"{cm_dir}/data", "value", DEFAULT)),
                                               "de df e0 e1 e2 e3"])
    for made, _ in cases.values():
        await cluster.client.pods.create(made)
    await _check(cluster, {name: lines for name, (_, lines) in cases.items()})


async def test_downward_and_projected_volumes(cluster: Cluster) -> None:
    """DownwardAPI volume, CPU limits / CPU request / memory limits / memory request / CPU
    limit, default node allocatable / memory limit, default node allocatable / pod name /
    volume mode 0400 / file mode 0400 ('[sig-storage] Downward API volume should provide …
    | should set DefaultMode on files | should set mode on item file'); the same nine as
    Projected Volume, DownwardAPI, …; Projected Volume, multiple projections; Projected
    Volume, ConfigMap, volume mode default / non-root user / volume mode 0400 / mapped /
    mapped, volume mode 0400 / mapped, non-root user / multiple volume paths; Projected
    Volume, Secrets, volume mode default / non-root, custom fsGroup / volume mode 0400 /
    mapped / mapped, volume mode 0400 / mapped, multiple paths."""
    node = await cluster.add_node(1)
    await _objects(cluster)
    allocatable = (await cluster.client.nodes.get(node.config.node_name)).status.allocatable
    node_cpu, node_memory = allocatable["cpu"], str(parse_quantity(allocatable["memory"]).int_value())
    info = "/etc/podinfo"
    files = [f"{info}/{f}" for f in ("podname", "cpu_limit", "memory_limit", "cpu_request", "memory_request")]
    cases: dict[str, tuple[core_pb2.Pod, list[str]]] = {}
    for kind in ("downwardapi", "projected"):
        projected = kind == "projected"
        for variant, volume, uid in (("resources", _downward(projected=projected), None),
                                     ("defaults", _downward(projected=projected), None),
                                     ("defaultmode", _downward(projected=projected, mode=0o400), None),
                                     ("itemmode", _downward(projected=projected, item_mode=0o400), None)):
            name = f"{kind}-volume-{variant}"
            made = _reader(name, files, (volume, info), uid=uid)
            if variant != "defaults":
                made.spec.containers[0].resources.limits.update({"cpu": "1250m", "memory": "64Mi"})
                made.spec.containers[0].resources.requests.update({"cpu": "250m", "memory": "32Mi"})
            mode = R400 if variant in ("defaultmode",) else DEFAULT
            first = R400 if variant in ("defaultmode", "itemmode") else DEFAULT
            values = ("2", str(64 * 1024 * 1024), "1", str(32 * 1024 * 1024)) if variant != "defaults" else \
                (node_cpu, node_memory, "0", "0")
            cases[name] = (made, _expect((files[0], name, first), *(
                (f, v, mode) for f, v in zip(files[1:], values, strict=True))))

    cm_dir, s_dir, f1 = "/etc/projected-configmap-volume", "/etc/projected-secret-volume", "data-1"
    mapped = _items(("data-2", "path/to/data-2", None))
    cm_cases: list[tuple[str, core_pb2.Volume, int | None, int | None, str, str, str]] = [
            ("projected-configmaps-default", _projected("cm", _pcm("configmap-test-volume")), None, None,
             f"{cm_dir}/{f1}", "value-1", DEFAULT),
            ("projected-configmaps-nonroot", _projected("cm", _pcm("configmap-test-volume")), 1000, None,
             f"{cm_dir}/{f1}", "value-1", DEFAULT),
            ("projected-configmaps-mode", _projected("cm", _pcm("configmap-test-volume"), mode=0o400), None, None,
             f"{cm_dir}/{f1}", "value-1", R400),
            ("projected-configmaps-mapped", _projected("cm", _pcm("configmap-test-volume", mapped)), None, None,
             f"{cm_dir}/path/to/data-2", "value-2", DEFAULT),
            ("projected-configmaps-mapped-mode", _projected("cm", _pcm("configmap-test-volume", _items(
                ("data-2", "path/to/data-2", 0o444)))), None, None, f"{cm_dir}/path/to/data-2", "value-2", R444),
            ("projected-configmaps-mapped-nonroot", _projected("cm", _pcm("configmap-test-volume", mapped)), 1000,
             None, f"{cm_dir}/path/to/data-2", "value-2", DEFAULT)]
    for name, volume, uid, group, path, content, mode in cm_cases:
        cases[name] = (_reader(name, [path], (volume, cm_dir), uid=uid, fs_group=group),
                       _expect((path, content, mode)))
    for name, volume, uid, group, path, content, mode in (
            ("projected-secrets-default", _projected("sec", _psecret("secret-test")), None, None,
             f"{s_dir}/{f1}", "value-1", DEFAULT),
            ("projected-secrets-fsgroup", _projected("sec", _psecret("secret-test"), mode=0o440), 1000, 1001,
             f"{s_dir}/{f1}", "value-1", R440),
            ("projected-secrets-mode", _projected("sec", _psecret("secret-test"), mode=0o400), None, None,
             f"{s_dir}/{f1}", "value-1", R400),
            ("projected-secrets-mapped", _projected("sec", _psecret("secret-test", _items(
                ("data-1", "new-path-data-1", None)))), None, None, f"{s_dir}/new-path-data-1", "value-1", DEFAULT),
            ("projected-secrets-mapped-mode", _projected("sec", _psecret("secret-test", _items(
                ("data-1", "new-path-data-1", 0o400)))), None, None, f"{s_dir}/new-path-data-1", "value-1", R400)):
        cases[name] = (_reader(name, [path], (volume, s_dir), uid=uid, fs_group=group),
                       _expect((path, content, mode)))
    cases["projected-configmaps-two"] = (
        _reader("projected-configmaps-two", [f"{cm_dir}/{f1}", f"{cm_dir}-2/{f1}"],
                (_projected("cm", _pcm("configmap-test-volume")), cm_dir),
                (_projected("cm-2", _pcm("configmap-test-volume")), f"{cm_dir}-2")),
        _expect((f"{cm_dir}/{f1}", "value-1", DEFAULT), (f"{cm_dir}-2/{f1}", "value-1", DEFAULT)))
    cases["projected-secrets-two"] = (
        _reader("projected-secrets-two", [f"{s_dir}/{f1}", f"{s_dir}-2/{f1}"],
                (_projected("sec", _psecret("secret-test")), s_dir),
                (_projected("sec-2", _psecret("secret-test")), f"{s_dir}-2")),
        _expect((f"{s_dir}/{f1}", "value-1", DEFAULT), (f"{s_dir}-2/{f1}", "value-1", DEFAULT)))
    combined_files = ["/all/podname", "/all/cpu_limit", "/all/data-1", "/all/secret-data-1"]
    combined = _reader("projected-volume-combined", combined_files, (_projected(
        "podinfo", core_pb2.VolumeProjection(downwardAPI=core_pb2.DownwardAPIProjection(items=_downward_files()[:2])),
        _pcm("configmap-test-volume", _items(("data-1", "data-1", None))),
        _psecret("secret-test", _items(("data-1", "secret-data-1", None)))), "/all"))
    combined.spec.containers[0].resources.limits.update({"cpu": "1250m", "memory": "64Mi"})
    cases["projected-volume-combined"] = (combined, _expect(
        ("/all/podname", "projected-volume-combined", DEFAULT), ("/all/cpu_limit", "2", DEFAULT),
        ("/all/data-1", "value-1", DEFAULT), ("/all/secret-data-1", "value-1", DEFAULT)))
    for made, _ in cases.values():
        await cluster.client.pods.create(made)
    await _check(cluster, {name: lines for name, (_, lines) in cases.items()})


async def test_updates_reach_running_pods(cluster: Cluster, kubectl: Kubectl) -> None:
    """ConfigMap Volume, update / create, update and delete ('[sig-storage] ConfigMap updates
    | optional updates should be reflected in volume'); Secrets Volume, create, update and
    delete; Projected Volume, ConfigMap, update / ConfigMap, create, update and delete /
    Secrets, create, update delete; DownwardAPI volume, update label / update annotations
    and Projected Volume, DownwardAPI, update labels / update annotation ('… should update
    labels|annotations on modification')."""
    await cluster.add_node(1)
    client = cluster.client

    async def cm(name: str, value: str) -> None:
        await client.configmaps.create(core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name=name,
                                                                                       namespace="default"),
                                                          data={"data-1": value}))

    async def secret(name: str, value: bytes) -> None:
        await client.secrets.create(core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                                                    data={"data-1": value}))
    for prefix in ("cm", "pcm"):
        await cm(f"{prefix}-test-upd", "value-1")
        await cm(f"{prefix}-test-opt-del", "value-1")
        await cm(f"{prefix}-test-opt-upd", "value-1")
    for prefix in ("s", "ps"):
        await secret(f"{prefix}-test-opt-del", b"value-1")
        await secret(f"{prefix}-test-opt-upd", b"value-1")

    def holder(name: str, *volumes: core_pb2.Volume) -> core_pb2.Pod:
        c = container("agnhost-container", "sleep", "3600")
        for v in volumes:
            c.volumeMounts.add(name=v.name, mountPath=f"/etc/{v.name}", readOnly=True)
        made = pod(name, c)
        made.spec.volumes.extend(volumes)
        made.metadata.labels["key1"] = "value1"
        made.metadata.annotations["builder"] = "bar"
        return made
    await client.pods.create(holder("pod-configmaps-upd", _cm("cm-test-upd", "upd"),
                                    _cm("cm-test-opt-del", "del", optional=True),
                                    _cm("cm-test-opt-upd", "updopt", optional=True),
                                    _cm("cm-test-opt-create", "create", optional=True)))
    await client.pods.create(holder("pod-secrets-upd", _secret("s-test-opt-del", "del", optional=True),
                                    _secret("s-test-opt-upd", "updopt", optional=True),
                                    _secret("s-test-opt-create", "create", optional=True)))
    await client.pods.create(holder("pod-projected-upd", _projected("upd", _pcm("pcm-test-upd")),
                                    _projected("del", _pcm("pcm-test-opt-del", optional=True)),
                                    _projected("updopt", _pcm("pcm-test-opt-upd", optional=True)),
                                    _projected("create", _pcm("pcm-test-opt-create", optional=True)),
                                    _projected("sdel", _psecret("ps-test-opt-del", optional=True)),
                                    _projected("supdopt", _psecret("ps-test-opt-upd", optional=True)),
                                    _projected("screate", _psecret("ps-test-opt-create", optional=True))))
    labels = [core_pb2.DownwardAPIVolumeFile(path="labels", fieldRef=core_pb2.ObjectFieldSelector(
        fieldPath="metadata.labels")), core_pb2.DownwardAPIVolumeFile(
        path="annotations", fieldRef=core_pb2.ObjectFieldSelector(fieldPath="metadata.annotations"))]
    await client.pods.create(holder("pod-downward-upd", core_pb2.Volume(
        name="podinfo", downwardAPI=core_pb2.DownwardAPIVolumeSource(items=labels)),
        _projected("ppodinfo", core_pb2.VolumeProjection(downwardAPI=core_pb2.DownwardAPIProjection(items=labels)))))
    for name in ("pod-configmaps-upd", "pod-secrets-upd", "pod-projected-upd", "pod-downward-upd"):
        await cluster.wait_pod(name, lambda p: p.status.phase == "Running")

    async def read(name: str, path: str) -> str:
        code, out, _ = await kubectl("exec", name, "--", "cat", path, ok=False)
        return out if code == 0 else "<none>"
    assert await read("pod-configmaps-upd", "/etc/create/data-1") == "<none>"

    # the changes: each made once, then awaited in the files
    for prefix in ("cm", "pcm"):
        upd = await client.configmaps.get(f"{prefix}-test-upd", "default")
        upd.data["data-1"] = "value-2"
        await client.configmaps.update(upd)
        await client.configmaps.delete(f"{prefix}-test-opt-del", "default")
        opt = await client.configmaps.get(f"{prefix}-test-opt-upd", "default")
        opt.data["data-3"] = "value-3"
        await client.configmaps.update(opt)
        await cm(f"{prefix}-test-opt-create", "value-1")
    for prefix in ("s", "ps"):
        await client.secrets.delete(f"{prefix}-test-opt-del", "default")
        sec = await client.secrets.get(f"{prefix}-test-opt-upd", "default")
        sec.data["data-3"] = b"value-3"
        await client.secrets.update(sec)
        await secret(f"{prefix}-test-opt-create", b"value-1")
    relabelled = await client.pods.get("pod-downward-upd", "default")
    relabelled.metadata.labels["key3"] = "value3"
    relabelled.metadata.annotations["builder"] = "foo"
    await client.pods.update(relabelled)

    expected = {
        ("pod-configmaps-upd", "/etc/upd/data-1"): "value-2", ("pod-configmaps-upd", "/etc/del/data-1"): "<none>",
        ("pod-configmaps-upd", "/etc/updopt/data-3"): "value-3", ("pod-configmaps-upd", "/etc/create/data-1"):
            "value-1",
        ("pod-secrets-upd", "/etc/del/data-1"): "<none>", ("pod-secrets-upd", "/etc/updopt/data-3"): "value-3",
        ("pod-secrets-upd", "/etc/create/data-1"): "value-1",
        ("pod-projected-upd", "/etc/upd/data-1"): "value-2", ("pod-projected-upd", "/etc/del/data-1"): "<none>",
        ("pod-projected-upd", "/etc/updopt/data-3"): "value-3", ("pod-projected-upd", "/etc/create/data-1"):
            "value-1",
        ("pod-projected-upd", "/etc/sdel/data-1"): "<none>", ("pod-projected-upd", "/etc/supdopt/data-3"): "value-3",
        ("pod-projected-upd", "/etc/screate/data-1"): "value-1",
    }
    for (name, path), value in expected.items():
        await until(functools.partial(read, name, path), timeout=120, check=functools.partial(str.__eq__, value),
                    what=f"{name}: {path} = {value}")
    for path in ("/etc/podinfo", "/etc/ppodinfo"):
        await until(functools.partial(read, "pod-downward-upd", f"{path}/labels"), timeout=120,
                    check=lambda got: 'key3="value3"' in got and 'key1="value1"' in got, what=f"{path} labels")
        await until(functools.partial(read, "pod-downward-upd", f"{path}/annotations"), timeout=120,
                    check=lambda got: 'builder="foo"' in got, what=f"{path} annotations")


async def test_subpaths_and_many_configmap_volumes(cluster: Cluster) -> None:
    """SubPath: Reading content from a configmap volume (and with mountPath of existing
    file) / from a downwardAPI volume / from a projected volume / from a secret volume
    ('[sig-storage] Subpath Atomic writer volumes should support subpaths with configmap |
    downward | projected | secret pod'); EmptyDir Wrapper Volume, ConfigMap volumes, no race
    ('[sig-storage] EmptyDir wrapper volumes should not cause race condition when used for
    configmaps': 50 ConfigMaps in each of 5 pods)."""
    await cluster.add_node(1)
    client = cluster.client
    await client.configmaps.create(core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name="my-configmap",
                                                                                   namespace="default"),
                                                      data={"configmap-key": "configmap-value"}))
    await client.secrets.create(core_pb2.Secret(metadata=meta_pb2.ObjectMeta(name="my-secret", namespace="default"),
                                                data={"secret-key": b"secret-value"}))

    def subpath_pod(name: str, volume: core_pb2.Volume, sub: str, mount: str, file: str) -> core_pb2.Pod:
        c = container("test-container-subpath", "cat", file)
        c.volumeMounts.add(name=volume.name, mountPath=mount, subPath=sub)
        made = pod(name, c, restart_policy="Never")
        made.spec.volumes.append(volume)
        return made
    downward = [core_pb2.DownwardAPIVolumeFile(path="downward/podname", fieldRef=core_pb2.ObjectFieldSelector(
        fieldPath="metadata.name"))]
    cases = {
        "pod-subpath-test-configmap": (subpath_pod("pod-subpath-test-configmap", _cm("my-configmap", "v"),
                                                   "configmap-key", "/test-volume/file", "/test-volume/file"),
                                       "configmap-value"),
        "pod-subpath-test-configmap-existing": (subpath_pod("pod-subpath-test-configmap-existing",
                                                            _cm("my-configmap", "v"), "configmap-key", "/etc/group",
                                                            "/etc/group"), "configmap-value"),
        "pod-subpath-test-downwardapi": (subpath_pod("pod-subpath-test-downwardapi", core_pb2.Volume(
            name="v", downwardAPI=core_pb2.DownwardAPIVolumeSource(items=downward)), "downward", "/test-volume",
            "/test-volume/podname"), "pod-subpath-test-downwardapi"),
        "pod-subpath-test-projected": (subpath_pod("pod-subpath-test-projected", _projected(
            "v", _pcm("my-configmap", _items(("configmap-key", "projected/configmap-key", None)))), "projected",
            "/test-volume", "/test-volume/configmap-key"), "configmap-value"),
        "pod-subpath-test-secret": (subpath_pod("pod-subpath-test-secret", _secret("my-secret", "v"), "secret-key",
                                                "/test-volume/file", "/test-volume/file"), "secret-value"),
    }
    for made, _ in cases.values():
        await client.pods.create(made)

    names = [f"racey-configmap-{i}" for i in range(50)]
    for name in names:
        await client.configmaps.create(core_pb2.ConfigMap(metadata=meta_pb2.ObjectMeta(name=name, namespace="default"),
                                                          data={"data-1": name}))
    for replica in range(5):
        c = container("test-container", "sh", "-c", "cat /etc/config-49/data-1; sleep 3600")
        many = pod(f"wrapped-volume-race-{replica}", c)
        for i, name in enumerate(names):
            many.spec.volumes.add(name=f"racey-configmap-{i}", configMap=core_pb2.ConfigMapVolumeSource(name=name))
            c.volumeMounts.add(name=f"racey-configmap-{i}", mountPath=f"/etc/config-{i}")
        await client.pods.create(many)

    for name, (_, content) in cases.items():
        done = await _finished(cluster, name)
        assert done.status.phase == "Succeeded" and await _logs(cluster, name) == content, (name, done.status)
    for replica in range(5):
        running = await cluster.wait_pod(f"wrapped-volume-race-{replica}", lambda p: p.status.phase == "Running",
                                         timeout=120)
        assert running.status.containerStatuses[0].restartCount == 0
