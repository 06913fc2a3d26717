"""Credentials in spellings that a name-and-shape rule misses.

A password in a URL may hold any character (``#``, ``?``, ``/``, ``:``, a space, a
quote): the URL's own grammar, not an alphabet, says where it ends. A password said in a
sentence ("the db password is …") has no ``=`` before it. An Azure SAS URL, an AWS
secret key pasted without its variable name, Oracle's ``user/password@db``, a PuTTY key
file, a ``.pgpass`` line, ``ldapsearch -w``, an ``htpasswd`` entry and Twilio's auth
token passed by position each have a shape of their own, and each rule here is that
shape. Like the other context rules, every finder starts from one linear regular
expression and looks only at a bounded stretch around each match.
"""

from __future__ import annotations

import itertools
import math
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterator

from memdir.store._secret_context import (
    _NOT_SECRET_KEYS,
    _NOT_SECRET_TOKENS,
    ValueKind,
    _context_rule,
    _is_path_or_url,
    _is_reference,
    _is_stock,
    plausible_password,
    plausible_value,
)
from memdir.store._secret_rule import (
    GENERIC,
    STRUCTURAL,
    Finder,
    SecretRule,
    compile_ascii,
    not_masked,
)

__all__ = ["FORMAT_RULES", "entropy"]


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    counts = Counter(value)
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


# ---------------------------------------------------------------------------------------
# URL user-info, parsed as a URL parser does

