"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, as a user's
browser, for the dashboard's test and benchmark: open a page, evaluate JavaScript in it,
take a screenshot. No WebDriver or
Playwright (their browsers are downloads this machine cannot make): the protocol's JSON
over a WebSocket, with aiohttp."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["Browser"]


class Browser:
    def __init__(self) -> None:
        binary = shutil.which("chromium")
        if binary is None:
            raise RuntimeError("chromium is not installed: `make test` installs it (apt-get install chromium)")
        self.profile = Path(tempfile.mkdtemp(prefix="kubeling-chromium-"))
        # --no-sandbox: root here, and the sandbox needs user namespaces the VM may not give
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--disable-background-networking", "--window-size=1280,1000", f"--user-data-dir={self.profile}",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self._ids = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Browser:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start (exit {self.proc.poll()})")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as reply:
            targets = await reply.json()
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=64 << 20)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # chromium's helpers (crash handler, utility processes) outlive it by a moment and
        # write into the profile: removed until it stays gone (a CI run found one left)
        for _attempt in range(50):
            shutil.rmtree(self.profile, ignore_errors=True)
            if not self.profile.exists():
                break
            await asyncio.sleep(0.1)

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._waiting:
                self._waiting.pop(data["id"]).set_result(data)
            elif "method" in data:
                self._events.put_nowait(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        await self._ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        async with asyncio.timeout(30):
            reply = await future
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def open(self, url: str) -> None:
        """Navigate and wait for the page's load event."""
        while not self._events.empty():
            self._events.get_nowait()
        await self.send("Page.navigate", url=url)
        async with asyncio.timeout(30):
            while (await self._events.get()).get("method") != "Page.loadEventFired":
                pass

    async def evaluate(self, expression: str) -> Any:
        """The expression's value (a promise awaited), as JSON."""
        reply = await self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    async def wait_for(self, expression: str, what: str, timeout: float = 30) -> Any:
        """Evaluate until the value is truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not in the page after {timeout:.0f} s")
            await asyncio.sleep(0.05)

    async def screenshot(self, path: Path) -> Path:
        reply = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(reply["data"]))
        return path
