"""Other spellings of a text, each scanned as well as the text as written.

A credential can be written so that no rule sees it as written and yet anyone reading or
pasting it gets the key: a zero-width space or a soft hyphen inside it, a Cyrillic
``o`` for a Latin one, full-width letters, the key wrapped over two lines or split into
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
import bisect
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from memdir.store._secret_rule import compile_ascii

__all__ = ["View", "base64_texts", "joined_view", "normalised_view"]


@dataclass(frozen=True)
class View:
    """A spelling of a text, with the way back to the original's offsets.

    The view is cut into pieces that each map to the original one character for one:
    piece ``k`` starts at ``starts[k]`` in the view and at ``origins[k]`` in the original.
    """

    text: str
    starts: tuple[int, ...]
    origins: tuple[int, ...]
    joints: tuple[int, ...] = ()
    """Sorted offsets in ``text`` where two pieces were joined (for :func:`joined_view`)."""

    def at(self, offset: int) -> int:
        """The original offset of the view's character at ``offset``."""
        piece = bisect.bisect_right(self.starts, offset) - 1
        return self.origins[piece] + offset - self.starts[piece]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original offsets of the view's ``text[start:end]``."""
        if end <= start:
            return self.at(start), self.at(start)
        return self.at(start), self.at(end - 1) + 1

    def crosses_joint(self, start: int, end: int) -> bool:
        first = bisect.bisect_right(self.joints, start)
        return first < len(self.joints) and self.joints[first] < end


# Characters that render as nothing: zero-width space, non-joiner, joiner, word joiner,
# byte-order mark, soft hyphen, Mongolian vowel separator, invisible operators.
_INVISIBLE = frozenset(
    "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u2061\u2062\u2063\u2064\u034f\u115f\u1160"
)
# Letters of other scripts drawn like Latin ones (Unicode's confusables for the letters
# and digits keys are made of). NFKC already folds full-width and other compatibility forms.
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic capitals and small letters
        "\u0410": "A",
        "\u0412": "B",
        "\u0415": "E",
        "\u0405": "S",
        "\u0406": "I",
        "\u0408": "J",
        "\u041a": "K",
        "\u041c": "M",
        "\u041d": "H",
        "\u041e": "O",
        "\u0420": "P",
        "\u0421": "C",
        "\u0422": "T",
        "\u0425": "X",
        "\u0423": "Y",
        "\u0430": "a",
        "\u0435": "e",
        "\u0455": "s",
        "\u0456": "i",
        "\u0458": "j",
        "\u043e": "o",
        "\u0440": "p",
        "\u0441": "c",
        "\u0445": "x",
        "\u0443": "y",
        "\u0501": "d",
        "\u04bb": "h",
        "\u051b": "q",
        "\u051d": "w",
        "\u0475": "v",
        # Greek capitals and small letters
        "\u0391": "A",
        "\u0392": "B",
        "\u0395": "E",
        "\u0396": "Z",
        "\u0397": "H",
        "\u0399": "I",
        "\u039a": "K",
        "\u039c": "M",
        "\u039d": "N",
        "\u039f": "O",
        "\u03a1": "P",
        "\u03a4": "T",
        "\u03a5": "Y",
        "\u03a7": "X",
        "\u03bf": "o",
        "\u03bd": "v",
        "\u03c4": "t",
        "\u03c5": "u",
        "\u03c7": "x",
        "\u03b9": "i",
        "\u03ba": "k",
        # Lisu capital I
        "\ua4f2": "I",
    }
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
    starts: list[int] = []
    origins: list[int] = []
    size = 0
    cursor = 0  # the start of the pending stretch of ASCII, copied as one piece
    for index, char in enumerate(text):
        if char.isascii():
            continue
        if cursor < index:
            starts.append(size)
            origins.append(cursor)
            chars.append(text[cursor:index])
            size += index - cursor
        cursor = index + 1
        if char in _INVISIBLE:
            continue
        for piece in unicodedata.normalize("NFKC", char):
            starts.append(size)
            origins.append(index)
            chars.append(piece)
            size += 1
    if cursor < len(text):
        starts.append(size)
        origins.append(cursor)
        chars.append(text[cursor:])
    if not starts:
        starts, origins = [0], [len(text)]
    normalised = "".join(chars)
    words = list(compile_ascii(r"\S+").finditer(normalised))
    if any(not word.group().isascii() for word in words):
        pieces: list[str] = []
        position = 0
        for word in words:
            value = word.group()
            if not value.isascii() and compile_ascii(r"[A-Za-z0-9]").search(value):
                pieces += (normalised[position : word.start()], value.translate(_LOOKALIKES))
                position = word.end()
        pieces.append(normalised[position:])
        normalised = "".join(pieces)  # the translation keeps lengths: the pieces still hold
    if normalised == text:
        return None
    return View(normalised, tuple(starts), tuple(origins))


