"""runtime.v1 ImageService over the local image store."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import grpc

from cri.images import reference
from cri.images.builtin import PAUSE_IMAGE
from cri.images.pull import Credentials, Puller, PullError
from cri.images.store import ImageRecord, ImageStore
from protos.runtime.v1 import api_pb2, api_pb2_grpc

log = logging.getLogger(__name__)


def image_message(record: ImageRecord) -> api_pb2.Image:
    image = api_pb2.Image(id=record.id, repo_tags=record.repo_tags, repo_digests=record.repo_digests,
                          size=record.size, spec=api_pb2.ImageSpec(image=record.id),
                          # The sandbox image is pinned, as containerd pins its sandbox image.
                          pinned=reference.normalize(PAUSE_IMAGE) in record.names)
    user = str(record.run_config.get("User") or "").split(":", 1)[0]
    if user.isdigit():
        image.uid.value = int(user)
    elif user:
        image.username = user
    return image


async def _image_name(spec: api_pb2.ImageSpec, field: str, context: grpc.aio.ServicerContext) -> str:
    """The requested image, validated: an image id or a reference."""
    name = spec.image
    if not name:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field}.image is required")
    if not reference.is_image_id(name):
        try:
            reference.parse(name)
        except reference.InvalidReference as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field}.image: {exc}")
    return name


class ImageService(api_pb2_grpc.ImageServiceServicer):
    def __init__(self, store: ImageStore, puller: Puller | None = None) -> None:
        self.store = store
        self.puller = puller or Puller(store)

    async def ListImages(self, request: api_pb2.ListImagesRequest,
                         context: grpc.aio.ServicerContext) -> api_pb2.ListImagesResponse:
        if request.filter.image.image:
            name = await _image_name(request.filter.image, "filter.image", context)
            found = self.store.get(name)
            records = [found] if found else []
        else:
            records = await asyncio.to_thread(self.store.images)
        return api_pb2.ListImagesResponse(images=[image_message(r) for r in records])

    async def ImageStatus(self, request: api_pb2.ImageStatusRequest,
                          context: grpc.aio.ServicerContext) -> api_pb2.ImageStatusResponse:
        name = await _image_name(request.image, "image", context)
        record = self.store.get(name)
        if record is None:
            return api_pb2.ImageStatusResponse()  # absent: image unset, as the API says
        info: dict[str, str] = {}
        if request.verbose:
            info["info"] = json.dumps({"id": record.id, "manifestDigest": record.manifest_digest,
                                       "imageSpec": record.config,
                                       "layers": [layer.digest for layer in record.layers]})
        return api_pb2.ImageStatusResponse(image=image_message(record), info=info)

    async def PullImage(self, request: api_pb2.PullImageRequest,
                        context: grpc.aio.ServicerContext) -> api_pb2.PullImageResponse:
        name = await _image_name(request.image, "image", context)
        record = self.store.get(name)
        if record is None and reference.is_image_id(name):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"image {name!r} is not in the local store")
        if record is None or (not reference.is_image_id(name) and self.puller.repull(name)):
            # Not present: pull it. Present: used as it is (this machine reaches no public
            # registry; built-in and loaded images exist nowhere else), unless its registry is
            # one run here on purpose (the local registry, a configured mirror), which is
            # asked again as containerd asks every registry: a tag pushed anew is pulled.
            auth = request.auth
            credentials = Credentials.from_auth(auth.auth, auth.username, auth.password,
                                                auth.registry_token or auth.identity_token)
            try:
                record = await self.puller.pull(name, credentials)
            except PullError as exc:
                # Whatever stopped the pull, the image cannot be had: NOT_FOUND with the reason.
                normalized = reference.normalize(name)
                reason = str(exc).removeprefix(f"{normalized}: ")
                await context.abort(grpc.StatusCode.NOT_FOUND, f"pulling image {normalized!r}: {reason}")
        assert record is not None
        return api_pb2.PullImageResponse(image_ref=record.id)

    async def RemoveImage(self, request: api_pb2.RemoveImageRequest,
                          context: grpc.aio.ServicerContext) -> api_pb2.RemoveImageResponse:
        name = await _image_name(request.image, "image", context)
        if await asyncio.to_thread(self.store.remove, name):
            log.info("removed image %s", name)
        return api_pb2.RemoveImageResponse()  # idempotent: removing what is gone succeeds

    async def ImageFsInfo(self, request: api_pb2.ImageFsInfoRequest,
                          context: grpc.aio.ServicerContext) -> api_pb2.ImageFsInfoResponse:
        used, inodes = await asyncio.to_thread(self.store.usage)
        usage = api_pb2.FilesystemUsage(
            timestamp=time.time_ns(), fs_id=api_pb2.FilesystemIdentifier(mountpoint=str(self.store.root)),
            used_bytes=api_pb2.UInt64Value(value=used), inodes_used=api_pb2.UInt64Value(value=inodes))
        return api_pb2.ImageFsInfoResponse(image_filesystems=[usage])
