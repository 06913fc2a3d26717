"""Credentials in any spelling: the guard reads what a person reads.

The corpus (``secret_spellings.py``) holds, per family, credentials the
guard used to let through: URL passwords with any character, passwords said in a
sentence, SAS signatures, bare AWS secret keys, base64-wrapped and line-split keys,
Oracle, PuTTY, ``.pgpass``, ``ldapsearch -w``, ``htpasswd``, Twilio's token by position,
zero-width and look-alike characters; and as much text that only looks risky. Each
credential must be refused by the write guard and removed by ``redact``; each benign
text must pass. The normalisation and URL-parsing cases pin the offsets: a finding in a
normalised or joined spelling still names the characters the writer typed.
"""

from __future__ import annotations

import base64
import random
import string
import time
import urllib.parse
from pathlib import Path

import pytest

from memdir.permissions import memory_write_guard
from memdir.store import format_memory_file
from memdir.store._secret_variants import joined_view, normalised_view
from memdir.store._secrets import contains_secret, redact, scan_secrets
from tests.store.secret_corpus import Entry
from tests.store.secret_spellings import FAMILIES, URL_SCHEMES, build_spellings

_RNG = random.Random(2504)
A62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
CORPUS = build_spellings()
POSITIVES = [e for e in CORPUS if e.label == "positive"]
NEGATIVES = [e for e in CORPUS if e.label == "negative"]


def rand(alphabet: str, size: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(size))


def refused(root: Path, text: str) -> bool:
    """Whether the write guard refuses ``text`` as the body of a reference memory."""
    memory = root / "mem"
    memory.mkdir(exist_ok=True)
    guard = memory_write_guard(memory)
    body = format_memory_file(name="note", description="a note", type="reference", body=text)
    return guard(memory / "note.md", body) is not None


# --- one sample per rule added for these spellings ----------------------------------------

_URL_PW = "Ma#ple?12/x"
_PROSE_PW = "harbor77!Zq"
_SAS = urllib.parse.quote(rand(A62, 43) + "=", safe="")
_AWS = rand(A62, 20) + "/" + rand(A62, 19)
_ORACLE_PW = "Tundra_42x"
_PUTTY_LINE = rand(A62, 64)
_PGPASS_PW = "quill55^Rt"
_LDAP_PW = "violet09#Kp"
_HT = "$apr1$" + rand(A62, 8) + "$" + rand(A62, 22)
_TWILIO = rand(HEX, 32)
_WRAPPED = base64.b64encode(f"DB_PASSWORD={_PROSE_PW}".encode()).decode()
SPELLING_SAMPLES: list[tuple[str, str, str]] = [
    ("url-userinfo-password", f"postgres://app:{_URL_PW}@db:5432/app", _URL_PW),
    ("prose-password", f"the db password is {_PROSE_PW}", _PROSE_PW),
    (
        "azure-sas-signature",
        f"https://a.blob.core.windows.net/c?sv=2022-11-02&sp=r&se=2026-01-01&sig={_SAS}",
        _SAS,
    ),
    ("aws-secret-access-key-bare", f"the deploy user's secret: {_AWS}", _AWS),
    ("oracle-password", f"sqlplus scott/{_ORACLE_PW}@orcl", _ORACLE_PW),
    (
        "putty-private-key",
        f"PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\n{_PUTTY_LINE}\nPrivate-MAC: 00",
        _PUTTY_LINE,
    ),
    ("pgpass-password", f"db.internal:5432:app:app:{_PGPASS_PW}", _PGPASS_PW),
    ("ldap-bind-password", f"ldapsearch -x -D cn=admin -w {_LDAP_PW} -b dc=x", _LDAP_PW),
    ("htpasswd-credential", f"admin:{_HT}", _HT),
    ("twilio-auth-token", f'Client("AC{rand(HEX, 32)}", "{_TWILIO}")', _TWILIO),
    ("base64-wrapped-credential", f"ENV_B64={_WRAPPED}", _WRAPPED),
]


@pytest.mark.parametrize(("rule_id", "text", "secret"), SPELLING_SAMPLES, ids=lambda v: str(v)[:30])
def test_each_spelling_rule_reports_its_sample(rule_id: str, text: str, secret: str) -> None:
    findings = scan_secrets(text)
    assert rule_id in {f.rule_id for f in findings}, findings
    assert secret not in redact(text)


# --- the corpus ------------------------------------------------------------------------------


def test_the_corpus_covers_every_family() -> None:
    assert len(POSITIVES) >= 300
    assert len(NEGATIVES) >= 300
    assert {e.family for e in POSITIVES} == set(FAMILIES)
    assert build_spellings() == CORPUS  # seeded: the same every run


def _id(entry: Entry) -> str:
    return f"{entry.family}: {entry.text[:40]!r}"


