"""Flags declared once, on the configuration they fill: a dataclass field made with
`flag(...)` is both the setting and its command-line flag (`--field-name`, its help, its
parser), so a component's parser and its config come from one declaration, with no copy
field by field (upstream's options structs with AddFlags).

    @dataclass
    class Config:
        listen: str = flag("127.0.0.1:6443", "gRPC listen address", type=host_port_arg)

    parser = argparse.ArgumentParser(); add_flags(parser, Config)
    config = from_args(Config, parser.parse_args())

Bad configuration raises ConfigError: a component's command exits 2 on it.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["ConfigError", "flag", "add_flags", "from_args", "overrides", "boolean"]

C = TypeVar("C")
_KEY = "kubeling.flag"


class ConfigError(ValueError):
    """The configuration (flags, or a config file) is invalid: one line saying what and why."""


@dataclasses.dataclass(frozen=True)
class _Flag:
    help: str
    name: str = ""  # default: --<field name with dashes>
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    action: str | None = None  # "append", "store_true"
    shown: bool = True  # False: a setting only the config (or a test) sets


def flag(default: Any = dataclasses.MISSING, help: str = "", *, name: str = "",
         type: Callable[[str], Any] | None = None, choices: Iterable[str] | None = None, metavar: str | None = None,
         action: str | None = None, default_factory: Callable[[], Any] | None = None, shown: bool = True) -> Any:
    """A dataclass field that is also a command-line flag."""
    spec = _Flag(help, name, type, tuple(choices) if choices is not None else None, metavar, action, shown)
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata={_KEY: spec})
    return dataclasses.field(default=default, metadata={_KEY: spec})


def _flags(cls: type[Any]) -> list[tuple[dataclasses.Field[Any], _Flag]]:
    return [(f, f.metadata[_KEY]) for f in dataclasses.fields(cls) if _KEY in f.metadata and f.metadata[_KEY].shown]


def add_flags(parser: argparse.ArgumentParser | Any, cls: type[Any], *, suppress_defaults: bool = False) -> None:
    """A flag per `flag(...)` field of the dataclass. With suppress_defaults a flag not
    given is absent from the parsed namespace (for settings a config file may give)."""
    for f, spec in _flags(cls):
        kwargs: dict[str, Any] = {"dest": f.name, "help": spec.help}
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs["required"] = True
        if suppress_defaults:
            kwargs["default"] = argparse.SUPPRESS
        elif f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kwargs["default"] = f.default_factory()
        if spec.action is not None:
            kwargs["action"] = spec.action
        if spec.type is not None and spec.action != "store_true":
            kwargs["type"] = spec.type
        if spec.choices is not None:
            kwargs["choices"] = spec.choices
        if spec.metavar is not None:
            kwargs["metavar"] = spec.metavar
        parser.add_argument("--" + (spec.name or f.name.replace("_", "-")), **kwargs)


def from_args(cls: type[C], args: argparse.Namespace, **fixed: Any) -> C:
    """The dataclass from the parsed flags (and `fixed` values for fields without a flag)."""
    return cls(**{**overrides(cls, args), **fixed})


def overrides(cls: type[Any], args: argparse.Namespace) -> dict[str, Any]:
    """The flags given on the command line (parsed with suppress_defaults), by field name."""
    return {f.name: getattr(args, f.name) for f, _ in _flags(cls) if hasattr(args, f.name)}


def boolean(text: str) -> bool:
    """A flag value true or false, as upstream's bool flags take them."""
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"
