"""What several plugins share (upstream's plugins/helper): the selector of the pods a pod
is spread with, the Services that select a pod, a node's zone."""

from __future__ import annotations

from scheduler.plugins.helper.args import label_list
from scheduler.plugins.helper.spread import controller_of, default_selector, pod_services, zone_key

__all__ = ["controller_of", "default_selector", "label_list", "pod_services", "zone_key"]
