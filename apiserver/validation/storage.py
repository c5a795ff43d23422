"""Validation of the storage API, worded as upstream's (pkg/apis/core/validation for
PersistentVolumes and claims, pkg/apis/storage/validation for StorageClass, CSIDriver,
CSINode, VolumeAttachment and CSIStorageCapacity)."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from apiserver.validation.checker import Checker
from apiserver.validation.pods import validate_label_selector, validate_node_selector_term
from kubeling import names
from protos.kubeling.v1 import core_pb2, storage_pb2

__all__ = ["ACCESS_MODES", "HOST_PATH_TYPES", "RECLAIM_POLICIES", "VOLUME_MODES", "BINDING_MODES", "validate_pv",
           "validate_pv_update", "validate_pvc", "validate_pvc_update", "validate_storage_class",
           "validate_storage_class_update", "validate_csi_driver", "validate_csi_driver_update", "validate_csi_node",
           "validate_volume_attachment", "validate_volume_attachment_update", "validate_storage_capacity", "immutable"]

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
VOLUME_MODES = ("Block", "Filesystem")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_PV_SOURCES = ("hostPath", "local", "csi")
HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate",
                   "Socket")
_FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")
_LIFECYCLE_MODES = ("Ephemeral", "Persistent")


def _same(a: object, b: object) -> bool:
    if hasattr(a, "SerializeToString") and hasattr(b, "SerializeToString"):
        return bool(a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True))
    return a == b


def immutable(path: str, new: object, old: object, check: Checker) -> None:
    """upstream's ValidateImmutableField."""
    if not _same(new, old):
        shown = new if isinstance(new, str | int | bool) else "{...}"
        check.invalid(path, shown, "field is immutable")


def _access_modes(path: str, modes: Sequence[str], check: Checker, required_detail: str = "") -> None:
    if not modes:
        check.add(path, f"Required value: {required_detail}" if required_detail else "Required value")
    once_pod = other = False
    for mode in modes:
        check.unsupported(path, mode, ACCESS_MODES)
        once_pod |= mode == "ReadWriteOncePod"
        other |= mode in ACCESS_MODES and mode != "ReadWriteOncePod"
    if once_pod and other:
        check.add(path, "Forbidden: may not use ReadWriteOncePod with other access modes")


def _positive_quantity(path: str, text: str, check: Checker) -> None:
    q = check.quantity(path, text)
    if q is not None and q.value <= 0:
        check.invalid(path, text, "must be greater than zero")


def _class_name(path: str, value: str, check: Checker) -> None:
    if value:
        check.name(path, value, names.dns1123_subdomain)


def _absolute_path(path: str, value: str, check: Checker) -> None:
    if check.required(path, value) and ".." in value.split("/"):
        check.invalid(path, value, "must not contain '..'")


