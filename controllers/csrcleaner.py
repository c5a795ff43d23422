"""The CSR cleaner (upstream's pkg/controller/certificates/cleaner, "csrcleaner"): once an
hour, requests that are done with are deleted: issued an hour after approval, denied or
failed an hour after, pending a day after creation, and any whose certificate expired."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from typing import Any

from cryptography import x509

from kubeling import errors
from kubeling.client import Client
from kubeling.dynamic import content_of
from kubeling.informer import Informer
from kubeling.timestamps import parse_rfc3339
from protos.kubeling.v1 import custom_pb2

__all__ = ["CSRCleaner", "why_done", "POLLING_INTERVAL"]

log = logging.getLogger(__name__)

POLLING_INTERVAL = 3600.0
APPROVED_EXPIRATION = DENIED_EXPIRATION = FAILED_EXPIRATION = 3600.0
PENDING_EXPIRATION = 24 * 3600.0


def _expired(certificate: str, now: float) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(base64.b64decode(certificate))
    except ValueError:
        return False
    return cert.not_valid_after_utc.timestamp() < now


def why_done(content: dict[str, Any], created: float, now: float) -> str:
    """Why this request is to be deleted now (upstream's isIssuedPastDeadline, isDenied…,
    isFailed…, isPending…, isIssuedExpired); "" when it stays."""
    status = content.get("status") or {}
    conditions = status.get("conditions") or []
    issued = bool(status.get("certificate"))
    if not conditions and now - created > PENDING_EXPIRATION:
        return "pending for more than a day"
    for c in conditions:
        try:
            updated = parse_rfc3339(c.get("lastUpdateTime", ""))
        except ValueError:
            updated = 0.0  # none (or unreadable): as old as can be
        kind = c.get("type")
        if kind == "Approved" and issued and now - updated > APPROVED_EXPIRATION:
            return "issued more than an hour ago"
        if kind == "Denied" and now - updated > DENIED_EXPIRATION:
            return "denied more than an hour ago"
        if kind == "Failed" and now - updated > FAILED_EXPIRATION:
            return "failed more than an hour ago"
        if kind == "Approved" and issued and _expired(status["certificate"], now):
            return "its certificate expired"
    return ""


class CSRCleaner:
    def __init__(self, client: Client, requests: Informer[custom_pb2.CustomResource],
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.requests = requests
        self.clock = clock

    async def clean(self) -> None:
        """One pass (the Periodic loop runs it every POLLING_INTERVAL)."""
        now = self.clock()
        for request in self.requests.store.list():
            reason = why_done(content_of(request), request.metadata.creationTimestamp.seconds, now)
            if not reason:
                continue
            try:
                await self.client.certificatesigningrequests.delete(request.metadata.name,
                                                                    uid=request.metadata.uid)
            except (errors.NotFound, errors.Conflict):
                continue
            log.info("csr %s deleted: %s", request.metadata.name, reason)
