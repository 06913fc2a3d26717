"""The offline model's rules: which sentences a person typed hold a memory, and of what kind.

Everything here is a pure function of text and a date, so the offline model answers the
same request the same way. A sentence yields at most one kind of cue, tried from the most
specific to the most general: forget, remember, role, link, dated fact, preference,
correction. Questions and sentences holding a credential yield nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from urllib.parse import urlsplit

from memdir.models._offline_text import (
    URL,
    DatedText,
    clip,
    make_slug,
    resolve_dates,
    sentence_case,
    significant_words,
    third_person,
    word_set,
)
from memdir.store import MemoryType, contains_secret

__all__ = ["Candidate", "Forget", "find_cues", "sentences"]

# Longer "sentences" are pasted logs or code, not something said to be remembered; skipping
# them also keeps every pattern's cost linear in practice.
_MAX_SENTENCE = 500
# "Forget the polars rule": words that say what kind of thing to forget, not which one.
_FORGET_NOISE = word_set("preference fact part bit everything anything one")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One memory that a cue asks to save."""

    type: MemoryType
    """The memory type."""
    slug: str
    """The file name without ``.md``: the same fact always gets the same slug."""
    name: str
    """A short title."""
    description: str
    """One line saying what the memory is."""
    fact: str
    """The memory itself, one sentence."""
    why: str | None = None
    """The ``**Why:**`` line (feedback and project memories)."""
    how: str | None = None
    """The ``**How to apply:**`` line (feedback and project memories)."""
    replaces: bool = False
    """A newer statement supersedes the file's body (a role, a date) instead of joining it."""

    @property
    def body(self) -> str:
        """The Markdown body of this memory."""
        if self.why is None:
            return self.fact
        return f"{self.fact}\n\n**Why:** {self.why}\n**How to apply:** {self.how}"


@dataclass(frozen=True, kw_only=True)
class Forget:
    """A request to forget whatever mentions every one of ``words``."""

    subject: str
    """The subject as the user put it."""
    words: tuple[str, ...]
    """Its significant words."""


# --- patterns ------------------------------------------------------------------------------

