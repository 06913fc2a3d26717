"""The conditions ``bench/cost_vs_mem0.py`` measures, and where memdir's tokens go.

Pure pieces, each testable on a few lines of made-up input:

- schedules: every pause 60 s (warm), or pauses drawn from the gaps between a person's
  prompts in real Claude Code sessions (:func:`transcript_gaps`, :func:`drawn_pauses`);
- the turns on which mem0 saved a memory, from its recorded replies
  (:func:`mem0_saved_turns`), and the note a good memory agent writes on a question turn
  (:func:`question_note`);
- a store of memories already there before the conversation starts (:func:`seed_store`);
- the sections of a memory agent's request and what each cost (:func:`request_sections`,
  :class:`Breakdown`), located from the request body the fake server recorded.
"""

from __future__ import annotations

import itertools
import json
import lzma
import math
import os
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from _scripted import Save, is_memory_request, memory_file, parse_memory_request, text_of

__all__ = [
    "EVICTION_S",
    "SECTIONS",
    "Breakdown",
    "attribute",
    "drawn_pauses",
    "mem0_saved_turns",
    "prompt_times",
    "question_note",
    "request_sections",
    "seed_store",
    "transcript_gaps",
    "warm_pauses",
]

EVICTION_S = 300.0
"""An idle prompt lives this long in OpenAI's cache (and in the fake's): a longer pause
means the next run finds nothing cached."""

# Compact JSON as the fake server counts it: characters / 4 of each piece.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


# Schedules.


def warm_pauses(count: int, seconds: float = 60.0) -> list[float]:
    """Seconds before each turn: none before the first, ``seconds`` before every other."""
    return [0.0] + [seconds] * (count - 1)


# A user line that starts no turn: Claude Code's meta lines, slash-command echoes (a local
# command calls no model), the marker of an interrupted turn, and the summary it writes
# when it compacts a conversation. A task notification does start one: the model answers.
_NO_TURN = (
    "<command-",
    "<local-command",
    "<system-reminder",
    "<bash-",
    "[Request interrupted",
    "Caveat: ",
    "This session is being continued",
)
_DAY_S = 86_400.0


