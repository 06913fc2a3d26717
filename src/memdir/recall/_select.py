"""Relevant-memory surfacing: pick the few memory files that help with a query, and render them.

Claude Code asks a side model to choose from the manifest; without a model we rank the
files lexically (BM25), which needs no network and gives the same answer every time.

The selector's request is a conversation that a session extends, as Claude Code's is: the
list of memories comes first, in a message of its own that ends a cached prefix, and each
query follows as a new user message after the earlier queries and answers, so a later
query pays only for what is new. The answer is structured output (a JSON schema) where the
provider takes one, and read leniently where it does not.

The chosen files are read only up to a small cap, framed as possibly relevant (to use
only if they apply), and headed with their path and age, because a memory is an
observation from one moment, not a fact about the present.
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memdir.errors import ModelError, UsageError, one_line
from memdir.messages import Message
from memdir.models import Model, ModelRequest, OfflineModel
from memdir.recall._fallback import surfaced_passages
from memdir.recall._prompt import MemoryDirLike, as_memory_dir
from memdir.store import (
    MemoryDir,
    MemoryHeader,
    find_links,
    format_manifest,
    memory_slug,
    parse_memory_file,
    scan_memory_files,
)
from memdir.store._provenance import record_shown

__all__ = [
    "DEFAULT_SELECTOR_MODEL",
    "MAX_SURFACED",
    "SELECTION_SCHEMA",
    "SELECTOR_MAX_TOKENS",
    "SESSION_SURFACE_BUDGET",
    "SURFACE_MAX_BYTES",
    "SURFACE_MAX_LINES",
    "SurfaceBudget",
    "SurfacedMemory",
    "select_relevant_memories",
]

_log = logging.getLogger("memdir.recall")

# 5: how many files Claude Code's relevance selector may pick per user turn.
MAX_SURFACED = 5
# 200 lines / 4,096 bytes: how much of each surfaced file Claude Code reads.
SURFACE_MAX_LINES = 200
SURFACE_MAX_BYTES = 4096
# 60 KiB: Claude Code's MAX_SESSION_BYTES, the surfaced bytes after which it stops.
SESSION_SURFACE_BUDGET = 60 * 1024

# 2,560: the selector's max_tokens in Claude Code 2.1.332 (512 for the answer, 2,048 more
# for a model that thinks first).
SELECTOR_MAX_TOKENS = 2560
# The side model Claude Code 2.1.332 sends its selector requests to. A constant of its
# own until the one model table (memdir.cost) names a side model.
DEFAULT_SELECTOR_MODEL = "claude-sonnet-5-5"
# The answer's shape, as Claude Code 2.1.332 asks for it.
SELECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"selected_memories": {"type": "array", "items": {"type": "string"}}},
    "required": ["selected_memories"],
    "additionalProperties": False,
}
# A session's selector conversation past this many exchanges drops its older half: one
# cache miss then, instead of a prefix that grows without end.
_MAX_EXCHANGES = 64
# BM25's usual constants: term-frequency saturation and document-length normalisation.
_BM25_K1 = 1.2
_BM25_B = 0.75
_DAY_SECONDS = 86_400

# Words too common to tell memories apart; a short list, since the queries are short.
_STOP_WORDS = frozenset(
    """
    a an and any are as at be been but by can could did do does for from had has have
    how i if in into is it its me my no not of on or our should so than that the their
    them then there these they this those to us was we were what when where which who
    whom why will with would you your
    """.split()  # noqa: SIM905 (one word list reads better than 70 quoted strings)
)
_WORD = re.compile(r"[a-z0-9]+")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
# The "[type] " tag the memory list puts before each filename.
_TYPE_TAG = re.compile(r"^\[[a-z]+\]\s+")


@dataclass(kw_only=True)
class SurfaceBudget:
    """How much memory one session has surfaced so far; keep one per session.

    Surfacing stops once :attr:`used` reaches :attr:`limit_bytes`, and files already in
    :attr:`surfaced` are not surfaced again. The selector's conversation lives here too
    (:attr:`exchanges`), so each query of the session extends the same cached prefix.
    Call :meth:`reset` after a compaction: the messages that carried the surfaced
    memories are gone, so the room is free again.
    """

    limit_bytes: int = SESSION_SURFACE_BUDGET
    """Bytes (UTF-8, of the rendered reminders) a session may surface in all."""
    used: int = 0
    """Bytes surfaced so far."""
    surfaced: set[str] = field(default_factory=set)
    """Filenames (relative to the memory directory) surfaced so far."""
    exchanges: list[tuple[str, str]] = field(default_factory=list)
    """The selector's conversation so far: each query message sent and the answer it
    got, oldest first. Sent again before the next query, after the memory list."""

    @property
    def exhausted(self) -> bool:
        """Whether the session has used up its budget."""
        return self.used >= self.limit_bytes

    def record(self, memory: SurfacedMemory) -> None:
        """Count ``memory`` as surfaced."""
        self.used += len(memory.text.encode("utf-8"))
        self.surfaced.add(memory.filename)

    def reset(self) -> None:
        """Forget everything surfaced so far (after a compaction), and the selector's
        conversation with it: what it was told not to pick again may be picked now."""
        self.used = 0
        self.surfaced.clear()
        self.exchanges.clear()


@dataclass(frozen=True, kw_only=True)
class SurfacedMemory:
    """One memory file chosen for a query, as the main agent will see it."""

    filename: str
    """The path relative to the memory directory (``team/x.md``)."""
    path: Path
    """The absolute path."""
    header: str
    """How old the memory is and where it lives. Computed once, so re-rendering the same
    memory later gives the same bytes (and keeps a cached prefix intact)."""
    content: str
    """The file's text, cut to :data:`SURFACE_MAX_LINES` lines and
    :data:`SURFACE_MAX_BYTES` bytes, with a note pointing to the Read tool when cut."""
    text: str
    """A line saying the memory was recalled as possibly relevant (to use only if it
    applies), then ``header`` and ``content``, inside a ``<system-reminder>`` block."""

    def message(self) -> Message:
        """:attr:`text` as a user message marked ``is_meta`` (written by the harness)."""
        return Message.user(self.text, is_meta=True)


async def select_relevant_memories(
    query: str,
    memory_dir: MemoryDirLike,
    model: Model | None = None,
    already_surfaced: Collection[str] = (),
    limit: int = MAX_SURFACED,
    now: datetime | None = None,
    budget: SurfaceBudget | None = None,
    *,
    recent_tools: Sequence[str] = (),
    follow_links: bool = True,
    single_word: bool = False,
    strict: bool = False,
    search_fallback: bool = False,
    current_session: str | None = None,
    record_session: str | None = None,
) -> list[SurfacedMemory]:
    """The memory files most useful for ``query``, at most ``limit``, read and rendered.

    Candidates are the scanned memory files minus ``already_surfaced`` (filenames
    relative to the memory directory, or absolute paths) and minus what ``budget`` has
    recorded. With a ``model``, one request asks it to choose (the model of Claude Code's
    own selector is :data:`DEFAULT_SELECTOR_MODEL`): the list of every memory file comes
    first, as a message of its own ending a cached prefix — the files already surfaced
    stay in it, so it is the same bytes from one query to the next, and the model is told
    not to pick them again (what it picks anyway is dropped). With a ``budget`` the
    session's earlier queries and answers follow the list, and this query comes last
    (``recent_tools``, when given, lets it skip usage notes for tools that just worked).
    The answer is asked for as structured output (``output_config`` on Anthropic,
    ``response_format`` on an OpenAI-compatible server) and read leniently from text
    too. Any failure — a :class:`~memdir.errors.ModelError`, an answer that is not the
    expected JSON — gives ``[]``, since surfacing is a hint and must never break a turn;
    with ``strict`` it raises :class:`~memdir.errors.ModelError` instead (for a person who
    asked and should learn that the model failed). Without a model (or with the offline
    one, which cannot choose) the files are ranked by BM25 over name, description and
    body, and only those sharing a word with the query qualify.

    A query with no whitespace (a single word, ``"continue"``, ``"yes"``) surfaces
    nothing, as in Claude Code: it carries too little to choose by in the middle of a
    conversation; ``single_word`` lets it through (a search, as ``memdir recall`` is).
    Nothing is surfaced either once ``budget`` is exhausted; what is surfaced is recorded
    in it, and surfacing stops part-way when the budget runs out.

    With ``follow_links``, each chosen memory's ``[[name]]`` links (in the part of it
    that is surfaced) bring the memories they name, among the candidates, after all the
    chosen ones and while fewer than ``limit`` are surfaced; links are followed one step
    only, from the chosen memories. A link names a memory by its ``name`` (compared as
    :func:`~memdir.store.memory_slug` gives it) or, failing that, by its file name.

    ``now`` (default: the current time) dates the headers: a memory older than a day
    says how many days old it is. Raises :class:`~memdir.errors.UsageError` when
    ``limit`` is below 1.

    With ``search_fallback``, when no memory is chosen the passages of the project's
    past sessions that best match ``query`` (:func:`memdir.search.search`, by BM25, the
    index brought up to date first) are surfaced instead, each named
    ``session:<id>#<uuid>`` and headed with its session and time; ``current_session``'s
    own turns are left out. Off by default: it reads the transcripts on every query, and
    what it surfaces is raw conversation that the memory agent did not choose to keep.

    With ``record_session``, what is surfaced is recorded as shown to that session, for
    :func:`memdir.provenance.why` (the query is kept with it).
    """
    surfaced = await _select(
        query,
        memory_dir,
        model,
        already_surfaced,
        limit,
        now,
        budget,
        recent_tools=recent_tools,
        follow_links=follow_links,
        single_word=single_word,
        strict=strict,
        search_fallback=search_fallback,
        current_session=current_session,
    )
    if record_session is not None and surfaced:
        md = as_memory_dir(memory_dir)
        await asyncio.to_thread(
            record_shown,
            md,
            record_session,
            "surfaced",
            [m.filename for m in surfaced],
            extra={"query": query},
        )
    return surfaced


async def _select(
    query: str,
    memory_dir: MemoryDirLike,
    model: Model | None,
    already_surfaced: Collection[str],
    limit: int,
    now: datetime | None,
    budget: SurfaceBudget | None,
    *,
    recent_tools: Sequence[str],
    follow_links: bool,
    single_word: bool,
    strict: bool,
    search_fallback: bool,
    current_session: str | None,
) -> list[SurfacedMemory]:
    """:func:`select_relevant_memories`, without recording."""
    if limit < 1:
        raise UsageError(f"limit must be at least 1, got {limit}")
    if not query.strip():
        return []
    if not single_word and not any(char.isspace() for char in query.strip()):
        return []
    if budget is not None and budget.exhausted:
        return []

    md = as_memory_dir(memory_dir)
    excluded = set(already_surfaced) | (budget.surfaced if budget is not None else set())
    headers = await asyncio.to_thread(scan_memory_files, md.root)
    candidates = [h for h in headers if h.filename not in excluded and str(h.path) not in excluded]
    if not candidates:
        if search_fallback:
            return await _fall_back(query, md, limit, excluded, current_session, budget)
        return []

    if isinstance(model, OfflineModel):
        model = None  # the rule-based engine saves memories; it cannot choose them
    if model is not None:
        chosen = await _ask_model(
            model,
            query,
            headers,
            candidates,
            limit,
            recent_tools,
            budget.exchanges if budget is not None else None,
            strict=strict,
        )
    else:
        chosen = await asyncio.to_thread(_rank_bm25, query, candidates, limit)
    if not chosen and search_fallback:
        return await _fall_back(query, md, limit, excluded, current_session, budget)

    moment = (now or datetime.now(UTC)).timestamp()
    by_link = _link_targets(candidates) if follow_links else {}
    queue = list(chosen[:limit])
    direct = len(queue)
    queued = {h.filename for h in queue}
    surfaced: list[SurfacedMemory] = []
    position = 0
    while position < len(queue) and len(surfaced) < limit:
        header = queue[position]
        position += 1
        if budget is not None and budget.exhausted:
            break
        memory = await asyncio.to_thread(_surface, header, moment)
        if memory is None:
            continue  # deleted or unreadable since the scan
        surfaced.append(memory)
        if budget is not None:
            budget.record(memory)
        if position <= direct:  # one step: only the chosen memories' links are followed
            for target in find_links(parse_memory_file(memory.content).body):
                linked = by_link.get(memory_slug(target))
                if linked is not None and linked.filename not in queued:
                    queue.append(linked)
                    queued.add(linked.filename)
    return surfaced


async def _fall_back(
    query: str,
    md: MemoryDir,
    limit: int,
    excluded: Collection[str],
    current_session: str | None,
    budget: SurfaceBudget | None,
) -> list[SurfacedMemory]:
    """Passages of past sessions, surfaced as memories are, when no memory is chosen."""
    surfaced: list[SurfacedMemory] = []
    for name, hit, header, text in await surfaced_passages(
        query, md, limit, excluded, current_session
    ):
        if budget is not None and budget.exhausted:
            break
        memory = SurfacedMemory(
            filename=name, path=hit.path, header=header, content=hit.text, text=text
        )
        surfaced.append(memory)
        if budget is not None:
            budget.record(memory)
    return surfaced


def _link_targets(candidates: Sequence[MemoryHeader]) -> dict[str, MemoryHeader]:
    """The candidates by the slug a link names them with: their ``name``, else file name.

    A name wins over a file name; among equal names, the newest file (the scan's order).
    """
    targets: dict[str, MemoryHeader] = {}
    for header in candidates:
        stem = memory_slug(Path(header.filename).stem)
        if stem:
            targets.setdefault(stem, header)
    for header in reversed(candidates):
        slug = memory_slug(header.name) if header.name else ""
        if slug:
            targets[slug] = header
    return targets


# --- choosing with a model ---------------------------------------------------------------

_SELECTOR_SYSTEM = """\
You pick the saved memories that will help an AI coding assistant with a user's request. \
The first message lists the memory files, one per line: its type in brackets, its \
filename, when it was last saved, and what it is about. Every later message holds one \
request.

For each request, name the files that will clearly help the assistant with it, at most \
{limit}. Judge by each file's name and description, and name a file only when you are \
sure it helps.
- When you are not sure about a file, leave it out. If nothing clearly helps, an empty \
list is the right answer.
- Be most sparing with [user] and [project] memories. They tell what the user is busy \
with in general, not what each request is about: a profile saying the user tunes \
database queries does not fit a request that merely uses the word "query". Decide by \
the subject of the request, never by words it happens to share with the user's \
profile or projects.
- Do not name a file again that you named for an earlier request in this \
conversation: the assistant has it already.
- If the request lists tools used just now, leave out memories that only explain how \
to use those tools (they are working), but keep memories that warn about their \
pitfalls or known problems.
- Use the filenames exactly as listed.

Answer with a JSON object only: {{"selected_memories": ["<filename>", ...]}}"""

_LIST_HEAD = "Memory files:"
_QUERY_HEAD = "Which memories will help with this request?"


def _selector_params(model: Model) -> dict[str, Any]:
    """The selector's request parameters for ``model``: ``max_tokens`` and the answer's
    JSON schema, in the shape its provider takes (``response_format`` for an
    OpenAI-compatible server, else Anthropic's ``output_config``)."""
    if model.name.startswith("openai:"):
        return {
            "max_tokens": SELECTOR_MAX_TOKENS,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "memory_selection",
                    "schema": SELECTION_SCHEMA,
                    "strict": True,
                },
            },
        }
    return {
        "max_tokens": SELECTOR_MAX_TOKENS,
        "output_config": {"format": {"type": "json_schema", "schema": SELECTION_SCHEMA}},
    }


