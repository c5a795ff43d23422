"""Exec, Attach and PortForward through the runtime's streaming server, over SPDY/3.1
(a client that behaves as client-go's) and WebSocket (the official Python client's
channel protocols, and SPDY tunnelled in a WebSocket as kubectl 1.31+ port-forwards),
on real containers: a real pty, exit codes, data both ways, single-use tokens, and bad
input that must end one connection and leave the server serving."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import struct
import time
from pathlib import Path

import grpc
import pytest
from kubernetes.client import Configuration
from kubernetes.stream.ws_client import WSClient, portforward_call
from wsproto import WSConnection
from wsproto.connection import ConnectionType
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Request, TextMessage

from cri.streaming import spdyframes as wire
from protos.runtime.v1 import api_pb2
from tests.contract.cri.conftest import Env, pod_config
from tests.contract.cri.spdyclient import SpdyClient, upgrade
from tests.wait import until

PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"]
ECHO_PORT = 9000


async def _pod(env: Env, name: str, command: list[str], **container: object) -> tuple[str, str]:
    """A sandbox on the bridge with one running busybox container: (sandbox id, container id)."""
    config = pod_config(name)
    sandbox_id = (await env.runtime.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=config))).pod_sandbox_id
    created = await env.runtime.CreateContainer(api_pb2.CreateContainerRequest(
        pod_sandbox_id=sandbox_id, sandbox_config=config, config=api_pb2.ContainerConfig(
            metadata=api_pb2.ContainerMetadata(name="main"), image=api_pb2.ImageSpec(image="busybox"),
            command=command, **container)))  # type: ignore[arg-type]
    await env.runtime.StartContainer(api_pb2.StartContainerRequest(container_id=created.container_id))
    return sandbox_id, created.container_id


async def _exec_url(env: Env, container_id: str, cmd: list[str], **flags: bool) -> str:
    request = api_pb2.ExecRequest(container_id=container_id, cmd=cmd)
    for flag, value in flags.items():
        setattr(request, flag, value)
    return (await env.runtime.Exec(request)).url


async def _spdy_exec(url: str, streams: list[str], stdin: bytes | None = None,
                     resize: list[tuple[int, int]] | None = None) -> tuple[dict[str, bytes], SpdyClient]:
    """Open the streams as client-go does, feed stdin (then FIN), return what each sent."""
    client = await SpdyClient.connect(url, PROTOCOLS)
    opened = {kind: await client.open({"streamtype": kind}) for kind in ["error", *streams]}
    if resize:
        for width, height in resize:
            await opened["resize"].write(json.dumps({"Width": width, "Height": height}).encode())
    if stdin is not None:
        await opened["stdin"].write(stdin)
        await opened["stdin"].close()
    out: dict[str, bytes] = {kind: await opened[kind].read_all() for kind in ("stdout", "stderr", "error")
                             if kind in opened}
    await asyncio.wait_for(client.closed.wait(), 10)  # the server hangs up once it is done
    await client.close()
    return out, client


async def test_exec_over_spdy_streams_and_exit_code(env: Env) -> None:
    _, cid = await _pod(env, "exec-spdy", ["sleep", "3600"])
    url = await _exec_url(env, cid, ["sh", "-c", "echo out; echo err >&2; read line; echo got $line; exit 3"],
                          stdin=True, stdout=True, stderr=True)
    assert url.startswith(env.server.streaming.base_url + "/exec/")
    out, client = await _spdy_exec(url, ["stdin", "stdout", "stderr"], stdin=b"hello\n")
    assert client.protocol == "v5.channel.k8s.io" and client.goaway == wire.GOAWAY_OK
    assert out["stdout"] == b"out\ngot hello\n"
    assert out["stderr"] == b"err\n"
    status = json.loads(out["error"])
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    # Success is a Status too (v4 and later); a URL is used once.
    ok_url = await _exec_url(env, cid, ["true"], stdout=True)
    out, _ = await _spdy_exec(ok_url, ["stdout"])
    assert json.loads(out["error"]) == {"metadata": {}, "status": "Success"}
    status_code, _, _, writer = await upgrade(ok_url, {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"},
                                              [("X-Stream-Protocol-Version", "v4.channel.k8s.io")])
    writer.close()
    assert status_code == 404


async def test_exec_with_a_terminal_and_resizes(env: Env) -> None:
    _, cid = await _pod(env, "exec-tty", ["sleep", "3600"])
    # The command waits for the size to arrive (no sleeps in the test), then says where it runs.
    script = 'until [ "$(stty size)" = "40 100" ]; do sleep 0.05; done; echo resized; tty; exit 5'
    url = await _exec_url(env, cid, ["sh", "-c", script], stdin=True, stdout=True, tty=True)
    out, _ = await _spdy_exec(url, ["stdin", "stdout", "resize"], resize=[(100, 40)])
    text = out["stdout"].decode()
    assert "resized\r\n/dev/pts/" in text  # a real terminal: CRLF line ends
    assert json.loads(out["error"])["details"]["causes"][0]["message"] == "5"


def _ws_config() -> Configuration:
    config = Configuration()
    config.verify_ssl = False
    return config


def _ws_exec(url: str, protocol: str, stdin: str | None, close_stdin: bool) -> tuple[str, str, int | None]:
    ws = WSClient(_ws_config(), url.replace("http://", "ws://"), {"sec-websocket-protocol": protocol}, True)
    assert ws.subprotocol == protocol
    if stdin is not None:
        ws.write_stdin(stdin)
        if close_stdin:
            ws.close_channel(0)  # v5's CLOSE signal: stdin's EOF
    ws.run_forever(timeout=30)
    try:
        return ws.read_stdout(), ws.read_stderr(), ws.returncode
    finally:
        ws.close()


@pytest.mark.parametrize("protocol", ["v5.channel.k8s.io", "v4.channel.k8s.io"])
async def test_exec_over_websocket(env: Env, protocol: str) -> None:
    _, cid = await _pod(env, "exec-ws", ["sleep", "3600"])
    v5 = protocol.startswith("v5")
    # v5 can end stdin (cat then ends); v4 cannot, so its command reads one line only.
    cmd = ["sh", "-c", "cat; echo err >&2; exit 2"] if v5 else ["sh", "-c", "head -n1; echo err >&2; exit 2"]
    url = await _exec_url(env, cid, cmd, stdin=True, stdout=True, stderr=True)
    stdout, stderr, code = await asyncio.to_thread(_ws_exec, url, protocol, "line one\n", v5)
    assert stdout == "line one\n" and stderr == "err\n" and code == 2


async def test_attach_to_a_shell_and_to_a_terminal(env: Env) -> None:
    _, shell = await _pod(env, "attach", ["sh"], stdin=True)
    url = (await env.runtime.Attach(api_pb2.AttachRequest(container_id=shell, stdin=True, stdout=True,
                                                          stderr=True))).url
    client = await SpdyClient.connect(url, PROTOCOLS)
    streams = {kind: await client.open({"streamtype": kind}) for kind in ("error", "stdin", "stdout", "stderr")}
    await streams["stdin"].write(b"echo attached; echo to-stderr >&2\n")
    assert await asyncio.wait_for(streams["stdout"].read(), 10) == b"attached\n"
    assert await asyncio.wait_for(streams["stderr"].read(), 10) == b"to-stderr\n"
    await streams["stdin"].write(b"exit 7\n")  # the container ends: so does the attach, successfully
    assert json.loads(await streams["error"].read_all()) == {"metadata": {}, "status": "Success"}
    await client.close()
    status = (await env.runtime.ContainerStatus(api_pb2.ContainerStatusRequest(container_id=shell))).status
    assert status.exit_code == 7

    _, term = await _pod(env, "attach-tty", ["sh"], stdin=True, tty=True)
    url = (await env.runtime.Attach(api_pb2.AttachRequest(container_id=term, stdin=True, stdout=True,
                                                          tty=True))).url

    def session() -> str:
        ws = WSClient(_ws_config(), url.replace("http://", "ws://"), None, True)
        ws.write_channel(4, json.dumps({"Width": 120, "Height": 33}))
        ws.write_stdin('until [ "$(stty size)" = "33 120" ]; do sleep 0.05; done; echo size-ok; exit 0\n')
        ws.run_forever(timeout=30)
        try:
            return ws.read_stdout()
        finally:
            ws.close()

    assert "size-ok" in await asyncio.to_thread(session)


async def _echo_pod(env: Env, name: str) -> str:
    sandbox_id, _ = await _pod(env, name, ["nc", "-ll", "-p", str(ECHO_PORT), "-e", "/bin/cat"])
    status = (await env.runtime.PodSandboxStatus(api_pb2.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))).status
    ip = status.network.ip
    def listening() -> bool:
        socket.create_connection((ip, ECHO_PORT), timeout=1).close()
        return True
    await until(listening, f"nc listening on {ip}:{ECHO_PORT}", timeout=10, retry_on=(OSError,))
    return sandbox_id


async def test_port_forward_over_spdy(env: Env) -> None:
    sandbox_id = await _echo_pod(env, "pf-spdy")
    url = (await env.runtime.PortForward(api_pb2.PortForwardRequest(pod_sandbox_id=sandbox_id))).url
    client = await SpdyClient.connect(url, ["portforward.k8s.io"])

    async def connection(request_id: int, port: int, payload: bytes) -> tuple[bytes, bytes]:
        headers = {"streamtype": "error", "port": str(port), "requestid": str(request_id)}
        error = await client.open(headers)
        await error.close()  # the client never writes to it
        data = await client.open({**headers, "streamtype": "data"})
        await data.write(payload)
        await data.close()  # the pod's cat sees EOF, answers, and closes
        return await data.read_all(), await error.read_all()

    # Several connections on one port at once, each with its own data going both ways.
    answers = await asyncio.gather(*(connection(i, ECHO_PORT, f"conn {i}\n".encode() * 1000) for i in range(4)))
    assert answers == [(f"conn {i}\n".encode() * 1000, b"") for i in range(4)]
    # Nothing listens on 9999: an error on that pair's error stream, not a hang; others go on.
    data, error = await connection(10, 9999, b"x")
    assert data == b""
    message = json.loads(error)
    assert "9999" in message["message"] and "connection refused" in message["message"]
    assert await connection(11, ECHO_PORT, b"again\n") == (b"again\n", b"")
    # A client that resets its data stream while the pod still answers: the connection
    # ends quietly (an error here would end kubectl's whole port-forward); others go on.
    headers = {"streamtype": "error", "port": str(ECHO_PORT), "requestid": "12"}
    error_stream = await client.open(headers)
    await error_stream.close()
    data_stream = await client.open({**headers, "streamtype": "data"})
    await data_stream.write(b"x" * 4_000_000)
    assert await data_stream.read()  # the echo has begun
    await data_stream.reset()
    assert await error_stream.read_all() == b""
    assert await connection(13, ECHO_PORT, b"after\n") == (b"after\n", b"")
    await client.close()


async def test_port_forward_over_websocket(env: Env) -> None:
    sandbox_id = await _echo_pod(env, "pf-ws")
    url = (await env.runtime.PortForward(api_pb2.PortForwardRequest(pod_sandbox_id=sandbox_id,
                                                                    port=[ECHO_PORT]))).url

    def session() -> bytes:
        pf = portforward_call(_ws_config(), "GET", url.replace("http://", "ws://") + f"?ports={ECHO_PORT}",
                              headers={"sec-websocket-protocol": "v4.channel.k8s.io"})
        sock = pf.socket(ECHO_PORT)
        sock.settimeout(20)
        sock.sendall(b"through the websocket\n")
        got = b""
        while len(got) < 22:
            got += sock.recv(1024)
        pf.close()
        return got

    assert await asyncio.to_thread(session) == b"through the websocket\n"


class _WebSocketClient:
    """A wsproto client: enough for the SPDY tunnel and for sending broken frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: WSConnection) -> None:
        self.reader, self.writer, self.conn = reader, writer, conn
        self.subprotocol = ""

    @classmethod
    async def connect(cls, url: str, subprotocols: list[str]) -> _WebSocketClient:
        host, port = url.split("//")[1].split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        conn = WSConnection(ConnectionType.CLIENT)
        client = cls(reader, writer, conn)
        writer.write(conn.send(Request(host=f"{host}:{port}", target="/" + url.split("/", 3)[3],
                                       subprotocols=subprotocols)))
        await writer.drain()
        while True:
            conn.receive_data(await reader.read(65536))
            for event in conn.events():
                if isinstance(event, AcceptConnection):
                    client.subprotocol = event.subprotocol or ""
                    return client
                raise ConnectionError(f"handshake refused: {event}")

    async def send(self, data: bytes | str) -> None:
        event = BytesMessage(data=data) if isinstance(data, bytes) else TextMessage(data=data)
        self.writer.write(self.conn.send(event))
        await self.writer.drain()

    async def events(self) -> list[object]:
        data = await asyncio.wait_for(self.reader.read(65536), 10)
        if not data:
            return [None]
        self.conn.receive_data(data)
        return list(self.conn.events())


