"""Impersonation (upstream's filters.WithImpersonation): a caller asks to act as another
user with the `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
`Impersonate-Extra-<key>` headers (gRPC: the same names, lower case, as metadata; what
`kubectl --as`, `--as-group` and `--as-uid` send). Each is authorized for the caller with
the verb `impersonate` on users, groups, serviceaccounts (a `system:serviceaccount:` name),
uids and userextras/<key>; the request then runs as the impersonated user."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from apiserver.auth.authentication import AUTHENTICATED, UserInfo
from apiserver.auth.authorization import Authorizer
from apiserver.auth.rbac import Attributes
from kubeling import errors

__all__ = ["Impersonation", "impersonation_of", "impersonate"]

_USER, _GROUP, _UID, _EXTRA = "impersonate-user", "impersonate-group", "impersonate-uid", "impersonate-extra-"
_SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Impersonation:
    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def impersonation_of(headers: Iterable[tuple[str, str]]) -> Impersonation | None:
    """The impersonation a request asks for (headers in any case), None: none; BadRequest
    when it names groups, a uid or extras without a user."""
    user, uid, asked = "", "", False
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for key, value in headers:
        name = key.lower()
        if name == _USER:
            user, asked = value, True
        elif name == _GROUP:
            groups.append(value)
            asked = True
        elif name == _UID:
            uid, asked = value, True
        elif name.startswith(_EXTRA):
            extra.setdefault(unquote(name[len(_EXTRA):]), []).append(value)
            asked = True
    if not asked:
        return None
    if not user:
        raise errors.BadRequest("requested impersonation of groups, a uid or extra fields without impersonating a "
                                "user")
    return Impersonation(user, tuple(groups), uid, tuple(sorted((k, tuple(v)) for k, v in extra.items())))


def _refuse(caller: UserInfo, resource: str, name: str, group: str = "", namespace: str = "") -> errors.Forbidden:
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    qualified = f"{resource}.{group}" if group else resource
    return errors.Forbidden(f'{qualified} "{name}" is forbidden: User "{caller.name}" cannot impersonate resource '
                            f'"{resource}" in API group "{group}" {where}')


def impersonate(caller: UserInfo, wanted: Impersonation, authorizer: Authorizer | None) -> UserInfo:
    """The user the request runs as, each part of it authorized (Forbidden otherwise)."""
    def allowed(resource: str, name: str, group: str = "", namespace: str = "", subresource: str = "") -> None:
        if authorizer is None:
            return
        ok, _ = authorizer.authorize(Attributes(caller, "impersonate", True, namespace, group, resource,
                                                subresource, name))
        if not ok:
            raise _refuse(caller, resource, name, group, namespace)

    groups = list(wanted.groups)
    if wanted.user.startswith(_SA_PREFIX) and wanted.user.count(":") == 3:
        namespace, name = wanted.user[len(_SA_PREFIX):].split(":")
        allowed("serviceaccounts", name, namespace=namespace)
        if not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        allowed("users", wanted.user)
    for group in wanted.groups:
        allowed("groups", group)
    if wanted.uid:
        allowed("uids", wanted.uid, group="authentication.k8s.io")
    for key, values in wanted.extra:
        for value in values:
            allowed("userextras", value, group="authentication.k8s.io", subresource=key)
    if wanted.user != "system:anonymous" and AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return UserInfo(wanted.user, wanted.uid, tuple(groups), wanted.extra)