async def _ask_model(
    model: Model,
    query: str,
    listed: Sequence[MemoryHeader],
    candidates: Sequence[MemoryHeader],
    limit: int,
    recent_tools: Sequence[str],
    exchanges: list[tuple[str, str]] | None,
    *,
    strict: bool = False,
) -> list[MemoryHeader]:
    """The candidates ``model`` picks for ``query``, in its order; ``[]`` on any failure,
    or with ``strict`` a :class:`~memdir.errors.ModelError` saying what failed.

    ``listed`` is every memory file (the cached list), ``candidates`` those that may be
    surfaced now. ``exchanges`` is the session's selector conversation: it is sent after
    the list and grows by this query and its answer when the answer is usable.
    """
    asked = f"{_QUERY_HEAD}\n{query}"
    if recent_tools:
        asked += f"\n\nTools used just now: {', '.join(recent_tools)}"
    history = exchanges if exchanges is not None else []
    messages = [Message.user(f"{_LIST_HEAD}\n{format_manifest(listed)}")]
    for sent, answer in history:
        messages += [Message.user(sent), Message.assistant(answer)]
    messages.append(Message.user(asked))
    request = ModelRequest(
        system=_SELECTOR_SYSTEM.format(limit=limit),
        messages=messages,
        params=_selector_params(model),
        # The list ends a cached prefix of its own; the last message always ends one, so
        # the next query of the session reads everything before it from the cache.
        cache_points=(0,),
    )
    try:
        try:
            response = await model.request(request)
        except ModelError as exc:
            if exc.status != 400:
                raise
            # A server that refuses structured output (an older gateway, a local model)
            # is asked once more without it: the instructions ask for the JSON anyway.
            plain = {"max_tokens": SELECTOR_MAX_TOKENS}
            response = await model.request(dataclasses.replace(request, params=plain))
    except Exception as exc:
        if strict:
            if isinstance(exc, ModelError):
                raise
            raise ModelError(f"memory selection failed: {one_line(exc)}") from exc
        # Whatever the provider raises, the turn goes on without surfaced memories.
        _log.debug("memory selection failed: %s: %s", type(exc).__name__, exc)
        return []
    answer = response.message.text
    names = _parse_selection(answer)
    if names is None:
        if strict:
            raise ModelError(
                f"{model.name}: the memory selection answer was not the expected JSON "
                '({"selected_memories": [...]})'
            )
        _log.debug("memory selection answer was not the expected JSON")
        return []
    if exchanges is not None:
        if len(exchanges) >= _MAX_EXCHANGES:
            del exchanges[: _MAX_EXCHANGES // 2]
        exchanges.append((asked, answer))
    by_name = {h.filename: h for h in candidates}
    chosen: list[MemoryHeader] = []
    for name in names:
        # A model that copies the list's "[type] " tag along with the name still means
        # the file; pop: a name given twice counts once; a file surfaced before is gone.
        header = by_name.pop(_TYPE_TAG.sub("", name.strip()), None)
        if header is not None:
            chosen.append(header)
    return chosen[:limit]


def _parse_selection(text: str) -> list[str] | None:
    """The ``selected_memories`` list in a selector's answer, or ``None`` if there is none.

    The JSON may stand alone, sit in a fenced code block, or be surrounded by prose.
    """
    for candidate in _json_candidates(text):
        try:
            value: Any = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        names = value.get("selected_memories")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return list(names)
        return None  # JSON object of the wrong shape: the model misunderstood
    return None


def _json_candidates(text: str) -> list[str]:
    found = [text.strip()]
    found += [match.group(1).strip() for match in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        found.append(text[start : end + 1])
    return found


# --- ranking without a model -------------------------------------------------------------


def _tokens(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if word not in _STOP_WORDS]


def _rank_bm25(query: str, candidates: Sequence[MemoryHeader], limit: int) -> list[MemoryHeader]:
    """The ``limit`` best candidates for ``query`` by BM25, those scoring above zero only."""
    terms = set(_tokens(query))
    if not terms:
        return []
    documents = [Counter(_tokens(_document_text(header))) for header in candidates]
    lengths = [sum(doc.values()) for doc in documents]
    average = sum(lengths) / len(lengths) or 1.0
    count = len(documents)
    scored: list[tuple[float, int]] = []
    for index, (doc, length) in enumerate(zip(documents, lengths, strict=True)):
        score = 0.0
        for term in terms:
            frequency = doc.get(term, 0)
            if not frequency:
                continue
            holders = sum(1 for other in documents if term in other)
            # The "+ 1" form of IDF stays positive even for a term in every document.
            idf = math.log(1 + (count - holders + 0.5) / (holders + 0.5))
            norm = _BM25_K1 * (1 - _BM25_B + _BM25_B * length / average)
            score += idf * frequency * (_BM25_K1 + 1) / (frequency + norm)
        if score > 0:
            scored.append((score, index))
    # Highest score first; a tie keeps the scan's order, newest first.
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [candidates[index] for _, index in scored[:limit]]


def _document_text(header: MemoryHeader) -> str:
    """Name, description and the start of the body: what BM25 ranks a file by."""
    try:
        head = _read_capped(header.path, SURFACE_MAX_BYTES)[0]
    except OSError:
        head = ""
    body = parse_memory_file(head).body if head else ""
    name = header.name or Path(header.filename).stem
    return "\n".join((name, header.description or "", body))


# --- reading and rendering ---------------------------------------------------------------


def _read_capped(path: Path, max_bytes: int) -> tuple[str, bool]:
    """The first ``max_bytes`` bytes of ``path`` as text, and whether there was more."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    cut = len(data) > max_bytes
    # An incremental decoder without ``final`` drops a character split by the cap instead
    # of turning its first bytes into a replacement character.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return decoder.decode(data[:max_bytes], final=not cut), cut


def _surface(header: MemoryHeader, now: float) -> SurfacedMemory | None:
    try:
        text, cut = _read_capped(header.path, SURFACE_MAX_BYTES)
    except OSError:
        return None
    lines = text.splitlines(keepends=True)
    if len(lines) > SURFACE_MAX_LINES:
        lines, cut = lines[:SURFACE_MAX_LINES], True
    elif cut and len(lines) > 1:
        lines = lines[:-1]  # the byte cap fell inside the last line: drop the fragment
    content = "".join(lines).rstrip("\n")
    if cut:
        content += (
            f"\n\n[Only the start of this memory is shown. Use the Read tool on {header.path} "
            "to see all of it.]"
        )
    head = _header(header, now)
    return SurfacedMemory(
        filename=header.filename,
        path=header.path,
        header=head,
        content=content,
        text=f"<system-reminder>\n{_FRAMING}\n\n{head}\n\n{content}\n</system-reminder>",
    )


# Said of every surfaced memory: chosen by a guess at relevance, so the main agent is
# told to weigh it, not to follow it.
_FRAMING = (
    "Recalled from memory as possibly relevant to this request. Use it only if it really "
    "bears on what the user asked; otherwise leave it aside."
)


def _header(header: MemoryHeader, now: float) -> str:
    """``Memory: <path> (saved …):``, after a caution when the memory is older than a day."""
    days = max(0, math.floor((now - header.mtime) / _DAY_SECONDS))
    when = "today" if days == 0 else "yesterday" if days == 1 else f"{days} days ago"
    line = f"Memory: {header.path} (saved {when}):"
    if days <= 1:
        return line
    return (
        f"This memory is {days} days old. A memory records what was true when it was "
        "saved, not how things are now: what it says about code, files or behaviour may "
        "have changed since, so check it against the current state before you present "
        f"it as fact.\n\n{line}"
    )
