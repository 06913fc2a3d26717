"""LoCoMo quality: replay long conversations through the extractor, then answer their questions.

Each LoCoMo conversation (two people chatting over 19 to 32 sessions spread across months)
gets its own memory directory. Session by session it is replayed as a host conversation:
the first speaker's turns are user messages, the second speaker's are assistant messages,
each starting with a line naming who speaks. The session opens with a message marked as
the harness's (``is_meta``) that says which session it is and when it took place, and
every message carries that date as its timestamp. A shared image becomes a line with its
caption. When a session ends, a fresh :class:`~memdir.extract.MemoryExtractor` (a new host
conversation; the memory directory stays) is told the turn ended, with no host request to
share, and is drained. The offline model only reads what the user typed, so with it only
the first speaker's statements can become memories.

Then every question of the conversation is put to memory. The few relevant memory files
are chosen by :func:`~memdir.recall.select_relevant_memories` (by the model with an LLM,
by BM25 with ``offline``). With an LLM the question is answered in one request from the
``MEMORY.md`` index and those files, and scored twice:

- token F1 as in the LoCoMo paper: lowercase, punctuation and commas out, a/an/the/and
  out, Porter stemming (the original 1980 algorithm, written out below), multiset
  overlap. Multi-hop (category 1) golds are split on commas, each part scored against its
  best-matching part of the answer, and averaged; open-domain (3) golds are cut at ``;``;
  adversarial (5) scores 1 when the answer says "no information available" or "not
  mentioned";
- an LLM judge that labels each answer CORRECT or WRONG (JSON); an adversarial question
  counts as correct when the answer says the information is not there.

Categories follow the official mapping: 1 multi-hop, 2 temporal, 3 open-domain, 4
single-hop, 5 adversarial. Figures needing no LLM come with every model: memories saved
per session, and the share of questions whose gold answer appears in memory — the
normalised gold (no stemming; a multi-hop gold needs every comma-separated part) as a
run of whole words in all of the conversation's memory files together — and in the
recalled files alone. A gold written differently in memory (a date as 2023-05-07, say)
is missed, and a short one (a year, "yes") may match by chance: a rough figure. For
adversarial questions the text matched is the answer the question's false premise points
to. With ``offline`` nothing is answered or judged: those fields are null, with a note.
Answers and verdicts are asked for at temperature 0.

Retrieval on LoCoMo's evidence annotations needs no LLM either. Each replayed session is
also written as a Claude Code transcript beside the memory directory (one line per turn),
as Claude Code lays out a project, and indexed by :mod:`memdir.search`. For every question
with readable evidence, four methods are scored by whether an evidence session, and an
evidence turn, is among their first 1, 3, 5 and 10 items: a plain BM25 over the raw turns
(computed here, lowercase words, no stemming, no stop list), ``search`` (the index, turns
only), ``recall`` (the memories surfaced, each counted for the session it came from,
``originSessionId``; a memory names no turn, so recall has no turn figure) and
``recall_with_fallback`` (the same call with ``search_fallback``: the passages of past
sessions when no memory is chosen). Recall surfaces at most 5, so its top 10 is its top 5.
The answer is still given from the memories alone.

With ``--sessions N`` only questions whose evidence lies in the first N sessions are
asked (a question whose evidence cannot be read is asked only when every session was
replayed). Scores are percentages; ``overall`` covers every category and
``overall_excluding_adversarial`` categories 1 to 4, as the mem0 paper reports its judge.

    python bench/locomo.py [--model offline] [--conversations 10] [--sessions N]
        [--questions N] [--out DIR] [--judge-model SPEC] [--base-url URL]
        [--recall {model,bm25}] [--concurrency 8] [--data PATH]

The data (CC BY-NC 4.0) is read where it lies and never copied. Progress goes to stderr,
one line per conversation; the result is one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import re
import string
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memdir.errors import MemdirError
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.messages import Message
from memdir.models import Model, ModelRequest, Usage, resolve_model
from memdir.recall import (
    MAX_SURFACED,
    PASSAGE_PREFIX,
    SurfacedMemory,
    memory_reminder,
    select_relevant_memories,
)
from memdir.search import index_sessions, search
from memdir.store import MemoryDir, parse_memory_file
from memdir.telemetry import CollectingSink

DEFAULT_DATA = (
    Path(__file__).resolve().parent.parent / ".." / "shared" / "research-data" / "locomo"
) / "locomo10.json"

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
MULTI_HOP = 1
OPEN_DOMAIN = 3

EXIT_USAGE = 2
# An extraction run reads and writes a handful of files; a slow provider may take minutes.
DRAIN_TIMEOUT = 900.0
ANSWER_MAX_TOKENS = 200
JUDGE_MAX_TOKENS = 50
NO_INFORMATION = "No information available"

ANSWER_SYSTEM = f"""\
You answer questions about a long conversation between {{a}} and {{b}} that took place \
over many sessions. You cannot see the conversation itself, only the memories that were \
saved from it, given below. Answer from those memories alone, in a short phrase (a name, \
a date, a place, a short list), without explanation. Give dates as calendar dates (for \
example 7 May 2023), working out relative ones ("last week") from the date a memory \
records. If the memories do not hold the answer, reply exactly: {NO_INFORMATION}."""

JUDGE_SYSTEM = """\
You grade answers to questions about a long conversation between two people. You are \
given the question, the gold answer and a generated answer. Label the generated answer \
CORRECT if it gives the same information as the gold answer: the wording may differ, \
extra detail that does not contradict the gold answer is fine, and a date written another \
way, or a relative date that comes to the same day, month or year, is the same date. \
Label it WRONG if it contradicts the gold answer, leaves out what the gold answer says, \
or only touches the topic without giving the information. When the gold answer says that \
the conversation does not hold the answer, the generated answer is CORRECT only if it \
says that the information is not available. Reply with JSON only: {"label": "CORRECT"} \
or {"label": "WRONG"}."""

ADVERSARIAL_GOLD = "The conversation does not say; no information is available."

_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


class DataError(Exception):
    """The data file is missing or not shaped like LoCoMo."""


# --- Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", 1980) -------------


def _consonant(word: str, i: int) -> bool:
    char = word[i]
    if char in "aeiou":
        return False
    if char == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """m in [C](VC)^m[V]: how many vowel-consonant runs the stem has."""
    forms = "".join("c" if _consonant(stem, i) else "v" for i in range(len(stem)))
    return re.sub(r"(.)\1+", r"\1", forms).count("vc")


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (hop, not hoop or snow)."""
    n = len(word)
    return (
        n >= 3
        and _consonant(word, n - 3)
        and not _consonant(word, n - 2)
        and _consonant(word, n - 1)
        and word[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
    ("izer", "ize"), ("abli", "able"), ("alli", "al"), ("entli", "ent"), ("eli", "e"),
    ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
    ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
    ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"),
    ("ful", ""), ("ness", ""),
)  # fmt: skip
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion",
    "ou", "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


def _replace(word: str, rules: Sequence[tuple[str, str]], min_measure: int) -> str:
    """The longest matching suffix replaced when the stem's measure allows, else ``word``."""
    for suffix, replacement in sorted(rules, key=lambda rule: -len(rule[0])):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            return stem + replacement if _measure(stem) > min_measure else word
    return word


def porter_stem(word: str) -> str:
    """``word`` (lowercase) reduced to its Porter stem."""
    if len(word) <= 2:
        return word
    # Step 1a: plurals.
    if word.endswith(("sses", "ies")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    # Step 1b: -eed, -ed, -ing.
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
                word = word[: -len(suffix)]
                if word.endswith(("at", "bl", "iz")):
                    word += "e"
                elif _double_consonant(word) and word[-1] not in "lsz":
                    word = word[:-1]
                elif _measure(word) == 1 and _cvc(word):
                    word += "e"
                break
    # Step 1c: y after a vowel-bearing stem.
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    word = _replace(word, _STEP2, 0)
    word = _replace(word, _STEP3, 0)
    # Step 4: -ion only after s or t.
    for suffix in sorted(_STEP4, key=len, reverse=True):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            if _measure(stem) > 1 and (suffix != "ion" or stem.endswith(("s", "t"))):
                word = stem
            break
    # Step 5: a final e, a final double l.
    if word.endswith("e"):
        stem = word[:-1]
        if _measure(stem) > 1 or (_measure(stem) == 1 and not _cvc(stem)):
            word = stem
    if _measure(word) > 1 and _double_consonant(word) and word.endswith("l"):
        word = word[:-1]
    return word


# --- scoring ---------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """LoCoMo's normaliser: commas, case, punctuation and a/an/the/and out, spaces squeezed."""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    """Multiset token F1 of the normalised, stemmed strings."""
    predicted = [porter_stem(w) for w in normalize_answer(prediction).split()]
    expected = [porter_stem(w) for w in normalize_answer(gold).split()]
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_hop_f1(prediction: str, gold: str) -> float:
    """Each comma-separated gold part against its best answer part, averaged."""
    parts = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in parts) for g in golds) / len(golds)


