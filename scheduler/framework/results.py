"""Why this node: every plugin's answer in one scheduling attempt, kept on the pod.

In the spirit of the kube-scheduler-simulator, a recorded attempt is written on the pod as
annotations (JSON values) with the binding (success) or the failure status update, so it
costs no extra API write:

- `scheduler.kubeling.io/attempt`: the attempt number (1 for the first);
- `scheduler.kubeling.io/prefilter-result`: per PreFilter plugin, `passed`, `skip`, its
  rejection, or the node subset it returned;
- `scheduler.kubeling.io/filter-result`: per node evaluated, per Filter plugin in order,
  `passed` up to the one that rejected it (`<Code>: <reason>`); with `runAllFilters`,
  every plugin's verdict;
- `scheduler.kubeling.io/score-result`: per feasible node, per Score plugin
  `{"raw", "normalized", "weighted"}`;
- `scheduler.kubeling.io/finalscore-result`: per feasible node, the total;
- `scheduler.kubeling.io/postfilter-result`: the nominated node and the victims;
- `scheduler.kubeling.io/permit-result`: per Permit plugin, its verdict;
- `scheduler.kubeling.io/selected-node`: the node chosen ("" when none).

Above `max_nodes` evaluated nodes, filter and score results keep the top `top_nodes`
feasible nodes by total score, and rejections are summed up under `"(rejected)"` as one
count per plugin and reason. Recording is on per profile (`recordResults`) or per pod
(the annotation `scheduler.kubeling.io/record: "true"`); off, a cycle pays one check.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protos.kubeling.v1.core_pb2 import Pod
from scheduler.framework.status import SUCCESS, Code, Status
from scheduler.framework.types import NodeInfo

__all__ = ["PREFIX", "RECORD", "KEYS", "REJECTED", "RecordOptions", "CycleResults", "wants_record", "verdict", "on_pod"]

PREFIX = "scheduler.kubeling.io/"
RECORD = PREFIX + "record"
KEYS = ("attempt", "prefilter-result", "filter-result", "score-result", "finalscore-result", "postfilter-result",
        "permit-result", "selected-node")
REJECTED = "(rejected)"
_CODE_NAMES = {code: "".join(w.title() for w in code.name.split("_")) for code in Code}


@dataclass(frozen=True)
class RecordOptions:
    enabled: bool = False  # for every pod of the profile (else only pods that ask)
    max_nodes: int = 50  # more evaluated nodes than this: keep the top ones, count the rest
    top_nodes: int = 10


def wants_record(options: RecordOptions, pod: Pod) -> bool:
    return options.enabled or pod.metadata.annotations.get(RECORD, "").lower() == "true"


def on_pod(results: CycleResults | None) -> dict[str, str] | None:
    """The annotations a recorded attempt writes with its binding or failure, if any."""
    return results.annotations() if results is not None and results.on_pod else None


def verdict(status: Status) -> str:
    return "passed" if status.ok else f"{_CODE_NAMES[status.code]}: {status.message}"


@dataclass
class CycleResults:
    """One attempt's answers; filled by the framework and the scheduling cycle. Per-node
    values stay as the cycle's numpy rows until they are written out, and only the nodes
    written out are turned into names and dicts: recording costs little per node."""

    attempt: int
    options: RecordOptions = field(default_factory=RecordOptions)
    on_pod: bool = True  # written on the pod (else only span events: a traced cycle)
    filter_order: list[str] = field(default_factory=list)  # the Filter plugins that ran, in order
    pre_filter: dict[str, Any] = field(default_factory=dict)
    nodes: Sequence[NodeInfo] = ()  # the snapshot's nodes, by row
    passed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # rows every filter passed
    rejected: dict[str, Status] = field(default_factory=dict)  # node -> the rejecting status
    score_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    scores: dict[str, tuple[np.ndarray, np.ndarray, int]] = field(default_factory=dict)  # plugin -> raw, norm, w
    totals: np.ndarray | None = None  # by score_rows
    post_filter: dict[str, Any] = field(default_factory=dict)
    permit: dict[str, str] = field(default_factory=dict)
    selected: str = ""
    selected_row: int = -1

    # ---------------------------------------------------------------- recording

    def record_scores(self, plugin: str, rows: np.ndarray, raw: np.ndarray, normalized: np.ndarray,
                      weight: int) -> None:
        self.score_rows = rows
        self.scores[plugin] = (raw, normalized, weight)

    # ---------------------------------------------------------------- output

    def _filter_entry(self, status: Status) -> dict[str, str]:
        out = {}
        if status.parts:  # every filter ran (runAllFilters): each one's verdict
            by_plugin = {part.plugin: part for part in status.parts}
            return {plugin: verdict(by_plugin[plugin]) if plugin in by_plugin else "passed"
                    for plugin in self.filter_order}
        for plugin in self.filter_order:
            if not status.ok and plugin == status.plugin:
                out[plugin] = verdict(status)
                break
            out[plugin] = "passed"
        return out

    def _shown(self) -> tuple[list[int], list[int], bool]:
        """The passing rows written out (the top ones by total, the selected one always),
        their positions among the scored rows, and whether the rest is capped."""
        scored = len(self.totals) == len(self.score_rows) if self.totals is not None else False
        if len(self.passed) + len(self.rejected) <= self.options.max_nodes:
            return self.passed.tolist(), list(range(len(self.score_rows))), False
        k = self.options.top_nodes
        if scored and self.totals is not None:
            totals = self.totals
            best = np.argpartition(-totals, k - 1)[:k] if len(totals) > k else np.arange(len(totals))
            positions = best[np.argsort(-totals[best], kind="stable")].tolist()
        else:
            positions = []
        rows = self.score_rows[positions].tolist() if positions else self.passed[:k].tolist()
        if self.selected_row >= 0 and self.selected_row not in rows:
            rows = [*rows[:k - 1], self.selected_row]
            if scored:
                where = np.flatnonzero(self.score_rows == self.selected_row)
                positions = [*positions[:k - 1], *where.tolist()[:1]]
        return rows, positions, True

    def annotations(self) -> dict[str, str]:
        shown_rows, positions, capped = self._shown()
        nodes = self.nodes
        passed = self._filter_entry(SUCCESS)  # the same for every node that passed
        filters: dict[str, Any] = {nodes[r].name: passed for r in shown_rows}
        if capped:
            counts: Counter[str] = Counter(f"{st.plugin}: {verdict(st)}" for st in self.rejected.values())
            filters[REJECTED] = dict(sorted(counts.items()))
        else:
            filters.update({n: self._filter_entry(st) for n, st in self.rejected.items()})
        filters = dict(sorted(filters.items()))
        scores: dict[str, dict[str, dict[str, int]]] = {}
        final: dict[str, int] = {}
        rows = self.score_rows
        totals = self.totals
        for i in positions:
            name = nodes[int(rows[i])].name
            scores[name] = {p: {"raw": int(raw[i]), "normalized": int(norm[i]), "weighted": int(norm[i]) * w}
                            for p, (raw, norm, w) in self.scores.items()}
            if totals is not None:
                final[name] = int(totals[i])
        values: dict[str, Any] = {"attempt": self.attempt, "prefilter-result": self.pre_filter,
                                  "filter-result": filters, "score-result": dict(sorted(scores.items())),
                                  "finalscore-result": dict(sorted(final.items())),
                                  "postfilter-result": self.post_filter, "permit-result": self.permit,
                                  "selected-node": self.selected}
        return {PREFIX + k: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
                for k, v in values.items()}