@pytest.mark.parametrize("entry", POSITIVES, ids=_id)
def test_each_credential_is_refused_and_redacted(tmp_path: Path, entry: Entry) -> None:
    assert refused(tmp_path, entry.text), entry.text
    assert entry.secret not in redact(entry.text)


@pytest.mark.parametrize("entry", NEGATIVES, ids=_id)
def test_risky_looking_text_is_not_refused(tmp_path: Path, entry: Entry) -> None:
    assert not refused(tmp_path, entry.text), scan_secrets(entry.text)
    assert redact(entry.text) == entry.text


# --- phrasings written apart from the corpus, to check the rules are not fitted to it ----

HELD_OUT_CREDENTIALS = [
    "mysql://root:p@ss#w0rd!@db.prod:3306/shop",
    "amqps://guest:S3cr?t/x@mq.example.com/%2f",
    "The password for the NAS is Tr0ub4dor&3",
    "fyi the admin pw is qwerty!234",
    "wifi: CoffeeShop / password hunter22!",
    f"Her Jira API token is {rand(A62, 24)}",
    f"the secret is {rand(A62, 26)}",
    "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2021-06-08"
    f"&ss=b&srt=co&sp=rl&se=2025-01-01T00:00:00Z&sig={_SAS}",
    "sqlplus system/Oracle_123@localhost:1521/XEPDB1",
    "jdbc:oracle:thin:scott/Tig3r_99@db:1521:ORCL",
    "ldapwhoami -x -D uid=bob,ou=people,dc=x -w S3cretPw!",
    "db.example.com:5432:billing:billing_rw:Xk29!mq#Lp",
    f"key: {_AWS}",
    "Tr0ub4dor&3 is the password for the NAS",
    'use "Xk29!mq#Lp" as the db password',
]
HELD_OUT_BENIGN = [
    "The password must be at least 12 characters long.",
    "I changed my password to something stronger.",
    "Use the token from the Settings page.",
    "https://docs.python.org/3/library/urllib.parse.html#url-parsing",
    "The key is 3 steps: plan, do, check.",
    "The API key is stored as an env var, see README.",
    "postgres://localhost/app?sslmode=disable",
    "password reset emails go to no-reply@example.com",
    "Our token limit is 200k/day; ask ana@example.com",
    "git clone https://github.com/acme/repo.git@main",
    "the pass rate is 97.5% on CI",
    "Key: value pairs are stored in redis",
    "token: the per-user rate limiter key (see docs)",
    "ssh user@host:2222",
    "Password: (hidden)",
    "The token is in ~/.config/gh/hosts.yml",
    "the secret sauce: caching at the edge",
    "My key takeaway: write smaller PRs.",
    "Password1 is the example of a bad password in the training.",
    "the primary key: 8f14e45fceea167a5a36dedd4bea2543",
    "cvs -d :pserver:anoncvs@cvs.example.org:/cvsroot co src",
    "To skip the leading call, pass <tt>{leading: false}</tt>.",
]


@pytest.mark.parametrize("text", HELD_OUT_CREDENTIALS)
def test_credentials_phrased_apart_from_the_corpus(text: str) -> None:
    assert contains_secret(text), text


@pytest.mark.parametrize("text", HELD_OUT_BENIGN)
def test_benign_text_phrased_apart_from_the_corpus(text: str) -> None:
    assert not contains_secret(text), scan_secrets(text)


# --- URL user-info, parsed as URLs are -----------------------------------------------------


@pytest.mark.parametrize("special", ["#", "?", "/", ":", " ", "(", "[", "'", '"', "@", "%"])
@pytest.mark.parametrize("scheme", list(URL_SCHEMES))
def test_url_password_with_any_character_is_redacted_exactly(scheme: str, special: str) -> None:
    password = f"Co{special}pper{rand(A62, 6)}!"
    url = URL_SCHEMES[scheme].format(user="svc", pw=password)
    user_end = url.index("svc:") + 4
    expected = url[:user_end] + "[REDACTED]" + url[user_end + len(password) :]
    assert redact(f"DSN: {url}") == f"DSN: {expected}"


@pytest.mark.parametrize(
    "text",
    [
        "http://localhost:3000/health (ask ops@example.com for access)",
        "ssh://git@github.com:22/acme/api.git",
        "https://example.com:8443/a?b=c then mail me at bo@example.com",
        "https://user:<password>@proxy.example.com:8080",
        "postgres://app:${DB_PASSWORD}@db:5432/app",
        "https://maps.example.com/@51.5,-0.12,12z",
    ],
)
def test_urls_without_a_password_are_left_alone(text: str) -> None:
    assert not contains_secret(text), scan_secrets(text)


# --- normalisation ---------------------------------------------------------------------------

_GH = "ghp_" + rand(A62, 36)