def says_no_information(prediction: str) -> bool:
    """The adversarial rule: the answer declines."""
    lowered = prediction.lower()
    return "no information available" in lowered or "not mentioned" in lowered


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    """The LoCoMo paper's F1 for one answer, by category."""
    if category == ADVERSARIAL:
        return 1.0 if says_no_information(prediction) else 0.0
    if category == MULTI_HOP:
        return multi_hop_f1(prediction, gold)
    if category == OPEN_DOMAIN:
        gold = gold.split(";")[0].strip()
    return token_f1(prediction, gold)


def gold_found(gold: str, category: int, haystack: str) -> bool:
    """Whether the normalised gold stands as whole words in ``haystack`` (normalised already).

    A multi-hop gold needs each comma-separated part; an open-domain gold is cut at ``;``.
    """
    if category == OPEN_DOMAIN:
        gold = gold.split(";")[0]
    parts = gold.split(",") if category == MULTI_HOP else [gold]
    needles = [normalize_answer(p) for p in parts]
    needles = [n for n in needles if n]
    padded = f" {haystack} "
    return bool(needles) and all(f" {n} " in padded for n in needles)


def parse_label(text: str) -> bool | None:
    """A judge's verdict: True for CORRECT, False for WRONG, None when it says neither."""
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        with contextlib.suppress(ValueError):
            value = json.loads(text[start : end + 1])
            label = value.get("label") if isinstance(value, dict) else None
            if isinstance(label, str) and label.upper() in ("CORRECT", "WRONG"):
                return label.upper() == "CORRECT"
    found = set(_LABEL.findall(text.upper()))
    return ("CORRECT" in found) if len(found) == 1 else None