_HARNESS = re.compile(
    r"<(system-reminder|command-[\w-]+|local-command-[\w-]+|bash-[\w-]+|[\w-]+-hook)>.*?</\1>",
    re.S | re.I,
)
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|so|also|and|but|oh|hey|hi|btw|fyi|please|pls|just|one more thing"
    r"|by the way|going forward|from now on|in (?:the )?future)\b[\s,:;!-]*)+",
    re.I,
)
_CORRECTION = re.compile(
    r"^(?:no|nope|actually|wrong|that'?s (?:wrong|not right|incorrect)"
    r"|that is (?:wrong|incorrect))\b[\s,.:;!-]*",
    re.I,
)
_FORGET = re.compile(
    r"^(?:forget(?:\s+about)?|(?:don't|dont|do not|no need to)\s+remember|stop remembering)"
    r"\s+(?:that\s+|what i said about\s+)?(.+)",
    re.I,
)
_REMEMBER = re.compile(
    r"^(?:(?:remember|keep in mind|bear in mind)(?:\s+that\b|\s*:|\b)|note(?:\s+that\b|\s*:))"
    r"\s*(.+)",
    re.I,
)
_ROLES = (
    re.compile(r"^(?:i'm|i am)\s+(?:now\s+|currently\s+|also\s+)?(?P<a>an?|the)\s+(?P<r>.+)", re.I),
    re.compile(r"^i work as\s+(?:(?P<a>an?|the)\s+)?(?P<r>.+)", re.I),
    re.compile(r"^my (?:role|job|title|position) is\s+(?:(?P<a>an?|the)\s+)?(?P<r>.+)", re.I),
)
_NAME = re.compile(r"^(?i:i'm|i am|my name is)\s+([A-Z][\w-]+)$")  # a name is capitalised
_LEADS = re.compile(r"^i (?P<v>lead|manage|run|own|head)\s+(?P<r>.+)", re.I)
_TEAMISH = re.compile(
    r"\b(?:team|group|org|organi[sz]ation|department|squad|platform|division|company)\b", re.I
)
# "I'm a bit tired", "I'm a fan of…": the article is there, a job title is not.
_NOT_A_ROLE = word_set("bit little lot tad fan big huge few couple hour minute moment")
# Hosts whose name alone says dashboard, tracker, wiki or chat.
_SERVICES = (
    "grafana", "datadog", "kibana", "sentry", "jira", "confluence", "atlassian", "linear",
    "trello", "notion", "slack", "discord", "pagerduty", "github", "gitlab",
)  # fmt: skip
_REF_WORDS = re.compile(r"\b(?:dashboards?|board|tracker|channel|runbook|wiki)\b", re.I)
_TRACKER_PATH = re.compile(r"/(?:issues|projects|pulls|boards?)\b")
_CHANNEL = re.compile(r"(?<![\w&#/])#([a-z][\w-]{1,79})", re.I)
_DEADLINE = re.compile(
    r"\b(?:deadline|due|ship(?:s|ped|ping)?|releas\w*|launch\w*|freez\w*|go(?:es)? live"
    r"|cut-?off|demo)\b",
    re.I,
)
_LIKES = re.compile(
    r"^(?P<s>i(?:'d|\s+would|\s+really|\s+much)?)\s+(?P<v>prefer|like|love|rather)\s+(?P<x>.+)",
    re.I,
)
_IMPERATIVE = re.compile(
    r"^(?:(?:you|we)\s+(?:should\s+|must\s+)?)?(?:always|never|don't|dont|do not|stop|avoid)"
    r"\s+(?P<x>.+)",
    re.I,
)
_INSTEAD = re.compile(
    r"^(?:use|try|go with|stick with|switch to|prefer)\s+.+?\s+(?:instead of|rather than|over)\s",
    re.I,
)
_SMALL_TALK = word_set("worry bother mind care apologize apologise thank panic")
_NOT_BUT = re.compile(r"\bnot\b.+\bbut\b", re.I)
_I_SAID = re.compile(r"^i said\s+(?:that\s+|to\s+)?(.+)", re.I)
_REASON = re.compile(
    r",?\s+because\s+|,\s+(?:since|as)\s+"
    r"|\s+since\s+(?=(?:the|we|it|they|our|that|this|there|i|you)\b)",
    re.I,
)


def sentences(text: str) -> list[str]:
    """What a person wrote, sentence by sentence, harness tags and code blocks left out."""
    text = _FENCE.sub("\n", _HARNESS.sub("\n", text.replace("\u2019", "'")))
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip().lstrip("-*•>").strip()
        out += [part.strip() for part in re.split(r"(?<=[.!?])\s+", line) if part.strip()]
    return out


def _lead_in(text: str) -> tuple[str, bool]:
    """``text`` without leading fillers ("ok, please") and correction markers ("no,")."""
    corrected = False
    while True:
        stripped = _FILLER.sub("", text)
        marker = _CORRECTION.match(stripped)
        if marker is not None:
            stripped, corrected = stripped[marker.end() :], True
        if stripped == text:
            return text.strip(), corrected
        text = stripped


def _split_reason(text: str) -> tuple[str, str | None]:
    match = _REASON.search(text)
    if match is None:
        return text.strip(" ,;"), None
    return text[: match.start()].strip(" ,;"), text[match.end() :].strip(" ,;.") or None


def _why(reason: str | None, default: str) -> str:
    if reason is None:
        return default
    return sentence_case(f"Because {reason}" if reason.lower().startswith("of ") else reason)


def _lower_first(text: str) -> str:
    """``text`` with a capital first letter lowered, unless it starts a shouted word."""
    return text if text[1:2].isupper() else text[:1].lower() + text[1:]


