"""API Priority and Fairness (upstream's k8s.io/apiserver/pkg/util/flowcontrol): every
request that is not exempt is classified by the first FlowSchema that matches it (by
matchingPrecedence, then name) into a priority level and a flow (its user or namespace),
and takes seats of that level before it is served — as many as its work needs (a LIST of
many objects more than one) — or waits in the level's queues, or is refused with 429 and
`Retry-After`. Each limited level gets its share of the server's seats
(`--max-requests-inflight` plus `--max-mutating-requests-inflight`) by its
nominalConcurrencyShares. Long-running requests (watches, logs, exec) take no seat.

The configuration is the FlowSchemas and PriorityLevelConfigurations in the watch cache,
read again whenever either changes; bootstrap.py makes upstream's mandatory and suggested
ones at start."""

from apiserver.flowcontrol.bootstrap import ensure_configuration
from apiserver.flowcontrol.dispatch import Admitted, FlowControl

__all__ = ["FlowControl", "Admitted", "ensure_configuration"]