# --- the data ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Question:
    """One QA item, its quirks smoothed over."""

    question: str
    gold: str
    """The answer as text; for adversarial items, the answer the false premise points to."""
    category: int
    evidence_sessions: frozenset[int] | None
    """Sessions the evidence names; None when no evidence id could be read."""
    evidence_turns: frozenset[str] = frozenset()
    """The turns the evidence names, as ``D<session>:<turn>`` ids."""


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """One LoCoMo sample: two speakers, their sessions in order, the questions."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[tuple[int, str | None, tuple[Mapping[str, Any], ...]], ...]
    """(number, date text, turns) for each ``session_N`` list present, in order."""
    questions: tuple[Question, ...]


def evidence_sessions(evidence: object, known: set[int]) -> frozenset[int] | None:
    """The sessions named by evidence ids such as ``D3:12``; ``None`` when none are readable.

    Strings may hold several ids (``"D8:6; D9:17"``, ``"D9:1 D4:4"``) or be malformed
    (``"D"``, ``"D:11:26"``); ids of sessions the conversation does not have are ignored.
    """
    found: set[int] = set()
    if isinstance(evidence, list):
        for item in evidence:
            for session, _turn in _EVIDENCE_ID.findall(str(item)):
                if int(session) in known:
                    found.add(int(session))
    return frozenset(found) if found else None


def evidence_turns(evidence: object, known: set[int]) -> frozenset[str]:
    """The turns named by evidence ids, normalised to ``D<session>:<turn>``."""
    found: set[str] = set()
    if isinstance(evidence, list):
        for item in evidence:
            for session, turn in _EVIDENCE_ID.findall(str(item)):
                if int(session) in known:
                    found.add(f"D{int(session)}:{int(turn)}")
    return frozenset(found)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def parse_conversation(sample: object, position: int) -> Conversation:
    """One sample of the file; raises :class:`DataError` when it is not LoCoMo-shaped."""
    if not isinstance(sample, dict):
        raise DataError(f"sample {position} is not an object")
    conv = sample.get("conversation")
    qa = sample.get("qa")
    if not isinstance(conv, dict) or not isinstance(qa, list):
        raise DataError(f"sample {position} has no 'conversation' object or 'qa' list")
    sessions = []
    for key, value in conv.items():
        match = _SESSION_KEY.fullmatch(key)
        if match is not None and isinstance(value, list):
            number = int(match.group(1))
            date = conv.get(f"session_{number}_date_time")
            turns = tuple(t for t in value if isinstance(t, dict))
            sessions.append((number, date if isinstance(date, str) else None, turns))
    sessions.sort(key=lambda s: s[0])
    known = {number for number, _, _ in sessions}
    questions = []
    for item in qa:
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            continue
        category = item.get("category")
        if category not in CATEGORIES:
            continue
        answer = item.get("answer")
        if answer is None and category == ADVERSARIAL:
            answer = item.get("adversarial_answer")
        questions.append(
            Question(
                question=item["question"],
                gold=_text(answer),
                category=int(category),
                evidence_sessions=evidence_sessions(item.get("evidence"), known),
                evidence_turns=evidence_turns(item.get("evidence"), known),
            )
        )
    return Conversation(
        sample_id=_text(sample.get("sample_id")) or f"sample-{position}",
        speaker_a=_text(conv.get("speaker_a")) or "Speaker A",
        speaker_b=_text(conv.get("speaker_b")) or "Speaker B",
        sessions=tuple(sessions),
        questions=tuple(questions),
    )


def load_data(path: Path) -> list[Conversation]:
    """Every conversation in the file; raises :class:`DataError` with a one-line reason."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"LoCoMo data not found at {path} (pass --data PATH)") from None
    except OSError as exc:
        raise DataError(f"cannot read LoCoMo data at {path}: {exc.strerror}") from None
    try:
        samples = json.loads(raw)
    except ValueError as exc:
        raise DataError(f"{path} is not JSON: {exc}") from None
    if not isinstance(samples, list) or not samples:
        raise DataError(f"{path} does not hold a list of LoCoMo samples")
    return [parse_conversation(sample, i) for i, sample in enumerate(samples)]


