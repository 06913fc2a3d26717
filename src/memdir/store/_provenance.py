"""Where each memory came from and what each session was shown, kept in memdir's state.

Not in the memory file: Claude Code 2.1.332 keeps frontmatter keys it does not know when
its agent writes them back (checked with the real CLI), but its agent writes the whole
file, so a rewrite that leaves them out loses them, and a list of message ids is the first
thing a model trims; it would also cost tokens at every Read of the memory. Provenance
lives beside the memories instead, in the memory directory's ``.memdir/`` folder, which no
scan lists and the memory agent may not write:

- ``.memdir/provenance/changes.log`` — one JSON line per change to a memory: which file, what
  happened (``created``, ``changed``, ``removed``, ``forgotten``, ``restored``),
  when, by whom (``memdir``, ``claude-code``, ``dream``, ``forget``), the run, the session
  and the ids of the messages it was drawn from, and the file's sha256 afterwards (so a
  later change made elsewhere shows as one).
- ``.memdir/provenance/shown/<session>.log`` — what a host memdir loads memory into was
  shown, as it happens: the index loaded (and whether it was cut), the memories surfaced.

Both are append-only, a short line per event (JSON lines, named ``.log`` so that nothing
looking for transcripts, ``*.jsonl``, takes them for one), written under one lock,
``.memdir/provenance.lock``. A line that cannot be parsed (a crash mid-append) is skipped
on reading. Recording never fails the work it records: an unwritable log is passed over.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memdir._private import PRIVATE_FILE_MODE, make_private_dirs
from memdir.errors import StoreError
from memdir.store._atomic import STATE_DIR_NAME, file_lock
from memdir.store._memory_dir import MemoryDir

__all__ = [
    "PROVENANCE_DIR_NAME",
    "Change",
    "ChangeKind",
    "Shown",
    "ShownKind",
    "changes_log",
    "file_digest",
    "read_changes",
    "read_shown",
    "record_changes",
    "record_shown",
    "shown_log",
    "shown_sessions",
]

PROVENANCE_DIR_NAME = "provenance"

ChangeKind = Literal["created", "changed", "removed", "forgotten", "restored"]
ShownKind = Literal["loaded", "surfaced"]

_SAFE_SESSION = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, kw_only=True)
class Change:
    """One change to one memory file."""

    file: str
    """The memory's path relative to the memory directory (posix)."""
    what: ChangeKind
    """What happened to it."""
    at: str
    """When, ISO-8601 UTC."""
    by: str
    """Who changed it: ``memdir`` (its memory agent), ``claude-code`` (Claude Code's
    agent, forked by memdir), ``dream`` (a consolidation pass), ``forget`` (the command)."""
    run: str | None = None
    """The run that made the change, where there was one."""
    session: str | None = None
    """The conversation the change was drawn from."""
    messages: tuple[str, ...] = ()
    """The ids (uuids) of the messages the run covered, oldest first."""
    sha256: str | None = None
    """The file's digest after the change; ``None`` once it is gone."""

    def to_json(self) -> dict[str, Any]:
        """The log line's object; empty fields left out."""
        out: dict[str, Any] = {"file": self.file, "what": self.what, "at": self.at, "by": self.by}
        for key in ("run", "session", "sha256"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.messages:
            out["messages"] = list(self.messages)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change | None:
        """A change read back from a log line; ``None`` for one that is not."""
        try:
            messages = data.get("messages") or ()
            return cls(
                file=str(data["file"]),
                what=data["what"],
                at=str(data["at"]),
                by=str(data.get("by") or "memdir"),
                run=_text(data.get("run")),
                session=_text(data.get("session")),
                messages=tuple(str(m) for m in messages),
                sha256=_text(data.get("sha256")),
            )
        except (KeyError, TypeError):
            return None


@dataclass(frozen=True, kw_only=True)
class Shown:
    """Memory a session was shown at one moment."""

    kind: ShownKind
    """``loaded``: an index put in its context; ``surfaced``: memories picked for a turn."""
    files: tuple[str, ...]
    """The files, relative to the memory directory where they are inside it."""
    at: str | None = None
    """When, ISO-8601 UTC."""
    turn: str | None = None
    """The turn's id where it is known (the prompt's message uuid, or the query)."""
    cut: bool = False
    """For ``loaded``: the index was longer than the load caps and only part was shown."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the source said (the query a recall answered, say)."""

    def to_json(self) -> dict[str, Any]:
        """The log line's object."""
        out: dict[str, Any] = {"kind": self.kind, "files": list(self.files)}
        if self.at is not None:
            out["at"] = self.at
        if self.turn is not None:
            out["turn"] = self.turn
        if self.cut:
            out["cut"] = True
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Shown | None:
        """Memory shown, read back from a log line; ``None`` for one that is not."""
        try:
            kind = data["kind"]
            if kind not in ("loaded", "surfaced"):
                return None
            known = {"kind", "files", "at", "turn", "cut"}
            return cls(
                kind=kind,
                files=tuple(str(f) for f in data.get("files") or ()),
                at=_text(data.get("at")),
                turn=_text(data.get("turn")),
                cut=bool(data.get("cut")),
                extra={k: v for k, v in data.items() if k not in known},
            )
        except (KeyError, TypeError):
            return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def now_iso(moment: datetime.datetime | None = None) -> str:
    """``moment`` (default now) as ISO-8601 UTC with milliseconds, as Claude Code stamps."""
    when = moment or datetime.datetime.now(datetime.UTC)
    return when.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _state(memory: MemoryDir) -> Path:
    return memory.root / STATE_DIR_NAME / PROVENANCE_DIR_NAME


def changes_log(memory: MemoryDir) -> Path:
    """The change log of ``memory``."""
    return _state(memory) / "changes.log"


def shown_log(memory: MemoryDir, session: str) -> Path:
    """The log of what ``session`` was shown (its id made safe as a file name)."""
    return _state(memory) / "shown" / f"{_SAFE_SESSION.sub('_', session)}.log"


def relative_name(memory: MemoryDir, path: str | os.PathLike[str]) -> str:
    """``path`` relative to the memory directory (posix) when inside it, else as given."""
    target = Path(path)
    for root in (memory.root, Path(os.path.realpath(memory.root))):
        for candidate in (target, Path(os.path.realpath(target))):
            with contextlib.suppress(ValueError):
                return candidate.relative_to(root).as_posix()
    return target.as_posix()


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """The sha256 of a file's bytes; ``None`` when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _append(log: Path, objects: Iterable[Mapping[str, Any]]) -> None:
    """Append one JSON line per object, under the provenance lock; never raises."""
    lines = "".join(json.dumps(o, ensure_ascii=False, sort_keys=True) + "\n" for o in objects)
    if not lines:
        return
    # A log that cannot be written loses its lines, not the run that made them.
    with contextlib.suppress(OSError, StoreError):
        make_private_dirs(log.parent)
        # One lock for the folder's logs, ``.memdir/provenance.lock`` beside the others.
        with file_lock(_provenance_dir(log)):
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
            try:
                os.write(fd, lines.encode("utf-8"))
            finally:
                os.close(fd)


def _provenance_dir(log: Path) -> Path:
    for folder in log.parents:
        if folder.name == PROVENANCE_DIR_NAME:
            return folder
    return log


def _read(log: Path) -> Iterator[dict[str, Any]]:
    try:
        text = log.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if isinstance(data, dict):
            yield data


def record_changes(
    memory: MemoryDir,
    paths: Sequence[str | os.PathLike[str]],
    *,
    by: str,
    run: str | None = None,
    session: str | None = None,
    messages: Sequence[str] = (),
    created: Iterable[str | os.PathLike[str]] = (),
    what: ChangeKind | None = None,
    at: str | None = None,
) -> list[Change]:
    """Record that ``paths`` changed; returns the changes written.

    Each path is ``created`` when it is in ``created`` (compared as real paths), else
    ``removed`` when it is gone, else ``changed`` — unless ``what`` says."""
    made = {os.path.realpath(p) for p in created}
    moment = at or now_iso()
    changes = []
    for path in paths:
        digest = file_digest(path)
        kind: ChangeKind
        if what is not None:
            kind = what
        elif os.path.realpath(path) in made:
            kind = "created"
        else:
            kind = "changed" if digest is not None else "removed"
        changes.append(
            Change(
                file=relative_name(memory, path),
                what=kind,
                at=moment,
                by=by,
                run=run,
                session=session,
                messages=tuple(messages),
                sha256=digest,
            )
        )
    _append(changes_log(memory), (c.to_json() for c in changes))
    return changes


def read_changes(memory: MemoryDir, file: str | None = None) -> list[Change]:
    """The recorded changes, oldest first; only ``file``'s (relative name) when given."""
    out = []
    for data in _read(changes_log(memory)):
        change = Change.from_json(data)
        if change is not None and (file is None or change.file == file):
            out.append(change)
    return out


def record_shown(
    memory: MemoryDir,
    session: str,
    kind: ShownKind,
    files: Sequence[str | os.PathLike[str]],
    *,
    turn: str | None = None,
    cut: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> Shown:
    """Record that ``session`` was shown ``files`` (an index loaded, memories surfaced)."""
    shown = Shown(
        kind=kind,
        files=tuple(relative_name(memory, f) for f in files),
        at=now_iso(),
        turn=turn,
        cut=cut,
        extra=dict(extra or {}),
    )
    _append(shown_log(memory, session), [shown.to_json()])
    return shown


def read_shown(memory: MemoryDir, session: str) -> list[Shown]:
    """What ``session`` was recorded as shown, oldest first."""
    return [s for d in _read(shown_log(memory, session)) if (s := Shown.from_json(d)) is not None]


def shown_sessions(memory: MemoryDir) -> list[str]:
    """The sessions with a log of what they were shown (their file names' stems)."""
    folder = _state(memory) / "shown"
    try:
        return sorted(p.stem for p in folder.iterdir() if p.suffix == ".log")
    except OSError:
        return []
