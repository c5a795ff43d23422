"""Who a request comes from, in upstream's order (k8s.io/apiserver/pkg/authentication):
an x509 client certificate verified against the client CA (user = CN, groups = O), a
bearer token from the static token file (`--token-auth-file`, upstream's CSV), then
anonymous (`system:anonymous` in `system:unauthenticated`) when allowed. A bearer token
that is presented and unknown is a 401 even where anonymous requests are allowed, as
upstream. Every authenticated user is also in `system:authenticated`.
"""

from __future__ import annotations

import contextvars
import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cryptography import x509
from cryptography.x509.oid import NameOID

from kubeling import errors

__all__ = ["ANONYMOUS", "Authenticator", "TokenAuthenticator", "UserInfo", "current_user", "load_token_file",
           "user_from_certificate"]

AUTHENTICATED, UNAUTHENTICATED = "system:authenticated", "system:unauthenticated"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values), sorted by key

    def with_authenticated(self) -> UserInfo:
        if AUTHENTICATED in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, AUTHENTICATED), self.extra)


ANONYMOUS = UserInfo("system:anonymous", groups=(UNAUTHENTICATED,))

# The user of the request being served (for logs, traces and reviews).
current_user: contextvars.ContextVar[UserInfo | None] = contextvars.ContextVar("current_user", default=None)


def load_token_file(path: Path) -> dict[str, UserInfo]:
    """Upstream's static token file: `token,user,uid[,"group1,group2,..."]` per line."""
    tokens: dict[str, UserInfo] = {}
    reader = csv.reader(io.StringIO(path.read_text()), skipinitialspace=True)
    for line, record in enumerate(reader, 1):
        if not record or (len(record) == 1 and not record[0].strip()):
            continue
        if len(record) < 3:
            raise ValueError(f"{path}:{line}: expected token,user,uid[,groups], got {len(record)} fields")
        token, name, uid = (v.strip() for v in record[:3])
        if not token or not name:
            raise ValueError(f"{path}:{line}: the token and the user name must not be empty")
        groups = tuple(g.strip() for g in record[3].split(",") if g.strip()) if len(record) > 3 else ()
        if token in tokens:
            raise ValueError(f"{path}:{line}: the token is listed twice")
        tokens[token] = UserInfo(name, uid, groups)
    return tokens


def user_from_certificate(cert: x509.Certificate) -> UserInfo:
    """The user a verified client certificate names (upstream's CommonNameUserConversion)."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return UserInfo(str(names[0].value) if names else "", groups=tuple(str(o.value) for o in orgs))


class TokenAuthenticator(Protocol):
    def authenticate_token(self, token: str) -> UserInfo | None:
        """The token's user; None: not one of this authenticator's tokens."""


@dataclass
class Authenticator:
    tokens: dict[str, UserInfo] = field(default_factory=dict)
    anonymous: bool = True
    # Bearer tokens the static file does not hold (ServiceAccount tokens, apiserver.auth.tokens).
    others: list[TokenAuthenticator] = field(default_factory=list)

    def authenticate(self, certificate_user: UserInfo | None, authorization: str | None) -> UserInfo:
        """The request's user, or errors.Unauthorized."""
        if certificate_user is not None and certificate_user.name:
            return certificate_user.with_authenticated()
        if authorization:
            scheme, _, token = authorization.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():  # an empty one is none, as upstream
                user = self.tokens.get(token.strip())
                for other in self.others:
                    if user is not None:
                        break
                    user = other.authenticate_token(token.strip())
                if user is None:
                    raise errors.Unauthorized("Unauthorized")
                return user.with_authenticated()
        if self.anonymous:
            return ANONYMOUS
        raise errors.Unauthorized("Unauthorized")
