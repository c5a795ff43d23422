"""The bootstrap token authenticator (upstream's plugin/pkg/auth/authenticator/token/
bootstrap, `--enable-bootstrap-token-auth`): a bearer token `<id>.<secret>` is the user
`system:bootstrap:<id>` in `system:bootstrappers` (and the token's auth-extra-groups) while
`kube-system/bootstrap-token-<id>` holds that secret, is of type
bootstrap.kubernetes.io/token, allows authentication and has not expired. Any other token
is not this authenticator's (the next one is asked)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apiserver.auth.authentication import UserInfo
from kubeling import bootstraptoken

__all__ = ["BootstrapTokens"]

log = logging.getLogger(__name__)


@dataclass
class BootstrapTokens:
    secrets: Callable[[str, str], Any]  # (namespace, name) -> the watch cache's Secret or None

    def authenticate_token(self, token: str) -> UserInfo | None:
        parsed = bootstraptoken.parse(token)
        if parsed is None:
            return None
        token_id, token_secret = parsed
        secret = self.secrets(bootstraptoken.NAMESPACE, bootstraptoken.SECRET_PREFIX + token_id)
        if secret is None:
            log.info("bootstrap token %s: no secret", token_id)
            return None
        data = dict(secret.data)
        if secret.metadata.HasField("deletionTimestamp") or secret.type != bootstraptoken.SECRET_TYPE:
            return None
        if not hmac.compare_digest(data.get("token-secret", b""), token_secret.encode()) or \
                data.get("token-id", b"").decode(errors="replace") != token_id:
            log.info("bootstrap token %s: the secret does not match", token_id)
            return None
        if bootstraptoken.expired(data):
            log.info("bootstrap token %s: expired", token_id)
            return None
        if data.get("usage-bootstrap-authentication", b"") != b"true":
            return None
        groups = bootstraptoken.groups(data)
        if groups is None:
            log.info("bootstrap token %s: malformed auth-extra-groups", token_id)
            return None
        return UserInfo(bootstraptoken.USER_PREFIX + token_id, groups=tuple(groups))
