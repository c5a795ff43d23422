"""kubeling.upgradeproxy against HTTP's upgrade protocol: an aiohttp client talks
WebSocket through the relay to aiohttp's WebSocket server; answers other than 101 come
back unchanged; a backend that cannot be reached is a ProxyError."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from kubeling.upgradeproxy import ProxyError, is_upgrade, proxy_upgrade
from tests.wait import until


async def _start(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


async def _echo(request: web.Request) -> web.StreamResponse:
    if request.query.get("refuse"):
        return web.Response(status=500, text='container not found ("web")')
    if request.query.get("chunked"):
        answer = web.StreamResponse(status=404)
        answer.enable_chunked_encoding()
        await answer.prepare(request)
        for part in (b"no such ", b"session"):
            await answer.write(part)
        await answer.write_eof()
        return answer
    ws = web.WebSocketResponse(protocols=["v5.channel.k8s.io"])
    await ws.prepare(request)
    request.app[_SESSIONS].add(ws)
    try:
        await _serve(request, ws)
    finally:
        request.app[_SESSIONS].discard(ws)
    return ws


async def _serve(request: web.Request, ws: web.WebSocketResponse) -> None:
    async for message in ws:
        if message.type == aiohttp.WSMsgType.BINARY:
            if message.data == b"digest":
                await ws.send_bytes(hashlib.sha256(request.app[_RECEIVED]).hexdigest().encode())
            else:
                request.app[_RECEIVED].extend(message.data)
                await ws.send_bytes(message.data)
        elif message.type == aiohttp.WSMsgType.TEXT:
            await ws.send_str(f"{request.method} {request.path_qs} {request.headers.get('X-Extra', '')}")


_RECEIVED = web.AppKey("received", bytearray)
_SESSIONS = web.AppKey("sessions", set[web.WebSocketResponse])


@dataclass
class Relay:
    url: str
    backend: web.Application


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    """A relay on one port to an echoing WebSocket backend on another."""
    backend = web.Application()
    backend[_RECEIVED] = bytearray()
    backend[_SESSIONS] = set()
    backend.router.add_route("*", "/echo", _echo)
    backend_runner, backend_port = await _start(backend)

    async def handler(request: web.Request) -> web.StreamResponse:
        if not is_upgrade(request):
            return web.Response(status=400, text="Upgrade request required")
        target = "http://127.0.0.1:1/echo" if request.path == "/nowhere" else f"http://127.0.0.1:{backend_port}/echo"
        try:
            return await proxy_upgrade(request, f"{target}?{request.query_string}")
        except ProxyError as exc:
            return web.Response(status=503, text=str(exc))

    front = web.Application()
    front.router.add_route("*", "/{tail:.*}", handler)
    front_runner, front_port = await _start(front)
    try:
        yield Relay(f"http://127.0.0.1:{front_port}", backend)
    finally:
        await front_runner.cleanup()
        await backend_runner.cleanup()


async def test_websocket_through_the_relay(relay: Relay) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{relay.url}/x?command=sh&command=-c", protocols=["v5.channel.k8s.io"],
                                      headers={"X-Extra": "kept"}) as ws:
            assert ws.protocol == "v5.channel.k8s.io"  # negotiated with the backend, end to end
            await ws.send_str("who")
            assert await ws.receive_str() == "GET /echo?command=sh&command=-c kept"
            payload = os.urandom(8 * 1024 * 1024)
            sent = [payload[i:i + 256 * 1024] for i in range(0, len(payload), 256 * 1024)]
            echoed = b""

            async def send() -> None:
                for chunk in sent:
                    await ws.send_bytes(chunk)

            sending = asyncio.create_task(send())
            while len(echoed) < len(payload):
                echoed += await ws.receive_bytes()
            await sending
            assert echoed == payload
            await ws.send_bytes(b"digest")
            assert (await ws.receive_bytes()).decode() == hashlib.sha256(payload).hexdigest()


async def test_answers_other_than_101_come_back_as_they_are(relay: Relay) -> None:
    spdy = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"{relay.url}/x?refuse=1")
        assert refused.value.status == 500
        async with session.get(f"{relay.url}/x?refuse=1", headers=spdy) as reply:
            assert reply.status == 500 and await reply.text() == 'container not found ("web")'
        async with session.get(f"{relay.url}/x?chunked=1", headers=spdy) as reply:
            assert reply.status == 404 and await reply.text() == "no such session"
        async with session.get(f"{relay.url}/nowhere", headers=spdy) as reply:
            assert reply.status == 503 and "cannot connect to 127.0.0.1:1" in await reply.text()
        async with session.get(f"{relay.url}/x") as reply:
            assert reply.status == 400


async def test_a_client_that_leaves_ends_the_backend_session(relay: Relay) -> None:
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(f"{relay.url}/x")
        await ws.send_str("who")
        await ws.receive_str()
        assert len(relay.backend[_SESSIONS]) == 1
        ws._response.connection.transport.abort()  # gone, no close frame
        await ws.close()
    await until(lambda: not relay.backend[_SESSIONS], "the relay's session over", timeout=5)
    # Another session still goes through: the relay is not stuck on the old one.
    async with aiohttp.ClientSession() as session, session.ws_connect(f"{relay.url}/x") as ws:
        await ws.send_bytes(b"again")
        assert await ws.receive_bytes() == b"again"
