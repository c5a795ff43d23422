"""Seccomp for containers: the CRI's SecurityProfile as the OCI spec's linux.seccomp.

Profiles are in the Docker/containers JSON format (defaultAction, archMap, syscalls with
includes/excludes by capability, architecture and kernel). `Localhost` names a profile
file on the node; `RuntimeDefault` is the profile Debian ships with containers-common
(/usr/share/containers/seccomp.json, what CRI-O and podman use by default; skopeo
depends on it); `Unconfined`, and no profile at all, mean no filter. A privileged
container gets no filter whatever it asks, as containerd does.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

from protos.runtime.v1 import api_pb2

DEFAULT_PROFILE = Path("/usr/share/containers/seccomp.json")

# libseccomp's name of this machine's architecture, and Go's (profiles' includes use Go's).
_SCMP_ARCH = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64", "ppc64le": "SCMP_ARCH_PPC64LE",
              "s390x": "SCMP_ARCH_S390X", "riscv64": "SCMP_ARCH_RISCV64"}
_GO_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


class SeccompError(ValueError):
    """The profile cannot be loaded or understood; the message names it."""


def _kernel() -> tuple[int, ...]:
    release = os.uname().release.split("-")[0]
    return tuple(int(p) for p in release.split(".")[:2] if p.isdigit())


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())


def _applies(rule: dict[str, Any], capabilities: set[str], arch: str, kernel: tuple[int, ...]) -> bool:
    excludes, includes = rule.get("excludes") or {}, rule.get("includes") or {}
    if arch in (excludes.get("arches") or []):
        return False
    if any(cap in capabilities for cap in excludes.get("caps") or []):
        return False
    if excludes.get("minKernel") and kernel >= _version(str(excludes["minKernel"])):
        return False
    if includes.get("arches") and arch not in includes["arches"]:
        return False
    if any(cap not in capabilities for cap in includes.get("caps") or []):
        return False
    if includes.get("minKernel") and kernel < _version(str(includes["minKernel"])):
        return False
    return True


def convert(profile: dict[str, Any], capabilities: set[str], machine: str | None = None,
            kernel: tuple[int, ...] | None = None) -> dict[str, Any]:
    """A Docker-format profile as OCI linux.seccomp for a container with these capabilities."""
    machine = machine or platform.machine()
    kernel = kernel if kernel is not None else _kernel()
    go_arch = _GO_ARCH.get(machine, machine)
    if not isinstance(profile.get("defaultAction"), str):
        raise SeccompError("defaultAction is required")
    out: dict[str, Any] = {"defaultAction": profile["defaultAction"]}
    if "defaultErrnoRet" in profile:
        out["defaultErrnoRet"] = int(profile["defaultErrnoRet"])
    native = _SCMP_ARCH.get(machine)
    if profile.get("archMap"):
        for entry in profile["archMap"]:
            if entry.get("architecture") == native:
                out["architectures"] = [native, *(entry.get("subArchitectures") or [])]
    elif profile.get("architectures"):
        out["architectures"] = list(profile["architectures"])
    if profile.get("flags"):
        out["flags"] = list(profile["flags"])
    syscalls = []
    for index, rule in enumerate(profile.get("syscalls") or []):
        if not isinstance(rule, dict) or not isinstance(rule.get("action"), str):
            raise SeccompError(f"syscalls[{index}]: an object with an action is required")
        if not _applies(rule, capabilities, go_arch, kernel):
            continue
        names = [rule["name"]] if rule.get("name") else list(rule.get("names") or [])
        if not names:
            raise SeccompError(f"syscalls[{index}]: names is required")
        call: dict[str, Any] = {"names": names, "action": rule["action"]}
        if "errnoRet" in rule:
            call["errnoRet"] = int(rule["errnoRet"])
        args = [{k: a[k] for k in ("index", "value", "valueTwo", "op") if k in a} for a in rule.get("args") or []]
        if args:
            call["args"] = args
        syscalls.append(call)
    out["syscalls"] = syscalls
    return out


def _load(path: Path, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise SeccompError(f"{what}: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise SeccompError(f"{what}: {path} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SeccompError(f"{what}: {path} is not a seccomp profile object")
    return doc


def seccomp_spec(config: api_pb2.LinuxContainerSecurityContext, capabilities: list[str],
                 default_profile: Path = DEFAULT_PROFILE) -> dict[str, Any] | None:
    """linux.seccomp for the container, or None for no filter."""
    if config.privileged or not config.HasField("seccomp"):
        return None
    profile = config.seccomp
    if profile.profile_type == api_pb2.SecurityProfile.Unconfined:
        return None
    where = "config.linux.security_context.seccomp"
    if profile.profile_type == api_pb2.SecurityProfile.Localhost:
        if not profile.localhost_ref.startswith("/"):
            raise SeccompError(f"{where}.localhost_ref must be an absolute path, got {profile.localhost_ref!r}")
        doc = _load(Path(profile.localhost_ref), f"{where}.localhost_ref")
    else:
        doc = _load(default_profile, "the RuntimeDefault seccomp profile (package golang-github-containers-common)")
    try:
        return convert(doc, set(capabilities))
    except (SeccompError, TypeError, ValueError, KeyError) as exc:
        raise SeccompError(f"{where}: {exc}") from None
