"""kubectl exec, attach, port-forward and cp against a whole cluster of two kubelets:
the apiserver's pods/exec, pods/attach and pods/portforward relayed to the pod's
kubelet, which relays them to its runtime's streaming server. Each is tried over both
of kubectl's transports: WebSocket (its default: v5 remote command, the port-forward
tunnel) and SPDY (KUBECTL_*_WEBSOCKETS=false), and with the Python client (v4
WebSocket)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import portforward, stream

from kubelet.agent import Kubelet
from protos.kubeling.v1 import core_pb2
from tests.e2e.conftest import Cluster, container, pod
from tests.e2e.kubectl import Kubectl
from tests.wait import settle, until

TRANSPORTS = {"websocket": {}, "spdy": {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false",
                                       "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}}
BLOB = 50 * 1024 * 1024
# The HTTP server serves a 50 MiB file of known content; port 9000 answers each
# connection with the sha256 of what it received until the client's half-close.
SERVER = ("mkdir -p /www && head -c 52428800 /dev/zero | tr '\\0' k > /www/blob && echo ok > /www/index.html"
          " && httpd -p 8080 -h /www && exec nc -ll -p 9000 -e sha256sum")
LISTENING = "netstat -ltn | grep -q :8080 && netstat -ltn | grep -q :9000"


def _ready(p: core_pb2.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in p.status.conditions)


async def _nodes(cluster: Cluster) -> list[Kubelet]:
    return [await cluster.add_node(1), await cluster.add_node(2)]


async def _run(cluster: Cluster, made: core_pb2.Pod) -> None:
    await cluster.client.pods.create(made)
    await cluster.wait_pod(made.metadata.name, _ready)


async def test_kubectl_exec(cluster: Cluster, kubectl: Kubectl) -> None:
    one, two = await _nodes(cluster)
    await _run(cluster, pod("shell", container("main", "sleep", "3600"), node=one.config.node_name))
    duo = pod("duo", container("app", "true"), container("side", "sleep", "3600"), node=two.config.node_name,
              restart_policy="Never")
    duo.metadata.annotations["kubectl.kubernetes.io/default-container"] = "side"
    await cluster.client.pods.create(duo)
    await cluster.wait_pod("duo", lambda p: {s.name: s.state.HasField("terminated") or s.ready
                                             for s in p.status.containerStatuses} == {"app": True, "side": True})
    pending = pod("pending", container("main", "sleep", "3600"), nodeSelector={"nowhere": "true"})
    await cluster.client.pods.create(pending)

    for transport, env in TRANSPORTS.items():
        k = kubectl.with_env(**env)
        code, out, err = await k("exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 3", ok=False)
        assert (code, out) == (3, "out\n"), (transport, code, out, err)
        assert "err\n" in err and "command terminated with exit code 3" in err
        code, _, err = await k("exec", "shell", "--", "nosuchbinary", ok=False)
        assert code == 1 and 'exec: "nosuchbinary": executable file not found in $PATH' in err, err
        # stdin to the end, then its close: wc sees all of it and ends
        _, out, _ = await k("exec", "-i", "shell", "--", "wc", "-c", stdin=b"x" * 300_000)
        assert out.strip() == "300000", transport
        # the pod on the other node; no -c: kubectl takes the default-container annotation
        _, out, _ = await k("exec", "duo", "--", "cat", "/etc/hostname")
        assert out == "duo\n", transport
        code, _, err = await k("exec", "duo", "-c", "app", "--", "true", ok=False)
        assert code == 1 and 'error: unable to upgrade connection: container not found ("app")' in err, err
        code, _, err = await k("exec", "duo", "-c", "nope", "--", "true", ok=False)
        assert code == 1 and "container nope is not valid for pod duo" in err, err
        code, _, err = await k("exec", "pending", "--", "true", ok=False)
        assert code == 1 and "pod pending does not have a host assigned" in err, err
        code, _, err = await k("exec", "ghost", "--", "true", ok=False)
        assert code == 1 and 'pods "ghost" not found' in err, err


async def test_kubectl_exec_and_attach_with_a_terminal(cluster: Cluster, kubectl: Kubectl) -> None:
    one, _ = await _nodes(cluster)
    await _run(cluster, pod("shell", container("main", "sleep", "3600"), node=one.config.node_name))
    await _run(cluster, pod("console", container("main", "sh", stdin=True, tty=True), node=one.config.node_name))
    for transport, env in TRANSPORTS.items():
        term = kubectl.with_env(**env).terminal("exec", "-it", "shell", "--", "sh", rows=30, cols=100)
        try:
            await term.expect(b"# ")
            term.type(b"stty size; tty\r")
            await term.expect(b"30 100\r\n/dev/pts/")
            term.resize(50, 132)  # SIGWINCH to kubectl, a resize message to the runtime
            def resized(term: Any = term) -> bool:  # the resize travels apart from what is typed: ask until it came
                term.type(b"stty size\r")
                return bool(term.printed(b"50 132"))
            await until(resized, "the terminal resized to 50x132", timeout=10, interval=0.1)
            await term.expect(b"50 132")
            term.type(b"exit 5\r")
            assert await term.wait() == 5, (transport, term.output)
        finally:
            term.close()
        term = kubectl.with_env(**env).terminal("exec", "-it", "shell", "--", "sh")
        try:
            await term.expect(b"# ")
            term.type(b"\x04")  # Ctrl-D: the shell ends, and so does kubectl
            assert await term.wait() == 0, (transport, term.output)
        finally:
            term.close()

        # attach: the container's own terminal; what is typed reaches its shell
        term = kubectl.with_env(**env).terminal("attach", "-it", "console")
        try:
            await term.expect(b"If you don't see a command prompt")
            term.type(b"echo $((6 * 7))-$TERM\r")
            await term.expect(b"42-")
        finally:
            term.close()  # leaves it running: detaching is not exiting


async def test_kubectl_attach_and_run_interactive(cluster: Cluster, kubectl: Kubectl) -> None:
    one, _ = await _nodes(cluster)
    ticks = "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"
    ticker = pod("ticker", container("main", "sh", "-c", ticks), node=one.config.node_name)
    await _run(cluster, ticker)
    for transport, env in TRANSPORTS.items():
        k = kubectl.with_env(**env)
        attached = await k.start("attach", "ticker")
        assert attached.stdout is not None
        line = await asyncio.wait_for(attached.stdout.readline(), 20)
        assert re.fullmatch(rb"tick \d+\n", line), (transport, line)
        attached.terminate()
        await attached.wait()
        # run -i: a container with an open stdin, attached as it starts; stdinOnce closes
        # it when kubectl's input ends, and --rm deletes the pod afterwards
        _, out, _ = await k("run", f"once-{transport}", "--image=busybox", "-i", "--restart=Never", "--rm",
                            "--", "sh", "-c", "read line; echo got:$line", stdin="hello\n")
        assert "got:hello" in out, (transport, out)
    await cluster.wait_gone("once-spdy")


async def _http_get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    await writer.drain()
    answer = await reader.read()  # the server closes the connection when it is done
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"200", head
    return body


async def _checksum(port: int, data: bytes) -> str:
    """Send data to the pod's sha256sum, half-close, read its answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    writer.write_eof()
    answer = await reader.read()
    writer.close()
    return answer.split()[0].decode()