def validate_pv(pv: core_pb2.PersistentVolume, check: Checker) -> None:
    spec = pv.spec
    _access_modes("spec.accessModes", spec.accessModes, check)
    if not spec.capacity:
        check.add("spec.capacity", "Required value")
    if "storage" not in spec.capacity or len(spec.capacity) > 1:
        check.add("spec.capacity", f"Unsupported value: {dict(spec.capacity)!r}: supported values: \"storage\"")
    for key, text in spec.capacity.items():
        _positive_quantity(f"spec.capacity[{key}]", text, check)
    if spec.persistentVolumeReclaimPolicy:
        check.unsupported("spec.persistentVolumeReclaimPolicy", spec.persistentVolumeReclaimPolicy, RECLAIM_POLICIES)
    affinity = spec.HasField("nodeAffinity")
    if affinity:
        if not spec.nodeAffinity.HasField("required"):
            check.add("spec.nodeAffinity.required", "Required value: must specify required node constraints")
        else:
            terms = spec.nodeAffinity.required.nodeSelectorTerms
            if not terms:
                check.add("spec.nodeAffinity.required.nodeSelectorTerms",
                          "Required value: must have at least one node selector term")
            for i, term in enumerate(terms):
                validate_node_selector_term(term, f"spec.nodeAffinity.required.nodeSelectorTerms[{i}]", check)
    sources = [s for s in _PV_SOURCES if spec.HasField(s)]
    for extra in sources[1:]:
        check.add(f"spec.{extra}", "Forbidden: may not specify more than 1 volume type")
    if not sources:
        check.add("spec", "Required value: must specify a volume type")
    if spec.HasField("hostPath"):
        _absolute_path("spec.hostPath.path", spec.hostPath.path, check)
        if spec.hostPath.HasField("type"):
            check.unsupported("spec.hostPath.type", spec.hostPath.type, HOST_PATH_TYPES)
        if posixpath.normpath(spec.hostPath.path or ".") == "/" and spec.persistentVolumeReclaimPolicy == "Recycle":
            check.add("spec.persistentVolumeReclaimPolicy",
                      "Forbidden: may not be 'recycle' for a hostPath mount of '/'")
    if spec.HasField("local"):
        _absolute_path("spec.local.path", spec.local.path, check)
        if not affinity:
            check.add("spec.nodeAffinity", "Required value: Local volume requires node affinity")
    if spec.HasField("csi"):
        if check.required("spec.csi.driver", spec.csi.driver):
            check.name("spec.csi.driver", spec.csi.driver, _driver_name)
        check.required("spec.csi.volumeHandle", spec.csi.volumeHandle)
    _class_name("spec.storageClassName", spec.storageClassName, check)
    if spec.HasField("volumeMode"):
        check.unsupported("spec.volumeMode", spec.volumeMode, VOLUME_MODES)



def validate_pv_update(new: core_pb2.PersistentVolume, old: core_pb2.PersistentVolume, check: Checker) -> None:
    for source in _PV_SOURCES:
        a, b = getattr(new.spec, source), getattr(old.spec, source)
        if new.spec.HasField(source) != old.spec.HasField(source) or not _same(a, b):
            check.add("spec.persistentvolumesource", "Forbidden: spec.persistentvolumesource is immutable after "
                                                     "creation")
            break
    immutable("volumeMode", new.spec.volumeMode, old.spec.volumeMode, check)
    if old.spec.HasField("nodeAffinity"):
        immutable("nodeAffinity", new.spec.nodeAffinity, old.spec.nodeAffinity, check)


def _data_source(path: str, kind: str, name: str, group: str, check: Checker) -> None:
    check.required(f"{path}.name", name)
    check.required(f"{path}.kind", kind)
    if not group and kind != "PersistentVolumeClaim":
        check.invalid(path, kind, "")


def validate_pvc(pvc: core_pb2.PersistentVolumeClaim, check: Checker) -> None:
    spec = pvc.spec
    _access_modes("spec.accessModes", spec.accessModes, check, "at least 1 access mode is required")
    if spec.HasField("selector"):
        validate_label_selector(spec.selector, "spec.selector", check)
    storage = spec.resources.requests.get("storage")
    if storage is None:
        check.add("spec.resources[storage]", "Required value")
    else:
        _positive_quantity("spec.resources[storage]", storage, check)
    if spec.HasField("storageClassName"):
        _class_name("spec.storageClassName", spec.storageClassName, check)
    if spec.HasField("volumeMode"):
        check.unsupported("spec.volumeMode", spec.volumeMode, VOLUME_MODES)
    if spec.HasField("dataSource"):
        ds = spec.dataSource
        _data_source("spec.dataSource", ds.kind, ds.name, ds.apiGroup, check)
    if spec.HasField("dataSourceRef"):
        ref = spec.dataSourceRef
        _data_source("spec.dataSourceRef", ref.kind, ref.name, ref.apiGroup, check)
    if spec.HasField("dataSource") and spec.HasField("dataSourceRef"):
        ds, ref = spec.dataSource, spec.dataSourceRef
        if (ds.apiGroup, ds.kind, ds.name) != (ref.apiGroup, ref.kind, ref.name) or ref.HasField("namespace"):
            check.invalid("spec", "spec.dataSource", "must match dataSourceRef")


