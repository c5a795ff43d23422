"""kubeling: what every component shares — the typed client, the informer, errors,
quantities, selectors — and the user-facing command."""

from __future__ import annotations

from kubeling.client import Client, PodClient, ResourceClient, WatchEvent
from kubeling.informer import Informer, Store, object_key

__all__ = ["Client", "PodClient", "ResourceClient", "WatchEvent", "Informer", "Store", "object_key"]