async def test_port_forward_tunnelled_spdy_over_websocket(env: Env) -> None:
    """kubectl 1.31+: a WebSocket with `SPDY/3.1+portforward.k8s.io` carries a SPDY connection."""
    sandbox_id = await _echo_pod(env, "pf-tunnel")
    url = (await env.runtime.PortForward(api_pb2.PortForwardRequest(pod_sandbox_id=sandbox_id))).url
    ws = await _WebSocketClient.connect(url, ["SPDY/3.1+portforward.k8s.io"])
    assert ws.subprotocol == "SPDY/3.1+portforward.k8s.io"
    # Bridge the WebSocket's binary messages to a stream the SPDY client reads.
    inbound = asyncio.StreamReader()

    class Writer:
        def write(self, data: bytes) -> None:
            ws.writer.write(ws.conn.send(BytesMessage(data=data)))

        async def drain(self) -> None:
            await ws.writer.drain()

        def close(self) -> None:
            ws.writer.close()

    async def pump() -> None:
        while True:
            for event in await ws.events():
                if event is None or isinstance(event, CloseConnection):
                    inbound.feed_eof()
                    return
                if isinstance(event, BytesMessage):
                    inbound.feed_data(event.data)

    pumping = asyncio.create_task(pump())
    client = SpdyClient(inbound, Writer(), "portforward.k8s.io")  # type: ignore[arg-type]
    headers = {"streamtype": "error", "port": str(ECHO_PORT), "requestid": "0"}
    error = await client.open(headers)
    data = await client.open({**headers, "streamtype": "data"})
    await data.write(b"tunnelled\n")
    await data.close()
    assert await data.read_all() == b"tunnelled\n"
    assert await error.read_all() == b""
    await client.close()
    pumping.cancel()
    await asyncio.gather(pumping, return_exceptions=True)


