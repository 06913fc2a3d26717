"""Other spellings of a text, each scanned as well as the text as written.

A credential can be written so that no rule sees it as written and yet anyone reading or
pasting it gets the key: a zero-width space or a soft hyphen inside it, a Cyrillic
``о`` for a Latin ``o``, full-width letters, the key wrapped over two lines or split into
two string literals, the whole credential base64-encoded. Claude Code scans normalised
variants of the text for the same reason. Each :class:`View` here is one such spelling
with a map back to the offsets of the original, so a finding in a view still names (and
:func:`redact` still removes) the characters the writer typed.

Views cost nothing on the common case: plain ASCII text has no normalised view, text
without a line break or a string joint has no joined view, and base64 runs are only
decoded when they are long enough and decode to text.
"""

from __future__ import annotations

import base64
import binascii
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from memdir.store._secret_rule import compile_ascii

__all__ = ["View", "base64_texts", "joined_view", "normalised_view"]


@dataclass(frozen=True)
class View:
    """A spelling of a text and, for each of its characters, the original's offset."""

    text: str
    origin: tuple[int, ...]
    """``origin[i]`` is where character ``i`` came from; one more entry for the end."""
    joints: frozenset[int] = frozenset()
    """Offsets in ``text`` where two pieces were joined (for :func:`joined_view`)."""

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original offsets of the view's ``text[start:end]``."""
        if end <= start:
            return self.origin[start], self.origin[start]
        return self.origin[start], self.origin[end - 1] + 1

    def crosses_joint(self, start: int, end: int) -> bool:
        return any(start < joint < end for joint in self.joints)


# Characters that render as nothing: zero-width space, non-joiner, joiner, word joiner,
# byte-order mark, soft hyphen, Mongolian vowel separator, invisible operators.
_INVISIBLE = frozenset(
    "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u2061\u2062\u2063\u2064\u034f\u115f\u1160"
)
# Letters of other scripts drawn like Latin ones (Unicode's confusables for the letters
# and digits keys are made of). NFKC already folds full-width and other compatibility forms.
_LOOKALIKES = str.maketrans(
    "АВЕЅІЈКМНОРСТХУавеѕіјкморсхуԁһԛԝѵ"  # Cyrillic
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοντυχικ"  # Greek
    "ꓲ",
    "ABESIJKMHOPCTXYabesijkmopcxydhqwv"
    "ABEZHIKMNOPTYXovtuxik"
    "I",
)


def normalised_view(text: str) -> View | None:
    """``text`` with invisible characters dropped, compatibility forms folded (NFKC),
    and look-alike letters folded to Latin inside words that also hold Latin letters or
    digits; ``None`` when that changes nothing (always for ASCII text).

    Look-alikes are folded only in mixed words, so that Russian or Greek prose is left as
    it is and cannot be read as random Latin letters.
    """
    if text.isascii():
        return None
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if char in _INVISIBLE:
            continue
        folded = char if char.isascii() else unicodedata.normalize("NFKC", char)
        for piece in folded:
            chars.append(piece)
            origin.append(index)
    origin.append(len(text))
    words = list(compile_ascii(r"\S+").finditer(normalised := "".join(chars)))
    if any(not word.group().isascii() for word in words):
        pieces = []
        cursor = 0
        for word in words:
            value = word.group()
            if not value.isascii() and compile_ascii(r"[A-Za-z0-9]").search(value):
                pieces += (normalised[cursor : word.start()], value.translate(_LOOKALIKES))
                cursor = word.end()
        pieces.append(normalised[cursor:])
        normalised = "".join(pieces)  # the translation keeps lengths, so origin still holds
    if normalised == text:
        return None
    return View(normalised, tuple(origin))


# A break inside a token: a line break with the indent or quote marker of the next line,
# or the end of one string literal and the start of the next ("abc" + "def", 'a' 'b').
_JOINT = (
    r"(?<=[\w+/=-])(?:[\"'`][ \t]*(?:\+|\.|&|\|\|)?[ \t]*(?:\\?\r?\n[ \t]*(?:\+[ \t]*)?)?[\"'`]"
    r"|\\?\r?\n[ \t]*(?:>[ \t]*)*)(?=[\w+/=-])"
)


def joined_view(text: str) -> View | None:
    """``text`` with each break inside a run of token characters removed, or ``None``."""
    if "\n" not in text and "'" not in text and '"' not in text and "`" not in text:
        return None
    chars: list[str] = []
    origin: list[int] = []
    joints: set[int] = set()
    cursor = 0
    for match in compile_ascii(_JOINT).finditer(text):
        chars.append(text[cursor : match.start()])
        origin.extend(range(cursor, match.start()))
        joints.add(len(origin))
        cursor = match.end()
    if not joints:
        return None
    chars.append(text[cursor:])
    origin.extend(range(cursor, len(text) + 1))
    return View("".join(chars), tuple(origin), frozenset(joints))


# Base64 long enough to hold a credential: 24 characters decode to 18 bytes.
_BASE64_RUN = r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=_-])"
_HEX = compile_ascii(r"[0-9a-fA-F]+")
_MAX_DECODED = 64 * 1024


def base64_texts(text: str) -> Iterator[tuple[int, int, str]]:
    """Each base64 run of ``text`` that decodes to readable text: its span and the text."""
    for match in compile_ascii(_BASE64_RUN).finditer(text):
        run = match.group()
        if len(run) % 4 or len(run) > _MAX_DECODED or _HEX.fullmatch(run):
            continue  # hex digests and ids are base64's alphabet but never base64 text
        try:
            decoded = base64.b64decode(run, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in decoded)
        if printable == len(decoded):
            yield match.start(), match.end(), decoded
