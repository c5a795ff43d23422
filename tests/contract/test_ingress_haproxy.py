"""The ingress controller's HAProxy as a process: it serves the rendered configuration (the
default backend's 404), it dies with its controller even when the controller is killed
outright (the successor never meets an orphan holding the ports), and one that died is
started again by its controller."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
from pathlib import Path

from ingress.controller import IngressConfig, IngressController
from kubeling.client import Client
from kubeling.netutil import free_port
from tests.wait import until

_CONTROLLER = """
import asyncio, sys
from pathlib import Path
from ingress.haproxy import HAProxy, render
from ingress.model import Routing
from kubeling import pki

async def main():
    state = Path(sys.argv[1])
    haproxy = HAProxy(state)
    cert, key = pki.self_signed("default")
    haproxy.write_certificates({}, cert + key)
    assert await haproxy.apply(render(Routing(), f"127.0.0.1:{sys.argv[2]}", f"127.0.0.1:{sys.argv[3]}", state))
    print(haproxy.pid, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def _get(port: int) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/", headers={"Host": "nowhere.example"})
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


async def test_haproxy_serves_and_dies_with_a_killed_controller(tmp_path: Path) -> None:
    http_port, https_port = free_port(), free_port()
    controller = subprocess.Popen([sys.executable, "-c", _CONTROLLER, str(tmp_path), str(http_port), str(https_port)],
                                  stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert controller.stdout is not None
        haproxy = int(controller.stdout.readline())
        status, body = await until(lambda: _get(http_port), "HAProxy answering", 10, interval=0.1,
                                   retry_on=(OSError,))
        assert (status, body) == (404, b"default backend - 404")
        controller.send_signal(signal.SIGKILL)
        controller.wait()
        await until(lambda: not _alive(haproxy), "HAProxy gone with its controller", 10, interval=0.1)

        def refused() -> bool:
            try:
                _get(http_port)
            except OSError:
                return True
            return False
        await until(refused, "the port free again", 10, interval=0.1)
    finally:
        controller.kill()
        controller.wait()


async def test_a_dead_haproxy_is_started_again(client: Client, tmp_path: Path) -> None:
    http_port, https_port = free_port(), free_port()
    controller = IngressController(Client(client.address), IngressConfig(
        http_listen=f"127.0.0.1:{http_port}", https_listen=f"127.0.0.1:{https_port}", state_dir=tmp_path / "ingress"))
    await controller.start()
    try:
        first = controller.haproxy.pid
        assert await until(lambda: _get(http_port), "HAProxy answering", 10, interval=0.1, retry_on=(OSError,))
        os.kill(first, signal.SIGKILL)
        await until(lambda: controller.haproxy.pid != first and _get(http_port)[0] == 404,
                    "a new HAProxy answering", 30, interval=0.2, retry_on=(OSError,))
    finally:
        await controller.stop()
        await controller.client.close()
