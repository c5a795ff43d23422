"""InterPodAffinity: required pod affinity / anti-affinity (Filter), preferred terms (Score)."""

from __future__ import annotations

from scheduler.plugins.interpodaffinity.inter_pod_affinity import (
    ERR_AFFINITY,
    ERR_ANTI_AFFINITY,
    ERR_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
)

__all__ = ["ERR_AFFINITY", "ERR_ANTI_AFFINITY", "ERR_EXISTING_ANTI_AFFINITY", "InterPodAffinity"]
