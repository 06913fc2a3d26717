"""When a newer memory restates an older one's fact with another value: the dream's rule.

Two memories contradict each other, for these rules, when a fact line of the newer one and
a fact line of the older one speak of the same subject and give it different values. The
values looked at are the ones a plain edit changes without rewording the sentence: ISO
dates (``2026-12-04``) and weekdays (``Tuesdays``); the dream prompt asks for relative dates
to be written as ISO ones, and the extraction rules already write them so. The subject is a
line's topic words less those values, words that only name a value (``date``,
``deadline``) and words that announce a change (``moved``, ``now``, ``postponed``). Same
subject means:

- the same topic words on both lines ("Release ships by 2026-12-04" and "Release ships by
  2026-12-07"), or
- the newer line announces a change and one line's topic words hold all of the other's
  ("Release ships by 2026-12-04" and "The ship date moved to 2026-12-07").

Lines whose topic words merely overlap are left alone: "The ingest migration ships by
2026-12-04" and "The billing migration ships by 2026-12-10" are two facts, not one that
changed. Which of the two memories is the newer is for the caller to say.

Fact lines are the body's lines other than ``**Why:**``, ``**How to apply:**`` and
``**History:**`` ones: reasons are not facts, and a history line states on purpose what
no longer holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from memdir.models._offline_text import clip, significant_words, word_set

__all__ = ["HISTORY", "Replacement", "replacement", "superseded_body"]

HISTORY = "**History:**"
"""How a line about what a memory used to say starts (and why later passes skip it)."""

_WHY, _HOW = "**Why:**", "**How to apply:**"
_ASIDES = (_WHY, _HOW)
_ISO_DATE = re.compile(r"(?<![\d-])(\d{4}-\d\d-\d\d)(?![\d-])")
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.I)
# Words that announce that a value changed; stems, as _stems folds them.
_CHANGE = word_set(
    """move moved moving change changed changing now postponed pushed delayed rescheduled
    slipped shifted updated revised new longer brought"""
)
# Words that only name the value the line gives.
_VALUE_NOUNS = word_set("date deadline time timing schedule scheduled")
_WEEKDAYS = word_set("monday tuesday wednesday thursday friday saturday sunday")
_QUOTE_MAX = 100

_Value = tuple[str, str]  # (kind, value): ("date", "2026-12-04") or ("weekday", "tuesday")


@dataclass(frozen=True, kw_only=True)
class Replacement:
    """What a newer memory replaces in an older one."""

    stale: frozenset[_Value]
    """The older memory's values that the newer one replaces."""
    current: frozenset[_Value]
    """The newer memory's values in their place."""
    lines: frozenset[str]
    """The older memory's fact lines (stripped) that the newer one restates."""
    exact: bool
    """Whether some pair of lines had the very same topic words; otherwise only a change
    word tied them, which a caller may distrust when it ties several older memories."""


def _stems(text: str) -> set[str]:
    # The folding that similarity() in _offline_text uses: a trailing "s" only.
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in significant_words(text)}


# Words that flip or number a fact: "never deploy on Fridays" is not "deploy on Tuesdays"
# restated, nor "Sprint 12 ends ..." the date of "Sprint 13 ends ...".
_POLARITY = word_set("not no never dont cant cannot wont without avoid stop always only")


def _line_stems(line: str) -> set[str]:
    text = _ISO_DATE.sub(" ", line.lower().replace("\u2019", "").replace("'", ""))
    kept = set(re.findall(r"\d+(?:\.\d+)*", text)) | (set(re.findall(r"[a-z]+", text)) & _POLARITY)
    return _stems(line) | kept


def _values(line: str) -> frozenset[_Value]:
    found: set[_Value] = set()
    for match in _ISO_DATE.finditer(line):
        try:
            found.add(("date", date.fromisoformat(match.group(1)).isoformat()))
        except ValueError:  # 2026-02-30 is no date
            continue
    found.update(("weekday", m.group(1).lower()) for m in _WEEKDAY.finditer(line))
    return frozenset(found)


def _subject(stems: set[str]) -> frozenset[str]:
    return frozenset(stems - _CHANGE - _VALUE_NOUNS - _WEEKDAYS)


def _marker(line: str) -> str | None:
    stripped = line.lstrip()
    return next((m for m in (*_ASIDES, HISTORY) if stripped.startswith(m)), None)


