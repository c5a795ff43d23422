"""Status: how a plugin answers, with codes instead of exceptions (upstream framework.Status)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["Code", "Status", "SUCCESS", "merge"]


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2                     # may fit after preemption or a cluster change
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3    # preemption cannot help on this node
    WAIT = 4                              # Permit: wait for allow/reject
    SKIP = 5                              # PreFilter/PreScore: this plugin has nothing to do
    PENDING = 6                           # waits for something outside the scheduler


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""  # the plugin that returned it (filled by the framework)
    error: BaseException | None = field(default=None, compare=False)
    # A merge of several plugins' rejections (a profile that runs all filters): each one's status.
    parts: tuple[Status, ...] = ()

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @classmethod
    def as_error(cls, err: BaseException | str) -> Status:
        if isinstance(err, BaseException):
            return cls(Code.ERROR, (str(err),), error=err)
        return cls(Code.ERROR, (err,))

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    def with_plugin(self, name: str) -> Status:
        return Status(self.code, self.reasons, name, self.error, self.parts) if self.plugin != name else self

    @property
    def failed_plugins(self) -> tuple[str, ...]:
        """Every plugin this status speaks for (several when merged)."""
        return tuple(p.plugin for p in self.parts) if self.parts else (self.plugin,)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)


SUCCESS = Status()


# Which of several rejections a merged status takes its code (and plugin) from (upstream statusPrecedence).
_PRECEDENCE = {Code.ERROR: 3, Code.UNSCHEDULABLE_AND_UNRESOLVABLE: 2, Code.UNSCHEDULABLE: 1}


def merge(statuses: list[Status]) -> Status:
    """Several plugins' rejections of one node as one status (upstream PluginToStatus.Merge):
    the most severe code and its plugin (the first of them, in plugin order), every reason;
    `parts` says each one's (the plugins that passed are the others)."""
    top = max(statuses, key=lambda s: _PRECEDENCE.get(s.code, 0))  # max keeps the first of equals
    reasons = tuple(r for s in statuses for r in s.reasons)
    return Status(top.code, reasons, top.plugin, top.error, tuple(statuses))
