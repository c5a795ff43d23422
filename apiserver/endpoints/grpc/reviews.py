"""The kubeling.v1.Authorization service: SubjectAccessReview over gRPC, with the request
pipeline's authentication and authorization (create subjectaccessreviews), answered by
the authorizer that decides requests (apiserver.auth.access_review)."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import json_format

from apiserver.auth.access_review import review_subject_access
from apiserver.endpoints.grpc.handlers import _abort, _credentials, _decode, _serialize
from apiserver.endpoints.pipeline import Pipeline
from apiserver.endpoints.request import RequestInfo
from kubeling import errors
from protos.kubeling.v1 import authorization_pb2

__all__ = ["authorization_service_handler", "SERVICE"]

SERVICE = "kubeling.v1.Authorization"
_GROUP = "authorization.k8s.io"


def authorization_service_handler(pipeline: Pipeline) -> grpc.GenericRpcHandler:
    async def create_subject_access_review(body: bytes, context: grpc.aio.ServicerContext) -> Any:
        try:
            with pipeline.serve("CREATE", "subjectaccessreviews") as served:
                served.authenticate(_credentials(context, pipeline))
                review = _decode(authorization_pb2.SubjectAccessReview, body)
                served.authorize(RequestInfo("create", True, _GROUP, "subjectaccessreviews", "", ""))
                await served.admit()
                spec = json_format.MessageToDict(review.spec)
                for key, value in list((spec.get("extra") or {}).items()):
                    spec["extra"][key] = value.get("items", [])
                status = review_subject_access(spec, "", pipeline.authorizer)
                review.status.allowed, review.status.reason = status["allowed"], status.get("reason", "")
                return review
        except errors.ApiError as err:
            await _abort(context, err)

    return grpc.method_handlers_generic_handler(SERVICE, {
        "CreateSubjectAccessReview": grpc.unary_unary_rpc_method_handler(create_subject_access_review,
                                                                         response_serializer=_serialize)})
