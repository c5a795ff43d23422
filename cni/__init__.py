"""libcni for Python, and the kubelet's network plugin manager.

    from cni import CNIConfig, RuntimeConf, load_dir
"""

from __future__ import annotations

from cni.api import DEFAULT_CACHE_DIR, DEFAULT_PATH, CNIConfig, RuntimeConf
from cni.conf import ConfError, NetworkConfig, NetworkConfigList, load_dir, parse_conflist
from cni.invoke import PluginError
from cni.result import DNS, Interface, IPConfig, Result, ResultError, Route, parse_result

__all__ = ["CNIConfig", "RuntimeConf", "DEFAULT_PATH", "DEFAULT_CACHE_DIR", "ConfError", "NetworkConfig",
           "NetworkConfigList", "load_dir", "parse_conflist", "PluginError", "Result", "Interface", "IPConfig",
           "Route", "DNS", "ResultError", "parse_result"]
