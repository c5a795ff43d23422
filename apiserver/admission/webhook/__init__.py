"""Admission webhooks (upstream's k8s.io/apiserver/pkg/admission/plugin/webhook): the
configurations as they are now (source), the call (client), and the two plugins
(dispatcher)."""

from apiserver.admission.webhook.client import WebhookClient
from apiserver.admission.webhook.dispatcher import MutatingWebhooks, ValidatingWebhooks
from apiserver.admission.webhook.source import Webhook, WebhookSource

__all__ = ["WebhookClient", "MutatingWebhooks", "ValidatingWebhooks", "Webhook", "WebhookSource"]
