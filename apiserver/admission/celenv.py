"""The CEL environment of admission (match conditions, ValidatingAdmissionPolicies), as
upstream's k8s.io/apiserver/pkg/cel: expressions run on the same interpreter as CRD rules
(`common-expression-language`), with the Kubernetes extension libraries that matter —
strings, lists, regex, quantity, URL, IP and CIDR, and the authorizer — added as
functions. A value of a Kubernetes type (a quantity, a URL, an IP) is a map tagged with
its type, which only these functions read.

The authorizer checks the request's user (`current_user`) against the authorizer a
policy plugin puts in `AUTHORIZER` for the evaluation.
"""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import cel

from apiserver.auth.authentication import ANONYMOUS, AUTHENTICATED, UserInfo, current_user
from apiserver.auth.rbac import Attributes
from kubeling.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["compile_error", "program", "evaluate", "context", "FUNCTIONS", "AUTHORIZER", "EVAL_ERRORS"]

# What an evaluation may raise: a missing field, an index out of range, a division by
# zero, an overflow, a bad regular expression, a function on the wrong types.
EVAL_ERRORS = (KeyError, IndexError, ZeroDivisionError, OverflowError, RuntimeError, TypeError, ValueError)

# The authorizer the `authorizer` variable asks (set by the policy plugin around an evaluation).
AUTHORIZER: contextvars.ContextVar[Any] = contextvars.ContextVar("cel_authorizer", default=None)


@functools.lru_cache(maxsize=4096)
def program(expression: str) -> Any:
    """The expression compiled (once per process); ValueError when it does not compile."""
    return cel.compile(expression)


def compile_error(expression: str, *, params: bool = False) -> str | None:
    """Upstream's compilation failure message, or None."""
    try:
        program(expression)
    except ValueError as err:
        detail = str(err)
        detail = detail[detail.index("ERROR:"):] if "ERROR:" in detail else detail
        return f"compilation failed: {detail}"
    return None


def context(variables: dict[str, Any]) -> Any:
    """An evaluation context: the variables converted to CEL once, for every expression
    evaluated in it."""
    return cel.Context(variables, FUNCTIONS)


def evaluate(expression: str, variables: dict[str, Any] | Any) -> Any:
    """The expression's value (raises one of EVAL_ERRORS), in a context or on variables."""
    return program(expression).execute(context(variables) if isinstance(variables, dict) else variables)


# ------------------------------------------------------------------ tagged values

_Q, _URL, _IP, _CIDR, _AUTHZ, _DECISION = "@quantity", "@url", "@ip", "@cidr", "@authz", "@decision"


def _tagged(value: Any, tag: str) -> Any:
    if not (isinstance(value, dict) and tag in value):
        raise TypeError(f"no such overload: expected a {tag[1:]}")
    return value[tag]


# ------------------------------------------------------------------ strings and lists

def _char_at(s: str, i: int) -> str:
    if not 0 <= i <= len(s):
        raise IndexError(f"index out of range: {i}")
    return s[i:i + 1]


def _index_of(target: Any, item: Any, start: int = 0) -> int:
    if isinstance(target, str):
        if not 0 <= start <= len(target):
            raise IndexError(f"index out of range: {start}")
        return target.find(item, start)
    if isinstance(target, list):
        return next((i for i, v in enumerate(target) if v == item), -1)
    raise TypeError("no such overload: indexOf")


def _last_index_of(target: Any, item: Any) -> int:
    if isinstance(target, str):
        return target.rfind(item)
    if isinstance(target, list):
        return next((i for i in range(len(target) - 1, -1, -1) if target[i] == item), -1)
    raise TypeError("no such overload: lastIndexOf")


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n if n >= 0 else -1)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    return s.split(sep, n - 1) if n > 0 else s.split(sep)


def _substring(s: str, start: int, end: int | None = None) -> str:
    end = len(s) if end is None else end
    if not 0 <= start <= end <= len(s):
        raise IndexError(f"index out of range: {start}:{end}")
    return s[start:end]


def _join(items: list[str], sep: str = "") -> str:
    return sep.join(items)


def _lower_ascii(s: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in s)


def _upper_ascii(s: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in s)


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in zip(items, items[1:], strict=False))