def _facts(body: str) -> list[str]:
    return [line.strip() for line in body.splitlines() if line.strip() and _marker(line) is None]


def _match(newer: str, older: str) -> tuple[frozenset[_Value], frozenset[_Value], bool] | None:
    """``(stale, current, exact)`` when line ``newer`` gives ``older``'s subject a new value."""
    new_values, old_values = _values(newer), _values(older)
    kinds = {kind for kind, _ in old_values}
    current = frozenset(v for v in new_values - old_values if v[0] in kinds)
    if not current:
        return None
    new_stems, old_stems = _line_stems(newer), _line_stems(older)
    new_subject, old_subject = _subject(new_stems), _subject(old_stems)
    if not new_subject & old_subject:
        return None
    exact = new_subject == old_subject
    changed = bool(new_stems & _CHANGE)
    if not exact and not (changed and (new_subject <= old_subject or old_subject <= new_subject)):
        return None
    replaced = {kind for kind, _ in current}
    if not exact and any(sum(1 for v in old_values if v[0] == k) > 1 for k in replaced):
        return None  # which of the older line's values changed is not for wording to say
    stale = frozenset(v for v in old_values - new_values if v[0] in replaced)
    return stale, current, exact


def replacement(newer_body: str, older_body: str) -> Replacement | None:
    """What the memory with ``newer_body`` replaces in the one with ``older_body``, or
    ``None`` when no fact of the older one is given another value by the newer one."""
    stale: set[_Value] = set()
    current: set[_Value] = set()
    lines: set[str] = set()
    exact = False
    new_facts = _facts(newer_body)
    for old in _facts(older_body):
        for new in new_facts:
            found = _match(new, old)
            if found is None:
                continue
            stale |= found[0]
            current |= found[1]
            lines.add(old)
            exact = exact or found[2]
    if not lines:
        return None
    return Replacement(
        stale=frozenset(stale), current=frozenset(current), lines=frozenset(lines), exact=exact
    )


def _shown(values: frozenset[_Value]) -> str:
    return ", ".join(value for _, value in sorted(values))


def _history(line: str, stale: frozenset[_Value], current: frozenset[_Value]) -> str:
    kinds = {kind for kind, _ in stale}
    now = frozenset(v for v in current if v[0] in kinds)
    quoted = clip(line, _QUOTE_MAX).replace('"', "'")
    return f'{HISTORY} was {_shown(stale)} until it changed to {_shown(now)} ("{quoted}")'


def _same(text: str) -> str:
    return " ".join(text.split())


def superseded_body(newer_body: str, older_body: str, found: Replacement) -> str:
    """The newer memory's body, taking from the older one what still holds.

    The newer body stays as it is, first. Of the older one it gains the fact lines that no
    replaced value touches, its history lines, and its ``**Why:**`` / ``**How to apply:**``
    lines only where the newer has none of that kind and they name no replaced value (the
    newer memory's reasons are the ones that go with its facts). Each older fact line that
    held a replaced value becomes a ``**History:**`` line; one the newer restates with its
    old value too ("moved from 2026-12-04 to 2026-12-07") is dropped, as the newer says it.
    Gained facts, then history, go before the newer's ``**Why:**`` and ``**How to apply:**``
    lines, so a feedback or project body still ends with them.
    """
    new_lines = newer_body.strip("\n").splitlines()
    have = {_same(line) for line in new_lines}
    kinds_had = {_marker(line) for line in new_lines}
    carried: list[str] = []
    history: list[str] = []
    reasons: list[str] = []
    for line in older_body.splitlines():
        stripped = line.strip()
        if not stripped or _same(line) in have:
            continue
        marker = _marker(line)
        stale = _values(line) & found.stale
        if marker == HISTORY:
            history.append(stripped)
        elif marker is not None:
            if marker not in kinds_had and not stale:
                reasons.append(stripped)
        elif stale:
            history.append(_history(stripped, stale, found.current))
        elif stripped not in found.lines:
            carried.append(line.rstrip())
    cut = next((i for i, line in enumerate(new_lines) if _marker(line) in _ASIDES), None)
    head = new_lines if cut is None else new_lines[:cut]
    tail = ([] if cut is None else new_lines[cut:]) + reasons
    parts = ["\n".join(head).strip("\n"), "\n".join(carried), "\n".join(history)]
    parts.append("\n".join(tail).strip("\n"))
    return "\n\n".join(part for part in parts if part) + "\n"