def session_date(text: str | None) -> datetime | None:
    """``1:56 pm on 8 May, 2023`` as a datetime (UTC); None when it does not parse."""
    if not text:
        return None
    try:
        return datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def turn_text(conversation: Conversation, turn: Mapping[str, Any]) -> tuple[str, str]:
    """One turn's role (speaker A: user, B: assistant) and text: a line naming the
    speaker, what they said, and a shared image's caption."""
    speaker = _text(turn.get("speaker")) or conversation.speaker_a
    role = "assistant" if speaker == conversation.speaker_b else "user"
    lines = [f"{speaker}:", _text(turn.get("text"))]
    caption = turn.get("blip_caption")
    if caption:
        lines.append(f"[{speaker} shares an image: {caption}]")
    return role, "\n".join(line for line in lines if line)


def session_messages(conversation: Conversation, index: int) -> list[Message]:
    """One session as host messages: speaker A as the user, speaker B as the assistant.

    The first message, marked as written by the harness (``is_meta``), names the session
    and its date. Each turn starts with a line naming its speaker; turns in a row from one
    speaker share a message.
    """
    number, date_text, turns = conversation.sessions[index]
    a, b = conversation.speaker_a, conversation.speaker_b
    when = f"; it took place at {date_text}" if date_text else ""
    timestamp = session_date(date_text)
    header = Message.user(
        f"[Session {number} of a conversation between {a} and {b}{when}.]",
        timestamp=timestamp,
        is_meta=True,
    )
    blocks: list[tuple[str, list[str]]] = []
    for turn in turns:
        role, text = turn_text(conversation, turn)
        if blocks and blocks[-1][0] == role:
            blocks[-1][1].append(text)
        else:
            blocks.append((role, [text]))
    return [header] + [
        Message.user("\n\n".join(parts), timestamp=timestamp)
        if role == "user"
        else Message.assistant("\n\n".join(parts), timestamp=timestamp)
        for role, parts in blocks
    ]


def asked(questions: Sequence[Question], replayed: set[int], everything: bool) -> list[Question]:
    """The questions whose evidence lies in the replayed sessions."""
    return [
        q
        for q in questions
        if (q.evidence_sessions is None and everything)
        or (q.evidence_sessions is not None and q.evidence_sessions <= replayed)
    ]


# --- retrieval on the evidence annotations ------------------------------------------------

RETRIEVAL_KS = (1, 3, 5, 10)
RETRIEVERS = ("bm25_baseline", "search", "recall", "recall_with_fallback")
_UUID_SPACE = uuid.UUID("6f1d3c2a-5b4e-4f8a-9c7d-2e1b0a9f8e7d")
# A plain BM25 over raw turns: the usual constants, lowercase words, nothing else.
_BM25_K1 = 1.2
_BM25_B = 0.75
_PLAIN_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Found:
    """One retrieved item: the session it came from and, for a turn, its dialogue id."""

    session: int | None
    turn: str | None


def session_name(number: int) -> str:
    """The session id (and transcript file name) of LoCoMo session ``number``."""
    return f"session-{number}"


def turn_id(number: int, position: int, turn: Mapping[str, Any]) -> str:
    """A turn's ``D<session>:<turn>`` id: its own ``dia_id`` when readable."""
    match = _EVIDENCE_ID.search(_text(turn.get("dia_id")))
    if match is not None:
        return f"D{int(match.group(1))}:{int(match.group(2))}"
    return f"D{number}:{position + 1}"


def write_sessions(
    conversation: Conversation, folder: Path, count: int
) -> tuple[dict[str, str], list[tuple[int, str, str]]]:
    """The first ``count`` sessions as Claude Code transcripts in ``folder`` (one line per
    turn, ``session-N.jsonl``); returns each line's uuid's turn id, and every turn as
    (session, turn id, text) for the baseline."""
    by_uuid: dict[str, str] = {}
    turns: list[tuple[int, str, str]] = []
    for number, date_text, session_turns in conversation.sessions[:count]:
        moment = session_date(date_text)
        stamp = moment.isoformat().replace("+00:00", "Z") if moment else None
        lines = []
        parent = None
        for position, turn in enumerate(session_turns):
            role, text = turn_text(conversation, turn)
            dia = turn_id(number, position, turn)
            line_uuid = str(
                uuid.uuid5(_UUID_SPACE, f"{conversation.sample_id}/{number}/{position}")
            )
            by_uuid[line_uuid] = dia
            turns.append((number, dia, text))
            content: Any = text if role == "user" else [{"type": "text", "text": text}]
            entry = {
                "type": role,
                "uuid": line_uuid,
                "parentUuid": parent,
                "sessionId": session_name(number),
                "timestamp": stamp,
                "message": {"role": role, "content": content},
            }
            lines.append(json.dumps(entry, ensure_ascii=False))
            parent = line_uuid
        (folder / f"{session_name(number)}.jsonl").write_text(
            "".join(f"{line}\n" for line in lines), encoding="utf-8"
        )
    return by_uuid, turns