async def test_tokens_are_single_use_and_expire(env: Env) -> None:
    _, cid = await _pod(env, "tokens", ["sleep", "3600"])
    for path in ("/exec/unknown-token", "/attach/x", "/portforward/x", "/nowhere"):
        status, _, _, writer = await upgrade(env.server.streaming.base_url + path, {})
        writer.close()
        assert status == 404
    now = [time.monotonic()]
    env.server.streaming.cache.clock = lambda: now[0]
    url = await _exec_url(env, cid, ["true"], stdout=True)
    now[0] += env.server.streaming.cache.ttl + 1  # unused for longer than the token lives
    status, _, _, writer = await upgrade(url, {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"},
                                         [("X-Stream-Protocol-Version", "v4.channel.k8s.io")])
    writer.close()
    assert status == 404
    # A request that is not an upgrade, or offers no protocol we speak, is refused with a reason.
    url = await _exec_url(env, cid, ["true"], stdout=True)
    status, _, reader, writer = await upgrade(url, {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"},
                                              [("X-Stream-Protocol-Version", "v9.channel.k8s.io")])
    body = await reader.read()
    writer.close()
    assert status == 403 and b"unable to negotiate protocol" in body


async def test_bad_input_ends_one_connection_and_the_server_serves_on(env: Env) -> None:
    _, cid = await _pod(env, "bad-input", ["sleep", "3600"])

    async def fresh_client() -> SpdyClient:
        return await SpdyClient.connect(await _exec_url(env, cid, ["cat"], stdin=True, stdout=True), PROTOCOLS)

    # A DATA frame for a stream that was never opened: that stream is reset, the connection lives.
    client = await fresh_client()
    await client.send(wire.data_frame(99, 0, b"who?"))
    await until(lambda: client.streams.get(99) and client.streams[99].reset_status, "stream 99 reset", timeout=2,
                interval=0.01)
    assert client.streams[99].reset_status == wire.INVALID_STREAM
    error = await client.open({"streamtype": "error"})
    stdin = await client.open({"streamtype": "stdin"})
    stdout = await client.open({"streamtype": "stdout"})
    await stdin.write(b"still works\n")
    await stdin.close()
    assert await stdout.read_all() == b"still works\n"
    assert json.loads(await error.read_all())["status"] == "Success"
    await client.close()
    # A malformed frame (SPDY version 2, then garbage): GOAWAY(PROTOCOL_ERROR), connection closed.
    client = await fresh_client()
    await client.send(struct.pack(">HHI", 0x8002, wire.SYN_STREAM, 10) + b"\x00" * 10)
    await asyncio.wait_for(client.closed.wait(), 10)
    assert client.goaway == wire.GOAWAY_PROTOCOL_ERROR
    await client.close()
    # A header block that is not zlib: the same.
    client = await fresh_client()
    await client.send(wire.control_frame(wire.SYN_STREAM, 0, struct.pack(">IIBB", 1, 0, 0, 0) + b"not zlib"))
    await asyncio.wait_for(client.closed.wait(), 10)
    assert client.goaway == wire.GOAWAY_PROTOCOL_ERROR
    await client.close()
    # WebSocket: bad base64 on a base64 channel, then a frame with reserved bits set.
    url = await _exec_url(env, cid, ["cat"], stdin=True, stdout=True)
    ws = await _WebSocketClient.connect(url, ["v4.base64.channel.k8s.io"])
    await ws.send("0***not base64***")
    events: list[object] = []
    while not any(isinstance(e, CloseConnection) or e is None for e in events):
        events += await ws.events()
    closing = [e for e in events if isinstance(e, CloseConnection)]
    assert closing and closing[0].code == 1003
    ws.writer.close()
    url = await _exec_url(env, cid, ["cat"], stdin=True, stdout=True)
    ws = await _WebSocketClient.connect(url, ["v5.channel.k8s.io"])
    ws.writer.write(bytes([0xF2, 0x80, 0, 0, 0, 0]))  # RSV1-3 set: not a frame anyone may send
    await ws.writer.drain()
    events = []
    while not any(isinstance(e, CloseConnection) or e is None for e in events):
        events += await ws.events()
    ws.writer.close()
    # Malformed HTTP: a clear 400.
    reader, writer = await asyncio.open_connection(*env.server.streaming.base_url[7:].split(":"))
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    assert (await reader.read()).startswith(b"HTTP/1.1 400")
    writer.close()
    # And the server still serves.
    out, _ = await _spdy_exec(await _exec_url(env, cid, ["echo", "alive"], stdout=True), ["stdout"])
    assert out["stdout"] == b"alive\n"


async def test_container_exits_mid_stream(env: Env) -> None:
    _, cid = await _pod(env, "mid-stream", ["sleep", "3600"])
    url = await _exec_url(env, cid, ["sh", "-c", "echo started; sleep 3600"], stdout=True)
    client = await SpdyClient.connect(url, PROTOCOLS)
    error = await client.open({"streamtype": "error"})
    stdout = await client.open({"streamtype": "stdout"})
    assert await asyncio.wait_for(stdout.read(), 10) == b"started\n"
    await env.runtime.StopContainer(api_pb2.StopContainerRequest(container_id=cid, timeout=0))
    assert await stdout.read_all() == b""
    status = json.loads(await error.read_all())
    assert status["reason"] == "NonZeroExitCode" and status["details"]["causes"][0]["message"] == "137"
    await client.close()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _exec_url(env, cid, ["true"], stdout=True)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not running" in (err.value.details() or "")


def _fds() -> dict[str, str]:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def _children() -> set[int]:
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
            and (Path("/proc") / p.name / "stat").exists()
            and _ppid(p.name) == os.getpid()}


def _ppid(pid: str) -> int:
    try:
        stat = (Path("/proc") / pid / "stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rindex(")") + 2:].split()[1])


async def test_a_hundred_execs_leak_nothing(env: Env) -> None:
    _, cid = await _pod(env, "leaks", ["sleep", "3600"])
    await _spdy_exec(await _exec_url(env, cid, ["true"], stdout=True), ["stdout"])  # warm up
    before = _fds()
    fds, tasks, children = len(before), len(asyncio.all_tasks()), _children()

    async def one(i: int) -> None:
        if i % 2:
            out, _ = await _spdy_exec(await _exec_url(env, cid, ["echo", str(i)], stdout=True), ["stdout"])
            assert out["stdout"] == f"{i}\n".encode()
        else:
            url = await _exec_url(env, cid, ["echo", str(i)], stdout=True, tty=(i % 4 == 0))
            stdout, _, code = await asyncio.to_thread(_ws_exec, url, "v5.channel.k8s.io", None, False)
            assert stdout.strip() == str(i) and code == 0

    for start in range(0, 100, 10):
        await asyncio.gather(*(one(i) for i in range(start, start + 10)))
    def settled() -> bool:  # closed connections finish their last steps
        # websocket-client keeps its socket once the server closed the connection, until
        # collected: the client's, not the server's, so collect before counting.
        gc.collect()
        return len(asyncio.all_tasks()) <= tasks and len(os.listdir("/proc/self/fd")) <= fds + 2 \
            and not env.server.streaming._connections  # a finished connection leaves it a turn later
    await until(settled, "no task, descriptor or connection left by the execs", timeout=5)
    assert len(asyncio.all_tasks()) <= tasks
    after = _fds()
    # A leak would be one or more per exec; the diff says what it is.
    assert len(after) <= fds + 2, sorted(set(after.values()) - set(before.values()))
    assert _children() <= children  # no runc exec left behind
    assert len(env.server.streaming.cache) == 0 and not env.server.streaming._connections


async def test_attach_sessions_leave_nothing_in_the_shim(env: Env) -> None:
    _, cid = await _pod(env, "attach-many", ["sh"], stdin=True)
    status = await env.runtime.ContainerStatus(api_pb2.ContainerStatusRequest(container_id=cid, verbose=True))
    shim = int((Path(json.loads(status.info["info"])["stateDir"]) / "shim.pid").read_text())

    def shim_fds() -> int:
        return len(os.listdir(f"/proc/{shim}/fd"))

    async def session(i: int) -> None:
        url = (await env.runtime.Attach(api_pb2.AttachRequest(container_id=cid, stdin=True, stdout=True))).url
        client = await SpdyClient.connect(url, PROTOCOLS)
        streams = {kind: await client.open({"streamtype": kind}) for kind in ("error", "stdin", "stdout")}
        await streams["stdin"].write(f"echo session-{i}\n".encode())
        assert await asyncio.wait_for(streams["stdout"].read(), 10) == f"session-{i}\n".encode()
        await client.close()  # the client leaves; the container goes on

    await session(0)
    before = shim_fds()
    for i in range(1, 21):
        await session(i)
    # the shim notices each departure a moment later
    await until(lambda: shim_fds() <= before, "the shim's descriptors back to before", timeout=5)
