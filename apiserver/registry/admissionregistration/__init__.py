"""admissionregistration.k8s.io/v1: the webhook configurations (webhooks.py) and the
ValidatingAdmissionPolicies with their bindings (policies.py), kept as JSON (json_strategy)
and validated with upstream's field errors (pkg/apis/admissionregistration/validation)."""

from apiserver.registry.admissionregistration.policies import (
    ValidatingAdmissionPolicyBindingStrategy,
    ValidatingAdmissionPolicyStrategy,
)
from apiserver.registry.admissionregistration.webhooks import (
    MutatingWebhookConfigurationStrategy,
    ValidatingWebhookConfigurationStrategy,
)

__all__ = ["STRATEGIES"]

STRATEGIES = (ValidatingWebhookConfigurationStrategy, MutatingWebhookConfigurationStrategy,
              ValidatingAdmissionPolicyStrategy, ValidatingAdmissionPolicyBindingStrategy)
