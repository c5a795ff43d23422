"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at a time."""

from __future__ import annotations

from scheduler.plugins.volumerestrictions.volume_restrictions import VolumeRestrictions

__all__ = ["VolumeRestrictions"]
