"""Errors the CRI handlers turn into gRPC statuses."""

from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable, TypeVar

import grpc

T = TypeVar("T")


class CRIError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def invalid(message: str) -> CRIError:
    return CRIError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> CRIError:
    return CRIError(grpc.StatusCode.NOT_FOUND, message)


def translate_errors(handler: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Turn a CRIError raised by an RPC handler into its gRPC status."""
    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await handler(self, request, context)
        except CRIError as exc:
            await context.abort(exc.code, exc.message)
            raise AssertionError("unreachable") from None  # abort raises
    return wrapper