@dataclass(frozen=True)
class Retrieval:
    """What the retrieval figures of one conversation need."""

    by_uuid: Mapping[str, str]
    """Each transcript line's uuid: the turn id it holds."""
    baseline: TurnBm25


class TurnBm25:
    """The baseline: BM25 over the raw turns, lowercase words, no stemming, no stop list."""

    def __init__(self, turns: Sequence[tuple[int, str, str]]) -> None:
        self.turns = [Found(session, dia) for session, dia, _ in turns]
        self.docs = [Counter(_PLAIN_WORD.findall(text.lower())) for _, _, text in turns]
        self.lengths = [sum(doc.values()) for doc in self.docs]
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        self.holders: Counter[str] = Counter()
        for doc in self.docs:
            self.holders.update(doc.keys())

    def rank(self, query: str, limit: int) -> list[Found]:
        terms = set(_PLAIN_WORD.findall(query.lower()))
        count = len(self.docs)
        scored = []
        for index, (doc, length) in enumerate(zip(self.docs, self.lengths, strict=True)):
            score = 0.0
            for term in terms:
                frequency = doc.get(term, 0)
                if frequency:
                    holders = self.holders[term]
                    idf = math.log(1 + (count - holders + 0.5) / (holders + 0.5))
                    norm = _BM25_K1 * (1 - _BM25_B + _BM25_B * length / self.average)
                    score += idf * frequency * (_BM25_K1 + 1) / (frequency + norm)
            if score > 0:
                scored.append((score, index))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [self.turns[index] for _, index in scored[:limit]]


def _session_number(name: str | None) -> int | None:
    if name is None or not name.startswith("session-"):
        return None
    with contextlib.suppress(ValueError):
        return int(name.removeprefix("session-"))
    return None


def recalled_found(surfaced: Sequence[SurfacedMemory], by_uuid: Mapping[str, str]) -> list[Found]:
    """What recall surfaced, as sessions (a memory's ``originSessionId``) and, for a
    passage of a session, its turn."""
    found = []
    for item in surfaced:
        if item.filename.startswith(PASSAGE_PREFIX):
            session, _, line = item.filename.removeprefix(PASSAGE_PREFIX).partition("#")
            found.append(Found(_session_number(session), by_uuid.get(line)))
        else:
            origin = parse_memory_file(item.content).origin_session_id
            found.append(Found(_session_number(origin), None))
    return found


