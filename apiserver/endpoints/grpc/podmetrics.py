"""The kubeling.v1.Metrics service: metrics.k8s.io PodMetrics over gRPC, read through the
aggregator from the metrics server (apiserver.aggregator.metrics), with the request
pipeline's authentication and authorization (list pods.metrics.k8s.io)."""

from __future__ import annotations

from typing import Any

import grpc

from apiserver.aggregator.metrics import GROUP, AggregatedMetrics
from apiserver.endpoints.grpc.handlers import _abort, _credentials, _decode, _serialize
from apiserver.endpoints.pipeline import Pipeline
from apiserver.endpoints.request import RequestInfo
from kubeling import errors
from kubeling.kjson import from_json
from protos.kubeling.v1 import meta_pb2, metrics_pb2

__all__ = ["metrics_service_handler", "SERVICE"]

SERVICE = "kubeling.v1.Metrics"


def metrics_service_handler(api: AggregatedMetrics, pipeline: Pipeline) -> grpc.GenericRpcHandler:
    async def list_pod_metrics(body: bytes, context: grpc.aio.ServicerContext) -> Any:
        try:
            with pipeline.serve("LIST", "pods.metrics") as served:
                served.authenticate(_credentials(context, pipeline))
                req = _decode(meta_pb2.ListRequest, body)
                served.authorize(RequestInfo("list", True, GROUP, "pods", "", req.namespace))
                await served.admit()
                items = await api.pod_metrics(req.namespace, "", req.labelSelector)
                out = metrics_pb2.PodMetricsList()
                for item in items:
                    decoded = from_json(item, metrics_pb2.PodMetrics)
                    out.items.append(decoded.message)
                return out
        except errors.ApiError as err:
            await _abort(context, err)

    return grpc.method_handlers_generic_handler(SERVICE, {
        "ListPodMetrics": grpc.unary_unary_rpc_method_handler(list_pod_metrics, response_serializer=_serialize)})