# A break inside a token: a line break (with the quote markers of the next line, but no
# indent: a wrapped key starts its next line at the margin), or the end of one string
# literal and the start of the next ("abc" + "def", 'a' 'b').
_JOINT = (
    r"(?=[\"'`\\\r\n])(?<=[\w+/=-])"
    r"(?:[\"'`][ \t]*(?:\+|\.|&|\|\|)?[ \t]*(?:\\?\r?\n[ \t]*(?:\+[ \t]*)?)?[\"'`]"
    r"|\\?\r?\n(?:[ \t]*>[ \t]*)*)(?=[\w+/=-])"
)


_TOKEN_RUN = r"[\w+/=.~:$-]+"
# A word as prose has it: a break next to one is the end of a line of text, not a cut key.
_PLAIN_WORD = compile_ascii(r"[A-Za-z]?[a-z]{0,15}[.,:;]?|\d{1,6}")


def joined_view(text: str) -> View | None:
    """The runs of token characters that a break cuts in two, each joined up again, one
    run a line; ``None`` when ``text`` has no such break.

    Only the runs are kept, not the whole text joined: a token rule matches a whole run
    of token characters anyway, and scanning the runs costs far less than scanning the
    text a second time.
    """
    if "\n" not in text and "'" not in text and '"' not in text and "`" not in text:
        return None
    chars: list[str] = []
    starts: list[int] = [0]
    origins: list[int] = [0]
    joints: list[int] = []
    size = 0
    cursor = 0
    for match in compile_ascii(_JOINT).finditer(text):
        chars.append(text[cursor : match.start()])
        size += match.start() - cursor
        joints.append(size)
        starts.append(size)
        origins.append(match.end())
        cursor = match.end()
    if not joints:
        return None
    chars.append(text[cursor:])
    joined = View("".join(chars), tuple(starts), tuple(origins))
    runs: list[str] = []
    run_starts: list[int] = []
    run_origins: list[int] = []
    run_joints: list[int] = []
    size = 0
    token_run = compile_ascii(_TOKEN_RUN)
    backwards = joined.text[::-1]  # a run's start is found as the end of its reverse
    index = 0
    while index < len(joints):
        joint = joints[index]
        before = token_run.match(backwards, len(joined.text) - joint)
        start = joint - (before.end() - before.start() if before else 0)
        after = token_run.match(joined.text, joint)
        end = after.end() if after else joint
        last = bisect.bisect_left(joints, end, index)
        inner = joints[index:last] if last > index else [joint]
        index = max(last, index + 1)
        # The whole run, and where it holds several breaks, each two pieces around one
        # break on their own: a wrapped key followed by a wrapped word is still found.
        # A break with a plain word on either side (the end of a sentence, the start of
        # the next) is not inside a token.
        bounds = (start, *inner, end)
        kept = [
            i
            for i in range(1, len(bounds) - 1)
            if _PLAIN_WORD.fullmatch(joined.text, bounds[i - 1], bounds[i]) is None
            and _PLAIN_WORD.fullmatch(joined.text, bounds[i], bounds[i + 1]) is None
        ]
        if not kept:
            continue
        windows = [(start, end)]
        if len(inner) > 1:
            windows += [(bounds[i - 1], bounds[i + 1]) for i in kept]
        for first, stop in windows:
            cut = inner[bisect.bisect_right(inner, first) : bisect.bisect_left(inner, stop)]
            for offset in (first, *cut):
                run_starts.append(size + offset - first)
                run_origins.append(joined.at(offset))
            run_joints += (size + piece - first for piece in cut)
            runs.append(joined.text[first:stop])
            size += stop - first + 1  # and the line break after the run
    if not runs:
        return None
    return View("\n".join(runs), tuple(run_starts), tuple(run_origins), tuple(run_joints))


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
