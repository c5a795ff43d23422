"""Errors the CRI handlers turn into gRPC statuses."""

from __future__ import annotations

import grpc


class CRIError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def invalid(message: str) -> CRIError:
    return CRIError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> CRIError:
    return CRIError(grpc.StatusCode.NOT_FOUND, message)
