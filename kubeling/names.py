"""Name and label syntax checks, as apimachinery's `util/validation`.

Each returns a list of messages (empty when valid), worded as upstream words them.
"""

from __future__ import annotations

import re

__all__ = [
    "dns1123_label", "dns1123_subdomain", "qualified_name", "label_value",
    "env_var_name", "port_name", "c_identifier", "path_segment_name", "dns1035_label",
]

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
_IANA_SVC = re.compile(r"[-a-z0-9]+\Z")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.match(value):
        errs.append("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                    "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')")
    return errs


def dns1035_label(value: str) -> list[str]:
    """A label that starts with a letter (versions and the names of custom resources)."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1035_LABEL.match(value):
        errs.append("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'example.com')")
    return errs


def path_segment_name(value: str) -> list[str]:
    """A name that only has to be one URL path segment (RBAC objects: `system:node`)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: optional DNS subdomain prefix and '/', then a name of <= 63."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += [f"prefix part {m}" for m in dns1123_subdomain(prefix)]
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not _QUALIFIED_NAME.match(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                    "and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')")
    return errs


def label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if value and not _QUALIFIED_NAME.match(value):
        errs.append("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                    "or '.', and must start and end with an alphanumeric character")
    return errs


def env_var_name(value: str) -> list[str]:
    if not _ENV_VAR_NAME.match(value):
        return ["a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
                "or '.', and must not start with a digit"]
    return []


def port_name(value: str) -> list[str]:
    """IANA_SVC_NAME: at most 15 lowercase alphanumerics or '-', at least one letter."""
    errs = []
    if len(value) > 15:
        errs.append("must be no more than 15 characters")
    if not _IANA_SVC.match(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    if not any(c.isalpha() for c in value):
        errs.append("must contain at least one letter (a-z)")
    return errs


def c_identifier(value: str) -> list[str]:
    return [] if _C_IDENTIFIER.match(value) else ["a valid C identifier must start with alphabetic character or '_'"]