# The user part may not hold ":" "/" "@" (they would have been percent-encoded); the
# password runs from the first ":" after it to the last "@" that a host follows.
_URL_USER = r"(?<![\w+.-])[A-Za-z][\w+.-]{0,30}://(?P<user>[^\s:/@?#\[\]\"'<>]{0,64}+):"
_HOST_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789[_")
# The longest stretch looked at for the "@": passwords are short; a URL is one line.
_USERINFO_SPAN = 200
_PORT = r"\d{1,5}(?:[/?#,]|$)"


def _url_password_spans(text: str) -> Iterator[tuple[int, int]]:
    if "://" not in text or "@" not in text:
        return
    for match in compile_ascii(_URL_USER).finditer(text):
        start = match.end()
        line_end = text.find("\n", start)
        limit = min(len(text) if line_end < 0 else line_end, start + _USERINFO_SPAN)
        end = _host_at(text, start, limit)
        if end < 0:
            continue
        password = text[start:end]
        if _url_password(password, match.group("user")):
            yield start, end


def _host_at(text: str, start: int, limit: int) -> int:
    """The "@" that ends the user-info starting at ``start``, or -1.

    It is the last "@" followed by a host, unless a blank comes before it: then the
    first one after the blank (an e-mail address later on the line is not the host).
    """
    blank = compile_ascii(r"\s").search(text, start, limit)
    solid_end = blank.start() if blank is not None else limit
    at = text.rfind("@", start, solid_end)
    while at >= 0 and text[at + 1 : at + 2] not in _HOST_START:
        at = text.rfind("@", start, at)
    if at >= 0 or blank is None:
        return at
    at = text.find("@", solid_end, limit)
    while at >= 0 and text[at + 1 : at + 2] not in _HOST_START:
        at = text.find("@", at + 1, limit)
    return at


def _url_password(password: str, user: str) -> bool:
    if compile_ascii(_PORT).match(password) or "://" in password:
        return False  # host:port/path, with an "@" later on the line
    if compile_ascii(r":?(?:pserver|gserver|kserver|ext|extssh|sspi|server|fork):").match(password):
        return False  # a CVSROOT's method (cvs://:pserver:anoncvs@host), not a password
    if any(ch.isspace() for ch in password) and (
        len(password) > 64 or password.count(" ") > 3 or not user
    ):
        return False
    decoded = urllib.parse.unquote(password)
    # Placeholders written in the URL: <password>, ${DB_PASSWORD}, {{ pw }}, [REDACTED],
    # $PASSWORD. (A password may hold "(" or "[" anywhere else: it is not a call here.)
    if decoded.startswith(("<", "${", "{{", "[", "%")) and decoded.endswith((">", "}", "]", "%")):
        return False
    if compile_ascii(r"\$\w+").fullmatch(decoded):
        return False
    if len(decoded) < 6 or decoded == user or len(set(decoded)) < 3:
        return False
    if _is_stock(decoded) or not not_masked(decoded):
        return False
    if decoded.isdigit() and len(decoded) <= 8:
        return False
    return compile_ascii(r"[A-Z_]+").fullmatch(decoded) is None


# ---------------------------------------------------------------------------------------
# A password or key stated in a sentence

_PROSE_NOUN = (
    r"(?i)(?=[ptksc])(?<![^\s\"'(*>])(?P<noun>pass(?:word|phrase|code|wd)?|pwd?|token|key|secret|creds)"
    r"(?=[ \t]|:[ \t]|\Z)"
    # Only where a link word or a colon follows on the line, or a word with a digit right
    # after the noun: a cheap test that spares most mentions of "token" or "key" in prose.
    r"(?=[^\n]{0,60}?(?:[ \t](?:is|was|to|now|=|-|\u2013|\u2192|->)[ \t]|:[ \t])"
    r"|[ \t]++[^\s\d]{0,40}+\d|\Z)"
)
_PASSWORD_NOUNS = frozenset({"password", "passphrase", "passcode", "passwd", "pass", "pw", "pwd"})
# Words after which the next word is what the noun is: "is", "was", "=", ":", "→",
# "set to", "now".
_PROSE_LINKS = frozenset({"is", "was", "=", ":", "-", "\u2013", "\u2192", "->", "to", "now"})
_PROSE_WORDS = compile_ascii(r"\S+")
_TRAILING = ".,;:)]}>\"'`"


def _prose_spans(text: str) -> Iterator[tuple[int, int]]:
    for match in compile_ascii(_PROSE_NOUN).finditer(text):
        noun = match.group("noun").lower()
        before = text[max(0, match.start() - 24) : match.start()].split()
        last = before[-1].lower().strip("\"'(*>") if before else ""
        if (noun == "key" and last in _NOT_SECRET_KEYS) or (
            noun == "token" and last in _NOT_SECRET_TOKENS
        ):
            continue  # a primary key, a sort key, a page token: ids, not secrets
        line_end = text.find("\n", match.end())
        stop = min(len(text) if line_end < 0 else line_end, match.end() + 120)
        words = list(itertools.islice(_PROSE_WORDS.finditer(text, match.end(), stop), 8))
        found = _stated_value(text, noun, match.end(), words)
        if found is not None:
            yield found
    yield from _value_first_spans(text)


def _stated_value(
    text: str, noun: str, noun_end: int, words: list[re.Match[str]]
) -> tuple[int, int] | None:
    """The value after a link word ("is", ":", "→") within the words after ``noun``."""
    spans = [w.span() for w in words]
    candidates: list[int] = []
    # "password: X" and "password=X", where the link is glued to the noun.
    glued = text[noun_end : noun_end + 1]
    if glued == ":":
        if spans and spans[0][0] == noun_end:
            first = text[spans[0][0] : spans[0][1]]
            if len(first) > 1:
                return _value_span(text, noun, spans[0][0] + 1, spans[0][1])
            candidates.append(1)
        else:
            candidates.append(0)
    for index, (start, end) in enumerate(spans[:6]):
        word = text[start:end].lower().rstrip(":")
        if word == "to":
            # "reset to X", "changed the password to X"; not "pass it to the caller".
            before = text[max(0, noun_end - 40) : start].lower()
            if compile_ascii(r"\b(?:set|reset|changed?|rotated|updated)\b").search(before):
                candidates.append(index + 1)
        elif word in _PROSE_LINKS or (text[start:end].endswith(":") and index < 4):
            candidates.append(index + 1)
    direct = noun in _PASSWORD_NOUNS - {"pass"} or text[noun_end - 6 : noun_end - 4] == ", "
    for index in candidates:
        if index >= len(spans):
            continue
        start, end = spans[index]
        if text[start:end].lower() in ("now", "set", "to", "is"):
            continue
        found = _value_span(text, noun, start, end)
        if found is not None:
            return found
    if direct and spans:
        # A value right after the noun ("passcode" then the code; ", pass" then it), which must
        # hold a digit (a verb or a noun follows it far more often).
        found = _value_span(text, noun, *spans[0])
        if found is not None and any(ch.isdigit() for ch in text[found[0] : found[1]]):
            return found
    return None


def _value_span(text: str, noun: str, start: int, end: int) -> tuple[int, int] | None:
    while end > start and text[end - 1] in _TRAILING:
        end -= 1
    while start < end and text[start] in "\"'`":
        start += 1
    value = text[start:end]
    if (
        value[:1] in ":([{<$%@#`\\"
        or any(mark in value for mark in ("`", "\\", '="', "='", "(?", "</", "/>"))
        or ("(" in value and ")" not in value)
        or ("{" in value and "}" in value)
        or compile_ascii(r"[fbrFBR]{1,2}[\"']").match(value) is not None
        or value.replace("'", "").isalpha()  # module's, don't
    ):
        return None  # markup, a call, a pattern, a reference, a word: not a value
    return (start, end) if _prose_value(value, noun) else None


def _prose_value(value: str, noun: str) -> bool:
    if len(value) < 6 or not any(ch.isalpha() for ch in value):
        return False
    if _is_reference(value) or _is_stock(value) or not not_masked(value):
        return False
    if _is_path_or_url(value) or ("@" in value[1:-1] and "." in value.rpartition("@")[2]):
        return False
    if value.isalpha() or compile_ascii(r"[A-Za-z]+(?:-[A-Za-z]+)+").fullmatch(value):
        return False  # a word, or words joined by hyphens
    if compile_ascii(r"[A-Z]{2,8}-?\d{1,5}|[a-z]+\d*(?:-[a-z]+\d*)+").fullmatch(value):
        return False  # RSA-4096, AES256, sha256-hashed
    if noun in _PASSWORD_NOUNS or noun == "creds":
        if plausible_value(value, ValueKind.PASSWORD):
            return True
        # A short password still has letters, digits and a symbol in it: "hunt3r!".
        symbols = any(not ch.isalnum() for ch in value)
        return symbols and any(ch.isdigit() for ch in value) and len(value) >= 6
    return plausible_value(value, ValueKind.TOKEN)


# "X is the password for …", "use X as the password", "log in as admin / X": found from
# the phrase after the value, which is cheaper to look for than any word before a phrase.
_VALUE_IS = (
    r"(?i)(?=[ \t])(?<=[^\s])[ \t]+(?:is|was)[ \t]+(?:the|my|our|his|her|their)[ \t]+"
    r"(?:[\w-]+[ \t]+){0,3}?(?:password|passphrase|passcode|token|api[ \t]key)\b"
)
_VALUE_AS = (
    r"(?i)\buse[ \t]+[\"'`]?(?P<value>[^\s\"'`]{6,80}+)[\"'`]?[ \t]+as[ \t]+(?:the|my|a|our)"
    r"[ \t]+(?:[\w-]+[ \t]+){0,2}?(?:password|passphrase|passcode|token|key)\b"
    r"|\blog[ \t]?in[ \t]+(?:with|as)[ \t]+[\w.@-]{1,40}[ \t]*/[ \t]*(?P<after>[^\s\"'`]{6,80}+)"
)


def _value_first_spans(text: str) -> Iterator[tuple[int, int]]:
    lowered = text.lower()
    nouns = ("password", "passphrase", "passcode", "token", "key")
    named = any(noun in lowered for noun in nouns)
    for match in compile_ascii(_VALUE_IS).finditer(text) if named else ():
        line_start = text.rfind("\n", 0, match.start()) + 1
        words = text[line_start : match.start()].rsplit(None, 1)
        if not words:
            continue
        value_start = match.start() - len(words[-1])
        found = _value_span(text, "password", value_start, match.start())
        if found is not None:
            yield found
    if not (named and "use" in lowered) and "log" not in lowered:
        return
    for match in compile_ascii(_VALUE_AS).finditer(text):
        group = "value" if match.group("value") is not None else "after"
        found = _value_span(text, "password", *match.span(group))
        if found is not None:
            yield found


# ---------------------------------------------------------------------------------------
# Azure shared access signatures

_SAS_SIG = r"(?<![\w-])sig=(?P<sig>[A-Za-z0-9%+/=]{20,200})"
_SAS_FIELDS = compile_ascii(r"(?<![\w-])(?:sv|se|sp|sr|srt|ss|spr|skn|skoid)=")


def _sas_spans(text: str) -> Iterator[tuple[int, int]]:
    if "sig=" not in text:
        return
    for match in compile_ascii(_SAS_SIG).finditer(text):
        window = text[max(0, match.start() - 400) : match.start()]
        if _SAS_FIELDS.search(window) is None:
            continue
        signature = urllib.parse.unquote(match.group("sig"))
        body = signature.rstrip("=")
        if len(body) >= 40 and entropy(body) >= 4.0:
            yield match.span("sig")


# ---------------------------------------------------------------------------------------
# An AWS secret access key with no name beside it

_AWS_SECRET = r"(?<![A-Za-z0-9+/=_.-])(?P<secret>[A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=_-])"
_AWS_CONTEXT = compile_ascii(r"(?i)\baws\b|\bsecret\b|\biam\b|(?<![A-Z0-9])A[KS]IA[A-Z0-9]{16}")


def _aws_secret_spans(text: str) -> Iterator[tuple[int, int]]:
    for match in compile_ascii(_AWS_SECRET).finditer(text):
        value = match.group("secret")
        if not (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
        ):
            continue
        if entropy(value) < 4.3 or "EXAMPLE" in value or _is_path_or_url(value):
            continue
        if _in_base64_block(text, match.start(), match.end()):
            continue  # the last line of a wrapped base64 block (a key, a certificate)
        if "/" in value or "+" in value:
            yield match.span("secret")
            continue
        window = text[max(0, match.start() - 200) : match.start()]
        if _AWS_CONTEXT.search(window) is not None:
            yield match.span("secret")


def _in_base64_block(text: str, start: int, end: int) -> bool:
    """Whether the line before or after ``text[start:end]`` is base64 of 40+ characters."""
    before = text[max(0, start - 100) : start]
    after = text[end : end + 100]
    block = compile_ascii(r"[A-Za-z0-9+/=]{40,}")
    if before.endswith("\n") and block.fullmatch(before[:-1].rpartition("\n")[2].strip()):
        return True
    return after.startswith("\n") and bool(block.match(after[1:]))


# ---------------------------------------------------------------------------------------
# Command lines and files with a password in a slot of their own

# sqlplus scott/tiger@orcl, expdp u/p@db, sqlldr userid=u/p@db, connect u/p@db, and
# the thin driver's jdbc:oracle:thin:u/p@host:1521:sid.
_ORACLE = (
    r"(?i)(?:(?<![\w-])(?:sqlplus|sqlcl|sql|expdp|impdp|exp|imp|sqlldr|rman|dgmgrl|connect|conn"
    r"|userid=|target|auxiliary|catalog)(?:[ \t]+-[A-Za-z]+)*[ \t]*(?<=[ \t=])"
    r"|jdbc:oracle:(?:thin|oci8?):)"
    r"(?P<user>[\w$#]{1,30})/(?P<password>[^\s/@\"']{1,64}|\"[^\"\n]{1,64}\")@(?=[\w/\[])"
)


def _oracle_spans(text: str) -> Iterator[tuple[int, int]]:
    if "/" not in text or "@" not in text:
        return
    for match in compile_ascii(_ORACLE).finditer(text):
        password = match.group("password").strip('"')
        if plausible_password(password, match.group("user")):
            yield match.span("password")


# A PuTTY key file: its Private-Lines are the key, encrypted or not.
_PUTTY = r"Private-Lines:[ \t]*\d+[ \t]*\r?\n(?P<key>(?:[A-Za-z0-9+/=]{4,}[ \t]*(?:\r?\n|$))+)"


def _putty_spans(text: str) -> Iterator[tuple[int, int]]:
    if "Private-Lines:" not in text:
        return
    for match in compile_ascii(_PUTTY).finditer(text):
        start, end = match.span("key")
        if end - start >= 32:
            yield start, end


# hostname:port:database:username:password, one entry a line (backslash escapes ":").
_PGPASS = (
    r"(?m)(?<![^\s`])(?P<host>[\w.*-]{1,253}+):"
    r"(?:[1-9]\d{0,4}|\*):(?:[^\s:\\\"']|\\.){1,63}:"
    r"(?P<user>(?:[^\s:\\\"']|\\.){1,63}):(?P<password>(?:[^\s:\\]|\\.)+)(?=[ \t]*(?:$|`))"
)


_HOST = compile_ascii(r"[\w.-]*[A-Za-z][\w.-]*|\d{1,3}(?:\.\d{1,3}){3}")


def _pgpass_spans(text: str) -> Iterator[tuple[int, int]]:
    if text.count(":") < 4:
        return
    for match in compile_ascii(_PGPASS).finditer(text):
        host = match.group("host")
        if not (host == "*" or _HOST.fullmatch(host)):
            continue  # a time of day, a version: a host name has a letter, or is an IP
        password = match.group("password")
        if plausible_password(password, match.group("user")) and not password.isdigit():
            yield match.span("password")


# ldapsearch and its siblings take the bind password after -w (-W asks for it).
_LDAP = (
    r"(?<![\w-])ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn|exop|url)?"
    r"(?P<args>[^\n]{0,300}?)(?<=\s)-w[ \t]*+(?P<q>[\"']?)(?P<password>[^\s\"']+)(?P=q)"
)


def _ldap_spans(text: str) -> Iterator[tuple[int, int]]:
    if "ldap" not in text or "-w" not in text:
        return
    for match in compile_ascii(_LDAP).finditer(text):
        if plausible_password(match.group("password")):
            yield match.span("password")


# An htpasswd line (user:hash in one of the forms Apache reads), or htpasswd -b's
# password given on the command line.
_HTPASSWD_LINE = (
    r"(?m)^[ \t]*[\w.@-]{1,64}:(?P<hash>\$apr1\$[./0-9A-Za-z]{1,8}\$[./0-9A-Za-z]{22}"
    r"|\{SHA\}[A-Za-z0-9+/]{27}="
    r"|\$2[abxy]?\$\d\d\$[./0-9A-Za-z]{53}"
    r"|\$[56]\$(?:rounds=\d+\$)?[./0-9A-Za-z]{1,16}\$[./0-9A-Za-z]{43,86})[ \t]*$"
)
_HTPASSWD_BATCH = (
    r"(?<![\w-])htpasswd(?:[ \t]+-[a-zA-Z]+)*?[ \t]+-[a-zA-Z]*b[a-zA-Z]*(?:[ \t]+-[a-zA-Z]+)*"
    r"[ \t]+(?P<file>\S+)[ \t]+(?P<user>\S+)[ \t]+(?P<q>[\"']?)(?P<password>[^\s\"']+)(?P=q)"
)


def _htpasswd_spans(text: str) -> Iterator[tuple[int, int]]:
    if "$" in text or "{SHA}" in text:
        for match in compile_ascii(_HTPASSWD_LINE).finditer(text):
            yield match.span("hash")
    if "htpasswd" in text:
        for match in compile_ascii(_HTPASSWD_BATCH).finditer(text):
            if plausible_password(match.group("password"), match.group("user")):
                yield match.span("password")


# Twilio's account SID, then its auth token as the next argument or field.
_TWILIO = (
    r"AC[a-f0-9]{32}[\"'`]?[ \t]*(?:,|:)[ \t\r\n]*(?:[A-Za-z]{1,20}[ \t]*[:=][ \t]*)?"
    r"[\"'`]?(?P<token>[a-f0-9]{32})(?![\w-])"
)


def _twilio_spans(text: str) -> Iterator[tuple[int, int]]:
    if "AC" not in text:
        return
    for match in compile_ascii(_TWILIO).finditer(text):
        yield match.span("token")


def _rule(
    rule_id: str,
    provider: str,
    description: str,
    pattern: str,
    finder: Finder,
    *,
    specificity: int = STRUCTURAL,
) -> SecretRule:
    """A format rule: :func:`_context_rule`, but structural unless said otherwise (each
    format has a shape of its own, not only a secret-sounding name)."""
    return _context_rule(rule_id, provider, description, pattern, finder, specificity=specificity)


FORMAT_RULES: tuple[SecretRule, ...] = (
    _rule(
        "url-userinfo-password",
        "Generic",
        "Password in a URL's user-info, any character, ended by the last @ before the host",
        _URL_USER,
        _url_password_spans,
    ),
    _rule(
        "prose-password",
        "Generic",
        "A password, token or key stated in a sentence",
        _PROSE_NOUN + "|" + _VALUE_IS,
        _prose_spans,
        specificity=GENERIC,
    ),
    _rule("azure-sas-signature", "Azure", "Shared access signature (sig=)", _SAS_SIG, _sas_spans),
    _rule(
        "aws-secret-access-key-bare",
        "AWS",
        "Secret access key by its shape and entropy, with no name beside it",
        _AWS_SECRET,
        _aws_secret_spans,
    ),
    _rule("oracle-password", "Oracle", "Password in user/password@db", _ORACLE, _oracle_spans),
    _rule("putty-private-key", "PuTTY", "Private-Lines of a .ppk key file", _PUTTY, _putty_spans),
    _rule(
        "pgpass-password", "PostgreSQL", "Password field of a .pgpass line", _PGPASS, _pgpass_spans
    ),
    _rule("ldap-bind-password", "LDAP", "Bind password after -w", _LDAP, _ldap_spans),
    _rule(
        "htpasswd-credential",
        "Apache",
        "htpasswd hash line, or the password given to htpasswd -b",
        _HTPASSWD_LINE,
        _htpasswd_spans,
    ),
    _rule(
        "twilio-auth-token",
        "Twilio",
        "Auth token given right after the account SID",
        _TWILIO,
        _twilio_spans,
    ),
)
"""Rules for credentials written in forms the provider and context rules miss."""
