"""The root-CA certificate publisher (upstream's pkg/controller/certificates/
rootcacertpublisher): a ConfigMap `kube-root-ca.crt` in every namespace holding the
cluster CA (`ca.crt`, from --root-ca-file), made when a namespace appears, made again
when deleted, set back when changed — what the ServiceAccount admission plugin's
projected volume mounts in every pod as its trust for the apiserver."""

from __future__ import annotations

import logging

from kubeling import errors
from kubeling.client import Client
from kubeling.informer import Informer
from kubeling.workqueue import Workers, WorkQueue
from protos.kubeling.v1 import core_pb2, meta_pb2

__all__ = ["RootCACertPublisher", "ROOT_CA_CONFIGMAP", "DESCRIPTION"]

log = logging.getLogger(__name__)

ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
DESCRIPTION_KEY = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")


class RootCACertPublisher:
    def __init__(self, client: Client, namespaces: Informer[core_pb2.Namespace],
                 configmaps: Informer[core_pb2.ConfigMap], root_ca: str, workers: int = 1) -> None:
        """`configmaps`: an informer of the kube-root-ca.crt ConfigMaps (every namespace)."""
        self.client = client
        self.namespaces = namespaces
        self.configmaps = configmaps
        self.root_ca = root_ca
        self.queue = WorkQueue("root-ca-cert-publisher")
        self.workers = Workers(self.queue, self.sync, workers)
        namespaces.add_handler(on_add=self._namespace, on_update=lambda old, new: self._namespace(new))
        configmaps.add_handler(on_update=lambda old, new: self._configmap(new), on_delete=self._configmap)

    def _namespace(self, ns: core_pb2.Namespace) -> None:
        self.queue.add(ns.metadata.name)

    def _configmap(self, cm: core_pb2.ConfigMap) -> None:
        if cm.metadata.name == ROOT_CA_CONFIGMAP:
            self.queue.add(cm.metadata.namespace)

    async def sync(self, namespace: str) -> None:
        ns = self.namespaces.store.get(namespace)
        if ns is None or ns.metadata.HasField("deletionTimestamp") or ns.status.phase == "Terminating":
            return  # nothing is made in a namespace that goes
        data = {"ca.crt": self.root_ca}
        current = self.configmaps.store.get(f"{namespace}/{ROOT_CA_CONFIGMAP}")
        if current is None:
            try:
                await self.client.configmaps.create(core_pb2.ConfigMap(
                    metadata=meta_pb2.ObjectMeta(name=ROOT_CA_CONFIGMAP, namespace=namespace,
                                                 annotations={DESCRIPTION_KEY: DESCRIPTION}), data=data))
                log.info("namespace %s: %s published", namespace, ROOT_CA_CONFIGMAP)
            except (errors.AlreadyExists, errors.NotFound, errors.Forbidden) as err:
                # made meanwhile (the informer will tell), or the namespace is going
                log.debug("namespace %s: %s not made: %s", namespace, ROOT_CA_CONFIGMAP, err.message)
            return
        if dict(current.data) == data and current.metadata.annotations.get(DESCRIPTION_KEY) == DESCRIPTION:
            return
        updated = core_pb2.ConfigMap()
        updated.CopyFrom(current)
        updated.data.clear()
        updated.data.update(data)
        updated.binaryData.clear()
        updated.metadata.annotations[DESCRIPTION_KEY] = DESCRIPTION
        try:
            await self.client.configmaps.update(updated)
            log.info("namespace %s: %s set back to the cluster CA", namespace, ROOT_CA_CONFIGMAP)
        except errors.NotFound:
            self.queue.add(namespace)  # deleted meanwhile: made again
