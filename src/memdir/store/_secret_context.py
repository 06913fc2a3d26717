"""Credentials known by where they stand rather than by their own shape.

A value right after a secret-sounding name (``DB_PASSWORD=…``, ``apiKey: "…"``,
``<authToken>…</authToken>``), the password in a URL's user part or a ``curl -u``, an
``Authorization`` header, the ``data:`` of a Kubernetes Secret. The name or the place
says "secret"; what is left is telling a real value from everything else that gets
assigned to such names: references (``${TOKEN}``, ``os.environ["KEY"]``), placeholders
and masks, identifiers (``"X-Auth-Token"``), paths, numbers. :func:`plausible_value` is
that test.

Every finder starts from one linear regular expression (possessive quantifiers where two
runs of blanks meet, no quantified group over an alphabet it overlaps) and then looks at
a bounded stretch around each match, so scanning stays linear in the text.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from enum import Enum

from memdir.store._secret_rule import (
    GENERIC,
    STRUCTURAL,
    Finder,
    SecretRule,
    compile_ascii,
    not_masked,
)

__all__ = ["CONTEXT_RULES", "ValueKind", "looks_like_name", "plausible_value"]


class ValueKind(Enum):
    """How much a name vouches for the value after it."""

    PASSWORD = "password"
    """A password or secret: people choose these, so ``Summer2024`` counts."""
    TOKEN = "token"
    """A token or key: issued, random; a word with a number in it is a name."""
    WEAK = "weak"
    """A name that is only sometimes secret (``*_key``, ``*_login``, ``auth``): the value
    has to look random (letters and digits, 12 or more)."""


# ---------------------------------------------------------------------------------------
# Telling a value from a name, a reference or a placeholder

_PIECE_SPLIT = r"[-_.+:/ ]+"
# One "word" of an identifier: letters, optionally with a short number (utf8, ed25519,
# v2), or a short number with a unit (8B, 4k).
_WORD_PIECE = r"[A-Za-z]+\d{0,5}|\d{1,4}[A-Za-z]{0,2}"
_CAMEL_WORD = r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+"
_VOWELS = frozenset("aeiouyAEIOUY")


def _reads_as_words(letters: str) -> bool:
    """Whether a run of letters splits into word-sized camelCase parts that could be read.

    ``TestSourcePassword`` and ``XMLHttpRequest`` do; ``yqDVtkqPECriaLRi`` (seven parts
    in sixteen letters), ``ZNclFzUpqmnDfoCheb`` (the case flips at every other letter,
    where camelCase flips about once a word) and ``qzkxjvbwpmrtlnhg`` (no vowels) do not.
    """
    words = compile_ascii(_CAMEL_WORD).findall(letters)
    if len(words) > 2 and len(letters) < 3 * len(words):
        return False
    if len(letters) >= 12 and not letters.isupper() and not letters.islower():
        flips = sum(a.isupper() != b.isupper() for a, b in itertools.pairwise(letters))
        if flips >= 0.4 * (len(letters) - 1):
            return False
    for word in words:
        if len(word) < 12:
            continue
        vowels = sum(ch in _VOWELS for ch in word)
        run = longest = 0
        for ch in word:
            run = 0 if ch in _VOWELS else run + 1
            longest = max(longest, run)
        if vowels < 0.22 * len(word) or longest >= 5:
            return False
    return True


def looks_like_name(value: str, *, digits_in_words: bool = True) -> bool:
    """Whether ``value`` reads as an identifier or words (``FORCE_CHANGE_PASSWORD``,
    ``settings.SLACK_TOKEN``, ``new-checkout-2024``) rather than something random.

    With ``digits_in_words`` off, any digit makes it not a name: a person's password
    (``Summer2024``, ``thisIsDog11``) is letters and a number.
    """
    for piece in compile_ascii(_PIECE_SPLIT).split(value):
        if not piece:
            continue
        if piece.isdigit():
            if len(piece) > 4:
                return False
            continue
        if not digits_in_words and not piece.isalpha():
            return False
        if compile_ascii(_WORD_PIECE).fullmatch(piece) is None:
            return False
        letters = piece.strip("0123456789")
        if not _reads_as_words(letters):
            return False
    return True


_REFERENCE = (
    # $VAR ${VAR} $(cmd) %VAR% #{ruby} {{template}} <placeholder> [PAD] !Ref @Attribute
    r"^(?:\$|%|#\{|\{\{|<|\[|!|@[A-Za-z_])"
    # a template expression or format field inside the value: ${HOME}, {{ x }}, {name}
    r"|\$\{[\w.:-]*\}|\{\{[^{}]*\}\}|(?<!\{)\{[A-Za-z_][\w.]*\}(?!\})"
    # a call or an index: os.environ[...], getenv(...), secrets.token_hex(...), ENC[...]
    r"|^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*[(\[]"
)
_STOCK = (
    r"(?i)change[_-]?me|placeholder|example|your|redacted|dummy|replace|insert"
    r"|^(?:password|passwd|pass|pwd|secret|token|admin|root|guest|test|user|username"
    r"|mypassword|foobar|none|null|nil|undefined|required|optional|hidden|masked)$"
)
_SEMVER = r"v?\d+(?:\.\d+)+(?:[-+][\w.+-]*)?"
_EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"


def _is_reference(value: str) -> bool:
    if compile_ascii(_REFERENCE).search(value) is not None:
        return True
    # "{password}" is a format placeholder; "{ZqL5kVrX1n8tA2}" is a value in braces.
    inner = compile_ascii(r"\{([\w.-]*)\}").fullmatch(value)
    return inner is not None and looks_like_name(inner.group(1))


def _is_stock(value: str) -> bool:
    return compile_ascii(_STOCK).search(value) is not None


def _is_path_or_url(value: str) -> bool:
    """``/run/secrets/db``, ``./pw.txt``, ``~/.ssh/id_rsa``, ``uploads/2024/a.png``, a URL.

    Base64 has slashes too, but its pieces between them do not read as names.
    """
    if "://" in value or compile_ascii(r"[A-Za-z]:\\").match(value):
        return True
    if "/" not in value:
        return False
    pieces = [piece for piece in value.lstrip("~").split("/") if piece]
    return bool(pieces) and all(looks_like_name(piece) for piece in pieces)


def plausible_value(value: str, kind: ValueKind) -> bool:
    """Whether ``value``, standing after a name of this ``kind``, could be the secret.

    Refused: references to where a secret is kept, placeholders and masks, paths and URLs,
    e-mail addresses, numbers, dates and versions (unless 16+ digits: an id or key made of
    digits), identifiers and words, and filler with fewer than four distinct characters.
    """
    size = len(value)
    if size < (12 if kind is ValueKind.WEAK else 8) or len(set(value)) < 4:
        return False
    # "(hidden)", "[masked]": a stock word in brackets is still a stock word.
    if _is_reference(value) or not not_masked(value) or _is_stock(value.strip("()[]")):
        return False
    if _is_path_or_url(value) or compile_ascii(_EMAIL).fullmatch(value):
        return False
    has_digit = any(ch.isdigit() for ch in value)
    if not any(ch.isalpha() for ch in value):
        return value.isdigit() and size >= 16
    if compile_ascii(_SEMVER).fullmatch(value):
        return False
    if kind is ValueKind.WEAK and not has_digit:
        return False
    return not looks_like_name(value, digits_in_words=kind is not ValueKind.PASSWORD)


def plausible_password(password: str, user: str = "") -> bool:
    """The looser test for a password in a credential slot (``user:password@host``,
    ``curl -u``, ``.netrc``), where the place already says it is one: any non-trivial
    value counts, ``deadbeef`` included, but not a stock word, a reference, a mask, an
    all-caps placeholder (``PASSWORD``), a short number, or the user name repeated
    (``postgres:postgres``)."""
    password = password.rstrip(".,;:)]}")  # the end of a sentence or call, not the value
    if len(password) < 6 or password == user or len(set(password)) < 3:
        return False
    if _is_reference(password) or not not_masked(password) or _is_stock(password):
        return False
    if password.isdigit() and len(password) <= 8:
        return False
    return compile_ascii(r"[A-Z_]+").fullmatch(password) is None


# ---------------------------------------------------------------------------------------
# Names that say "secret"

# The last word of an identifier, where it says what the value is. ``key``, ``pass``,
# ``pw(d)``, ``auth`` and ``login`` only count as a word of their own (db_pass, dbPass,
# SNYK_KEY), never inside another one (compass, monkey, oauth).
_SECRET_WORD = (
    r"(?=[AaCcKkLlPpSsTt])(?P<word>(?i:(?:api|access|secret|private)[_.-]?key|secrete?|passw(?:or)?d|passphrase|pass"
    r"|pwd|pw|token|credentials?|auth|key|login|access[_.-]?id))\d*(?![\w-])"
)
_NEEDS_BOUNDARY = frozenset({"key", "pass", "pwd", "pw", "auth", "login"})
_NEEDS_PREFIX = frozenset({"key", "login"})
_PASSWORD_WORDS = frozenset({"password", "passwd", "passphrase", "pass", "pwd", "pw"})
# Tokens that are not credentials: pagination and concurrency tokens (NextToken,
# page_token, LockToken) that API output is full of, and a tokenizer's special tokens.
_NOT_SECRET_TOKENS = frozenset(
    {"next", "page", "pagination", "continuation", "lock", "change", "sync", "resume"}
    | {"cursor", "eos", "bos", "pad", "unk", "sep", "cls", "mask"}
)
# Keys that are not credentials: database and cache keys, public halves, UI shortcuts.
_NOT_SECRET_KEYS = frozenset(
    {"primary", "foreign", "sort", "partition", "range", "hash", "cache", "public"}
    | {"publishable", "pub", "site", "idempotency", "dedup", "dedupe", "object", "s3"}
    | {"row", "lookup", "map", "hot", "shortcut", "translation", "i18n", "unique"}
    | {"composite", "routing", "group", "message", "ssh", "gpg", "pgp", "shard", "index"}
)
# A key whose name says what kind it is, and that kind is secret.
_SECRET_KEY_KINDS = frozenset(
    {"secret", "private", "api", "access", "master", "encryption", "signing", "auth"}
    | {"client", "app", "account", "license", "service", "subscription", "shared"}
    | {"session", "jwt", "hmac", "crypt", "cipher", "consumer", "admin", "write"}
)
_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.$-")


def _last_word(prefix: str) -> str:
    """The last camelCase or snake_case word of an identifier's start, lower-cased."""
    words = compile_ascii(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+").findall(prefix)
    return words[-1].lower() if words else ""


def name_kind(prefix: str, word: str) -> ValueKind | None:
    """What a name made of ``prefix`` + ``word`` (its last word) vouches for, if anything."""
    lower = compile_ascii(r"[_.-]").sub("", word.lower())
    before = prefix[-1:] if prefix else ""
    if lower in _NEEDS_BOUNDARY:
        camel = word[0].isupper() and (before.islower() or before.isdigit())
        if not (before in ("_", ".", "-", "$") or camel or not prefix):
            return None
        if lower in _NEEDS_PREFIX and not prefix.strip("_.-$"):
            return None
    last = _last_word(prefix)
    if lower == "token" and last in _NOT_SECRET_TOKENS:
        return None
    if lower == "key":
        if last in _NOT_SECRET_KEYS:
            return None
        return ValueKind.TOKEN if last in _SECRET_KEY_KINDS else ValueKind.WEAK
    if lower in ("login", "auth"):
        return ValueKind.WEAK
    if lower in _PASSWORD_WORDS or lower.startswith("secret"):
        return ValueKind.PASSWORD
    return ValueKind.TOKEN


_WORD_AT_END = compile_ascii(_SECRET_WORD + r"\Z")


def identifier_kind(name: str) -> ValueKind | None:
    """:func:`name_kind` for a whole identifier (an XML tag, a ``name:`` field)."""
    found = _WORD_AT_END.search(name.strip("\"'"))
    if found is None:
        return None
    return name_kind(name[: found.start("word")], found.group("word"))


def _identifier_start(text: str, end: int) -> int:
    """Where the identifier ending at ``end`` starts (looking back at most 64 characters)."""
    start = end
    while start > 0 and end - start < 64 and text[start - 1] in _IDENT_CHARS:
        start -= 1
    return start


# ---------------------------------------------------------------------------------------
# A value assigned to a secret-sounding name, in any common syntax

_ASSIGNMENT = (
    _SECRET_WORD
    # the end of a quoted name or of an index: "api_key": / ENV['TOKEN'] / secret[25]
    + r"(?P<nq>\\?[\"'`])?\]?(?:\[\d*\])?\*{0,2}"
    # a declared type: Go's `var token string = "…"`, `token: str = "…"`, `KEY: &str = "…"`
    + r"(?:[ \t]*:[ \t]*&?(?:'static[ \t]+)?(?:str|string|String|bytes)(?=[ \t]*=[^=>])"
    + r"|[ \t]+(?:string|String)(?=[ \t]*=[^=>]))?"
    # the operator: = : := ::= :::= ?= .= += |= => == === != !== or a comma after a quoted
    # name (setProperty("X_TOKEN", "…")); none at all before a quoted value or after a flag
    + r"(?P<gap>[ \t]*+)(?:(?P<sep>:{1,3}=|[?.+|]=|=>|!==?|===?|=|:|,)|(?<=[ \t]))"
    + r"[ \t]*+\*{0,2}[ \t]*+"
    + r"(?P<open>@?[bBrRuU]{0,2}\\?[\"'`])?(?P<value>[^\s\"'`\\]+)"
)
_LINE_KEYWORD = r"(?:^|\n)[ \t]*(?:ENV|setenv|set[ \t]+-[a-zA-Z]+)[ \t]+\Z"
_UNBALANCED = {")": "(", "]": "[", "}": "{", ">": "<"}


def _trim_unquoted(value: str) -> str:
    """An unquoted value ends at a list or query separator, before a full stop or colon
    that ends it, and before a closing bracket the value did not open (``f(key=abc1)``)."""
    value = compile_ascii(r"[,;&]").split(value, 1)[0]
    while value:
        last = value[-1]
        if last in ".:" or (
            last in _UNBALANCED and value.count(_UNBALANCED[last]) < value.count(last)
        ):
            value = value[:-1]  # the end of a sentence, or of a call around the value
        else:
            break
    return value


def _inside_path(text: str, start: int) -> bool:
    """Whether the name starting at ``start`` is a segment of a path or resource name
    (``arn:…:secret:prod/db``, ``a/token:x``) rather than a key. PowerShell's
    ``$env:API_TOKEN`` and ``.npmrc``'s ``//host/:_authToken`` are keys."""
    joint, before = text[start - 1 : start], text[start - 2 : start - 1]
    if joint not in (":", "/") or not before.isalnum():
        return False
    return not text.endswith("$env:", 0, start)


# How long a refused value may be and still be searched again for a name inside it.
_RESCAN = 256


def _assignment_spans(text: str) -> Iterator[tuple[int, int]]:
    regex = compile_ascii(_ASSIGNMENT)
    position = 0
    while (match := regex.search(text, position)) is not None:
        position = match.end()
        span = _assigned_value(text, match)
        if span is not None:
            yield span
        elif match.end("value") - match.start("value") <= _RESCAN:
            # The value may itself hold the name of the next assignment (`secret
            # token=…`); look at it again, but only when short, so scanning stays linear.
            position = match.start("value")


def _assigned_value(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """The span of the value ``match`` assigns, if the name and the value bear it out."""
    word_start = match.start("word")
    start = _identifier_start(text, word_start)
    prefix = text[start:word_start]
    if _inside_path(text, start):
        return None
    kind = name_kind(prefix.lstrip("-"), match.group("word"))
    if kind is None:
        return None
    sep, opening = match.group("sep"), match.group("open")
    if sep is None:
        # Only a blank between name and value: a quoted value (`password "…"`), a
        # command-line flag (`--api-token …`) or a Dockerfile/csh line (`ENV TOKEN …`).
        line = text[max(0, start - 64) : start]
        keyword = compile_ascii(_LINE_KEYWORD).search(line) is not None
        if not (opening or prefix.startswith("--") or keyword):
            return None
    elif sep == ",":
        # A comma separates a name from its value only as two string arguments:
        # setProperty("API_TOKEN", "…"), define('DB_PASSWORD', '…').
        quote = match.group("nq")
        if not (quote and opening and text[start - 1 : start] == quote[-1]):
            return None
    value_start, value_end = match.span("value")
    if opening:
        if not text.startswith(opening.lstrip("@bBrRuU"), value_end):
            return None
        value = match.group("value")
    else:
        value = _trim_unquoted(match.group("value"))
        value_end = value_start + len(value)
    return (value_start, value_end) if plausible_value(value, kind) else None


# The same with the value first: `if ("…" == password)`.
_COMPARED = r"(?P<q>[\"'`])(?P<value>[^\s\"'`\\]+)(?P=q)[ \t]*[!=]==?[ \t]*(?P<name>[\w.$-]{1,80})"


def _compared_spans(text: str) -> Iterator[tuple[int, int]]:
    if "==" not in text and "!=" not in text:
        return
    for match in compile_ascii(_COMPARED).finditer(text):
        kind = identifier_kind(match.group("name"))
        if kind is not None and plausible_value(match.group("value"), kind):
            yield match.span("value")


# An XML element named like a secret: <password>…</password>, <apiToken>…</apiToken>.
_ELEMENT = r"<(?P<tag>[A-Za-z_][\w.:-]{0,80})>[ \t\r\n]*+(?P<value>[^<>\s]+)[ \t\r\n]*+</(?P=tag)>"


def _element_spans(text: str) -> Iterator[tuple[int, int]]:
    if "</" not in text:
        return
    for match in compile_ascii(_ELEMENT).finditer(text):
        kind = identifier_kind(match.group("tag").rpartition(":")[2])
        if kind is not None and plausible_value(match.group("value"), kind):
            yield match.span("value")


# A name and a value given as two fields: NuGet and .NET settings
# (<add key="ClearTextPassword" value="…"/>), Kubernetes and ECS env lists
# (- name: DB_PASSWORD / value: …), Terraform variables (name = … / secret_value = …).
_PAIR = (
    r"(?<![\w-])(?:name|Name|NAME|key|Key|KEY)[\"']?[ \t]*[:=][ \t]*+(?P<q0>[\"']?)"
    r"(?P<name>[\w.-]{1,80})(?P=q0)[ \t,;]*+(?:\r?\n[ \t]*+-?[ \t]*+)?[\"']?"
    r"(?:secret_?|Secret)?(?:value|Value|VALUE)[\"']?[ \t]*[:=][ \t]*+"
    r"(?P<open>[\"']?)(?P<value>[^\s\"'<>\\]+)"
)


def _pair_spans(text: str) -> Iterator[tuple[int, int]]:
    if "alue" not in text and "VALUE" not in text:
        return
    for match in compile_ascii(_PAIR).finditer(text):
        name = match.group("name")
        kind = identifier_kind(name)
        if kind is None:
            continue
        opening, value = match.group("open"), match.group("value")
        if opening and not text.startswith(opening, match.end("value")):
            continue
        # A field named only "password" holds one: the name cannot be anything else.
        explicit = compile_ascii(r"(?i)(?:clear_?text_?)?(?:password|passwd|pwd)").fullmatch(name)
        if plausible_value(value, kind) or (explicit and plausible_password(value)):
            yield match.span("value")


# HTTP authorization: the header with any scheme, or a bearer token anywhere.
_AUTH_HEADER = (
    r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*+[\"']?"
    r"(?:[A-Za-z][\w-]{1,20}[ \t]++)?(?P<value>[^\s\"'\\,;]+)"
)
_BEARER = r"(?<![\w-])[Bb]earer[ \t]++(?P<value>[\w.~+/=-]{16,})"


def _authorization_spans(text: str) -> Iterator[tuple[int, int]]:
    for pattern, hints in ((_AUTH_HEADER, ("uthoriz", "UTHORIZ")), (_BEARER, ("earer",))):
        if not any(hint in text for hint in hints):
            continue
        for match in compile_ascii(pattern).finditer(text):
            if plausible_value(match.group("value"), ValueKind.TOKEN):
                yield match.span("value")


# user:password in a URL, and curl's -u/--user.
_URL_USERINFO = (
    r"://(?P<user>[^\s:/@?#\[\]\"'<>]*+):(?P<password>[^\s:/@?#\[\]\"'<>]++)@(?=[\w.\[-])"
)
_CURL_USER = (
    r"(?<!\S)(?:-u|--user)(?:[ \t]++|=)(?:(?P<q>[\"'])(?P<pair>[^\s\"']*:[^\s\"']*)(?P=q)"
    r"|(?P<q1>[\"']?)(?P<user>[^\s\"':]*)(?P=q1):(?P<q2>[\"']?)(?P<password>[^\s\"']*)(?P=q2))"
)


_HTTP_CLIENT = compile_ascii(r"(?i)\b(?:curl|wget|https?|httpie|xh)\b")


def _userinfo_spans(text: str) -> Iterator[tuple[int, int]]:
    if "://" in text:
        for match in compile_ascii(_URL_USERINFO).finditer(text):
            if plausible_password(match.group("password"), match.group("user")):
                yield match.span("password")
    if "-u" not in text and "--user" not in text:
        return
    for match in compile_ascii(_CURL_USER).finditer(text):
        # -u means other things to other tools (socat's one-way mode, docker's uid:gid),
        # so the short form counts on an HTTP client's command line only.
        window = text[max(0, match.start() - 300) : match.start()]
        command = compile_ascii(r"(?<!\\)\n").split(window)[-1]  # with its continued lines
        if match.group().startswith("-u") and _HTTP_CLIENT.search(command) is None:
            continue
        if match.group("pair") is not None:
            offset = match.start("pair")
            user, _, password = match.group("pair").partition(":")
            user_span = (offset, offset + len(user))
            password_span = (offset + len(user) + 1, match.end("pair"))
        else:
            user, password = match.group("user"), match.group("password")
            user_span, password_span = match.span("user"), match.span("password")
        if password and plausible_password(password, user) and not _is_path_or_url(password):
            yield password_span
        elif not password and plausible_value(user, ValueKind.TOKEN):
            yield user_span  # an API key given as the user name, with an empty password


# Passwords in other credential slots: .netrc, Bundler's per-host environment
# variables, mysql's -pPASSWORD, sshpass -p, SQL's IDENTIFIED BY.
_NETRC = (
    r"(?<![\w-])(?:machine[ \t]++\S++|default)(?:\s++(?:login|account)[ \t]++\S++)*+"
    r"\s++password[ \t]++(?P<password>\S++)"
)
_BUNDLER = (
    r"(?<![\w-])BUNDLE_(?P<host>[A-Z0-9_]++)[\"']?[ \t]*[:=][ \t]*+[\"']?"
    r"(?P<password>[^\s\"';&]+)"
)
_MYSQL = r"(?<!\S)-p(?P<q>[\"']?)(?P<password>[^\s\"']+)(?P=q)"
_SSHPASS = r"(?<![\w-])sshpass[ \t]++-p[ \t]*+(?P<q>[\"']?)(?P<password>[^\s\"']+)(?P=q)"
_IDENTIFIED = r"(?i:identified[ \t]++by)[ \t]++(?P<q>[\"'])(?P<password>[^\s\"']+)(?P=q)"


def _credential_slot_spans(text: str) -> Iterator[tuple[int, int]]:
    checks: list[tuple[str, str]] = [(_SSHPASS, "sshpass"), (_IDENTIFIED, "")]
    if "machine" in text or "default" in text:
        checks.append((_NETRC, ""))
    for pattern, needle in checks:
        if needle and needle not in text:
            continue
        for match in compile_ascii(pattern).finditer(text):
            if plausible_password(match.group("password")):
                yield match.span("password")
    if "BUNDLE_" in text:
        for match in compile_ascii(_BUNDLER).finditer(text):
            if "__" in match.group("host") and plausible_password(match.group("password")):
                yield match.span("password")
    if "mysql" in text or "mariadb" in text:
        for match in compile_ascii(_MYSQL).finditer(text):
            line = text[max(0, match.start() - 200) : match.start()].rpartition("\n")[2]
            if compile_ascii(r"\b(?:mysql\w*|mariadb)\b").search(line) and plausible_password(
                match.group("password")
            ):
                yield match.span("password")


# The data of a Kubernetes Secret manifest: every value under data: or stringData:.
_K8S_KIND = r"(?im)^[ \t]*kind:[ \t]*[\"']?secret[\"']?[ \t]*$"
_K8S_DATA = r"(?m)^(?P<indent>[ \t]*)(?P<field>data|stringData):[ \t]*(?:#.*)?$"
_K8S_ENTRY = r"(?P<key>[\w.-]+):[ \t]*+(?P<value>.*)"


def _k8s_secret_spans(text: str) -> Iterator[tuple[int, int]]:
    if "kind" not in text or compile_ascii(_K8S_KIND).search(text) is None:
        return
    scanned = 0  # a data: line inside a block already read is not read again
    for header in compile_ascii(_K8S_DATA).finditer(text):
        if header.start() < scanned:
            continue
        depth = len(header.group("indent"))
        base64_only = header.group("field") == "data"
        position = header.end() + 1
        block: tuple[int, int] | None = None  # the lines of a `key: |` value
        while position < len(text):
            newline = text.find("\n", position)
            end = len(text) if newline < 0 else newline
            line = text[position:end].rstrip("\r")
            body = line.lstrip(" \t")
            indent = len(line) - len(body)
            if body and not body.startswith("#"):
                if indent <= depth:
                    break
                if block is not None and indent > block[1]:
                    yield position + indent, position + len(line)
                else:
                    block = None
                    entry = compile_ascii(_K8S_ENTRY).fullmatch(body)
                    if entry is not None:
                        raw = entry.group("value").rstrip(" \t")
                        value = raw.strip("\"'")
                        if value in ("|", ">", "|-", ">-", "|+", ">+"):
                            block = (position, indent)
                        elif value and _is_secret_data(value, base64_only):
                            offset = position + indent + entry.start("value")
                            quoted = raw[:1] in ("'", '"')
                            yield offset + quoted, offset + quoted + len(value)
            position = end + 1
        scanned = position


def _is_secret_data(value: str, base64_only: bool) -> bool:
    if _is_reference(value):
        return False
    if base64_only:
        return compile_ascii(r"[A-Za-z0-9+/]{4,}={0,2}").fullmatch(value) is not None
    return len(value) >= 4


def _context_rule(
    rule_id: str,
    provider: str,
    description: str,
    pattern: str,
    finder: Finder,
    *,
    specificity: int = GENERIC,
) -> SecretRule:
    return SecretRule(
        id=rule_id,
        provider=provider,
        description=description,
        pattern=pattern,
        specificity=specificity,
        finder=finder,
    )


CONTEXT_RULES: tuple[SecretRule, ...] = (
    _context_rule(
        "generic-secret-assignment",
        "Generic",
        "Value assigned to a secret-sounding name (env, YAML, INI, JSON, code, flags)",
        _ASSIGNMENT,
        _assignment_spans,
    ),
    _context_rule(
        "generic-secret-comparison",
        "Generic",
        "Literal compared with a secret-sounding name",
        _COMPARED,
        _compared_spans,
    ),
    _context_rule(
        "generic-secret-element",
        "Generic",
        "XML element named like a secret",
        _ELEMENT,
        _element_spans,
    ),
    _context_rule(
        "generic-secret-pair",
        "Generic",
        "Name and value fields (NuGet/.NET settings, Kubernetes env, Terraform variables)",
        _PAIR,
        _pair_spans,
    ),
    _context_rule(
        "http-authorization",
        "Generic",
        "Credentials in an Authorization header or after Bearer",
        _AUTH_HEADER,
        _authorization_spans,
    ),
    _context_rule(
        "url-or-curl-password",
        "Generic",
        "Password in a URL's user:password@ part or a curl -u/--user",
        _URL_USERINFO,
        _userinfo_spans,
        specificity=STRUCTURAL,
    ),
    _context_rule(
        "credential-slot-password",
        "Generic",
        "Password in .netrc, Bundler host credentials, mysql -p, sshpass, IDENTIFIED BY",
        _NETRC,
        _credential_slot_spans,
        specificity=STRUCTURAL,
    ),
    _context_rule(
        "kubernetes-secret-data",
        "Kubernetes",
        "Value in the data or stringData of a Secret manifest",
        _K8S_DATA,
        _k8s_secret_spans,
        specificity=STRUCTURAL,
    ),
)
"""The rules that judge a value by the name or place it stands in."""
