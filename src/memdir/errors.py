"""The exceptions memdir raises, split by who is at fault.

Every error memdir raises on purpose is a :class:`MemdirError`, so a host can catch the
whole family in one place. The children say where to look:

- :class:`UsageError`: the caller passed something memdir cannot work with (a bad
  argument, an invalid setting, a path outside the memory directory).
- :class:`TranscriptError`: a conversation file could not be read or understood.
- :class:`ModelError`: the model provider failed or answered with something unusable.
- :class:`StoreError`: the memory directory could not be read or written.
"""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = [
    "MemdirError",
    "MissingExtraError",
    "ModelError",
    "StoreError",
    "TranscriptError",
    "UsageError",
    "error_fields",
    "error_info",
    "install_command",
    "one_line",
]

REASON_CHARS = 300
"""The most a reported reason may take: one line of a log or a telemetry field."""


def one_line(exc: BaseException) -> str:
    """Why ``exc`` happened as one line of at most :data:`REASON_CHARS` characters: its
    message with line breaks folded (its type's name when it has none), cut at the end."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."


class MemdirError(Exception):
    """Root of every exception memdir raises on purpose."""


class UsageError(MemdirError, ValueError):
    """The caller asked for something memdir cannot do as asked."""


class MissingExtraError(UsageError, ModuleNotFoundError):
    """A part of memdir was used without the optional dependencies it needs.

    One error for every integration, model provider and backend, whose message names
    the extra that installs what is missing. It is a :class:`ModuleNotFoundError` (so an
    :class:`ImportError`) too, so code that guards an optional import with either keeps
    working.
    """

    def __init__(self, feature: str, extra: str, reason: str | None = None) -> None:
        why = f" ({reason})" if reason else ""
        super().__init__(f"{feature} needs the [{extra}] extra: {install_command(extra)}{why}")
        self.feature = feature
        self.extra = extra


def install_command(extra: str, source: Path | None = None) -> str:
    """The ``pip`` command that adds ``extra`` to this memdir.

    memdir is installed from its source tree, not from a package index, so a bare
    ``pip install 'memdir[extra]'`` finds nothing. Run from a source tree (an editable
    install, the usual case), the command names that tree; otherwise it says where the
    path goes. ``source`` is the tree to name (default: the one this module runs from,
    if it is one).
    """
    tree = source if source is not None else Path(__file__).resolve().parents[2]
    if (tree / "pyproject.toml").is_file():
        return f"pip install -e {shlex.quote(f'{tree}[{extra}]')}"
    return f"pip install '<memdir source tree>[{extra}]'"


class ModelError(MemdirError):
    """The model provider failed, or answered with something that cannot be used.

    ``status`` is the HTTP status the provider answered with, when it answered at all
    (None for a refused connection, a timeout or an unusable answer).
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StoreError(MemdirError, OSError):
    """The memory directory could not be read or written."""


class TranscriptError(MemdirError):
    """A conversation file is missing, unreadable, or in no format memdir knows.

    The message names the file, and the line where there is one; both are also kept as
    attributes so a caller can report them its own way.
    """

    def __init__(self, path: str | Path, reason: str, *, line: int | None = None) -> None:
        self.path = Path(path)
        self.reason = reason
        self.line = line
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {reason}")


def error_info(exc: BaseException) -> dict[str, object]:
    """``exc`` as a small JSON object for machines: ``kind`` (who is at fault: ``model``,
    ``store``, ``usage``, ``transcript``, else ``internal``), ``status`` (the provider's
    HTTP status, or None) and ``message`` (:func:`one_line`)."""
    kinds: tuple[tuple[type[BaseException], str], ...] = (
        (ModelError, "model"),
        (StoreError, "store"),
        (TranscriptError, "transcript"),
        (UsageError, "usage"),
    )
    kind = next((name for cls, name in kinds if isinstance(exc, cls)), "internal")
    status = getattr(exc, "status", None)
    return {
        "kind": kind,
        "status": status if isinstance(status, int) else None,
        "message": one_line(exc),
    }


def error_fields(exc: BaseException) -> dict[str, object]:
    """:func:`error_info` as a failure event's fields: ``reason``, ``error_kind``,
    ``status``."""
    info = error_info(exc)
    return {"reason": info["message"], "error_kind": info["kind"], "status": info["status"]}
