"""Errors in what the user asked for. Each message names the bad value and what is allowed or what to do."""

from __future__ import annotations


class RsbenchError(Exception):
    """A problem with the request (config, data, checkpoint, existing results), not a bug; the message says the fix."""


class ConfigError(RsbenchError, ValueError):
    """The composed configuration asks for something impossible."""


class CheckpointMismatchError(RsbenchError, ValueError):
    """A checkpoint was made for another architecture, class count, input layer or sigma than the one requested."""


class DamagedFileError(RsbenchError, ValueError):
    """A checkpoint or record on disk cannot be read (truncated, corrupt, not what its name says)."""


class DatasetUnavailableError(RsbenchError, FileNotFoundError):
    """A dataset is neither on disk nor downloadable; the message says where its files must go."""


class ProtocolMismatchError(RsbenchError, RuntimeError):
    """An existing certification record was made under another protocol (n, alpha, sigma, seed, model, ...)."""


class UnsafeFileError(RsbenchError, ValueError):
    """A checkpoint or weights file needs arbitrary unpickling to be read; the message says how to convert it."""


class ResumeMismatchError(RsbenchError, RuntimeError):
    """A run directory is resumed with settings that change what it trained or certified."""


class RunDirectoryBusyError(RsbenchError, RuntimeError):
    """Another process is writing the run directory."""


def damaged_record(path: object, line: int | None, reason: str) -> DamagedFileError:
    """The error for a certification record that cannot be continued, saying what to do about it."""
    where = f"{path}, line {line}" if line is not None else str(path)
    return DamagedFileError(
        f"{where} is damaged: {reason}. Its complete rows are still valid certificates: move the file away (or "
        "delete its bad lines) and rerun, which recomputes only the missing images"
    )


def user_message(error: BaseException) -> str | None:
    """The message to show for an error in the request, without wrappers; ``None`` for anything else (a bug).

    Hydra wraps a constructor's ``ValueError`` in an ``InstantiationException`` ("Error in call to target ...,
    full_key: certify") and a resolver's error in OmegaConf's ``InterpolationResolutionError``: the message shown is
    the original one, prefixed by the config key when it does not name it already.
    """
    if isinstance(error, RsbenchError):
        return str(error)
    cause = error.__cause__ or error.__context__
    wrapper = type(error).__name__
    if wrapper == "InstantiationException" and cause is not None:
        key = _full_key(str(error))
        inner = user_message(cause) or (_constructor_message(cause) if cause is not None else None)
        if inner is None:
            return None
        return inner if not key or key in inner else f"{key}: {inner}"
    if wrapper == "InterpolationResolutionError":
        if cause is not None and (inner := user_message(cause)) is not None:
            return inner
        return str(error).splitlines()[0]
    return None


def _constructor_message(error: BaseException) -> str | None:
    """A constructor's complaint about its arguments (bad value, unknown keyword, impossible device setting)."""
    if isinstance(error, ValueError | TypeError) or type(error).__name__ == "MisconfigurationException":
        return str(error)
    return None


def _full_key(message: str) -> str:
    """The ``full_key: <key>`` Hydra appends to an instantiation error ("" when absent)."""
    for line in reversed(message.splitlines()):
        if line.strip().startswith("full_key:"):
            return line.split(":", 1)[1].strip()
    return ""