async def _forwarded_ports(proc: asyncio.subprocess.Process, count: int) -> list[int]:
    assert proc.stdout is not None
    ports: list[int] = []
    while len(ports) < count:
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        assert line, "kubectl port-forward ended"
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> ", line)
        if match:
            ports.append(int(match.group(1)))
    return ports


async def test_kubectl_port_forward(cluster: Cluster, kubectl: Kubectl) -> None:
    _, two = await _nodes(cluster)
    # Ready once both listen: kubectl port-forward ends ("lost connection to pod") when the
    # pod refuses a forwarded connection, as it does with upstream's runtimes.
    listening = core_pb2.Probe(exec=core_pb2.ExecAction(command=["sh", "-c", LISTENING]), periodSeconds=1)
    await _run(cluster, pod("srv", container("main", "sh", "-c", SERVER, readinessProbe=listening),
                            node=two.config.node_name))
    expected = hashlib.sha256(b"k" * BLOB).hexdigest()
    upload = os.urandom(BLOB)
    for transport, env in TRANSPORTS.items():
        # ":PORT": kubectl picks free local ports itself
        forward = await kubectl.with_env(**env).start("port-forward", "pod/srv", ":8080", ":9000")
        try:
            http, sums = await _forwarded_ports(forward, 2)
            pages = await asyncio.gather(*(_http_get(http, "/index.html") for _ in range(8)),
                                         _http_get(http, "/blob"), _checksum(sums, b"small"))
            assert pages[:8] == [b"ok\n"] * 8, transport
            blob = pages[8]
            assert isinstance(blob, bytes) and hashlib.sha256(blob).hexdigest() == expected, transport
            assert pages[9] == hashlib.sha256(b"small").hexdigest()
            assert await _checksum(sums, upload) == hashlib.sha256(upload).hexdigest(), transport
            # A client that goes away in the middle leaves the forward working
            reader, writer = await asyncio.open_connection("127.0.0.1", http)
            writer.write(b"GET /blob HTTP/1.0\r\n\r\n")
            await reader.readexactly(1024 * 1024)
            writer.transport.abort()
            assert await _http_get(http, "/index.html") == b"ok\n", transport
        finally:
            forward.terminate()
            await forward.wait()