def validate_pvc_update(new: core_pb2.PersistentVolumeClaim, old: core_pb2.PersistentVolumeClaim,
                        check: Checker) -> None:
    a, b = core_pb2.PersistentVolumeClaimSpec(), core_pb2.PersistentVolumeClaimSpec()
    a.CopyFrom(new.spec)
    b.CopyFrom(old.spec)
    if not old.spec.volumeName:
        b.volumeName = a.volumeName  # the binder sets it once
    if new.status.phase == "Bound" and "storage" in a.resources.requests:
        a.resources.requests["storage"] = b.resources.requests.get("storage", "")
    a.ClearField("volumeAttributesClassName")
    b.ClearField("volumeAttributesClassName")
    if not _same(a, b):
        check.add("spec", "Forbidden: spec is immutable after creation except resources.requests and "
                          "volumeAttributesClassName for bound claims")
    new_size, old_size = new.spec.resources.requests.get("storage"), old.spec.resources.requests.get("storage")
    if new_size and old_size:
        checker = Checker()
        n, o = checker.quantity("", new_size), checker.quantity("", old_size)
        if n is not None and o is not None and n < o:
            check.add("spec.resources.requests.storage", "Forbidden: field can not be less than previous value")
    immutable("volumeMode", new.spec.volumeMode, old.spec.volumeMode, check)


# ---------------------------------------------------------------- storage.k8s.io

