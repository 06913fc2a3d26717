"""The search index of one memory directory: SQLite FTS5, in memdir's state folder.

It lives at ``.memdir/search.sqlite3`` inside the memory directory, beside the cursors:
the memory agent's tools are refused that folder, so what the transcripts hold (which the
agent may have chosen not to save) never reaches it through the index. The file is
``0600``, as every file memdir creates.

Transcripts only grow while a session lasts, so each session's entry remembers how far
it was read (a byte offset, always at the end of a whole line) and the uuid of the last
line read, with fingerprints of the file's first bytes and of the bytes just before the
offset. The next pass seeks there and reads only what was added (and a session whose
size and modification time are those of the last pass is not opened). A file shorter
than the offset, or whose fingerprints no longer match (Claude Code rewrote it, a sync
replaced it), is indexed again from the start, its old passages dropped first.

The passages' text is an FTS5 table ranked by ``bm25()``; where each passage came from
sits in an ordinary table keyed by the same rowid, with indexes on the session and the
memory file, so dropping one session's passages costs that session's rows, not a scan of
the whole index.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, TypeAlias, cast

from memdir._private import PRIVATE_FILE_MODE, make_private_dirs
from memdir.errors import StoreError, UsageError
from memdir.search._passages import entry_passages, fts_query, split_passages
from memdir.search._sources import (
    CappedReader,
    HitKind,
    IndexStats,
    SearchHit,
    SessionMark,
    digest,
    fts5_available,
    is_json,
    parse_time,
    read_at,
    session_files,
)
from memdir.store import MemoryDir, parse_memory_file
from memdir.store._atomic import STATE_DIR_NAME
from memdir.store._scan import _list_memory_files
from memdir.transcripts._lines import (
    LINE_MAX_BYTES,
    NotRegularError,
    Overlong,
    open_regular,
    read_lines,
)

__all__ = [
    "SEARCH_DB_NAME",
    "HitKind",
    "IndexStats",
    "SearchHit",
    "SearchIndex",
    "fts5_available",
    "session_files",
]

SEARCH_DB_NAME = f"{STATE_DIR_NAME}/search.sqlite3"
"""The index, relative to the memory directory."""

MemoryDirLike: TypeAlias = MemoryDir | str | os.PathLike[str]
Progress: TypeAlias = Callable[[int, int], object]

_SCHEMA_VERSION = "1"
# 4 KiB: enough of a file's start and of the bytes before the offset to tell a rewrite
# from growth (a line of JSON with a uuid and a timestamp), and cheap to read each pass.
_FINGERPRINT_BYTES = 4096
# A memory file past this is read only this far: memories are short by design.
_MEMORY_MAX_BYTES = 256 * 1024
# Seconds a writer waits for another process's transaction before giving up.
_BUSY_TIMEOUT = 30.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # porter: "deploys" finds "deployed"; unicode61 folds case and diacritics.
    "CREATE VIRTUAL TABLE IF NOT EXISTS passages USING fts5("
    "text, tokenize = 'porter unicode61 remove_diacritics 2')",
    "CREATE TABLE IF NOT EXISTS sources("
    "id INTEGER PRIMARY KEY, kind TEXT NOT NULL, session TEXT, uuid TEXT, time TEXT, "
    "role TEXT, file TEXT)",
    "CREATE INDEX IF NOT EXISTS sources_session ON sources(session)",
    "CREATE INDEX IF NOT EXISTS sources_file ON sources(file)",
    "CREATE TABLE IF NOT EXISTS sessions("
    "session TEXT PRIMARY KEY, path TEXT NOT NULL, offset INTEGER NOT NULL, "
    "last_uuid TEXT, head TEXT NOT NULL, tail TEXT NOT NULL, "
    "size INTEGER NOT NULL DEFAULT -1, mtime_ns INTEGER NOT NULL DEFAULT -1)",
    "CREATE TABLE IF NOT EXISTS memories("
    "file TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL)",
)


class SearchIndex:
    """The search index of one memory directory; see the module's docstring.

    Open it, index, search, close (it is a context manager too). Several processes may
    share one index: each session is read and written in one transaction that starts by
    reading how far the session was indexed, so two passes never add a line twice.
    Raises :class:`~memdir.errors.StoreError` when this Python's ``sqlite3`` lacks FTS5
    or the index cannot be opened.
    """

    def __init__(self, memory_dir: MemoryDirLike) -> None:
        self.memory = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
        self.path: Path = self.memory.root / SEARCH_DB_NAME
        if not fts5_available():
            raise StoreError(
                f"search needs SQLite's FTS5, which this Python's sqlite3 (SQLite "
                f"{sqlite3.sqlite_version}) was built without; use a Python whose sqlite3 "
                "has it (the python.org, Homebrew and most Linux builds do)"
            )
        try:
            make_private_dirs(self.path.parent)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE_MODE))
                os.chmod(self.path, PRIVATE_FILE_MODE)
            self._db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None)
            self._drop_other_schema()
            for statement in _SCHEMA:
                self._db.execute(statement)
            self._db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?)", (_SCHEMA_VERSION,)
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the search index {self.path}: {exc}") from exc

    def _drop_other_schema(self) -> None:
        """Empty an index built by another version of this module: the index only mirrors
        the transcripts and memories, so it is rebuilt rather than migrated."""
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError:
            return  # a new file: no tables yet
        if row is not None and row[0] == _SCHEMA_VERSION:
            return
        self._db.execute("BEGIN IMMEDIATE")
        for table in ("passages", "sources", "sessions", "memories", "meta"):
            self._db.execute(f"DROP TABLE IF EXISTS {table}")
        self._db.execute("COMMIT")

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE: take the write lock before reading a session's offset, so a second
        # process indexing the same session waits and then sees the new offset.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _add(
        self,
        db: sqlite3.Connection,
        text: str,
        *,
        kind: HitKind,
        session: str | None = None,
        uuid: str | None = None,
        time: str | None = None,
        role: str | None = None,
        file: str | None = None,
    ) -> None:
        cursor = db.execute(
            "INSERT INTO sources(kind, session, uuid, time, role, file) VALUES (?,?,?,?,?,?)",
            (kind, session, uuid, time, role, file),
        )
        db.execute("INSERT INTO passages(rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))

    def _drop(self, db: sqlite3.Connection, column: str, value: str) -> None:
        ids = [row[0] for row in db.execute(f"SELECT id FROM sources WHERE {column} = ?", (value,))]
        db.executemany("DELETE FROM passages WHERE rowid = ?", ((i,) for i in ids))
        db.execute(f"DELETE FROM sources WHERE {column} = ?", (value,))

    # --- sessions --------------------------------------------------------------------------

    def _pending(self, path: Path) -> int | None:
        """Bytes of ``path`` not yet indexed (an estimate for progress), or None when the
        file has the size and modification time it had at the last pass: then nothing
        of it is read at all, so a pass over many idle sessions costs a stat each."""
        row = self._db.execute(
            "SELECT offset, size, mtime_ns FROM sessions WHERE session = ?", (path.stem,)
        ).fetchone()
        try:
            st = path.stat()
        except OSError:
            return 0  # the pass itself says why
        if row is None:
            return st.st_size
        done, size, mtime_ns = (int(value) for value in row)
        if (size, mtime_ns) == (st.st_size, st.st_mtime_ns):
            return None
        return st.st_size - done if st.st_size >= done else st.st_size

    def index_sessions(
        self,
        paths: Iterable[str | os.PathLike[str]] | None = None,
        *,
        progress: Progress | None = None,
    ) -> IndexStats:
        """Index what the session transcripts added since the last pass.

        ``paths``: Claude Code session files (JSONL); default: every ``<session>.jsonl``
        in the memory directory's parent folder, where Claude Code keeps the project's
        sessions beside its ``memory/`` folder. A session is named by its file name. The
        whole lines after the session's offset are read; a file rewritten or cut since is
        read again from the start. ``progress(done, total)`` (bytes) is called before
        the first session and after each. A file that cannot be read is noted in
        :attr:`IndexStats.errors` and left as it was indexed.
        """
        files = (
            session_files(self.memory.root.parent)
            if paths is None
            else [Path(p).expanduser() for p in paths]
        )
        stats = IndexStats()
        pending = [(file, self._pending(file)) for file in files]
        total = sum(size or 0 for _, size in pending)
        done = 0
        if progress is not None:
            progress(done, total)
        for file, size in pending:
            stats.sessions_seen += 1
            if size is None:
                stats.sessions_unchanged += 1
                continue
            try:
                self._index_session(file, stats)
            except (OSError, NotRegularError) as exc:
                reason = getattr(exc, "strerror", None) or "not a regular file"
                stats.errors.append(f"{file}: cannot read: {reason}")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot update the search index {self.path}: {exc}") from exc
            done += size
            if progress is not None:
                progress(done, total)
        return stats

    def _index_session(self, file: Path, stats: IndexStats) -> None:
        session = file.stem
        handle, size = open_regular(file)
        with handle, self._transaction() as db:
            mtime_ns = os.fstat(handle.fileno()).st_mtime_ns
            row = db.execute(
                "SELECT offset, last_uuid, head, tail FROM sessions WHERE session = ?", (session,)
            ).fetchone()
            known = SessionMark(*row) if row is not None else None
            start = 0
            unchanged = "UPDATE sessions SET size = ?, mtime_ns = ? WHERE session = ?"
            if known is not None:
                if size == known.offset and self._intact(handle, known):
                    db.execute(unchanged, (size, mtime_ns, session))
                    return
                if size > known.offset and self._intact(handle, known):
                    start = known.offset
                else:
                    self._drop(db, "session", session)
                    stats.sessions_reindexed += 1
                    known = None
            handle.seek(start)
            position, last_uuid = start, known.last_uuid if known is not None else None
            for _, raw in read_lines(
                cast(BinaryIO, CappedReader(handle, size - start)), max_line=LINE_MAX_BYTES
            ):
                length = raw.size if isinstance(raw, Overlong) else len(raw)
                complete = position + length < size  # a newline follows it
                if not complete and (isinstance(raw, Overlong) or not is_json(raw)):
                    # An unterminated last line that is not whole JSON is still being
                    # written: leave it for the next pass.
                    break
                position += length + (1 if complete else 0)
                stats.lines_read += 1
                stats.bytes_read += length + (1 if complete else 0)
                if isinstance(raw, Overlong):
                    continue
                found = entry_passages(raw)
                if found is None:
                    continue
                last_uuid = found.uuid or last_uuid
                for text in found.texts:
                    self._add(
                        db,
                        text,
                        kind="turn",
                        session=session,
                        uuid=found.uuid,
                        time=found.timestamp,
                        role=found.role,
                    )
                    stats.passages_added += 1
            if position == start:
                if start == 0:  # nothing whole yet, or a file cut to nothing
                    db.execute("DELETE FROM sessions WHERE session = ?", (session,))
                else:  # only part of a line was added: read again when it changes
                    db.execute(unchanged, (size, mtime_ns, session))
                return
            head = digest(read_at(handle, 0, min(_FINGERPRINT_BYTES, position)))
            tail_start = max(0, position - _FINGERPRINT_BYTES)
            tail = digest(read_at(handle, tail_start, position - tail_start))
            db.execute(
                "INSERT OR REPLACE INTO sessions"
                "(session, path, offset, last_uuid, head, tail, size, mtime_ns) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (session, str(file), position, last_uuid, head, tail, size, mtime_ns),
            )
            stats.sessions_updated += 1

    @staticmethod
    def _intact(handle: BinaryIO, known: SessionMark) -> bool:
        """Whether the bytes indexed so far are still the file's: same start, same bytes
        before the offset."""
        head = read_at(handle, 0, min(_FINGERPRINT_BYTES, known.offset))
        if digest(head) != known.head:
            return False
        tail_start = max(0, known.offset - _FINGERPRINT_BYTES)
        tail = read_at(handle, tail_start, known.offset - tail_start)
        return digest(tail) == known.tail

    # --- memories --------------------------------------------------------------------------

    def index_memories(self) -> IndexStats:
        """Index the memory files new or changed since the last pass (by modification
        time and size), and drop those that are gone."""
        stats = IndexStats()
        listed = _list_memory_files(os.path.abspath(self.memory.root))
        try:
            with self._transaction() as db:
                known = {
                    str(file): (int(mtime), int(size))
                    for file, mtime, size in db.execute("SELECT file, mtime_ns, size FROM memories")
                }
                present = set()
                for filename, path in listed:
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    present.add(filename)
                    if known.get(filename) == (st.st_mtime_ns, st.st_size):
                        continue
                    self._drop(db, "file", filename)
                    try:
                        with open(path, "rb") as handle:
                            data = handle.read(_MEMORY_MAX_BYTES)
                    except OSError as exc:
                        stats.errors.append(f"{path}: cannot read: {exc.strerror or exc}")
                        db.execute("DELETE FROM memories WHERE file = ?", (filename,))
                        continue
                    parsed = parse_memory_file(data.decode("utf-8", errors="replace"))
                    name = parsed.name or Path(filename).stem
                    text = "\n".join(p for p in (name, parsed.description or "", parsed.body) if p)
                    stamp = datetime.fromtimestamp(st.st_mtime, UTC).isoformat()
                    for passage in split_passages(text):
                        self._add(db, passage, kind="memory", time=stamp, file=filename)
                        stats.passages_added += 1
                    db.execute(
                        "INSERT OR REPLACE INTO memories(file, mtime_ns, size) VALUES (?,?,?)",
                        (filename, st.st_mtime_ns, st.st_size),
                    )
                    stats.memories_indexed += 1
                for gone in set(known) - present:
                    self._drop(db, "file", gone)
                    db.execute("DELETE FROM memories WHERE file = ?", (gone,))
                    stats.memories_removed += 1
        except sqlite3.Error as exc:
            raise StoreError(f"cannot update the search index {self.path}: {exc}") from exc
        return stats

    # --- searching -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        kinds: Sequence[HitKind] = ("turn", "memory"),
        exclude_sessions: Iterable[str] = (),
    ) -> list[SearchHit]:
        """The ``limit`` passages that best match ``query`` by BM25, best first.

        Only what was indexed is searched: index first. ``kinds`` keeps turns, memories
        or both; ``exclude_sessions`` leaves sessions out (the one asking, whose words
        are in its context already). Raises :class:`~memdir.errors.UsageError` when
        ``limit`` is below 1.
        """
        if limit < 1:
            raise UsageError(f"limit must be at least 1, got {limit}")
        expression = fts_query(query)
        if expression is None or not kinds:
            return []
        excluded = list(exclude_sessions)
        where = [f"s.kind IN ({','.join('?' * len(kinds))})"]
        params: list[object] = [expression, *kinds]
        if excluded:
            where.append(
                f"(s.session IS NULL OR s.session NOT IN ({','.join('?' * len(excluded))}))"
            )
            params += excluded
        params.append(limit)
        sql = (
            "SELECT passages.text, bm25(passages) AS rank, s.kind, s.session, s.uuid, "
            "s.time, s.role, s.file, sessions.path FROM passages "
            "JOIN sources AS s ON s.id = passages.rowid "
            "LEFT JOIN sessions ON sessions.session = s.session "
            f"WHERE passages MATCH ? AND {' AND '.join(where)} ORDER BY rank LIMIT ?"
        )
        try:
            rows = self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot search {self.path}: {exc}") from exc
        hits = []
        for text, rank, kind, session, uuid, time, role, file, path in rows:
            where_from = (
                self.memory.root / file if kind == "memory" else Path(path or f"{session}.jsonl")
            )
            hits.append(
                SearchHit(
                    kind=kind,
                    text=text,
                    score=-float(rank),
                    session_id=session,
                    uuid=uuid,
                    timestamp=parse_time(time),
                    role=role,
                    memory_file=file,
                    path=where_from,
                )
            )
        return hits