def _feedback(
    rule: str, said_on: date, reason: str | None, corrected: bool, how: str | None = None
) -> Candidate:
    rule = sentence_case(rule).rstrip(".")
    told = "corrected the assistant" if corrected else "stated this"
    return Candidate(
        type="feedback",
        slug=make_slug("feedback", significant_words(rule)),
        name=clip(rule, 60),
        description=clip(rule, 110),
        fact=f"{rule}.",
        why=_why(reason, f"The user {told} on {said_on.isoformat()}."),
        how=how or f"In future work: {_lower_first(rule)}.",
    )


def _project(dated: DatedText, said_on: date, reason: str | None) -> Candidate:
    fact = sentence_case(third_person(dated.text))
    notes = "; ".join(f'"{phrase}" read as {when.isoformat()}' for phrase, when in dated.relative)
    why = _why(reason, f"Stated by the user on {said_on.isoformat()}.")
    if notes:
        said = f"said on {said_on.isoformat()}: " if reason else ""
        why = f"{why.rstrip('.')} ({said}{notes})."
    if dated.dates:
        days = ", ".join(sorted({d.isoformat() for d in dated.dates}))
        how = f"Plan around {days}; once that date has passed, check whether this still holds."
    else:
        how = "Keep this in mind when planning or changing work on the project."
    return Candidate(
        type="project",
        slug=make_slug("project", significant_words(dated.text)),
        name=clip(fact.rstrip("."), 60),
        description=clip(fact.rstrip("."), 110),
        fact=fact,
        why=why,
        how=how,
        replaces=bool(dated.dates),
    )


def _role_phrase(clause: str) -> tuple[str, str] | None:
    """``(role, fact)`` when ``clause`` says what the user does."""
    for pattern in _ROLES:
        match = pattern.match(clause)
        if match is not None:
            role = match.group("r").strip(" .")
            if not role or role.split()[0].lower() in _NOT_A_ROLE:
                return None
            article = (match.group("a") or "").lower()
            return role, f"The user is {article} {role}".replace("  ", " ")
    lead = _LEADS.match(clause)
    if lead is None or not _TEAMISH.search(lead.group("r")):
        return None
    role = f"{lead.group('v').lower()}s {lead.group('r').strip(' .')}"
    return role, f"The user {role}"


def _role(text: str) -> Candidate | None:
    clauses = [c for c in re.split(r"\s*[,;]\s*", text) if c]
    found = next((r for r in map(_role_phrase, clauses) if r is not None), None)
    if found is None:
        return None
    role, fact = found
    # "I'm Ana, I lead the data team": the name goes with the role, nothing more personal.
    name = next((m.group(1) for m in map(_NAME.match, clauses) if m is not None), None)
    if name is not None:
        fact = fact.replace("The user", f"The user ({name})", 1)
    return Candidate(
        type="user",
        slug="user_role",
        name="User role",
        description=clip(f"The user's role: {role}", 110),
        fact=f"{fact}.",
        replaces=True,
    )


def _references(text: str) -> list[Candidate]:
    found: list[tuple[str, str, str]] = []  # (service, link, the words that go with it)
    several = len(URL.findall(text)) > 1
    # "The dashboard is X and bugs go to Y": each link is described by its own clause.
    for clause in re.split(r"[,;]\s+|\s+and\s+", text) if several else [text]:
        for url in URL.findall(clause):
            url = url.rstrip(".,;:!?")
            parts = urlsplit(url)
            labels = (parts.hostname or "").lower().split(".")
            service = next((s for s in _SERVICES if any(x.startswith(s) for x in labels)), "")
            forge = service in ("github", "gitlab")  # code hosts: only their trackers count
            tracker = forge and _TRACKER_PATH.search(parts.path) is not None
            if (service and not forge) or tracker or _REF_WORDS.search(text):
                host = next((x for x in labels if x not in ("www", "app")), "")
                found.append((service or host, url, clause))
    if not found and re.search(r"\bchannels?\b", text, re.I):
        found = [("slack", f"#{name}", text) for name in _CHANNEL.findall(text)]
    out = []
    for service, link, clause in found:
        words = significant_words(link[1:] if link.startswith("#") else clause)
        words = [w for w in words if w != service]
        title = f"{service.capitalize()}: {' '.join(words[:3]) or link}"
        out.append(
            Candidate(
                type="reference",
                slug=make_slug("reference", [service, *words]),
                name=clip(title, 60),
                description=clip(sentence_case(clause).rstrip("."), 110),
                fact=sentence_case(third_person(clause)),
            )
        )
    return out


