"""The bootstrap signer (upstream's pkg/controller/bootstrap/bootstrapsigner.go): the
`kube-public/cluster-info` ConfigMap's kubeconfig is signed with every bootstrap token that
may sign (`usage-bootstrap-signing: "true"`, not expired), one `jws-kubeconfig-<id>` key
each; signatures of tokens gone are removed. A joining machine reads cluster-info without
credentials and trusts it once the signature of the token it was given verifies."""

from __future__ import annotations

import logging

from kubeling import bootstraptoken, errors
from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2

__all__ = ["BootstrapSigner"]

log = logging.getLogger(__name__)

_KEY = "cluster-info"  # the one queue key: every change re-signs the one ConfigMap


class BootstrapSigner:
    def __init__(self, client: Client, configmaps: Informer[core_pb2.ConfigMap],
                 secrets: Informer[core_pb2.Secret]) -> None:
        """`configmaps`: kube-public's cluster-info; `secrets`: kube-system's bootstrap tokens."""
        self.client = client
        self.configmaps = configmaps
        self.secrets = secrets
        self.queue = WorkQueue("bootstrap-signer")
        self.workers = Workers(self.queue, self.sync, 1)
        for informer in (configmaps, secrets):
            informer.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                 on_delete=self._changed)

    def _changed(self, _obj: object) -> None:
        self.queue.add(_KEY)

    def _signing_tokens(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for secret in self.secrets.store.list():
            data = dict(secret.data)
            token_id = data.get("token-id", b"").decode(errors="replace")
            if secret.type != bootstraptoken.SECRET_TYPE or secret.metadata.name != \
                    bootstraptoken.SECRET_PREFIX + token_id or data.get("usage-bootstrap-signing") != b"true" or \
                    bootstraptoken.expired(data) or secret.metadata.HasField("deletionTimestamp"):
                continue
            out[token_id] = data.get("token-secret", b"").decode(errors="replace")
        return out

    async def sync(self, _key: str) -> None:
        cm = self.configmaps.store.get(f"{bootstraptoken.CLUSTER_INFO_NAMESPACE}/{bootstraptoken.CLUSTER_INFO}")
        if cm is None or "kubeconfig" not in cm.data:
            return
        content = cm.data["kubeconfig"]
        wanted = {bootstraptoken.JWS_PREFIX + token_id: bootstraptoken.detached_signature(content, token_id, secret)
                  for token_id, secret in self._signing_tokens().items()}
        present = {k: v for k, v in cm.data.items() if k.startswith(bootstraptoken.JWS_PREFIX)}
        if present == wanted:
            return
        updated = core_pb2.ConfigMap()
        updated.CopyFrom(cm)
        for key in present:
            del updated.data[key]
        updated.data.update(wanted)
        try:
            await self.client.configmaps.update(updated)
        except errors.NotFound:
            return
        log.info("cluster-info signed for %d bootstrap token(s)", len(wanted))