def prompt_times(lines: Iterable[str]) -> list[float]:
    """When each turn of one Claude Code session file began (epoch seconds): a person's
    prompt, or a background task's notification, which the model answers too.

    A turn starts at a main-thread ``user`` line with text (not a tool result, not a meta,
    compaction, command or interruption line) and a timestamp that parses; lines that do
    not parse as JSON are skipped.
    """
    times: list[float] = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or row.get("type") != "user":
            continue
        if row.get("isSidechain") or row.get("isMeta") or row.get("isCompactSummary"):
            continue
        if "toolUseResult" in row:
            continue
        message = row.get("message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list):
            kinds = {b.get("type") for b in content if isinstance(b, dict)}
            if "tool_result" in kinds or "text" not in kinds:
                continue
        elif not isinstance(content, str):
            continue
        text = text_of(message).lstrip()
        if not text or text.startswith(_NO_TURN):
            continue
        try:
            stamp = datetime.fromisoformat(str(row.get("timestamp")).replace("Z", "+00:00"))
        except ValueError:
            continue
        times.append(stamp.timestamp())
    return times


def transcript_gaps(folder: Path, sources: Sequence[str] | None = None) -> list[float]:
    """Seconds between consecutive turns of each main session under ``folder`` (only in
    its subfolders named in ``sources``, when given).

    Subagent files are left out (their turns are the main thread's tool calls). Gaps of
    zero or less (clock skew) and of more than a day (a session resumed another day: a new
    conversation, not a pause in one) are dropped.
    """
    gaps: list[float] = []
    for path in sorted(folder.rglob("*.jsonl")):
        if "subagents" in path.parts or path.name.startswith("agent-"):
            continue
        if sources is not None and path.relative_to(folder).parts[0] not in sources:
            continue
        with path.open(encoding="utf-8", errors="replace") as lines:
            times = prompt_times(lines)
        gaps.extend(b - a for a, b in itertools.pairwise(times) if 0 < b - a <= _DAY_S)
    return gaps


def drawn_pauses(gaps: Sequence[float], count: int, seed: int) -> list[float]:
    """Seconds before each turn: none before the first, then gaps drawn from ``gaps``
    with replacement by a generator seeded with ``seed``."""
    if not gaps:
        raise ValueError("no gaps to draw from")
    rng = random.Random(seed)
    return [0.0] + [float(rng.choice(gaps)) for _ in range(count - 1)]


# mem0's saves.


def mem0_saved_turns(path: Path) -> list[int]:
    """The turns on which mem0 saved a memory: a chat reply whose ``memory`` list is not
    empty, in its recording of requests and replies (a ``.jsonl.xz``, one row a request)."""
    turns: set[int] = set()
    with lzma.open(path, "rt") as lines:
        for line in lines:
            row = json.loads(line)
            if row.get("kind") != "chat":
                continue
            try:
                reply = json.loads(row.get("response_content") or "")
            except ValueError:
                continue
            if isinstance(reply, dict) and reply.get("memory"):
                turns.add(int(row["mark"]["turn"]))
    return sorted(turns)


_WORD = re.compile(r"[a-z0-9]+")
# Words that say nothing of a question's topic ("i'm" splits into "i" and "m").
_FILLER_WORDS = (
    "a an and are as at be but by can do does for from how i if in is it me my of on or our "
    "should so that the this to was we what when where which who why will with would you "
    "your m s t"
)
_FILLER = frozenset(_FILLER_WORDS.split())


def question_note(turn: int, user: str) -> tuple[str, str, str, str]:
    """What a good memory agent keeps of a question turn: a ``project`` note of what was
    decided. (file name, type, title, description), all from the turn alone."""
    words = [w for w in _WORD.findall(user.lower()) if w not in _FILLER]
    topic = words[:4] or ["question"]
    question = " ".join(user.split())
    if len(question) > 90:
        question = question[:89].rstrip() + "…"
    return (
        f"project_{'_'.join(topic)}_{turn:02d}.md",
        "project",
        " ".join(topic).capitalize(),
        f"decided: {question}",
    )


# A store that was there before the conversation.

_SUBJECTS = (
    ("photo_app", "the iOS photo app", "SwiftUI", "Core Data", "gallery grid"),
    ("budget_sheet", "the family budget sheet", "Google Sheets", "Apps Script", "tax tab"),
    ("dotfiles", "the dotfiles installer", "Rust", "Nix", "symlink planner"),
    ("blog", "the personal blog", "Hugo", "Tailwind", "comment widget"),
    ("nas", "the home NAS", "ZFS", "Proxmox", "snapshot rota"),
    ("chess", "the chess engine", "C++", "NNUE", "move generator"),
    ("bakery_site", "the bakery's website", "WordPress", "WooCommerce", "order form"),
    ("weather", "the weather station", "Arduino", "LoRa", "sensor board"),
    ("thesis", "the thesis template", "LaTeX", "BibTeX", "figure macros"),
    ("boardgame", "the board game scorer", "Kotlin", "Jetpack Compose", "score sheet"),
    ("synth", "the synth plugin", "JUCE", "Faust", "filter section"),
    ("garden", "the garden planner", "Svelte", "IndexedDB", "planting calendar"),
    ("podcast", "the podcast feed tool", "Go", "ffmpeg", "chapter parser"),
    ("kids_quiz", "the kids' quiz game", "Godot", "GDScript", "level editor"),
    ("bike_log", "the bike ride log", "Elm", "Strava exports", "elevation chart"),
    ("recipes", "the recipe scaler", "Flutter", "SQLite", "unit converter"),
    ("telescope", "the telescope mount driver", "MicroPython", "INDI", "tracking loop"),
    ("choir", "the choir rota", "Airtable", "Zapier", "absence form"),
    ("keyboard", "the split keyboard firmware", "QMK", "ZMK", "layer map"),
    ("translation", "the subtitle translator", "TypeScript", "Whisper", "timing fixer"),
    ("sailing", "the sailing club site", "Jekyll", "Netlify", "booking page"),
    ("genealogy", "the family tree", "Gramps", "GEDCOM", "source citations"),
    ("aquarium", "the aquarium controller", "ESP32", "Home Assistant", "dosing pump"),
    ("crossword", "the crossword builder", "Haskell", "Elm", "grid filler"),
    ("library", "the book lending list", "Notion", "Google Forms", "overdue reminders"),
    ("shader", "the shader toy gallery", "GLSL", "WebGPU", "noise library"),
    ("marathon", "the marathon plan", "Excel", "Garmin exports", "taper weeks"),
    ("pottery", "the pottery shop listings", "Etsy", "Canva", "glaze notes"),
    ("ham_radio", "the ham radio logger", "Python", "Qt", "contest mode"),
    ("language", "the Japanese flashcards", "Anki", "Python", "kanji deck"),
)
# (suffix, type, title, description, body); fields filled from one of _SUBJECTS.
_ASPECTS = (
    (
        "background",
        "user",
        "{name}: background",
        "{what}: built alone on weekends; knows {tech} well, new to {other}",
        "The user maintains {what} alone, mostly on weekends. They know {tech} well and are "
        "still learning {other}, so explain {other} in terms of {tech} when it comes up.",
    ),
    (
        "style",
        "feedback",
        "{name}: change style",
        "{what}: small changes, a reason per {tech} choice, no new dependencies",
        "Keep changes to {what} small and explain each {tech} choice in one sentence. Do not "
        "add dependencies without asking; {other} is the only one they accepted this year.",
    ),
    (
        "next_version",
        "project",
        "{name}: next version",
        "{what}: next version due the 14th; the {part} rewrite waits until after",
        "The next version of {what} is due on the 14th of next month. The {part} rewrite "
        "waits until it has shipped, because the last rewrite slipped two months.",
    ),
    (
        "notes",
        "reference",
        "{name}: where notes live",
        "{what}: design notes in drive folder '{slug}', tasks on the kanban board",
        "Design notes for {what} are in the shared drive folder '{slug}'; tasks and ideas are "
        "on the kanban board of the same name. Look there before proposing a redesign.",
    ),
    (
        "choice",
        "project",
        "{name}: {other} dropped",
        "{what}: keeps {tech}; {other} dropped, it doubled the build time",
        "For {what} the user decided to keep {tech} and drop {other}: {other} doubled the "
        "build time and the {part} never needed it. Do not suggest bringing it back.",
    ),
)
_STORE_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: seeded memories date from before


def _seeded(count: int) -> list[Save]:
    saves = []
    for n in range(count):
        slug, what, tech, other, part = _SUBJECTS[n % len(_SUBJECTS)]
        suffix, kind, title, description, body = _ASPECTS[(n // len(_SUBJECTS)) % len(_ASPECTS)]
        fields = {
            "slug": slug,
            "what": what,
            "tech": tech,
            "other": other,
            "part": part,
            "name": what.removeprefix("the ").capitalize(),
        }
        saves.append(
            Save(
                filename=f"{kind}_{slug}_{suffix}.md",
                type=kind,
                title=title.format(**fields),
                description=description.format(**fields),
                body=body.format(**fields),
            )
        )
    return saves


def seed_store(directory: Path, count: int) -> list[Save]:
    """Write ``count`` memories on topics the conversation never touches into
    ``directory``, with a ``MEMORY.md`` of one pointer line each, as a store looks after
    months of use: deterministic text, and file times an hour apart from 2026-01-01.

    At most 150 (30 subjects, 5 aspects); returns what it wrote."""
    if count > len(_SUBJECTS) * len(_ASPECTS):
        raise ValueError(f"at most {len(_SUBJECTS) * len(_ASPECTS)} seeded memories")
    directory.mkdir(parents=True, exist_ok=True)
    saves = _seeded(count)
    for n, save in enumerate(saves):
        path = directory / save.filename
        path.write_text(memory_file(save), encoding="utf-8")
        os.utime(path, (_STORE_EPOCH + 3600 * n, _STORE_EPOCH + 3600 * n))
    if saves:
        index = "".join(f"- [{s.title}]({s.filename}) — {s.description}\n" for s in saves)
        (directory / "MEMORY.md").write_text(index, encoding="utf-8")
    return saves


# Where the tokens go.

SECTIONS = (
    "host prefix",
    "tool definitions",
    "system prompt",
    "opening",
    "window",
    "new messages",
    "final message",
    "own turns",
)
"""A memory agent's request, in prompt order. A fork sends the host's request (``host
prefix``) then memdir's prompt; memdir's own (standalone) request sends its tools, its
system prompt, an opening message, the conversation before the new messages (``window``),
the new messages, then the request with the memory's state (``final message``). Either
ends with the run's own earlier calls and their results (``own turns``), from its second
request on. OpenAI's prompt text puts the tools first, then the messages."""


# Characters of a message's text that tell which message of the conversation it renders.
_OPENING_CHARS = 120


def _chars(value: object) -> int:
    return len(_ENCODER.encode(value))


def request_sections(
    body: Mapping[str, Any], *, host_system: str, conversation: frozenset[str]
) -> list[tuple[str, int]]:
    """The characters of each section of the memory agent's Chat Completions request
    ``body``, in prompt order (sections it lacks are left out).

    A request whose system message is ``host_system`` is a fork. In a standalone request
    the window starts at the first message that renders one of ``conversation`` (the texts
    the host's conversation holds; a render may cut a long text, so its opening is
    enough), and the new messages are the last ones before memdir's prompt, as many as the
    prompt says; whatever sits between them and the prompt counts with the prompt.
    """
    openings = {text[:_OPENING_CHARS] for text in conversation}
    messages = list(body.get("messages") or ())
    at = max(i for i, m in enumerate(messages) if is_memory_request({"messages": [m]}))
    sizes = [_chars(m) for m in messages]
    tools = _chars(body["tools"]) if body.get("tools") else 0
    first = messages[0] if messages else {}
    between = 0  # a standalone request's messages after the new ones, before the prompt
    if first.get("role") == "system" and first.get("content") == host_system:
        out = [("host prefix", tools + sum(sizes[:at]))]
    else:
        system = 0
        while system < at and messages[system].get("role") in ("system", "developer"):
            system += 1
        talk = [i for i in range(system, at) if text_of(messages[i])[:_OPENING_CHARS] in openings]
        window = talk[0] if talk else at
        last = talk[-1] + 1 if talk else at
        new = last
        wanted = len(parse_memory_request(body).new_texts)
        while wanted and new > window:
            new -= 1
            if messages[new].get("role") in ("user", "assistant"):
                wanted -= 1
        between = sum(sizes[last:at])
        out = [
            ("tool definitions", tools),
            ("system prompt", sum(sizes[:system])),
            ("opening", sum(sizes[system:window])),
            ("window", sum(sizes[window:new])),
            ("new messages", sum(sizes[new:last])),
        ]
    out += [("final message", between + sizes[at]), ("own turns", sum(sizes[at + 1 :]))]
    return [(name, chars) for name, chars in out if chars]


def attribute(sections: Sequence[tuple[str, int]], cached_tokens: int) -> dict[str, list[float]]:
    """Each section's [cached, uncached] tokens: the cached prefix covers the sections in
    prompt order (the fake caches a prefix of the prompt text, 4 characters a token)."""
    cached_chars = cached_tokens * 4
    out: dict[str, list[float]] = {}
    for name, chars in sections:
        hit = min(chars, max(cached_chars, 0))
        cached_chars -= hit
        tokens = out.setdefault(name, [0.0, 0.0])
        tokens[0] += hit / 4
        tokens[1] += (chars - hit) / 4
    return out


@dataclass
class Breakdown:
    """Where one side's billed-token equivalents went, request by request."""

    cache_read: float
    """The price of a cached input token (input = 1)."""
    output: float
    """The price of an output token, reasoning included."""
    cached: dict[str, float] = field(default_factory=dict)
    uncached: dict[str, float] = field(default_factory=dict)
    visible_output: float = 0.0
    reasoning: float = 0.0

    def add(self, sections: Sequence[tuple[str, int]], usage: Mapping[str, Any]) -> None:
        """One request: its sections (:func:`request_sections`) and its reported usage."""
        cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
        for name, (hit, miss) in attribute(sections, cached_tokens).items():
            self.cached[name] = self.cached.get(name, 0.0) + hit * self.cache_read
            self.uncached[name] = self.uncached.get(name, 0.0) + miss
        completion = int(usage.get("completion_tokens", 0))
        hidden = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens", 0))
        self.visible_output += (completion - hidden) * self.output
        self.reasoning += hidden * self.output

    def total(self) -> float:
        """Billed-token equivalents of everything added (characters / 4, unrounded)."""
        return (
            sum(self.cached.values())
            + sum(self.uncached.values())
            + self.visible_output
            + self.reasoning
        )

    def shares(self) -> dict[str, Any]:
        """Each section's share of the total, cached and uncached apart, in prompt order,
        then visible output and reasoning; shares in percent, rounded to 0.1."""
        total = self.total() or 1.0

        def pct(value: float) -> float:
            return round(100 * value / total, 1)

        out: dict[str, Any] = {}
        for name in SECTIONS:
            if name in self.cached or name in self.uncached:
                cached, uncached = self.cached.get(name, 0.0), self.uncached.get(name, 0.0)
                out[name] = {
                    "total": pct(cached + uncached),
                    "cached": pct(cached),
                    "uncached": pct(uncached),
                }
        out["visible output"] = pct(self.visible_output)
        out["reasoning"] = pct(self.reasoning)
        out["billed_token_equivalents"] = math.floor(total + 0.5)
        return out
