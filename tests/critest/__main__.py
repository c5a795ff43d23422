"""Run the upstream CRI validation suite (critest) against `python -m cri`, offline.

    python -m tests.critest --critest PATH [--focus RE] [--skip RE] [--report FILE] [--keep]
    make critest CRITEST=PATH [FOCUS=RE] [SKIP=RE] [REPORT=FILE]

Everything happens inside a network namespace made for the run (a test "host"): the
suite's fixed host ports (12000-12003), the pods' bridge and their iptables rules
never touch the machine's own network. In it: Debian's docker-registry on loopback,
filled by skopeo with the images the suite names (tests/critest/images.py) under
`<registry>/<path>`; a registry hosts directory (containerd's hosts.toml) that
mirrors gcr.io, registry.k8s.io and k8s.gcr.io to it; a CNI bridge network; the CRI
runtime; then critest. It prints passed/failed/skipped and exits non-zero when a spec
failed. Build critest and crictl as ../shared/CRITEST.md says; never commit them.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc

from kubeling.netutil import free_port
from protos.runtime.v1 import api_pb2, api_pb2_grpc
from tests.critest import images

CLONE_NEWNET = 0x40000000
BRIDGE = "kbl-critest0"
POD_SUBNET = "10.201.0.0/24"


def log(message: str) -> None:
    print(f"[critest harness] {message}", flush=True)


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)


@contextlib.contextmanager
def network_namespace(name: str) -> Iterator[None]:
    """Run the body (and every process it starts) in a fresh network namespace."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    home_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        _setns(f"/run/netns/{name}")
        try:
            yield
        finally:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(home_fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the machine's network namespace")
    finally:
        os.close(home_fd)
        subprocess.run(["ip", "netns", "del", name], check=False)


def _wait_for(what: str, check: object, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready after {timeout:.0f}s")
        time.sleep(0.1)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def start_registry(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    config = work / "registry.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: "
                      f"{work / 'registry'}\nhttp:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdin=subprocess.DEVNULL,
                            stdout=open(work / "registry.log", "wb"), stderr=subprocess.STDOUT)
    _wait_for("docker-registry", lambda: _listening(port), 20, proc)
    return proc, port


def push_images(work: Path, refs: dict[str, tuple[str, ...]], port: int) -> None:
    layout = work / "oci"
    for ref, names in refs.items():
        for name in names:
            registry, path = name.split("/", 1)
            target = f"127.0.0.1:{port}/{registry}/{path}"
            subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", f"oci:{layout}:{ref}",
                            f"docker://{target}"], check=True, capture_output=True, timeout=120)
    log(f"pushed {sum(len(n) for n in refs.values())} image names to the registry on 127.0.0.1:{port}")


def write_mirrors(work: Path, port: int) -> Path:
    """Each upstream registry mirrors to `<registry>/...` in the local one (override_path:
    the mirror URL's path is the API root); the upstream itself stays the fallback."""
    root = work / "certs.d"
    for registry in images.REGISTRIES:
        directory = root / registry
        directory.mkdir(parents=True)
        (directory / "hosts.toml").write_text(
            f'server = "https://{registry}"\n\n'
            f'[host."http://127.0.0.1:{port}/v2/{registry}"]\n'
            f'  capabilities = ["pull", "resolve"]\n  override_path = true\n')
    return root


def write_cni(work: Path) -> Path:
    conf = work / "net.d"
    conf.mkdir()
    (conf / "10-critest.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": "critest", "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]], "dataDir": str(work / "ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}}]}))
    return conf


def start_runtime(work: Path, mirrors: Path, cni_conf: Path) -> tuple[subprocess.Popen[bytes], Path]:
    sock = work / "cri.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cri", "--socket", str(sock), "--state-dir", str(work / "state"),
         "--cni-conf-dir", str(cni_conf), "--cni-cache-dir", str(work / "cni-cache"),
         "--runc-root", str(work / "runc"), "--registry-config-dir", str(mirrors),
         "--streaming-listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=open(work / "cri.log", "wb"), stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[2])
    _wait_for("the CRI runtime", sock.is_socket, 60, proc)
    return proc, sock


def remove_leftovers(sock: Path) -> None:
    """Whatever the suite left running: stop and remove through the runtime itself."""
    with grpc.insecure_channel(f"unix://{sock}") as channel:
        runtime = api_pb2_grpc.RuntimeServiceStub(channel)
        sandboxes = runtime.ListPodSandbox(api_pb2.ListPodSandboxRequest(), timeout=30).items
        for sandbox in sandboxes:
            runtime.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox.id), timeout=120)
        for container in runtime.ListContainers(api_pb2.ListContainersRequest(), timeout=30).containers:
            runtime.RemoveContainer(api_pb2.RemoveContainerRequest(container_id=container.id), timeout=60)
    if sandboxes:
        log(f"removed {len(sandboxes)} pod sandbox(es) the suite left behind")