def _driver_name(name: str) -> list[str]:
    """A CSI driver's name: at most 63 characters, a DNS subdomain of alphanumerics, '-' and '.'."""
    out = []
    if len(name) > 63:
        out.append("must be no more than 63 characters")
    if not all(c.isalnum() or c in "-." for c in name) or not name[:1].isalnum() or not name[-1:].isalnum():
        out.append("a CSI driver name must consist of alphanumeric characters, '-' or '.', and must start and end "
                   "with an alphanumeric character (e.g. 'MyName', 'my.name', or '123-abc', regex used for "
                   "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return out


def validate_storage_class(sc: storage_pb2.StorageClass, check: Checker) -> None:
    if check.required("provisioner", sc.provisioner):
        check.name("provisioner", sc.provisioner, names.qualified_name)
    total = sum(len(k) + len(v) for k, v in sc.parameters.items())
    if len(sc.parameters) > 512:
        check.add("parameters", "Too many: must have at most 512 parameters")
    if total > 256 * 1024:
        check.add("parameters", "Too long: must have at most 262144 bytes")
    for key in sc.parameters:
        if not key:
            check.invalid("parameters", key, "field can not be empty.")
    if sc.HasField("reclaimPolicy"):
        check.unsupported("reclaimPolicy", sc.reclaimPolicy, ("Delete", "Retain"))
    if sc.HasField("volumeBindingMode"):
        check.unsupported("volumeBindingMode", sc.volumeBindingMode, BINDING_MODES)
    else:
        check.add("volumeBindingMode", "Required value")
    for i, term in enumerate(sc.allowedTopologies):
        path = f"allowedTopologies[{i}]"
        if not term.matchLabelExpressions:
            check.add(f"{path}.matchLabelExpressions", "Required value: must have at least one label expression")
        keys: set[str] = set()
        for j, req in enumerate(term.matchLabelExpressions):
            rp = f"{path}.matchLabelExpressions[{j}]"
            check.name(f"{rp}.key", req.key, names.qualified_name)
            if req.key in keys:
                check.add(f"{rp}.key", f"Duplicate value: {req.key!r}")
            keys.add(req.key)
            if not req.values:
                check.add(f"{rp}.values", "Required value: must specify as least one value")


def validate_storage_class_update(new: storage_pb2.StorageClass, old: storage_pb2.StorageClass,
                                  check: Checker) -> None:
    if dict(new.parameters) != dict(old.parameters):
        check.add("parameters", "Forbidden: updates to parameters are forbidden.")
    if new.provisioner != old.provisioner:
        check.add("provisioner", "Forbidden: updates to provisioner are forbidden.")
    if new.reclaimPolicy != old.reclaimPolicy:
        check.add("reclaimPolicy", "Forbidden: updates to reclaimPolicy are forbidden.")
    immutable("volumeBindingMode", new.volumeBindingMode, old.volumeBindingMode, check)


def validate_csi_driver(driver: storage_pb2.CSIDriver, check: Checker) -> None:
    check.name("metadata.name", driver.metadata.name, _driver_name)
    spec = driver.spec
    if not spec.HasField("attachRequired"):
        check.add("spec.attachRequired", "Required value")
    if not spec.HasField("podInfoOnMount"):
        check.add("spec.podInfoOnMount", "Required value")
    if spec.HasField("fsGroupPolicy"):
        check.unsupported("spec.fsGroupPolicy", spec.fsGroupPolicy, _FS_GROUP_POLICIES)
    for i, mode in enumerate(spec.volumeLifecycleModes):
        check.unsupported(f"spec.volumeLifecycleModes[{i}]", mode, _LIFECYCLE_MODES)
    audiences: set[str] = set()
    for i, request in enumerate(spec.tokenRequests):
        if request.audience in audiences:
            check.add(f"spec.tokenRequests[{i}].audience", f"Duplicate value: {request.audience!r}")
        audiences.add(request.audience)
        if request.HasField("expirationSeconds") and request.expirationSeconds < 600:
            check.invalid(f"spec.tokenRequests[{i}].expirationSeconds", request.expirationSeconds,
                          "may not specify a duration less than 10 minutes")


def validate_csi_driver_update(new: storage_pb2.CSIDriver, old: storage_pb2.CSIDriver, check: Checker) -> None:
    immutable("spec.attachRequired", new.spec.attachRequired, old.spec.attachRequired, check)
    immutable("spec.fsGroupPolicy", new.spec.fsGroupPolicy, old.spec.fsGroupPolicy, check)
    immutable("spec.volumeLifecycleModes", list(new.spec.volumeLifecycleModes), list(old.spec.volumeLifecycleModes),
              check)


def validate_csi_node(node: storage_pb2.CSINode, check: Checker) -> None:
    seen: set[str] = set()
    for i, d in enumerate(node.spec.drivers):
        path = f"spec.drivers[{i}]"
        if check.required(f"{path}.name", d.name):
            check.name(f"{path}.name", d.name, _driver_name)
        if d.name in seen:
            check.add(f"{path}.name", f"Duplicate value: {d.name!r}")
        seen.add(d.name)
        if check.required(f"{path}.nodeID", d.nodeID) and len(d.nodeID) > 192:
            check.add(f"{path}.nodeID", "Too long: may not be more than 192 bytes")
        for j, key in enumerate(d.topologyKeys):
            check.name(f"{path}.topologyKeys[{j}]", key, names.qualified_name)
        if d.allocatable.HasField("count"):
            check.non_negative(f"{path}.allocatable.count", d.allocatable.count)


def validate_volume_attachment(va: storage_pb2.VolumeAttachment, check: Checker) -> None:
    spec = va.spec
    if check.required("spec.attacher", spec.attacher):
        check.name("spec.attacher", spec.attacher, _driver_name)
    check.required("spec.nodeName", spec.nodeName)
    has_pv, has_inline = spec.source.HasField("persistentVolumeName"), spec.source.HasField("inlineVolumeSpec")
    if has_pv == has_inline:
        check.add("spec.source", "Required value: must specify exactly one of inlineVolumeSpec and "
                                 "persistentVolumeName")
    elif has_pv and not spec.source.persistentVolumeName:
        check.add("spec.source.persistentVolumeName", "Required value: must specify non empty persistentVolumeName")


def validate_volume_attachment_update(new: storage_pb2.VolumeAttachment, old: storage_pb2.VolumeAttachment,
                                      check: Checker) -> None:
    immutable("spec", new.spec, old.spec, check)


def validate_storage_capacity(capacity: storage_pb2.CSIStorageCapacity, check: Checker) -> None:
    if capacity.HasField("nodeTopology"):
        validate_label_selector(capacity.nodeTopology, "nodeTopology", check)
    if check.required("storageClassName", capacity.storageClassName):
        check.name("storageClassName", capacity.storageClassName, names.dns1123_subdomain)
    for name in ("capacity", "maximumVolumeSize"):
        if capacity.HasField(name):
            q = check.quantity(name, getattr(capacity, name))
            if q is not None and q.value < 0:
                check.invalid(name, getattr(capacity, name), "must be greater than or equal to 0")
