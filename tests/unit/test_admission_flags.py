"""--enable-admission-plugins and --disable-admission-plugins as upstream's: every plugin is on
by default and runs in its fixed order; enabling adds to the defaults (kubeadm's
`--enable-admission-plugins=NodeRestriction` turns nothing off), disabling takes away, and
a name that is no plugin, or is in both lists, is refused naming it."""

from __future__ import annotations

import pytest

from apiserver.options.completed import complete
from apiserver.options.config import ADMISSION_PLUGINS, Config
from kubeling.options import ConfigError


def test_enable_adds_to_the_defaults_and_disable_takes_away() -> None:
    assert complete(Config()).admission_plugins == list(ADMISSION_PLUGINS)
    assert complete(Config(admission_plugins="NodeRestriction")).admission_plugins == list(ADMISSION_PLUGINS)
    running = complete(Config(disable_admission_plugins="PodSecurity, ResourceQuota")).admission_plugins
    assert running == [p for p in ADMISSION_PLUGINS if p not in ("PodSecurity", "ResourceQuota")]


def test_bad_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="--enable-admission-plugins: 'NodeRestrictions' is not one of"):
        complete(Config(admission_plugins="NodeRestrictions"))
    with pytest.raises(ConfigError, match="--disable-admission-plugins: 'Nope' is not one of"):
        complete(Config(disable_admission_plugins="Nope"))
    with pytest.raises(ConfigError, match="both name Priority"):
        complete(Config(admission_plugins="Priority", disable_admission_plugins="Priority"))