def stop(proc: subprocess.Popen[bytes] | None, timeout: float = 20) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def shm_segments() -> set[str]:
    """The machine's System V shared memory ids (the HostIpc specs make some with ipcmk)."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {line.split()[1] for line in lines if line.split()}


def remove_segments(ids: set[str]) -> None:
    for shmid in sorted(ids):
        subprocess.run(["ipcrm", "-m", shmid], check=False, capture_output=True)
    if ids:
        log(f"removed {len(ids)} shared memory segment(s) the suite made")


def unmount_under(root: Path) -> None:
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for target in sorted((m for m in mounts if m.startswith(str(root) + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], check=False)


def summarize(report: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    failed: list[str] = []
    for suite in json.loads(report.read_text()):
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It":
                continue
            state = spec.get("State", "unknown")
            counts[state] += 1
            if state not in ("passed", "skipped", "pending"):
                failed.append(" ".join([*spec.get("ContainerHierarchyTexts", []), spec.get("LeafNodeText", "")]))
    for name in failed:
        log(f"FAILED: {name}")
    return counts


def run_suite(args: argparse.Namespace, critest: Path, work: Path, sock: Path) -> tuple[int, Counter[str]]:
    """critest against the runtime: its exit code (0 when every spec passed) and the counts."""
    images_file = work / "images.yaml"
    images_file.write_text(f"defaultTestContainerImage: {images.DEFAULT_IMAGE}\n"
                           f"webServerTestImage: {images.WEB_SERVER_IMAGE}\n")
    report = work / "report.json"
    command = [str(critest), f"-runtime-endpoint=unix://{sock}", f"-image-endpoint=unix://{sock}",
               f"-test-images-file={images_file}", "-ginkgo.no-color", f"-ginkgo.json-report={report}",
               f"-ginkgo.focus={args.focus}", *([f"-ginkgo.skip={args.skip}"] if args.skip else []), *args.extra]
    log("running " + " ".join(command))
    # The suite's temporary files (log dirs, seccomp profiles, mount propagation sources it
    # may leave mounted when a spec fails) go under the work dir, which is unmounted and removed.
    tmp = work / "tmp"
    tmp.mkdir()
    finished = subprocess.run(command, cwd=work, env={**os.environ, "TMPDIR": str(tmp)})
    if not report.exists():
        return 1, Counter()
    counts = summarize(report)
    if args.report:
        shutil.copy(report, args.report)
    return (0 if finished.returncode == 0 else 1), counts


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        log("needs root (network namespaces, runc, mounts)")
        return 2
    critest = Path(args.critest)
    if not os.access(critest, os.X_OK):
        log(f"{critest}: not an executable; build it as ../shared/CRITEST.md says")
        return 2
    for tool in ("docker-registry", "skopeo", "runc", "ip"):
        if shutil.which(tool) is None:
            log(f"{tool} is missing (make deps installs it)")
            return 2
    work = Path(tempfile.mkdtemp(prefix="kubeling-critest-"))
    registry = runtime = None
    counts: Counter[str] = Counter()
    code = 1
    segments = shm_segments()
    try:
        refs = images.build(work / "oci")  # before the namespace: apt may fetch a package
        with network_namespace(f"kbl-critest-{os.getpid()}"):
            try:
                registry, port = start_registry(work)
                push_images(work, refs, port)
                mirrors = write_mirrors(work, port)
                runtime, sock = start_runtime(work, mirrors, write_cni(work))
                log(f"runtime on unix://{sock} (log {work / 'cri.log'})")
                code, counts = run_suite(args, critest, work, sock)
            finally:
                if runtime is not None and runtime.poll() is None:
                    # Whatever the suite (or a failure) left: through the runtime itself.
                    try:
                        remove_leftovers(work / "cri.sock")
                    except grpc.RpcError as exc:
                        log(f"removing leftovers through the runtime failed: {exc}")
                        code = 1
                stop(runtime)
                stop(registry)
    finally:
        remove_segments(shm_segments() - segments)
        unmount_under(work)
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    total = sum(counts.values())
    log(f"{counts.get('passed', 0)} passed, {total - counts.get('passed', 0) - counts.get('skipped', 0)} failed, "
        f"{counts.get('skipped', 0)} skipped of {total} specs")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.critest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--critest", required=True, help="the critest binary (cri-tools v1.36)")
    parser.add_argument("--focus", default=r"\[Conformance\]", help="-ginkgo.focus (default %(default)s)")
    parser.add_argument("--skip", default="", help="-ginkgo.skip")
    parser.add_argument("--report", default="", help="copy ginkgo's JSON report here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, state)")
    parser.add_argument("extra", nargs="*", help="more critest flags, after --")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
