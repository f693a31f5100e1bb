"""The errors the experiments frame raises for problems a user can fix (the CLI prints them as one line)."""

from __future__ import annotations


class ExperimentError(Exception):
    """A problem with an experiment request: unknown name, bad config, unusable run folder."""


class ConfigError(ExperimentError, ValueError):
    """A setting the experiment cannot run with (its ``validate`` named it before any run folder
    was made); a ``ValueError`` too, as the experiment raised it."""


class CheckpointError(ExperimentError):
    """A checkpoint file exists but cannot be read back; the message names the file."""
