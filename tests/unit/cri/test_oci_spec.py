"""The OCI spec of a CRI container: command semantics, env, user, mounts, namespaces, resources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cri import oci_spec
from cri.oci_spec import (
    ALL_CAPABILITIES,
    SandboxContext,
    SpecError,
    _rootfs_propagation,
    container_spec,
    current_capabilities,
    mount_propagation,
)
from protos.runtime.v1 import api_pb2


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\nstaff:x:50:\n")
    return root


@pytest.fixture
def sandbox(tmp_path: Path) -> SandboxContext:
    etc = tmp_path / "sandbox"
    etc.mkdir()
    for name in ("hosts", "resolv.conf", "hostname"):
        (etc / name).write_text(name)
    return SandboxContext(hostname="web-0", pause_pid=4242, netns_path="/var/run/netns/cni-1", etc_dir=etc,
                          cgroup_parent="/kubeling/pod-uid", sysctls=(("net.ipv4.ip_forward", "0"),))


def spec(rootfs: Path, sandbox: SandboxContext, image: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    config = api_pb2.ContainerConfig(metadata=api_pb2.ContainerMetadata(name="app"), **fields)
    return container_spec("cid", config, image if image is not None else {"Cmd": ["sh"]}, rootfs, sandbox)


@pytest.mark.parametrize(("image", "command", "args", "expected"), [
    ({"Entrypoint": ["/entry"], "Cmd": ["--default"]}, [], [], ["/entry", "--default"]),
    ({"Entrypoint": ["/entry"], "Cmd": ["--default"]}, [], ["--mine"], ["/entry", "--mine"]),
    ({"Entrypoint": ["/entry"], "Cmd": ["--default"]}, ["/mine"], [], ["/mine"]),
    ({"Entrypoint": ["/entry"], "Cmd": ["--default"]}, ["/mine"], ["x"], ["/mine", "x"]),
    ({"Cmd": ["sh"]}, [], [], ["sh"]),
])
def test_command_semantics_as_kubernetes(rootfs: Path, sandbox: SandboxContext, image: dict[str, Any],
                                         command: list[str], args: list[str], expected: list[str]) -> None:
    assert spec(rootfs, sandbox, image, command=command, args=args)["process"]["args"] == expected


def test_no_command_at_all(rootfs: Path, sandbox: SandboxContext) -> None:
    with pytest.raises(SpecError, match="config.command"):
        spec(rootfs, sandbox, {})


def test_env_and_cwd(rootfs: Path, sandbox: SandboxContext) -> None:
    out = spec(rootfs, sandbox, {"Cmd": ["sh"], "Env": ["PATH=/bin", "A=image"], "WorkingDir": "/srv"},
               envs=[api_pb2.KeyValue(key="A", value="pod"), api_pb2.KeyValue(key="B", value="x=y")])
    # HOSTNAME as containerd sets it: after the image's variables, before (and overridable by) the config's.
    assert out["process"]["env"] == ["PATH=/bin", "A=pod", "HOSTNAME=web-0", "B=x=y"]
    mine = spec(rootfs, sandbox, {"Cmd": ["sh"]}, envs=[api_pb2.KeyValue(key="HOSTNAME", value="own")])
    assert mine["process"]["env"] == ["HOSTNAME=own"]
    assert out["process"]["cwd"] == "/srv"
    assert spec(rootfs, sandbox, working_dir="/w")["process"]["cwd"] == "/w"
    with pytest.raises(SpecError, match="config.working_dir"):
        spec(rootfs, sandbox, working_dir="relative")
    with pytest.raises(SpecError, match="config.envs"):
        spec(rootfs, sandbox, envs=[api_pb2.KeyValue(key="", value="x")])


def _security(**fields: Any) -> api_pb2.LinuxContainerConfig:
    return api_pb2.LinuxContainerConfig(security_context=api_pb2.LinuxContainerSecurityContext(**fields))


def test_users(rootfs: Path, sandbox: SandboxContext) -> None:
    def user(image_user: str = "", **security: Any) -> tuple[int, int]:
        out = spec(rootfs, sandbox, {"Cmd": ["sh"], "User": image_user}, linux=_security(**security))
        return out["process"]["user"]["uid"], out["process"]["user"]["gid"]

    assert user() == (0, 0)
    assert user("app") == (1000, 1001)
    assert user("1000") == (1000, 1001)
    assert user("app:staff") == (1000, 50)
    assert user("7:8") == (7, 8)
    assert user("app", run_as_user=api_pb2.Int64Value(value=0)) == (0, 0)
    assert user(run_as_username="app", run_as_group=api_pb2.Int64Value(value=9)) == (1000, 9)
    with pytest.raises(SpecError, match="run_as_username"):
        user(run_as_username="ghost")
    with pytest.raises(SpecError, match="image user"):
        user("ghost")


def test_mounts(rootfs: Path, sandbox: SandboxContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # HostToContainer needs its source on a slave or shared mount (checked in
    # test_mount_propagation_needs_a_fitting_source); say this one is.
    monkeypatch.setattr(oci_spec, "mount_propagation", lambda path, mountinfo=None: "slave")
    data = tmp_path / "data"
    data.mkdir()
    link = tmp_path / "link"
    link.symlink_to(data)
    out = spec(rootfs, sandbox, mounts=[
        api_pb2.Mount(container_path="/data", host_path=str(link), readonly=True),
        api_pb2.Mount(container_path="/etc/hosts", host_path=str(sandbox.etc_dir / "hosts"),
                      propagation=api_pb2.PROPAGATION_HOST_TO_CONTAINER),
    ])
    by_dest = {m["destination"]: m for m in out["mounts"]}
    assert by_dest["/data"] == {"destination": "/data", "type": "bind", "source": str(data),
                                "options": ["rbind", "rprivate", "ro"]}
    assert by_dest["/etc/hosts"]["options"] == ["rbind", "rslave", "rw"]  # the container's own, once
    assert out["linux"]["rootfsPropagation"] == "rslave"
    assert [m["destination"] for m in out["mounts"]].count("/etc/hosts") == 1
    assert by_dest["/etc/resolv.conf"]["source"] == str(sandbox.etc_dir / "resolv.conf")
    for bad, field in ((api_pb2.Mount(container_path="rel", host_path=str(data)), "container_path"),
                       (api_pb2.Mount(container_path="/x", host_path=str(tmp_path / "none")), "host_path"),
                       (api_pb2.Mount(container_path="/x"), "host_path")):
        with pytest.raises(SpecError, match=rf"config\.mounts\[0\]\.{field}"):
            spec(rootfs, sandbox, mounts=[bad])


def test_namespaces_join_the_sandbox(rootfs: Path, sandbox: SandboxContext) -> None:
    out = spec(rootfs, sandbox)
    namespaces = {n["type"]: n.get("path") for n in out["linux"]["namespaces"]}
    assert namespaces == {"mount": None, "pid": "/proc/4242/ns/pid", "ipc": "/proc/4242/ns/ipc",
                          "uts": "/proc/4242/ns/uts", "network": "/var/run/netns/cni-1"}
    # The container joins the pause's UTS namespace, which already has the pod's name:
    # setting it again would fail for names the kernel refuses (over 64 characters).
    assert "hostname" not in out
    own_pid = spec(rootfs, sandbox, linux=_security(namespace_options=api_pb2.NamespaceOption(pid=api_pb2.CONTAINER)))
    assert {"type": "pid"} in own_pid["linux"]["namespaces"]
    host = SandboxContext(hostname="node", pause_pid=1, netns_path="", etc_dir=sandbox.etc_dir, host_ipc=True)
    host_out = spec(rootfs, host, linux=_security(namespace_options=api_pb2.NamespaceOption(pid=api_pb2.NODE)))
    assert [n["type"] for n in host_out["linux"]["namespaces"]] == ["mount"]
    assert "hostname" not in host_out


def test_resources_and_cgroup(rootfs: Path, sandbox: SandboxContext) -> None:
    resources = api_pb2.LinuxContainerResources(cpu_shares=512, cpu_quota=50000, cpu_period=100000,
                                                memory_limit_in_bytes=64 << 20, oom_score_adj=900)
    out = spec(rootfs, sandbox, linux=api_pb2.LinuxContainerConfig(resources=resources))
    assert out["linux"]["resources"]["cpu"] == {"shares": 512, "quota": 50000, "period": 100000}
    assert out["linux"]["resources"]["memory"] == {"limit": 64 << 20}
    assert out["process"]["oomScoreAdj"] == 900
    assert out["linux"]["cgroupsPath"] == "/kubeling/pod-uid/cid"
    assert out["linux"]["sysctl"] == {"net.ipv4.ip_forward": "0"}


def test_current_capabilities_read_the_bounding_set(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapBnd:\t0000000000000003\n")  # bits 0 and 1
    assert current_capabilities(status) == ["CAP_CHOWN", "CAP_DAC_OVERRIDE"]


def test_capabilities(rootfs: Path, sandbox: SandboxContext) -> None:
    default = spec(rootfs, sandbox)["process"]["capabilities"]["bounding"]
    # containerd's (and Docker's) defaultUnixCaps, the 14 a container gets unless told otherwise
    assert sorted(default) == sorted([
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
        "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
        "CAP_AUDIT_WRITE"])
    changed = spec(rootfs, sandbox, linux=_security(capabilities=api_pb2.Capability(
        add_capabilities=["NET_ADMIN"], drop_capabilities=["CAP_KILL"])))["process"]["capabilities"]["effective"]
    assert "CAP_NET_ADMIN" in changed and "CAP_KILL" not in changed
    privileged = spec(rootfs, sandbox, linux=_security(privileged=True))
    # "All" is what this process holds (as containerd): a VM without CAP_SYS_RESOURCE in
    # its bounding set cannot hand it on, and runc would fail trying.
    assert privileged["process"]["capabilities"]["bounding"] == current_capabilities()
    assert set(current_capabilities()) <= set(ALL_CAPABILITIES)
    added_all = spec(rootfs, sandbox, linux=_security(capabilities=api_pb2.Capability(add_capabilities=["ALL"])))
    assert added_all["process"]["capabilities"]["bounding"] == current_capabilities()
    assert "maskedPaths" not in privileged["linux"]
    assert spec(rootfs, sandbox, linux=_security(readonly_rootfs=True))["root"]["readonly"] is True


def test_groups_follow_the_supplemental_groups_policy(rootfs: Path, sandbox: SandboxContext) -> None:
    (rootfs / "etc/group").write_text("root:x:0:\nstaff:x:50:\ndevs:x:60:app,other\n")

    def groups(**security: Any) -> list[int]:
        out = spec(rootfs, sandbox, {"Cmd": ["sh"], "User": "app"}, linux=_security(**security))
        return list(out["process"]["user"]["additionalGids"])

    # Merge (the default): the primary group, the image's groups naming the user, the pod's own.
    assert groups(supplemental_groups=[1234]) == [1001, 60, 1234]
    assert groups(supplemental_groups=[1234], supplemental_groups_policy=api_pb2.Strict) == [1001, 1234]
    with pytest.raises(SpecError, match="run_as_group: a group needs a user"):
        spec(rootfs, sandbox, linux=_security(run_as_group=api_pb2.Int64Value(value=5)))


def test_seccomp_profiles(rootfs: Path, sandbox: SandboxContext, tmp_path: Path) -> None:
    profile = tmp_path / "block-chmod.json"
    profile.write_text(json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
        {"names": ["chmod", "fchmodat"], "action": "SCMP_ACT_ERRNO"},
        {"names": ["reboot"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_BOOT"]}}]}))

    def seccomp(**security: Any) -> Any:
        return spec(rootfs, sandbox, linux=_security(**security))["linux"].get("seccomp")

    assert seccomp() is None  # no profile: unconfined
    assert seccomp(seccomp=api_pb2.SecurityProfile(profile_type=api_pb2.SecurityProfile.Unconfined)) is None
    local = api_pb2.SecurityProfile(profile_type=api_pb2.SecurityProfile.Localhost, localhost_ref=str(profile))
    assert seccomp(seccomp=local) == {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
        {"names": ["chmod", "fchmodat"], "action": "SCMP_ACT_ERRNO"}]}  # reboot needs a capability it lacks
    with_boot = seccomp(seccomp=local, capabilities=api_pb2.Capability(add_capabilities=["SYS_BOOT"]))
    assert [c["names"] for c in with_boot["syscalls"]] == [["chmod", "fchmodat"], ["reboot"]]
    assert seccomp(seccomp=local, privileged=True) is None  # privileged: never filtered (containerd)
    default = seccomp(seccomp=api_pb2.SecurityProfile())  # RuntimeDefault: Debian's containers-common
    assert default["defaultAction"] == "SCMP_ACT_ERRNO" and default["architectures"][0].startswith("SCMP_ARCH_")
    assert any("read" in c["names"] for c in default["syscalls"])
    for ref, words in (("relative.json", "absolute path"), (str(tmp_path / "none.json"), "cannot read")):
        with pytest.raises(SpecError, match=words):
            seccomp(seccomp=api_pb2.SecurityProfile(profile_type=api_pb2.SecurityProfile.Localhost,
                                                    localhost_ref=ref))


def test_mount_propagation_needs_a_fitting_source(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("1 0 8:1 / / rw - ext4 /dev/root rw\n"
                         "2 1 8:1 /data /srv/shared rw shared:7 - ext4 /dev/root rw\n"
                         "3 1 8:1 /data /srv/slave rw master:7 - ext4 /dev/root rw\n")
    assert mount_propagation(Path("/srv/shared/a/b"), mountinfo) == "shared"
    assert mount_propagation(Path("/srv/slave"), mountinfo) == "slave"
    assert mount_propagation(Path("/srv/sharedness"), mountinfo) == "private"  # a prefix is not a parent

    def config(path: str, propagation: int) -> api_pb2.ContainerConfig:
        return api_pb2.ContainerConfig(mounts=[api_pb2.Mount(container_path="/m", host_path=path,
                                                             propagation=propagation)])  # type: ignore[arg-type]

    assert _rootfs_propagation(config("/srv/shared", api_pb2.PROPAGATION_BIDIRECTIONAL), mountinfo) == "rshared"
    assert _rootfs_propagation(config("/srv/slave", api_pb2.PROPAGATION_HOST_TO_CONTAINER), mountinfo) == "rslave"
    assert _rootfs_propagation(config("/elsewhere", api_pb2.PROPAGATION_PRIVATE), mountinfo) == ""
    with pytest.raises(SpecError, match=r"mounts\[0\].propagation: Bidirectional needs .* it is slave"):
        _rootfs_propagation(config("/srv/slave", api_pb2.PROPAGATION_BIDIRECTIONAL), mountinfo)
    with pytest.raises(SpecError, match="HostToContainer needs"):
        _rootfs_propagation(config("/elsewhere", api_pb2.PROPAGATION_HOST_TO_CONTAINER), mountinfo)