def retrieval_table(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per method, the share of questions with evidence whose evidence session (and
    evidence turn) is among its first k items, for each k in :data:`RETRIEVAL_KS`."""
    judged = [o for o in outcomes if o.evidence_sessions]
    table: dict[str, Any] = {"questions": len(judged)}
    for method in RETRIEVERS:
        sessions: dict[str, float | None] = {}
        turns: dict[str, float | None] = {}
        for k in RETRIEVAL_KS:
            session_hits = []
            turn_hits = []
            for outcome in judged:
                top = outcome.retrieved.get(method, [])[:k]
                wanted = outcome.evidence_sessions or frozenset()
                session_hits.append(float(any(f.session in wanted for f in top)))
                turn_hits.append(float(any(f.turn in outcome.evidence_turns for f in top)))
            sessions[f"top_{k}"] = _pct(session_hits)
            # A memory records the session it came from, not the messages: no turn figure.
            turns[f"top_{k}"] = None if method == "recall" else _pct(turn_hits)
        table[method] = {"evidence_session_pct": sessions, "evidence_turn_pct": turns}
    return table


# --- one conversation ------------------------------------------------------------------------


@dataclass(kw_only=True)
class Tally:
    """What a run spent and saved."""

    runs: int = 0
    errors: int = 0
    memories_saved: list[int] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


@dataclass(kw_only=True)
class Outcome:
    """One question, answered (or not) and scored."""

    category: int
    in_memory: bool
    in_recalled: bool
    f1: float | None = None
    correct: bool | None = None
    answer_error: bool = False
    judge_error: bool = False
    in_recalled_with_fallback: bool = False
    evidence_sessions: frozenset[int] | None = None
    evidence_turns: frozenset[str] = frozenset()
    retrieved: dict[str, list[Found]] = field(default_factory=dict)
    """Per method (:data:`RETRIEVERS`), what it ranked first, best first."""


@dataclass(kw_only=True)
class Settings:
    """What the command line chose."""

    model: Model
    judge: Model | None
    selector: Model | None
    concurrency: int


def _usage(fields: Mapping[str, Any]) -> Usage:
    return Usage(
        input_tokens=int(fields.get("input_tokens", 0)),
        output_tokens=int(fields.get("output_tokens", 0)),
        cache_read_input_tokens=int(fields.get("cache_read_input_tokens", 0)),
        cache_creation_input_tokens=int(fields.get("cache_creation_input_tokens", 0)),
    )


async def replay(
    conversation: Conversation, memory: MemoryDir, model: Model, sessions: int
) -> Tally:
    """Run the extractor once at the end of each of the first ``sessions`` sessions."""
    tally = Tally()
    memory.ensure()
    for index in range(min(sessions, len(conversation.sessions))):
        sink = CollectingSink()
        extractor = MemoryExtractor(memory, model, ExtractConfig(), sink=sink)
        messages = tuple(session_messages(conversation, index))
        # Named, so each memory records the session it came from (originSessionId).
        name = session_name(conversation.sessions[index][0])
        extractor.on_turn_end(TurnContext(messages=messages, cwd=str(memory.root), session_id=name))
        await extractor.drain(timeout=DRAIN_TIMEOUT)
        saved = 0
        for event in sink.events:
            if event.name == "extract.run":
                tally.runs += 1
                saved += int(event.fields.get("memories_saved", 0))
                tally.usage += _usage(event.fields)
            elif event.name == "extract.error":
                tally.errors += 1
        if extractor.in_flight:
            tally.errors += 1  # still running after the drain timeout
        tally.memories_saved.append(saved)
    return tally


def conversation_folder(root: Path, conversation: Conversation) -> Path:
    """Where a conversation's sessions (as transcripts) and memory live under ``root``:
    laid out as Claude Code lays out a project, the sessions beside ``memory/``."""
    return root / re.sub(r"[^\w.-]", "_", conversation.sample_id)


def memory_folder(root: Path, conversation: Conversation) -> Path:
    """Where a conversation's memory lives under ``root``."""
    return conversation_folder(root, conversation) / "memory"


def memory_text(memory: MemoryDir) -> str:
    """Every Markdown file of the memory directory, the index included, normalised."""
    texts = []
    for path in sorted(memory.root.rglob("*.md")):
        with contextlib.suppress(OSError):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return normalize_answer("\n".join(texts))


def memory_files(memory: MemoryDir) -> int:
    """Memory files on disk, ``MEMORY.md`` indexes left out."""
    return sum(1 for p in memory.root.rglob("*.md") if p.name != "MEMORY.md")


async def _ask(model: Model, system: str, prompt: str, max_tokens: int) -> tuple[str, Usage]:
    params: dict[str, Any] = {"temperature": 0}
    if model.name.startswith("anthropic:"):
        params["max_tokens"] = max_tokens
    response = await model.request(
        ModelRequest(system=system, messages=[Message.user(prompt)], params=params)
    )
    return response.message.text.strip(), response.usage


async def put_question(
    question: Question,
    conversation: Conversation,
    memory: MemoryDir,
    all_memory: str,
    settings: Settings,
    spent: dict[str, Usage],
    retrieval: Retrieval,
) -> Outcome:
    """Recall for one question, then (with an LLM) answer it and score the answer.

    Recall runs once, with the search fallback on: what it surfaces from memory is
    recall alone (the fallback only adds passages when no memory was chosen), and the
    answer is given from that alone, as before; the passages count only for the
    retrieval figures.
    """
    with_fallback = await select_relevant_memories(
        question.question, memory, settings.selector, limit=MAX_SURFACED, search_fallback=True
    )
    surfaced = [m for m in with_fallback if not m.filename.startswith(PASSAGE_PREFIX)]
    recalled = normalize_answer("\n".join(m.content for m in surfaced))
    everything = normalize_answer("\n".join(m.content for m in with_fallback))
    searched = await asyncio.to_thread(
        search, memory, question.question, limit=max(RETRIEVAL_KS), memories=False, update=False
    )
    outcome = Outcome(
        category=question.category,
        in_memory=gold_found(question.gold, question.category, all_memory),
        in_recalled=gold_found(question.gold, question.category, recalled),
        in_recalled_with_fallback=gold_found(question.gold, question.category, everything),
        evidence_sessions=question.evidence_sessions,
        evidence_turns=question.evidence_turns,
        retrieved={
            "bm25_baseline": retrieval.baseline.rank(question.question, max(RETRIEVAL_KS)),
            "search": [
                Found(_session_number(h.session_id), retrieval.by_uuid.get(h.uuid or ""))
                for h in searched
            ],
            "recall": recalled_found(surfaced, retrieval.by_uuid),
            "recall_with_fallback": recalled_found(with_fallback, retrieval.by_uuid),
        },
    )
    if settings.judge is None:
        return outcome
    context = "\n\n".join([memory_reminder(memory), *(m.text for m in surfaced)])
    system = ANSWER_SYSTEM.format(a=conversation.speaker_a, b=conversation.speaker_b)
    try:
        answer, usage = await _ask(
            settings.model,
            system,
            f"{context}\n\nQuestion: {question.question}",
            ANSWER_MAX_TOKENS,
        )
        spent["answer"] += usage
    except MemdirError:
        answer, outcome.answer_error = "", True
    outcome.f1 = locomo_f1(answer, question.gold, question.category)
    gold = ADVERSARIAL_GOLD if question.category == ADVERSARIAL else question.gold
    if question.category == OPEN_DOMAIN:
        gold = gold.split(";")[0].strip()
    try:
        verdict, usage = await _ask(
            settings.judge,
            JUDGE_SYSTEM,
            f"Question: {question.question}\nGold answer: {gold}\nGenerated answer: {answer}",
            JUDGE_MAX_TOKENS,
        )
        spent["judge"] += usage
        outcome.correct = parse_label(verdict)
    except MemdirError:
        outcome.correct = None
    outcome.judge_error = outcome.correct is None
    return outcome


async def run_conversation(
    conversation: Conversation,
    memory: MemoryDir,
    settings: Settings,
    sessions: int | None,
    max_questions: int | None,
    spent: dict[str, Usage],
) -> tuple[dict[str, Any], Tally, list[Outcome], int]:
    """Replay one conversation and put its questions; the per-conversation figures."""
    started = time.monotonic()
    count = len(conversation.sessions) if sessions is None else sessions
    tally = await replay(conversation, memory, settings.model, count)
    replayed = {number for number, _, _ in conversation.sessions[:count]}
    questions = asked(conversation.questions, replayed, len(replayed) == len(conversation.sessions))
    skipped = len(conversation.questions) - len(questions)
    if max_questions is not None:
        questions = questions[:max_questions]
    all_memory = await asyncio.to_thread(memory_text, memory)
    by_uuid, turns = write_sessions(conversation, memory.root.parent, count)
    indexed = time.monotonic()
    await asyncio.to_thread(index_sessions, memory)
    index_s = time.monotonic() - indexed
    retrieval = Retrieval(by_uuid=by_uuid, baseline=TurnBm25(turns))
    gate = asyncio.Semaphore(settings.concurrency)

    async def one(question: Question) -> Outcome:
        async with gate:
            return await put_question(
                question, conversation, memory, all_memory, settings, spent, retrieval
            )

    outcomes = list(await asyncio.gather(*(one(q) for q in questions)))
    summary = {
        "sample_id": conversation.sample_id,
        "sessions": len(tally.memories_saved),
        "turns": sum(len(t) for _, _, t in conversation.sessions[:count]),
        "questions": len(outcomes),
        "memories_saved": sum(tally.memories_saved),
        "memory_files": memory_files(memory),
        "extraction_errors": tally.errors,
        "search_index_s": round(index_s, 3),
        "elapsed_s": round(time.monotonic() - started, 2),
    }
    return summary, tally, outcomes, skipped


# --- the report ------------------------------------------------------------------------------


def _pct(values: Sequence[float]) -> float | None:
    return round(100 * sum(values) / len(values), 2) if values else None


def by_category(outcomes: Sequence[Outcome], value: str) -> dict[str, float | None]:
    """A percentage per category, overall, and overall without the adversarial questions."""
    scores: dict[int, list[float]] = {c: [] for c in CATEGORIES}
    for outcome in outcomes:
        score = getattr(outcome, value)
        if score is not None:
            scores[outcome.category].append(float(score))
    table = {name: _pct(scores[c]) for c, name in CATEGORIES.items()}
    table["overall"] = _pct([s for c in CATEGORIES for s in scores[c]])
    table["overall_excluding_adversarial"] = _pct(
        [s for c in CATEGORIES if c != ADVERSARIAL for s in scores[c]]
    )
    return table


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
    }