async def test_kubectl_cp(cluster: Cluster, kubectl: Kubectl, tmp_path: Path) -> None:
    one, _ = await _nodes(cluster)
    await _run(cluster, pod("box", container("main", "sleep", "3600"), node=one.config.node_name))
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("hello\n")
    payload = os.urandom(3_000_000)
    (tree / "sub" / "data.bin").write_bytes(payload)
    for transport, env in TRANSPORTS.items():
        k = kubectl.with_env(**env)
        await k("cp", str(tree), f"box:/tmp/{transport}")
        _, out, _ = await k("exec", "box", "--", "sha256sum", f"/tmp/{transport}/sub/data.bin")
        assert out.split()[0] == hashlib.sha256(payload).hexdigest(), transport
        back = tmp_path / f"back-{transport}"
        await k("cp", f"box:/tmp/{transport}", str(back))
        assert (back / "a.txt").read_text() == "hello\n"
        assert (back / "sub" / "data.bin").read_bytes() == payload


def _python_client_session(kubeconfig: str) -> dict[str, object]:
    """The official client's stream(): exec (v4 WebSocket, GET), its exit code, and
    port-forward (v4 WebSocket, ports in the query). No container named: the server
    picks the pod's only one."""
    v1 = k8s.CoreV1Api(k8s_config.new_client_from_config(kubeconfig))
    out = stream(v1.connect_get_namespaced_pod_exec, "srv", "default", command=["sh", "-c", "echo out; echo err >&2"],
                 stderr=True, stdin=False, stdout=True, tty=False)
    session = stream(v1.connect_get_namespaced_pod_exec, "srv", "default", command=["sh", "-c", "exit 7"],
                     stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    session.run_forever(timeout=20)
    forward = portforward(v1.connect_get_namespaced_pod_portforward, "srv", "default", ports="8080")
    sock = forward.socket(8080)
    sock.setblocking(True)
    sock.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    sock.close()
    forward.close()
    # stdout and stderr travel on channels of their own: their order is not kept
    return {"out": sorted(out.splitlines()), "code": session.returncode, "page": answer.partition(b"\r\n\r\n")[2]}


async def test_python_client_stream(cluster: Cluster, kubectl: Kubectl) -> None:
    one, _ = await _nodes(cluster)
    serve = "echo ok > /index.html && exec httpd -f -p 8080 -h /"
    await _run(cluster, pod("srv", container("main", "sh", "-c", serve), node=one.config.node_name))
    # the synchronous client runs in a thread: the apiserver is in this process
    result = await asyncio.to_thread(_python_client_session, kubectl.env["KUBECONFIG"])
    assert result == {"out": ["err", "out"], "code": 7, "page": b"ok\n"}


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _children() -> int:
    """Processes whose parent is this one (runc exec and its helpers, among others)."""
    count = 0
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue  # gone meanwhile
        if stat and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            count += 1
    return count


async def test_exec_leaves_nothing_behind(cluster: Cluster, kubectl: Kubectl) -> None:
    """100 execs: the apiserver, the kubelet and its runtime (all in this process) hold
    no more descriptors, tasks, child processes, cached tokens or connections than
    before, and the container runs no more processes."""
    one, _ = await _nodes(cluster)
    await _run(cluster, pod("shell", container("main", "sleep", "3600"), node=one.config.node_name))
    await kubectl("exec", "shell", "--", "true")  # connections and caches made once are not leaks
    runtime = one.cri
    assert runtime is not None

    def quiet() -> bool:
        return len(runtime.streaming.cache) == 0 and not runtime.streaming._connections

    await until(quiet, "the streaming server idle before the execs", timeout=10)
    fds, tasks, children = _open_fds(), len(asyncio.all_tasks()), _children()
    _, in_container, _ = await kubectl("exec", "shell", "--", "ps", "-o", "pid,args")
    for i in range(100):
        env = TRANSPORTS["spdy"] if i % 4 == 0 else {}
        _, out, _ = await kubectl("exec", "shell", "--", "echo", str(i), env=env)
        assert out == f"{i}\n"
    # in the container: the same processes as before (ps itself aside), no exec left over
    _, now, _ = await kubectl("exec", "shell", "--", "ps", "-o", "pid,args")
    assert [line for line in now.splitlines() if "ps -o" not in line] == \
        [line for line in in_container.splitlines() if "ps -o" not in line], (in_container, now)
    # Then, once the last exec's requests have finished (the same exec was counted in the
    # baseline), nothing more is held than before.
    await settle(lambda: quiet() and _open_fds() <= fds and len(asyncio.all_tasks()) <= tasks
                 and _children() <= children, timeout=10)  # the asserts below say which was not
    assert quiet(), (len(runtime.streaming.cache), runtime.streaming._connections)
    assert _children() <= children, (children, _children())
    assert _open_fds() <= fds, (fds, _open_fds(), os.listdir("/proc/self/fd"))
    assert len(asyncio.all_tasks()) <= tasks, asyncio.all_tasks()