def _preference(text: str) -> tuple[str, str | None] | None:
    """The rule a preference states, with its "how to apply" line when the rule alone reads
    badly as one; ``None`` when ``text`` states no preference."""
    likes = _LIKES.match(text)
    if likes is not None:
        subject, verb, rest = likes.group("s").lower(), likes.group("v").lower(), likes.group("x")
        wishful = "'d" in subject or "would" in subject
        if (verb in ("like", "love") and wishful) or not significant_words(rest):
            return None  # "I'd like you to…" asks for something now; "I like it" is no rule
        phrase = {"prefer": "prefers", "like": "likes", "love": "loves"}.get(verb, "would rather")
        phrase = "would prefer" if verb == "prefer" and wishful else phrase
        return f"The user {phrase} {rest}", f"When there is a choice, go with {rest}."
    imperative = _IMPERATIVE.match(text)
    if imperative is not None:
        rest = imperative.group("x")
        if not significant_words(rest) or rest.split()[0].lower() in _SMALL_TALK:
            return None
        return text, None
    return (text, None) if _INSTEAD.match(text) else None


def _classify(text: str, said_on: date, corrected: bool) -> list[Candidate]:
    main, reason = _split_reason(text)
    if not main:
        return []
    role = _role(main)
    if role is not None:
        return [role]
    references = _references(main)
    if references:
        return references
    dated = resolve_dates(main, said_on)
    if dated.dates and (dated.anchored or _DEADLINE.search(main)):
        return [_project(dated, said_on, reason)]
    preference = _preference(main)
    if preference is not None:
        rule, how = preference
        return [_feedback(rule, said_on, reason, corrected, how)]
    said = _I_SAID.match(main)
    if said is not None:
        main, corrected = said.group(1), True
    if (corrected or _NOT_BUT.search(main)) and len(significant_words(main)) >= 2:
        return [_feedback(main, said_on, reason, True)]
    return []


def _plain(text: str, said_on: date) -> Candidate:
    """Something the user asked to remember that no other rule types: about them, or the work."""
    main, reason = _split_reason(text)
    if re.match(r"(?:i|i'm|my|me)\b", main, re.I) is None:
        undated = DatedText(text=main, dates=(), relative=(), anchored=False)
        return _project(undated, said_on, reason)
    fact = sentence_case(third_person(text))
    return Candidate(
        type="user",
        slug=make_slug("user", significant_words(main)),
        name=clip(fact.rstrip("."), 60),
        description=clip(fact.rstrip("."), 110),
        fact=fact,
    )


def _sentence_cues(sentence: str, said_on: date) -> list[Candidate | Forget]:
    if len(sentence) > _MAX_SENTENCE or sentence.endswith("?") or contains_secret(sentence):
        return []
    text, corrected = _lead_in(sentence.rstrip(" .!;"))
    if not text:
        return []
    forget = _FORGET.match(text)
    if forget is not None:
        words = [w for w in significant_words(forget.group(1)) if w not in _FORGET_NOISE]
        return [Forget(subject=forget.group(1), words=tuple(words))] if words else []
    remember = _REMEMBER.match(text)
    if remember is None:
        return list(_classify(text, said_on, corrected))
    inner, _ = _lead_in(remember.group(1))
    if not significant_words(inner):
        return []
    if inner.lower().startswith("to "):
        return [_feedback(f"Remember {inner}", said_on, None, False)]
    return list(_classify(inner, said_on, False) or [_plain(inner, said_on)])


def find_cues(text: str, said_on: date) -> list[Candidate | Forget]:
    """The memories and forget requests in one message a person typed, in order.

    ``said_on`` is the day the message was written: relative dates are read from it.
    """
    cues: list[Candidate | Forget] = []
    for sentence in sentences(text):
        cues += _sentence_cues(sentence, said_on)
    return cues
