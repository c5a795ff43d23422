"""The apiserver's options (upstream's cmd/kube-apiserver/app/options): every setting and
its flag declared once (`config`), and their validation into what the server is built
from (`completed`)."""

from __future__ import annotations

from apiserver.options.completed import Completed, complete
from apiserver.options.config import ADMISSION_PLUGINS, Config

__all__ = ["ADMISSION_PLUGINS", "Completed", "Config", "complete"]