@pytest.mark.parametrize(
    ("name", "spelled"),
    [
        ("zero-width space", _GH[:3] + "\u200b" + _GH[3:]),
        ("zero-width joiner", _GH[:7] + "\u200d" + _GH[7:]),
        ("soft hyphen", _GH[:5] + "\u00ad" + _GH[5:]),
        ("byte-order mark", "\ufeff" + _GH),
        ("two invisibles", _GH[:2] + "\u2060" + _GH[2:9] + "\u200c" + _GH[9:]),
        ("cyrillic p", _GH[:2] + "\u0440" + _GH[3:]),
        ("cyrillic h", _GH[:1] + "\u04bb" + _GH[2:]),
        ("full-width prefix", "".join(chr(ord(c) + 0xFEE0) for c in _GH[:4]) + _GH[4:]),
    ],
)
def test_keys_spelled_with_invisible_or_lookalike_characters(name: str, spelled: str) -> None:
    text = f"saved — {spelled} — for later"
    findings = scan_secrets(text)
    assert [f.rule_id for f in findings] == ["github-pat"], name
    (finding,) = findings
    # The finding's offsets are the original's: it covers the spelled key exactly (an
    # invisible character in front of the key is not part of it).
    assert text[finding.start : finding.end] == spelled.lstrip("\ufeff")
    assert redact(text) == text.replace(spelled.lstrip("\ufeff"), "[REDACTED]")
    assert redact(text).replace("\ufeff", "") == "saved — [REDACTED] — for later"


def test_cyrillic_h_is_folded() -> None:
    # U+04BB (shha) is drawn like a Latin h.
    view = normalised_view("g\u04bbp_x")
    assert view is not None
    assert view.text == "ghp_x"


def test_other_scripts_are_not_folded_into_latin() -> None:
    # Words with no Latin letter or digit stay in their script, so Russian or Greek prose
    # is never read as random Latin letters; NFKC still folds full-width forms.
    assert normalised_view("Пароль от wifi спросите у Ани.") is None  # noqa: RUF001
    assert normalised_view("Ο κωδικός είναι στο vault.") is None  # noqa: RUF001
    view = normalised_view("ＡＰＩキー")
    assert view is not None
    assert view.text == "APIキー"
    assert normalised_view("plain ascii text") is None


def test_normalised_view_maps_offsets_back() -> None:
    text = "a\u200bb ｃd \u0430x"  # noqa: RUF001
    view = normalised_view(text)
    assert view is not None
    assert view.text == "ab cd ax"
    assert [text[view.at(i)] for i in range(len(view.text))] == list(text.replace("\u200b", ""))


# --- line-split and base64-wrapped --------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        "{h}\n{t}",
        '"{h}" + "{t}"',
        "'{h}'\n  '{t}'",
        "> {h}\n> {t}",
        "{h}\\\n{t}",
    ],
)
def test_a_key_split_in_two_is_found_across_the_break(layout: str) -> None:
    head, tail = _GH[:15], _GH[15:]
    text = "token: " + layout.format(h=head, t=tail) + "\nthat is all"
    findings = scan_secrets(text)
    assert [f.rule_id for f in findings] == ["github-pat"]
    redacted = redact(text)
    assert head not in redacted
    assert tail not in redacted
    assert redacted.endswith("\nthat is all")


def test_joined_view_only_keeps_runs_cut_by_a_break() -> None:
    view = joined_view("id: Ab3_x9\nQ7zK-1 then\nsome words.\nmore words\nk8s_v2\nnext")
    assert view is not None
    # "then"/"some" and "words."/"more" are prose wrapping; "k8s_v2"/"next" ends on a word.
    assert view.text == "Ab3_x9Q7zK-1"
    assert view.span(0, len(view.text)) == (4, 17)
    assert joined_view("no break at all") is None
    assert joined_view("a sentence\nand the next one") is None


def test_base64_of_ordinary_text_is_not_a_credential() -> None:
    for plain in ("hello world, a plain note", '{"theme": "dark"}', "feature:new-checkout"):
        text = f"FLAGS={base64.b64encode(plain.encode()).decode()}"
        assert not contains_secret(text), plain


# --- cost ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "x://u:" * 150_000,
        "x://u:@a" * 100_000,
        "password is " * 80_000,
        "the key: " * 100_000,
        "ldapsearch -w " * 60_000,
        "sig=" + "A" * 30 + "&sv=1 sig=" * 50_000,
        ("QUJD" * 10 + "\n") * 20_000,
        'abc"\n"' * 150_000,
        "sqlplus a/" * 100_000,
        "a:1:b:c:" * 100_000,
        "\u200b" * 500_000,
    ],
    ids=lambda t: repr(t[:12]),
)
def test_near_misses_scan_in_linear_time(text: str) -> None:
    start = time.perf_counter()
    assert isinstance(scan_secrets(text), list)
    # Generous for a shared machine; quadratic behaviour would take minutes.
    assert time.perf_counter() - start < 30
