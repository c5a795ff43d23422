"""The fake link itself (tests/faultproxy.py) against an echo server on loopback: it
delays, keeps order, holds in a blackhole and resets as it says."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.faultproxy import FaultProxy, Faults


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    made = await FaultProxy("127.0.0.1:%d" % server.sockets[0].getsockname()[1], seed=1).start()
    try:
        yield made
    finally:
        await made.stop()
        server.close()
        await server.wait_closed()


async def _connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, _, port = proxy.address.rpartition(":")
    return await asyncio.open_connection(host, int(port))


async def test_latency_jitter_and_loss_delay_but_keep_order(proxy: FaultProxy) -> None:
    proxy.faults = Faults(latency=0.05, jitter=0.05, loss=0.5, retransmit=0.1)
    reader, writer = await _connect(proxy)
    began = time.monotonic()
    sent = b""
    for i in range(20):
        chunk = f"<{i}>".encode()
        sent += chunk
        writer.write(chunk)
        await writer.drain()
        await asyncio.sleep(0.005)
    got = b""
    while len(got) < len(sent):
        got += await asyncio.wait_for(reader.read(65536), 5)
    assert got == sent  # nothing lost, nothing reordered
    assert time.monotonic() - began >= 2 * 0.05  # latency each way
    assert proxy.stats.lost > 0
    writer.close()


async def test_a_blackhole_holds_bytes_until_healed_and_a_reset_is_a_reset(proxy: FaultProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"before")
    assert await asyncio.wait_for(reader.readexactly(6), 5) == b"before"
    proxy.faults = Faults(blackhole=True)
    writer.write(b"held")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readexactly(4), 0.3)
    proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"held"
    assert proxy.reset_all() == 1
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(reader.readexactly(1), 5)
    writer.close()


async def test_a_severed_connection_goes_silent_while_new_ones_pass(proxy: FaultProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"before")
    assert await reader.readexactly(6) == b"before"
    assert proxy.sever_all() == 1
    writer.write(b"lost")
    await writer.drain()
    with pytest.raises(TimeoutError):  # nothing comes back, and nothing says the connection ended
        async with asyncio.timeout(0.5):
            await reader.read(1)
    assert not reader.at_eof()
    fresh_reader, fresh_writer = await _connect(proxy)
    fresh_writer.write(b"fresh")
    assert await fresh_reader.readexactly(5) == b"fresh"
    for w in (writer, fresh_writer):
        w.close()
