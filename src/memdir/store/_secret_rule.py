"""What a secret rule is, and the helpers the rule tables are written with.

Split from :mod:`memdir.store._secrets` so the provider table
(:mod:`memdir.store._secret_providers`) and the context rules
(:mod:`memdir.store._secret_context`) can both build on it without importing each other.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

# Rules that name a provider outrank structural ones (JWT, a name-scoped value), which
# outrank the generic "name = value" rules, when two matches overlap.
PROVIDER, STRUCTURAL, GENERIC = 2, 1, 0

Finder = Callable[[str], Iterable[tuple[int, int]]]
"""Yields the ``(start, end)`` of each credential in a text, for rules that need code."""


@functools.cache
def compile_ascii(pattern: str) -> re.Pattern[str]:
    """``re.compile`` with ``re.ASCII``, cached.

    ``re.ASCII`` keeps ``\\w`` and ``\\b`` to ``[A-Za-z0-9_]``: keys are ASCII, and a
    Unicode ``\\w`` would let a neighbouring accented letter hide the start of a key.
    """
    return re.compile(pattern, re.ASCII)


# Key material after a BEGIN line with no END: base64 lines, split by real newlines or
# by the escaped "\n" of a JSON string (as in a service-account key file).
BASE64_LINES = r"(?:(?:\\[nr]|\s)*+[A-Za-z0-9+/=]{16,}+)*+"


@dataclass(frozen=True, kw_only=True)
class SecretRule:
    """One kind of credential and how to recognise it.

    ``pattern`` is a regular expression (compiled with ``re.ASCII`` on first use). If it
    has a group named ``secret``, only that group is the credential; otherwise the whole
    match is. ``block_end``, when set, makes the match run on to the first match of that
    expression (used for multi-line key blocks). ``check``, when set, gets the secret
    text and can veto a match that the pattern alone cannot rule out. ``finder``, when
    set, replaces all of that: it gets the whole text and yields the spans itself (for
    rules that must look around a match, such as the name a value is assigned to; its
    ``pattern`` is then the expression it starts from, kept for reference). ``hints``,
    when set, are strings of which the text must hold one for the rule to run at all: a
    cheap first test for a pattern that has to be tried at every offset. Where matches
    of two rules overlap, the one with the higher ``specificity`` is the one reported.
    """

    id: str
    provider: str
    description: str
    pattern: str
    specificity: int = PROVIDER
    block_end: str | None = None
    check: Callable[[str], bool] | None = field(default=None, repr=False, compare=False)
    finder: Finder | None = field(default=None, repr=False, compare=False)
    hints: tuple[str, ...] = ()

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        """Yield the ``(start, end)`` of each credential this rule finds in ``text``."""
        if self.hints and not any(hint in text for hint in self.hints):
            return
        if self.finder is not None:
            yield from self.finder(text)
            return
        regex = compile_ascii(self.pattern)
        spans: Iterable[tuple[int, int]]
        if self.block_end is not None:
            spans = self._block_spans(text, regex, compile_ascii(self.block_end))
        elif "secret" in regex.groupindex:
            spans = (match.span("secret") for match in regex.finditer(text))
        else:
            spans = (match.span() for match in regex.finditer(text))
        for start, end in spans:
            if self.check is None or self.check(text[start:end]):
                yield start, end

    @staticmethod
    def _block_spans(
        text: str, begin: re.Pattern[str], end: re.Pattern[str]
    ) -> Iterator[tuple[int, int]]:
        # The end marker found for one block is reused for later begin markers, and a
        # failed search is never repeated, so many unterminated blocks stay linear.
        heads = list(begin.finditer(text))
        pending: re.Match[str] | None = None
        exhausted = False
        covered = 0
        for index, head in enumerate(heads):
            if head.start() < covered:
                continue
            if not exhausted and (pending is None or pending.start() < head.end()):
                pending = end.search(text, head.end())
                exhausted = pending is None
            following = heads[index + 1].start() if index + 1 < len(heads) else len(text)
            if pending is not None and pending.start() <= following:
                covered = pending.end()
            else:  # truncated block (no END before the next BEGIN): hide what key there is
                tail = compile_ascii(BASE64_LINES).match(text, head.end())
                covered = tail.end() if tail else head.end()
            yield head.start(), covered


# Masking runs in documentation ("ghp_xxxxxxxx…", "sk-****", "AKIA...") stand for a key
# without being one. Real keys drawn from 62 symbols hold "xxxx" about once in 10,000.
_MASK = r"(?i:x{4})|\*{3}|\.{3}|\u2026|\u2022"


def not_masked(value: str) -> bool:
    """Whether ``value`` has no masking run in it."""
    return compile_ascii(_MASK).search(value) is None


def _masked_or(check: Callable[[str], bool] | None) -> Callable[[str], bool]:
    if check is None:
        return not_masked
    return lambda value: not_masked(value) and check(value)


_LITERAL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


def _edged(pattern: str, edge: str) -> str:
    """``pattern`` with the edge checks of :func:`token_rule` around it."""
    # Checking the edge after a fixed prefix, not before it, lets the regex engine skip
    # ahead to that prefix instead of trying every offset. The prefix is the literal run
    # the pattern opens with, or else one character class that opens it unquantified.
    size = len(pattern) - len(pattern.lstrip(_LITERAL))
    if pattern[size : size + 1] in ("{", "*", "+", "?"):
        size -= 1  # that character is quantified, so not part of the fixed prefix
    if size == 0 and pattern.startswith("[") and "]" in pattern:
        closing = pattern.index("]", 2) + 1
        if pattern[closing : closing + 1] not in ("{", "*", "+", "?"):
            size = closing
    prefix = pattern[:size]
    lead = edge.replace("=", "")
    return (
        rf"{prefix}(?:(?<![{lead}]{prefix})|(?<=\\[nrt]{prefix}))"
        rf"{pattern[size:]}(?![{edge}])"
    )


def _alternatives_finder(patterns: tuple[str, ...], check: Callable[[str], bool]) -> Finder:
    """Search for each pattern on its own: one fast search per literal prefix costs far
    less than one alternation tried at every offset."""

    def find(text: str) -> Iterator[tuple[int, int]]:
        for pattern in patterns:
            regex = compile_ascii(pattern)
            group = "secret" if "secret" in regex.groupindex else 0
            for match in regex.finditer(text):
                start, end = match.span(group)
                if check(text[start:end]):
                    yield start, end

    return find


def token_rule(
    rule_id: str,
    provider: str,
    description: str,
    pattern: str | tuple[str, ...],
    *,
    edge: str | None = r"\w-",
    specificity: int = PROVIDER,
    check: Callable[[str], bool] | None = None,
    hints: tuple[str, ...] = (),
) -> SecretRule:
    """A token rule; ``edge`` is the token alphabet the match may not touch on either side.

    The edge check means a rule only starts where a run of token characters starts, so
    ``task_sk_live_demo`` is not a Stripe key, and a megabyte of near-misses is scanned
    once rather than once per offset. Two exceptions on the left: ``=`` is allowed before
    the token even where the alphabet has it (it only ever pads the end of base64, so in
    front it is an assignment: ``SENTRY_TOKEN=sntrys_…``), and so is the ``n`` of an
    escaped newline inside a JSON string (``"…\\nghp_…"``). Every token rule also skips a
    match with a masking run in it.

    A tuple of patterns is one format with several prefixes, each searched on its own.
    ``hints``, for a pattern with no fixed prefix, are strings of which the text must
    hold at least one before the pattern is tried at all.
    """
    alternatives = (pattern,) if isinstance(pattern, str) else pattern
    if edge is not None:
        alternatives = tuple(_edged(alternative, edge) for alternative in alternatives)
    full_check = _masked_or(check)
    return SecretRule(
        id=rule_id,
        provider=provider,
        description=description,
        pattern=alternatives[0] if len(alternatives) == 1 else "|".join(alternatives),
        specificity=specificity,
        check=full_check,
        finder=None if len(alternatives) == 1 else _alternatives_finder(alternatives, full_check),
        hints=hints,
    )
