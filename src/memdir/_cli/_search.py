"""``memdir search``: find what was said in the project's sessions, or saved in its memory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from memdir._cli._common import (
    choose_memory_dir,
    fail,
    fail_with,
    json_option,
    memory_dir_option,
    print_json,
)
from memdir.errors import MemdirError
from memdir.search import HitKind, IndexStats, SearchHit, SearchIndex, session_files
from memdir.store import MEMDIR_DIR_ENV

# Below this many bytes to read, indexing takes well under a second: no progress bar.
_PROGRESS_MIN_BYTES = 8 * 2**20


def _hit_json(hit: SearchHit) -> dict[str, Any]:
    return {
        "kind": hit.kind,
        "score": hit.score,
        "session_id": hit.session_id,
        "uuid": hit.uuid,
        "timestamp": hit.timestamp.isoformat() if hit.timestamp else None,
        "role": hit.role,
        "memory_file": hit.memory_file,
        "path": str(hit.path),
        "text": hit.text,
    }


def _hit_text(hit: SearchHit) -> str:
    when = hit.timestamp.strftime("%Y-%m-%d %H:%M") if hit.timestamp else "undated"
    if hit.kind == "memory":
        head = f"memory {hit.memory_file} (saved {when})"
    else:
        head = f"session {hit.session_id} · {hit.role} · {when} · message {hit.uuid}"
    body = "\n".join(f"  {line}" for line in hit.text.splitlines())
    return f"{head}\n{body}"


def _index(index: SearchIndex, transcripts: Path | None, show: bool) -> IndexStats:
    """Index what the sessions added, with a progress bar on a terminal for long work."""
    paths = session_files(transcripts) if transcripts is not None else None
    if not show:
        return index.index_sessions(paths)
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    bar = Progress(
        TextColumn("indexing sessions"),
        BarColumn(),
        DownloadColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("index", total=None)
    shown = False

    def report(done: int, total: int) -> None:
        nonlocal shown
        if not shown and total >= _PROGRESS_MIN_BYTES:
            bar.start()
            shown = True
        bar.update(task, completed=done, total=total)

    try:
        return index.index_sessions(paths, progress=report)
    finally:
        if shown:
            bar.stop()


@click.command("search")
@click.argument("query")
@memory_dir_option
@click.option(
    "--transcripts",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of session transcripts to index (default: the memory directory's parent, "
    "where Claude Code keeps a project's sessions).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=10, show_default=True, help="The most passages."
)
@click.option("--sessions-only", is_flag=True, help="Search what was said, not the memories.")
@click.option("--memories-only", is_flag=True, help="Search the memories, not the sessions.")
@json_option
def search_command(
    query: str,
    memory_dir: Path | None,
    transcripts: Path | None,
    limit: int,
    sessions_only: bool,
    memories_only: bool,
    as_json: bool,
) -> None:
    """Find QUERY in what was said in the project's past sessions and in its memories.

    Passages are ranked by BM25 (the words they share with QUERY, rarer words counting
    more), each shown with its session, message and time, or its memory file. The index
    lives in the memory directory's .memdir folder and is brought up to date first,
    reading only what each session added since the last search.
    """
    if sessions_only and memories_only:
        fail("--sessions-only and --memories-only exclude each other")
    memory = choose_memory_dir(memory_dir, None, write=True)
    folder = transcripts if transcripts is not None else memory.root.parent
    if transcripts is not None and not transcripts.is_dir():
        fail(f"no transcript folder at {transcripts}", kind="usage")
    if not memory.root.is_dir() and not session_files(folder):
        fail(
            f"nothing to search: no memory directory at {memory.root} and no sessions in "
            f"{folder} (check --memory-dir or ${MEMDIR_DIR_ENV})",
            kind="memory_dir",
        )
    try:
        with SearchIndex(memory) as index:
            stats = IndexStats()
            if not memories_only:
                stats = _index(index, transcripts, show=not as_json and sys.stderr.isatty())
            if not sessions_only:
                index.index_memories()
            kinds: list[HitKind] = []
            if not memories_only:
                kinds.append("turn")
            if not sessions_only:
                kinds.append("memory")
            hits = index.search(query, limit=limit, kinds=kinds)
    except MemdirError as exc:
        fail_with(exc, "search failed")
    for error in stats.errors:
        click.echo(f"memdir: skipped {error}", err=True)
    if as_json:
        print_json({"query": query, "hits": [_hit_json(h) for h in hits]})
    elif not hits:
        click.echo("no matches")
    else:
        click.echo("\n\n".join(_hit_text(h) for h in hits))
