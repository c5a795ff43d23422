"""Validation, as upstream's pkg/apis/core/validation: the field-error Checker shared by every
resource's strategy (`checker.py`) and the pod rules (`pods.py`)."""

from apiserver.validation.checker import TOTAL_ANNOTATION_SIZE_LIMIT, Checker

__all__ = ["Checker", "TOTAL_ANNOTATION_SIZE_LIMIT"]
