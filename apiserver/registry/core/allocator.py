"""Durable range allocators: which Service ClusterIPs and node ports are taken, as a bitmap
in one etcd key, changed by compare-and-swap (upstream's pkg/registry/core/service/
allocator: an AllocationBitmap behind an etcd-backed RangeAllocation).

Every apiserver allocates through the same key, so two of them never hand out the same
address; the last value etcd returned is kept and a refused swap brings the current one,
so an allocation costs one etcd round trip when nobody else wrote in between. Within one
apiserver the swaps take turns (a lock): concurrent creates would otherwise refuse each
other's swaps over and over (bench.services found 64 at once running out of retries).
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from apiserver.storage.etcd import KV, KeyExists, StaleRevision, Storage
from kubeling import errors
from protos.kubeling.v1 import core_pb2

__all__ = ["RangeAllocator", "RangeFull", "AlreadyAllocated", "OutOfRange", "IPRange", "PortRange"]

_CAS_RETRIES = 50


class RangeFull(Exception):
    pass


class AlreadyAllocated(Exception):
    pass


class OutOfRange(Exception):
    pass


@dataclass(frozen=True)
class IPRange:
    """The usable addresses of a CIDR: not the network address, and not the broadcast one of
    an IPv4 range (upstream's ipallocator)."""

    cidr: ipaddress.IPv4Network | ipaddress.IPv6Network

    @classmethod
    def parse(cls, text: str) -> IPRange:
        return cls(ipaddress.ip_network(text, strict=True))

    @property
    def text(self) -> str:
        return str(self.cidr)

    @property
    def size(self) -> int:
        total = self.cidr.num_addresses - 1  # the network address is never handed out
        if self.cidr.version == 4:
            total -= 1  # nor the broadcast address
        return max(min(total, 1 << 20), 0)  # IPv6: the first 2^20 addresses are plenty here

    def index(self, value: str) -> int:
        try:
            ip = ipaddress.ip_address(value)
        except ValueError:
            raise OutOfRange(value) from None
        offset = int(ip) - int(self.cidr.network_address) - 1
        if ip not in self.cidr or not 0 <= offset < self.size:
            raise OutOfRange(value)
        return offset

    def value(self, index: int) -> str:
        return str(self.cidr.network_address + index + 1)


@dataclass(frozen=True)
class PortRange:
    """base..base+size-1 (--service-node-port-range, 30000-32767 by default)."""

    base: int
    size: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        low, sep, high = text.partition("-")
        if not sep or not low.strip().isdigit() or not high.strip().isdigit():
            raise ValueError(f"invalid port range {text!r}: want LOW-HIGH")
        first, last = int(low), int(high)
        if not 1 <= first <= last <= 65535:
            raise ValueError(f"invalid port range {text!r}")
        return cls(first, last - first + 1)

    @property
    def text(self) -> str:
        return f"{self.base}-{self.base + self.size - 1}"

    def index(self, value: str) -> int:
        port = int(value)
        if not self.base <= port < self.base + self.size:
            raise OutOfRange(value)
        return port - self.base

    def value(self, index: int) -> str:
        return str(self.base + index)


Range = IPRange | PortRange


class RangeAllocator:
    """A bitmap over `range` stored at `key`; indices are the range's offsets."""

    def __init__(self, storage: Storage, key: bytes, range_: Range, *,
                 rng: random.Random | None = None) -> None:
        self.storage = storage
        self.key = key
        self.range = range_
        self._rng = rng or random.Random()
        self._last: KV | None = None  # what etcd last told us the key holds
        self._turn = asyncio.Lock()

    # ------------------------------------------------------------ bitmap

    def _bits(self, kv: KV | None) -> bytearray:
        size = (self.range.size + 7) // 8
        if kv is None:
            return bytearray(size)
        stored = core_pb2.RangeAllocation.FromString(kv.value)
        if stored.range != self.range.text:
            return bytearray(size)  # another range configured: the repair rebuilds it from the Services
        data = bytearray(stored.data[:size])
        return data + bytearray(size - len(data))

    @staticmethod
    def _taken(bits: bytearray, index: int) -> bool:
        return bool(bits[index >> 3] & (1 << (index & 7)))

    def _free_index(self, bits: bytearray) -> int | None:
        """A random free index: the scan starts at a random place so that allocators racing
        for the same bitmap rarely pick the same address (upstream's randomScanStrategy)."""
        size = self.range.size
        if size <= 0:
            return None
        start = self._rng.randrange(size)
        for index in (*range(start, size), *range(0, start)):
            byte = bits[index >> 3]
            if byte == 0xFF and index & 7 == 0 and index + 8 <= size:
                continue
            if not byte & (1 << (index & 7)):
                return index
        return None

    def _encode(self, bits: bytearray) -> bytes:
        return core_pb2.RangeAllocation(range=self.range.text, data=bytes(bits)).SerializeToString()

    # ------------------------------------------------------------ etcd

    async def _current(self) -> KV | None:
        if self._last is None:
            self._last, _ = await self.storage.get(self.key)
        return self._last

    async def _swap(self, change: Callable[[bytearray], bool]) -> None:
        """Apply change to the stored bitmap (it returns False: nothing to write) by CAS."""
        async with self._turn:
            await self._swap_now(change)

    async def _swap_now(self, change: Callable[[bytearray], bool]) -> None:
        kv = await self._current()
        fresh = False  # our last copy may be behind another apiserver's writes
        for _ in range(_CAS_RETRIES):
            bits = self._bits(kv)
            try:
                if not change(bits):
                    return
            except (RangeFull, AlreadyAllocated):
                if fresh:
                    raise
                kv = self._last = (await self.storage.get(self.key))[0]  # judge again on etcd's copy
                fresh = True
                continue
            try:
                if kv is None:
                    revision = await self.storage.create(self.key, self._encode(bits))
                else:
                    revision = await self.storage.update(self.key, self._encode(bits), kv.mod_revision)
            except (StaleRevision, KeyExists) as refused:
                kv = self._last = refused.current
                fresh = True
                continue
            self._last = KV(self.key, self._encode(bits), revision, kv.create_revision if kv else revision)
            return
        raise errors.Conflict(f"too many concurrent allocations from {self.range.text}; try again")

    async def allocate(self, value: str | None = None) -> str:
        """Take `value` (AlreadyAllocated, OutOfRange) or any free one (RangeFull)."""
        wanted = self.range.index(value) if value is not None else None
        chosen: list[int] = []

        def take(bits: bytearray) -> bool:
            chosen.clear()
            index = wanted if wanted is not None else self._free_index(bits)
            if index is None:
                raise RangeFull(self.range.text)
            if self._taken(bits, index):
                raise AlreadyAllocated(self.range.value(index))
            bits[index >> 3] |= 1 << (index & 7)
            chosen.append(index)
            return True

        await self._swap(take)
        return self.range.value(chosen[0])

    async def would_allocate(self, value: str | None = None) -> str:
        """What allocate would answer, nothing taken (dry runs)."""
        self._last, _ = await self.storage.get(self.key)
        bits = self._bits(self._last)
        index = self.range.index(value) if value is not None else self._free_index(bits)
        if index is None:
            raise RangeFull(self.range.text)
        if value is not None and self._taken(bits, index):
            raise AlreadyAllocated(value)
        return self.range.value(index)

    async def release(self, values: Iterable[str]) -> None:
        indices = []
        for value in values:
            try:
                indices.append(self.range.index(value))
            except (OutOfRange, ValueError):
                continue  # never ours (a range changed since): nothing to free

        def free(bits: bytearray) -> bool:
            changed = False
            for index in indices:
                if self._taken(bits, index):
                    bits[index >> 3] &= ~(1 << (index & 7)) & 0xFF
                    changed = True
            return changed

        if indices:
            await self._swap(free)

    async def taken(self) -> set[str]:
        """Every value the stored bitmap holds, read fresh from etcd."""
        self._last, _ = await self.storage.get(self.key)
        bits = self._bits(self._last)
        return {self.range.value(i) for i in range(self.range.size) if self._taken(bits, i)}

    async def reconcile(self, add: set[str], remove: set[str]) -> None:
        """One swap that marks `add` taken and `remove` free (the repair's fix-up)."""
        add_i = {self.range.index(v) for v in add}
        remove_i = {self.range.index(v) for v in remove} - add_i

        def fix(bits: bytearray) -> bool:
            changed = False
            for index in add_i:
                if not self._taken(bits, index):
                    bits[index >> 3] |= 1 << (index & 7)
                    changed = True
            for index in remove_i:
                if self._taken(bits, index):
                    bits[index >> 3] &= ~(1 << (index & 7)) & 0xFF
                    changed = True
            return changed

        if add_i or remove_i:
            await self._swap(fix)