def _sum(items: list[Any]) -> Any:
    return sum(items) if items else 0


def _min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min called on empty list")
    return min(items)


def _max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max called on empty list")
    return max(items)


def _find(s: str, pattern: str) -> str:
    match = re.search(pattern, s)
    return match.group(0) if match else ""


def _find_all(s: str, pattern: str, n: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, s)]
    return found if n < 0 else found[:n]


# ------------------------------------------------------------------ quantity

def _quantity(s: str) -> dict[str, str]:
    try:
        parse_quantity(s)
    except QuantityError as err:
        raise ValueError(f"quantities must match the regular expression: {err}") from None
    return {_Q: s}


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


def _q(value: Any) -> Quantity:
    return parse_quantity(_tagged(value, _Q))


def _q_compare(a: Any, b: Any) -> int:
    x, y = _q(a).value, _q(b).value
    return (x > y) - (x < y)


def _q_sign(a: Any) -> int:
    v = _q(a).value
    return (v > 0) - (v < 0)


def _q_is_integer(a: Any) -> bool:
    return _q(a).value == int(_q(a).value)


def _q_as_integer(a: Any) -> int:
    v = _q(a).value
    if v != int(v):
        raise ValueError("cannot convert value to integer")
    if not -(2 ** 63) <= v < 2 ** 63:
        raise OverflowError("cannot convert value to integer")
    return int(v)


def _q_arith(a: Any, b: Any, sign: int) -> dict[str, str]:
    other = _q(b).value if isinstance(b, dict) else b
    value = _q(a).value + sign * other
    return {_Q: str(int(value)) if value == int(value) else repr(float(value))}


# ------------------------------------------------------------------ URL

def _url(s: str) -> dict[str, str]:
    if not _is_url(s):
        raise ValueError(f"URL parse error during conversion from string: {s!r}")
    return {_URL: s}


def _is_url(s: str) -> bool:
    try:
        parts = urlsplit(s)
    except ValueError:
        return False
    return bool(parts.scheme and (parts.netloc or parts.path.startswith("/"))) or s.startswith("/")


def _url_part(name: str) -> Callable[[Any], str]:
    def get(u: Any) -> str:
        parts = urlsplit(_tagged(u, _URL))
        if name == "scheme":
            return parts.scheme
        if name == "host":
            return parts.netloc.rpartition("@")[2]
        if name == "hostname":
            return parts.hostname or ""
        if name == "port":
            return str(parts.port) if parts.port is not None else ""
        return parts.path
    return get


def _url_query(u: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(_tagged(u, _URL)).query, keep_blank_values=True)


# ------------------------------------------------------------------ IP and CIDR

def _ip(s: str) -> dict[str, str]:
    if not _is_ip(s):
        raise ValueError(f"IP Address {s!r} parse error during conversion from string")
    return {_IP: s}


def _is_ip(s: str) -> bool:
    try:
        ipaddress.ip_address(s)
    except ValueError:
        return False
    return "%" not in s


