"""Finding credentials in text, so that memdir never writes one to disk.

Memories are plain Markdown files that outlive the conversation they came from, get
synced, committed and pasted elsewhere. An API key that slips into one is a leaked key.
So memdir refuses to write a memory file in which :func:`contains_secret` finds anything,
and where text is kept for other purposes (logs, transcripts shown back to the model) it
passes through :func:`redact` first.

The rules are deliberately high-confidence, and of three kinds. Provider rules
(:mod:`memdir.store._secret_providers`) know a token by its own shape: a fixed prefix, a
length, an alphabet, a checksum-like marker. Context rules
(:mod:`memdir.store._secret_context`) know a value by where it stands: after a name that
says "secret" in any common syntax (env files, YAML, INI, JSON, XML, Makefiles, code,
command-line flags), in a URL's ``user:password@``, in ``curl -u`` or an
``Authorization`` header, in a Kubernetes Secret's ``data``. They are chosen so that
ordinary prose, hashes, UUIDs, references such as ``${{ secrets.X }}`` and masked
placeholders are not flagged; a scanner that cries wolf gets switched off. Format rules
(:mod:`memdir.store._secret_formats`) read the spellings those two miss: a URL password
with any character in it, a password said in a sentence, an Azure SAS signature, a bare
AWS secret key, Oracle's ``user/password@db``, PuTTY, ``.pgpass``, ``ldapsearch -w``,
``htpasswd`` and Twilio's token by position. And every text is also read in its other
spellings (:mod:`memdir.store._secret_variants`): normalised (NFKC, invisible characters
dropped, look-alike letters folded), with keys split over lines or string literals joined
up, and with base64 decoded. Every regular expression is linear-time (no nested
quantifiers over overlapping alphabets) and each token rule is anchored on the start of a
run of token characters, so adversarial input cannot make scanning quadratic. Findings
carry only offsets, never the matched text.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

from memdir.store._secret_context import CONTEXT_RULES, ValueKind, plausible_value
from memdir.store._secret_formats import FORMAT_RULES
from memdir.store._secret_providers import PROVIDER_RULES
from memdir.store._secret_rule import PROVIDER, STRUCTURAL, SecretRule, compile_ascii
from memdir.store._secret_variants import base64_texts, joined_view, normalised_view

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


_PLAIN_RULES: tuple[SecretRule, ...] = PROVIDER_RULES + CONTEXT_RULES + FORMAT_RULES
# A token split over lines or string literals is only looked for by its own shape: a
# name-scoped rule run over joined lines would read one line's name with the next's text.
_JOINABLE_RULES = tuple(rule for rule in _PLAIN_RULES if rule.specificity == PROVIDER)
_PAIR = compile_ascii(r"[\w.@+-]{1,64}:(?P<password>[^\s:]{6,128})")


def _wrapped_spans(text: str) -> Iterator[tuple[int, int]]:
    """Base64 runs whose decoded text holds a credential, or is a ``user:password`` pair
    (as Basic auth and Docker's config keep them).

    The decoded texts are scanned together, one per line block, so that many short runs
    cost one scan rather than one each.
    """
    runs: list[tuple[int, int, int]] = []  # (start, end) in text, end in the joined text
    pieces: list[str] = []
    size = 0
    for start, end, decoded in base64_texts(text):
        pair = _PAIR.fullmatch(decoded.strip())
        if pair is not None and plausible_value(pair.group("password"), ValueKind.PASSWORD):
            yield start, end
            continue
        pieces.append(decoded)
        size += len(decoded) + 2
        runs.append((start, end, size))
    if not runs:
        return
    ends = [joined_end for _, _, joined_end in runs]
    reported: set[int] = set()
    for found, _, _ in _raw("\n\n".join(pieces), _PLAIN_RULES):
        index = bisect.bisect_right(ends, found)
        if index < len(runs) and index not in reported:
            reported.add(index)
            yield runs[index][0], runs[index][1]


BASE64_RULE = SecretRule(
    id="base64-wrapped-credential",
    provider="Generic",
    description="Base64 whose decoded text holds a credential",
    pattern=r"[A-Za-z0-9+/]{24,}={0,2}",
    specificity=STRUCTURAL,
    finder=_wrapped_spans,
)

SECRET_RULES: tuple[SecretRule, ...] = (*_PLAIN_RULES, BASE64_RULE)
"""Every rule :func:`scan_secrets` applies, provider rules first."""
_ORDER = {rule.id: index for index, rule in enumerate(SECRET_RULES)}


def _raw(text: str, rules: tuple[SecretRule, ...]) -> Iterator[tuple[int, int, SecretRule]]:
    for rule in rules:
        for start, end in rule._spans(text):
            yield start, end, rule


def _candidates(text: str) -> Iterator[tuple[int, int, int, SecretRule]]:
    """Every raw match of every rule, overlapping ones included, with the rule's index:
    in the text as written, then in its normalised and its joined spellings (mapped back
    to the original's offsets)."""
    for start, end, rule in _raw(text, SECRET_RULES):
        yield start, end, _ORDER[rule.id], rule
    normalised = normalised_view(text)
    if normalised is not None:
        for start, end, rule in _raw(normalised.text, SECRET_RULES):
            yield *normalised.span(start, end), _ORDER[rule.id], rule
    joined = joined_view(normalised.text if normalised is not None else text)
    if joined is not None:
        for start, end, rule in _raw(joined.text, _JOINABLE_RULES):
            if joined.crosses_joint(start, end):
                first, last = joined.span(start, end)
                if normalised is not None:
                    first, last = normalised.span(first, last)
                yield first, last, _ORDER[rule.id], rule


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
