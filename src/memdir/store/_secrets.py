"""Finding credentials in text, so that memdir never writes one to disk.

Memories are plain Markdown files that outlive the conversation they came from, get
synced, committed and pasted elsewhere. An API key that slips into one is a leaked key.
So memdir refuses to write a memory file in which :func:`contains_secret` finds anything,
and where text is kept for other purposes (logs, transcripts shown back to the model) it
passes through :func:`redact` first.

The rules are deliberately high-confidence, and of two kinds. Provider rules
(:mod:`memdir.store._secret_providers`) know a token by its own shape: a fixed prefix, a
length, an alphabet, a checksum-like marker. Context rules
(:mod:`memdir.store._secret_context`) know a value by where it stands: after a name that
says "secret" in any common syntax (env files, YAML, INI, JSON, XML, Makefiles, code,
command-line flags), in a URL's ``user:password@``, in ``curl -u`` or an
``Authorization`` header, in a Kubernetes Secret's ``data``. They are chosen so that
ordinary prose, hashes, UUIDs, references such as ``${{ secrets.X }}`` and masked
placeholders are not flagged; a scanner that cries wolf gets switched off. Every regular
expression is linear-time (no nested quantifiers over overlapping alphabets) and each
token rule is anchored on the start of a run of token characters, so adversarial input
cannot make scanning quadratic. Findings carry only offsets, never the matched text.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

from memdir.store._secret_context import CONTEXT_RULES
from memdir.store._secret_providers import PROVIDER_RULES
from memdir.store._secret_rule import SecretRule

__all__ = [
    "SECRET_RULES",
    "SecretFinding",
    "SecretRule",
    "contains_secret",
    "redact",
    "scan_secrets",
]


@dataclass(frozen=True, kw_only=True)
class SecretFinding:
    """Where a credential was found: the rule that matched and the offsets in the text.

    The matched text itself is never kept, so logging a finding cannot leak it.
    """

    rule_id: str
    provider: str
    start: int
    end: int


SECRET_RULES: tuple[SecretRule, ...] = PROVIDER_RULES + CONTEXT_RULES
"""Every rule :func:`scan_secrets` applies, provider rules first."""


def _candidates(text: str) -> Iterator[tuple[int, int, int, SecretRule]]:
    """Every raw match of every rule, overlapping ones included, with the rule's index."""
    for index, rule in enumerate(SECRET_RULES):
        for start, end in rule._spans(text):
            yield start, end, index, rule


def scan_secrets(text: str) -> list[SecretFinding]:
    """Find every credential in ``text``, ordered by position.

    Where matches of different rules overlap, only the most specific survives (provider
    rules over JWT and name-scoped rules, those over generic ones; then the longer match;
    then the earlier rule), so each stretch of text is reported once.
    """
    ranked = sorted(_candidates(text), key=lambda c: (-c[3].specificity, c[0] - c[1], c[2]))
    starts: list[int] = []
    kept: list[tuple[int, int, SecretRule]] = []
    for start, end, _, rule in ranked:
        slot = bisect.bisect_right(starts, start)
        # Kept spans never overlap, so only the neighbours on either side can collide.
        if slot > 0 and kept[slot - 1][1] > start:
            continue
        if slot < len(kept) and kept[slot][0] < end:
            continue
        starts.insert(slot, start)
        kept.insert(slot, (start, end, rule))
    return [SecretFinding(rule_id=r.id, provider=r.provider, start=s, end=e) for s, e, r in kept]


def contains_secret(text: str) -> bool:
    """Whether ``text`` holds any credential; stops at the first one found."""
    return any(True for _ in _candidates(text))


def redact(text: str, replacement: str = "[REDACTED]") -> str:
    """Return ``text`` with each credential replaced by ``replacement``.

    Only the secret itself is replaced (for ``api_key = "..."`` just the value inside the
    quotes); every other character is kept as it was. Overlapping matches are merged
    first, so no fragment survives where the matches of two rules only partly overlap.
    """
    spans = sorted((start, end) for start, end, _, _ in _candidates(text))
    if not spans:
        return text
    parts: list[str] = []
    cursor = 0
    merged_start, merged_end = spans[0]
    for start, end in [*spans[1:], (len(text) + 1, len(text) + 1)]:
        if start < merged_end:
            merged_end = max(merged_end, end)
            continue
        parts += (text[cursor:merged_start], replacement)
        cursor = merged_end
        merged_start, merged_end = start, end
    parts.append(text[cursor:])
    return "".join(parts)
