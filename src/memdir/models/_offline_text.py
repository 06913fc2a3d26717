"""Text helpers for the offline model: topic words, similarity, and dates made absolute.

Pure functions of their arguments, so the offline model answers alike every time.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = [
    "URL",
    "DatedText",
    "clip",
    "make_slug",
    "mentions",
    "resolve_dates",
    "sentence_case",
    "significant_words",
    "similarity",
    "third_person",
    "word_set",
]


def word_set(words: str) -> frozenset[str]:
    """The space-separated ``words`` as a set: long word lists read better as one string."""
    return frozenset(words.split())


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# Words that carry no topic: they would make every slug and every comparison alike.
_STOP = word_set(
    """a an the and or but if then so to of in on at by for from with without into about as
    is are was were be been being am do does did doing done have has had i me my mine you your
    we us our it its this that these those there here they them their he she his her not no
    yes please always never dont do stop avoid use using used prefer prefers like likes love
    rather would should could must can will just also really very thing things stuff rule
    rules memory remember forget note thats what which who when where why how all any some
    more most less than instead over only ok okay thanks thank im ive id ill lets user users
    go goes get make sure today tonight tomorrow yesterday day days week weeks month months
    year years next last end eod eow eom january february march april june july august
    september october november december"""
) | frozenset(_WEEKDAYS + _MONTHS)


@dataclass(frozen=True, kw_only=True)
class DatedText:
    """A sentence with its date expressions rewritten as ISO dates."""

    text: str
    """The sentence, every date ISO (``2026-12-04``)."""
    dates: tuple[date, ...]
    """The dates found, in order."""
    relative: tuple[tuple[str, date], ...]
    """Relative expressions as written, with the date each was read as."""
    anchored: bool
    """A date follows ``by``, ``until``, ``on``, ``before`` or ``due``."""


# --- words ---------------------------------------------------------------------------------

URL = re.compile(r"https?://[^\s<>()\"'`\]]+", re.I)


def significant_words(text: str) -> list[str]:
    """The topic words of ``text``, lower case, first occurrence order, URLs left out."""
    words: list[str] = []
    for word in re.findall(r"[a-z0-9]+", URL.sub(" ", text.lower().replace("'", ""))):
        if len(word) > 1 and word not in _STOP and not word.isdigit() and word not in words:
            words.append(word)
    return words


def _stems(text: str) -> set[str]:
    # A trailing "s" is the only inflection worth folding: "dashboards" is "dashboard".
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in significant_words(text)}


def similarity(a: str, b: str) -> float:
    """How far two descriptions are about one thing: 0.0, or the share of words they hold in
    common (out of the longer one's) when that is over half and at least two words."""
    x, y = _stems(a), _stems(b)
    shared = len(x & y)
    if shared < 2 or 2 * shared <= max(len(x), len(y)):
        return 0.0
    return shared / max(len(x), len(y))


def mentions(words: Sequence[str], text: str) -> bool:
    """Whether ``text`` holds every one of ``words`` (none means no)."""
    wanted = _stems(" ".join(words))
    return bool(wanted) and wanted <= _stems(text)


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary with ``…`` to at most ``limit`` chars."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:-") + "…"


def make_slug(prefix: str, words: Sequence[str]) -> str:
    return "_".join([prefix, *(list(words)[:3] or ["note"])])[:48].rstrip("_")


def sentence_case(text: str) -> str:
    text = text.strip().rstrip(" ,;:")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    ends_with_url = any(m.end() == len(text) for m in URL.finditer(text))
    return text if text.endswith((".", "!")) or ends_with_url else text + "."


_STARTS = (
    ("i'm ", "The user is "),
    ("i am ", "The user is "),
    ("i'd ", "The user would "),
    ("i would ", "The user would "),
    ("i've ", "The user has "),
    ("i have ", "The user has "),
    ("i was ", "The user was "),
    ("my ", "The user's "),
)
_MODALS = word_set("can could will would should shall must may might cannot can't won't")
_IRREGULAR = {"do": "does", "don't": "doesn't", "go": "goes", "have": "has", "am": "is"}


def third_person(text: str) -> str:
    """A sentence that starts in the first person, retold about "the user"."""
    low = text.lower()
    for start, replacement in _STARTS:
        if low.startswith(start):
            return replacement + text[len(start) :]
    match = re.match(r"i\s+([a-z']+)\b", text, re.I)
    if match is None:
        return text
    verb = match.group(1).lower()
    if verb in _IRREGULAR:
        verb = _IRREGULAR[verb]
    elif verb not in _MODALS and not verb.endswith("ed"):
        verb += "es" if verb.endswith(("s", "sh", "ch", "x", "z", "o")) else "s"
    return f"The user {verb}{text[match.end() :]}"


# --- dates ---------------------------------------------------------------------------------

