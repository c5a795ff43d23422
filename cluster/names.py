"""Named clusters, as kind's: `kubeling up --name N` keeps N's state in a directory of its
own and records the name in `$KUBELING_HOME/names/N` (a symlink to that directory), so
that `down`, `status`, `image load` and `get clusters` find it by name. The cluster
called `kubeling` (the default) keeps its state in `$KUBELING_HOME` itself (~/.kubeling),
where it was before clusters had names; any other N in `$KUBELING_HOME/clusters/N`."""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_NAME", "ClusterNameError", "Registered", "add_cluster_args", "check_name", "default_state_dir",
           "kubeling_home", "register", "registered", "resolve", "state_dir_of"]

DEFAULT_NAME = "kubeling"
# A DNS label (the context `kubeling-<name>`, network namespaces and logs carry it), short
# enough that `kbh-<name>-<node>` stays readable.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")


class ClusterNameError(Exception):
    """A name that is not valid, or belongs to another cluster."""


@dataclass(frozen=True)
class Registered:
    name: str
    state_dir: Path


def kubeling_home() -> Path:
    """Where clusters live: $KUBELING_HOME, else ~/.kubeling."""
    return Path(os.environ.get("KUBELING_HOME") or Path.home() / ".kubeling")


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ClusterNameError(f"cluster name {name!r}: must be a DNS label of at most 32 characters "
                         "(lower case letters, digits and '-', starting and ending with a letter or digit)")
    return name


def default_state_dir(name: str) -> Path:
    home = kubeling_home()
    return home if name == DEFAULT_NAME else home / "clusters" / name


def _names_dir() -> Path:
    return kubeling_home() / "names"


def resolve(name: str) -> Path | None:
    """The state dir the name was last brought up from, if it still holds a cluster."""
    link = _names_dir() / name
    try:
        target = Path(os.readlink(link))
    except OSError:
        return None
    return target if (target / "cluster.json").is_file() else None


def registered() -> list[Registered]:
    """Every name whose state dir still holds a cluster (dangling ones: state deleted, left out)."""
    try:
        entries = sorted(_names_dir().iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        target = resolve(entry.name)
        if target is not None:
            found.append(Registered(entry.name, target))
    return found


def register(name: str, state_dir: Path) -> None:
    """Record that `name` is the cluster in state_dir (replacing a stale record)."""
    names = _names_dir()
    names.mkdir(parents=True, exist_ok=True)
    link = names / name
    temp = names / f".{name}.{os.getpid()}"
    temp.unlink(missing_ok=True)
    os.symlink(state_dir, temp)
    os.replace(temp, link)  # atomic: a reader sees the old record or the new one


def state_dir_of(args: argparse.Namespace) -> Path:
    """--state-dir when given, else the named cluster's (where it was brought up from, or
    where a new one of that name goes)."""
    if args.state_dir:
        return Path(args.state_dir).resolve()
    name = check_name(args.name or DEFAULT_NAME)
    return resolve(name) or default_state_dir(name)


def add_cluster_args(parser: argparse.ArgumentParser, help_suffix: str = "") -> None:
    parser.add_argument("--name", default="", help=f"the cluster's name (default {DEFAULT_NAME}){help_suffix}")
    parser.add_argument("--state-dir", default="",
                        help="the cluster's directory (default: the named cluster's, ~/.kubeling for kubeling, "
                             "~/.kubeling/clusters/NAME for another; $KUBELING_HOME instead of ~/.kubeling)")
