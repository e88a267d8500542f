"""Errors in what the user asked for. Each message names the bad value and what is allowed or what to do."""

from __future__ import annotations


class RsbenchError(Exception):
    """A problem with the request (config, data, checkpoint, existing results), not a bug; the message says the fix."""


class ConfigError(RsbenchError, ValueError):
    """The composed configuration asks for something impossible."""


class CheckpointMismatchError(RsbenchError, ValueError):
    """A checkpoint was made for another architecture, class count, input layer or sigma than the one requested."""


class DatasetUnavailableError(RsbenchError, FileNotFoundError):
    """A dataset is neither on disk nor downloadable; the message says where its files must go."""


class ProtocolMismatchError(RsbenchError, RuntimeError):
    """An existing certification record was made under another protocol (n, alpha, sigma, seed, model, ...)."""


class UnsafeFileError(RsbenchError, ValueError):
    """A checkpoint or weights file needs arbitrary unpickling to be read; the message says how to convert it."""