async def close(model: Model | None) -> None:
    """Close the provider client a model holds, if it has one."""
    closer = getattr(getattr(model, "client", None), "close", None)
    if closer is not None:
        with contextlib.suppress(Exception):
            await closer()


async def run(args: argparse.Namespace, conversations: Sequence[Conversation]) -> dict[str, Any]:
    """The whole benchmark; the result object."""
    started = time.monotonic()
    model = resolve_model(args.model, base_url=args.base_url)
    offline = model.name == "offline"
    recall = args.recall or ("bm25" if offline else "model")
    if recall == "model" and offline:
        raise MemdirError("--recall model needs an LLM; the offline model recalls by BM25")
    judge: Model | None = None
    if not offline and args.judge_model is not None:
        judge = resolve_model(args.judge_model, base_url=args.base_url)
        if judge.name == "offline":
            await close(model)
            raise MemdirError("the judge must be an LLM: 'anthropic:MODEL' or 'openai:MODEL'")
    elif not offline:
        judge = model
    settings = Settings(
        model=model,
        judge=judge,
        selector=model if recall == "model" else None,
        concurrency=args.concurrency,
    )
    spent = {"answer": Usage(), "judge": Usage()}
    summaries: list[dict[str, Any]] = []
    outcomes: list[Outcome] = []
    tallies: list[Tally] = []
    skipped = 0
    try:
        with contextlib.ExitStack() as stack:
            if args.out is None:
                root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="locomo-")))
            else:
                root = Path(args.out)
            for conversation in conversations:
                memory = MemoryDir(memory_folder(root, conversation))
                summary, tally, found, left = await run_conversation(
                    conversation, memory, settings, args.sessions, args.questions, spent
                )
                summaries.append(summary)
                tallies.append(tally)
                outcomes.extend(found)
                skipped += left
                print(
                    f"locomo: {summary['sample_id']}: {summary['sessions']} sessions, "
                    f"{summary['memories_saved']} memories saved "
                    f"({summary['memory_files']} files), {summary['questions']} questions, "
                    f"{summary['elapsed_s']} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        await close(model)
        if judge is not model:
            await close(judge)
    per_session = [n for t in tallies for n in t.memories_saved]
    extraction = Usage()
    for tally in tallies:
        extraction += tally.usage
    counts = Counter(CATEGORIES[o.category] for o in outcomes)
    result: dict[str, Any] = {
        "bench": "locomo",
        "model": model.name,
        "judge_model": judge.name if judge is not None else None,
        "recall": recall,
        "data": str(args.data),
        "conversations": len(summaries),
        "sessions": len(per_session),
        "turns": sum(s["turns"] for s in summaries),
        "questions": {name: counts.get(name, 0) for name in CATEGORIES.values()}
        | {"total": len(outcomes)},
        "questions_not_asked": skipped,
        "memories_saved": {
            "total": sum(per_session),
            "per_session_mean": round(sum(per_session) / len(per_session), 3)
            if per_session
            else None,
            "memory_files": sum(s["memory_files"] for s in summaries),
        },
        "extraction": {
            "runs": sum(t.runs for t in tallies),
            "errors": sum(t.errors for t in tallies),
        }
        | _usage_dict(extraction),
        "gold_in_memory_pct": by_category(outcomes, "in_memory"),
        "gold_in_recalled_pct": by_category(outcomes, "in_recalled"),
        "gold_in_recalled_with_fallback_pct": by_category(outcomes, "in_recalled_with_fallback"),
        "retrieval": retrieval_table(outcomes),
        "f1_pct": None,
        "judge_pct": None,
        "per_conversation": summaries,
        "elapsed_s": round(time.monotonic() - started, 2),
    }
    if offline:
        result["note"] = (
            "offline model: nothing is answered, so f1_pct and judge_pct are null; "
            "gold_in_memory_pct and gold_in_recalled_pct need no LLM"
        ) + ("; --judge-model was not used" if args.judge_model else "")
    else:
        result["f1_pct"] = by_category(outcomes, "f1")
        result["judge_pct"] = by_category(outcomes, "correct")
        result["answer_errors"] = sum(o.answer_error for o in outcomes)
        result["judge_errors"] = sum(o.judge_error for o in outcomes)
        result["answer_usage"] = _usage_dict(spent["answer"])
        result["judge_usage"] = _usage_dict(spent["judge"])
    return result


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line."""
    out = argparse.ArgumentParser(prog="locomo.py", description=(__doc__ or "").splitlines()[0])
    out.add_argument("--model", default="offline", help="offline, anthropic:MODEL or openai:MODEL")
    out.add_argument("--judge-model", help="the judge (default: --model)")
    out.add_argument("--base-url", help="the provider's endpoint, for every model")
    out.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    out.add_argument("--conversations", type=_positive, help="the first N (default: all)")
    out.add_argument("--sessions", type=_positive, help="the first N of each (default: all)")
    out.add_argument("--questions", type=_positive, help="at most N per conversation")
    out.add_argument("--out", type=Path, help="keep the memory directories here")
    out.add_argument(
        "--recall",
        choices=("model", "bm25"),
        help="how memories are chosen (default: model with an LLM, bm25 offline)",
    )
    out.add_argument("--concurrency", type=_positive, default=8, help="questions in flight at once")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0 when done, 2 for bad usage or unreadable data."""
    args = parser().parse_args(argv)
    args.data = args.data.resolve()
    try:
        conversations = load_data(args.data)
    except DataError as exc:
        print(f"locomo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.conversations is not None:
        conversations = conversations[: args.conversations]
    if args.out is not None:
        for conversation in conversations:
            folder = conversation_folder(args.out, conversation)
            if folder.is_dir() and any(folder.iterdir()):
                print(f"locomo: {folder} is not empty; choose an empty --out", file=sys.stderr)
                return EXIT_USAGE
    try:
        result = asyncio.run(run(args, conversations))
    except MemdirError as exc:
        print(f"locomo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
