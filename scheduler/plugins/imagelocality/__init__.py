"""ImageLocality: favour nodes that already have the pod"s images, scaled by how widely"""

from __future__ import annotations

from scheduler.plugins.imagelocality.image_locality import ImageLocality, calculate_priority

__all__ = ["ImageLocality", "calculate_priority"]