def _addr(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(_tagged(value, _IP))


def _cidr(s: str) -> dict[str, str]:
    if not _is_cidr(s):
        raise ValueError(f"network address {s!r} parse error during conversion from string")
    return {_CIDR: s}


def _is_cidr(s: str) -> bool:
    try:
        ipaddress.ip_network(s, strict=False)
    except ValueError:
        return False
    return "/" in s


def _net(value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(_tagged(value, _CIDR), strict=False)


def _contains_ip(c: Any, ip: Any) -> bool:
    addr = ipaddress.ip_address(ip) if isinstance(ip, str) else _addr(ip)
    return addr in _net(c)


def _contains_cidr(c: Any, other: Any) -> bool:
    net = ipaddress.ip_network(other, strict=False) if isinstance(other, str) else _net(other)
    outer = _net(c)
    return net.version == outer.version and net.subnet_of(outer)  # type: ignore[arg-type]


def _ip_or_cidr_ip(value: Any) -> dict[str, str]:
    """cidr.ip(): the CIDR's address."""
    return {_IP: _tagged(value, _CIDR).partition("/")[0]}


def _family(value: Any) -> int:
    return _addr(value).version


# ------------------------------------------------------------------ authorizer

def _authz(value: Any) -> dict[str, str]:
    return dict(_tagged(value, _AUTHZ))


def _with(key: str) -> Callable[[Any, str], dict[str, Any]]:
    def set_(target: Any, value: str) -> dict[str, Any]:
        out = _authz(target)
        out[key] = value
        return {_AUTHZ: out}
    return set_


def _check(target: Any, verb: str) -> dict[str, Any]:
    spec = _authz(target)
    authorizer = AUTHORIZER.get()
    user = current_user.get() or ANONYMOUS
    if "serviceAccount" in spec:
        namespace, _, name = spec["serviceAccount"].partition("/")
        user = UserInfo(f"system:serviceaccount:{namespace}:{name}",
                        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))
    if authorizer is None:
        return {_DECISION: {"allowed": True, "reason": "", "error": ""}}
    if "path" in spec:
        attrs = Attributes(user, verb, False, path=spec["path"])
    else:
        attrs = Attributes(user, verb, True, spec.get("namespace", ""), spec.get("group", ""),
                           spec.get("resource", ""), spec.get("subresource", ""), spec.get("name", ""))
    allowed, reason = authorizer.authorize(attrs)
    return {_DECISION: {"allowed": bool(allowed), "reason": reason or "", "error": ""}}


def _decision(key: str) -> Callable[[Any], Any]:
    def get(d: Any) -> Any:
        value = _tagged(d, _DECISION)
        return bool(value["error"]) if key == "errored" else value[key]
    return get


def _service_account(target: Any, namespace: str, name: str) -> dict[str, Any]:
    _authz(target)
    return {_AUTHZ: {"serviceAccount": f"{namespace}/{name}"}}


# Every extension function, by name (a method is a function whose first argument is its receiver).
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "charAt": _char_at, "indexOf": _index_of, "lastIndexOf": _last_index_of, "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii, "replace": _replace, "split": _split, "substring": _substring, "trim": str.strip,
    "join": _join, "isSorted": _is_sorted, "sum": _sum, "min": _min, "max": _max, "find": _find,
    "findAll": _find_all,
    "quantity": _quantity, "isQuantity": _is_quantity, "sign": _q_sign, "isInteger": _q_is_integer,
    "asInteger": _q_as_integer, "asApproximateFloat": lambda a: float(_q(a).value),
    "isGreaterThan": lambda a, b: _q_compare(a, b) > 0, "isLessThan": lambda a, b: _q_compare(a, b) < 0,
    "compareTo": _q_compare, "add": lambda a, b: _q_arith(a, b, 1), "sub": lambda a, b: _q_arith(a, b, -1),
    "url": _url, "isURL": _is_url, "getScheme": _url_part("scheme"), "getHost": _url_part("host"),
    "getHostname": _url_part("hostname"), "getPort": _url_part("port"), "getEscapedPath": _url_part("path"),
    "getQuery": _url_query,
    "ip": lambda v: _ip(v) if isinstance(v, str) else _ip_or_cidr_ip(v), "isIP": _is_ip, "family": _family,
    "isUnspecified": lambda v: _addr(v).is_unspecified, "isLoopback": lambda v: _addr(v).is_loopback,
    "isLinkLocalMulticast": lambda v: _addr(v).is_multicast and _addr(v).is_link_local,
    "isLinkLocalUnicast": lambda v: _addr(v).is_link_local and not _addr(v).is_multicast,
    "isGlobalUnicast": lambda v: _addr(v).is_global and not _addr(v).is_multicast,
    "cidr": _cidr, "isCIDR": _is_cidr, "containsIP": _contains_ip, "containsCIDR": _contains_cidr,
    "prefixLength": lambda c: _net(c).prefixlen, "masked": lambda c: {_CIDR: str(_net(c))},
    "group": _with("group"), "resource": _with("resource"), "subresource": _with("subresource"),
    "namespace": _with("namespace"), "name": _with("name"), "path": _with("path"), "check": _check,
    "serviceAccount": _service_account,
    "allowed": _decision("allowed"), "reason": _decision("reason"), "errored": _decision("errored"),
    "error": _decision("error"),
}

AUTHORIZER_VALUE: dict[str, Any] = {_AUTHZ: {}}