_COUNTS = {"a couple of": 2, "couple of": 2, "a": 1, "an": 1, "one": 1, "two": 2, "three": 3}
_COUNTS |= {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_COUNT = "|".join(sorted(_COUNTS, key=len, reverse=True)) + r"|\d{1,3}"
_DATE = re.compile(
    r"\b(?:(?P<iso>\d{4}-\d\d-\d\d)"
    rf"|(?P<dd>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dm>{_MONTH})(?:,?\s+(?P<dy>\d{{4}}))?"
    rf"|(?P<mm>{_MONTH})\.?\s+(?P<md>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<my>\d{{4}}))?"
    r"|(?P<rel>(?:the\s+)?day after tomorrow|today|tonight|tomorrow|yesterday|eod"
    r"|end of (?:the\s+)?day)"
    rf"|(?:(?P<wq>this|next|last|coming)\s+)?(?P<wd>{'|'.join(_WEEKDAYS)})"
    r"|(?P<pq>next|this)\s+(?P<pu>week|month|year)"
    r"|(?P<eat>(?:at|by|before)\s+)?(?:the\s+)?end of (?:the\s+|this\s+)?(?P<eu>week|month|year)"
    r"|(?P<eo>eow|eom)"
    rf"|in\s+(?P<n>{_COUNT})\s+(?P<u>day|week|month)s?)\b",
    re.I,
)
_SHIFTS = {"tomorrow": 1, "yesterday": -1}
_ANCHOR = re.compile(r"\b(?:by|until|till|on|before|due)\s+(?:the\s+)?$", re.I)


def _add_months(day: date, months: int) -> date:
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _month_end(day: date) -> date:
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def _nearest(today: date, month: str, day: int, year: str | None) -> date:
    """An absolute date; without a year, the one of last, this or next year nearest today."""
    number = _MONTHS.index(month[:3].lower()) + 1
    if year is not None:
        return date(int(year), number, day)
    options = []
    for y in (today.year - 1, today.year, today.year + 1):
        try:
            options.append(date(y, number, day))
        except ValueError:  # 29 February outside a leap year
            continue
    if not options:
        raise ValueError("no such day")
    return min(options, key=lambda d: (abs((d - today).days), -d.toordinal()))


def _weekday(today: date, qualifier: str, index: int) -> date:
    ahead = (index - today.weekday()) % 7
    if qualifier == "this":
        return today + timedelta(days=ahead)
    if qualifier == "next":  # the one in the following calendar week (weeks start Monday)
        return today - timedelta(days=today.weekday() - 7 - index)
    if qualifier == "last":
        return today - timedelta(days=(today.weekday() - index) % 7 or 7)
    return today + timedelta(days=ahead or 7)  # bare, "on", "by", "coming": strictly ahead


def _period(today: date, unit: str, starts_next: bool) -> date:
    if unit in ("week", "eow"):
        if starts_next:
            return today + timedelta(days=7 - today.weekday())
        return today + timedelta(days=(4 - today.weekday()) % 7)  # Friday
    if unit in ("month", "eom"):
        return _add_months(today.replace(day=1), 1) if starts_next else _month_end(today)
    return date(today.year + 1, 1, 1) if starts_next else date(today.year, 12, 31)


def _when(match: re.Match[str], today: date) -> tuple[date, bool]:
    """The date a match names and whether it was relative. Raises ``ValueError``."""
    group = match.group
    if group("iso"):
        return date.fromisoformat(group("iso")), False
    if group("dm"):
        return _nearest(today, group("dm"), int(group("dd")), group("dy")), False
    if group("mm"):
        return _nearest(today, group("mm"), int(group("md")), group("my")), False
    if group("rel"):
        word = group("rel").lower()
        shift = 2 if "after" in word else _SHIFTS.get(word, 0)
        return today + timedelta(days=shift), True
    if group("wd"):
        index = _WEEKDAYS.index(group("wd").lower())
        return _weekday(today, (group("wq") or "").lower(), index), True
    if group("pu"):
        return _period(today, group("pu").lower(), group("pq").lower() == "next"), True
    if group("eu") or group("eo"):
        return _period(today, (group("eu") or group("eo")).lower(), False), True
    count = _COUNTS.get(group("n").lower()) or int(group("n"))
    unit = group("u").lower()
    if unit == "month":
        return _add_months(today, count), True
    return today + timedelta(days=count * (7 if unit == "week" else 1)), True


def resolve_dates(text: str, today: date) -> DatedText:
    """``text`` with each date expression replaced by its ISO date, relative ones read
    from ``today``."""
    found: list[date] = []
    relative: list[tuple[str, date]] = []
    anchored = False

    def replace(match: re.Match[str]) -> str:
        nonlocal anchored
        try:
            when, is_relative = _when(match, today)
        except ValueError:  # "February 30"
            return match.group(0)
        found.append(when)
        if is_relative:
            relative.append((match.group(0), when))
        if match.group("eat"):
            anchored = True
            return f"by {when.isoformat()}"
        if _ANCHOR.search(text[: match.start()]):
            anchored = True
            return when.isoformat()
        return f"on {when.isoformat()}" if is_relative else when.isoformat()

    rewritten = _DATE.sub(replace, text)
    return DatedText(
        text=rewritten, dates=tuple(found), relative=tuple(relative), anchored=anchored
    )
