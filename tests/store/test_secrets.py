"""Tests for the secret scanner.

Every sample key below is assembled at run time from a seeded random alphabet, so this
file holds no literal that looks like a real credential (and trips no push protection).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import random
import re
import string
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.store._secrets import (
    SECRET_RULES,
    SecretFinding,
    SecretRule,
    contains_secret,
    redact,
    scan_secrets,
)
from tests.store.secret_corpus import FORMATS
from tests.store.test_secrets_formats import CONTEXT_SAMPLES
from tests.store.test_secrets_spellings import SPELLING_SAMPLES

_RNG = random.Random(20240611)
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits
BECH32_UPPER = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
NOT_PROVIDERS = {"Generic", "JSON Web Token", "Private key"}


def rand(alphabet: str, size: int) -> str:
    """A deterministic pseudo-random string: fake, but shaped like the real thing."""
    return "".join(_RNG.choice(alphabet) for _ in range(size))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pem(kind: str, lines: int = 4, newline: str = "\n") -> str:
    body = newline.join(rand(B64, 64) for _ in range(lines))
    label = f"{kind} PRIVATE KEY".strip()
    return f"-----BEGIN {label}-----{newline}{body}{newline}-----END {label}-----"


def jwt() -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": "1234567890", "name": "memdir"}).encode())
    return f"{header}.{payload}.{rand(B64URL, 43)}"


def discord() -> str:
    user_id = b64url(rand(string.digits, 18).encode())
    return f"{user_id}.{rand(B64URL, 6)}.{rand(B64URL, 27)}"


@dataclass(frozen=True)
class Case:
    """A secret in context: the scanner must report exactly ``rule_id`` over ``secret``."""

    provider: str
    rule_id: str
    secret: str
    before: str = "note to self: "
    after: str = " (rotate it next week)"

    @property
    def text(self) -> str:
        return self.before + self.secret + self.after


CASES = [
    Case("Anthropic", "anthropic-api-key", "sk-ant-api03-" + "A" * 93 + "AA"),
    Case("Anthropic", "anthropic-api-key", "sk-ant-api03-" + rand(B64URL, 93) + "AA"),
    Case("Anthropic", "anthropic-admin-key", "sk-ant-admin01-" + rand(B64URL, 93) + "AA"),
    Case("Anthropic", "anthropic-oauth-token", "sk-ant-oat01-" + rand(ALNUM, 95)),
    Case("OpenAI", "openai-project-key", f"sk-proj-{rand(B64URL, 74)}T3BlbkFJ{rand(B64URL, 74)}"),
    Case("OpenAI", "openai-service-account-key", "sk-svcacct-" + rand(B64URL, 156)),
    Case("OpenAI", "openai-admin-key", "sk-admin-" + rand(B64URL, 156)),
    Case("OpenAI", "openai-legacy-key", f"sk-{rand(ALNUM, 20)}T3BlbkFJ{rand(ALNUM, 20)}"),
    Case("AWS", "aws-access-key-id", "AKIA" + rand(UPPER_DIGITS, 16)),
    Case("AWS", "aws-access-key-id", "ASIA" + rand(UPPER_DIGITS, 16), "id=", ";"),
    Case("AWS", "aws-secret-access-key", rand(B64, 40), 'AWS_SECRET_ACCESS_KEY="', '"\n'),
    Case("AWS", "aws-secret-access-key", rand(B64, 40), "aws_secret_access_key = ", "\n"),
    Case("Google Cloud", "gcp-api-key", "AIza" + rand(B64URL, 35), "?key=", "&q=1"),
    Case("Google Cloud", "gcp-oauth-client-secret", "GOCSPX-" + rand(B64URL, 28)),
    Case(
        "Azure",
        "azure-storage-account-key",
        rand(B64, 86) + "==",
        "DefaultEndpointsProtocol=https;AccountName=memdirdemo;AccountKey=",
        ";EndpointSuffix=core.windows.net",
    ),
    Case(
        "Azure",
        "azure-shared-access-key",
        rand(B64, 43) + "=",
        "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=",
        "",
    ),
    Case(
        "Azure",
        "azure-ad-client-secret",
        rand(ALNUM, 3) + "8Q~" + rand(ALNUM + "_~.-", 33) + "a",
        "AZURE_CLIENT_SECRET is ",
    ),
    Case("GitHub", "github-pat", "ghp_" + rand(ALNUM, 36)),
    Case("GitHub", "github-oauth-token", "gho_" + rand(ALNUM, 36)),
    Case("GitHub", "github-user-token", "ghu_" + rand(ALNUM, 36)),
    Case("GitHub", "github-app-token", "ghs_" + rand(ALNUM, 36)),
    Case("GitHub", "github-refresh-token", "ghr_" + rand(ALNUM, 36)),
    Case("GitHub", "github-fine-grained-pat", f"github_pat_{rand(ALNUM, 22)}_{rand(ALNUM, 59)}"),
    Case("GitLab", "gitlab-pat", "glpat-" + rand(B64URL, 20) + "x"),
    Case("GitLab", "gitlab-token", "gldt-" + rand(ALNUM, 20)),
    Case(
        "Slack",
        "slack-bot-token",
        f"xoxb-{rand(string.digits, 12)}-{rand(string.digits, 13)}-{rand(ALNUM, 24)}",
    ),
    Case(
        "Slack",
        "slack-user-token",
        f"xoxp-{rand(string.digits, 12)}-{rand(string.digits, 12)}-"
        f"{rand(string.digits, 13)}-{rand(HEX, 32)}",
    ),
    Case("Slack", "slack-token", f"xoxa-2-{rand(string.digits, 12)}-{rand(ALNUM, 40)}"),
    Case(
        "Slack",
        "slack-webhook-url",
        f"T{rand(UPPER_DIGITS, 10)}/B{rand(UPPER_DIGITS, 10)}/{rand(ALNUM, 24)}",
        "curl -X POST https://hooks.slack.com/services/",
        " -d @payload.json",
    ),
    Case("Stripe", "stripe-secret-key", "sk_live_" + rand(ALNUM, 99)),
    Case("Stripe", "stripe-restricted-key", "rk_live_" + rand(ALNUM, 99)),
    Case("Stripe", "stripe-test-key", "sk_test_" + rand(ALNUM, 99)),
    Case("Stripe", "stripe-webhook-secret", "whsec_" + rand(ALNUM, 32)),
    Case("Twilio", "twilio-api-key", "SK" + rand(HEX, 32)),
    Case("SendGrid", "sendgrid-api-key", f"SG.{rand(B64URL, 22)}.{rand(B64URL, 43)}"),
    Case("npm", "npm-token", "npm_" + rand(ALNUM, 36), "//registry.npmjs.org/:_authToken=", ""),
    Case("PyPI", "pypi-token", "pypi-AgEIcHlwaS5vcmc" + rand(B64URL, 150)),
    Case("Hugging Face", "huggingface-token", "hf_" + rand(ALNUM, 34)),
    Case("DigitalOcean", "digitalocean-token", "dop_v1_" + rand(HEX, 64)),
    Case("Databricks", "databricks-token", "dapi" + rand(HEX, 32)),
    Case(
        "HashiCorp",
        "terraform-cloud-token",
        f"{rand(ALNUM, 14)}.atlasv1.{rand(ALNUM, 67)}",
    ),
    Case("HashiCorp", "vault-token", "hvs." + rand(B64URL, 90)),
    Case("Pulumi", "pulumi-token", "pul-" + rand(HEX, 40)),
    Case("Postman", "postman-api-key", f"PMAK-{rand(HEX, 24)}-{rand(HEX, 34)}"),
    Case("Grafana", "grafana-cloud-token", "glc_" + rand(B64, 80) + "="),
    Case("Grafana", "grafana-service-account-token", f"glsa_{rand(ALNUM, 32)}_{rand(HEX, 8)}"),
    Case("Sentry", "sentry-org-token", "sntrys_eyJ" + rand(ALNUM + "+/_", 120)),
    Case("Sentry", "sentry-user-token", "sntryu_" + rand(HEX, 64)),
    Case("Shopify", "shopify-token", "shpat_" + rand(HEX, 32)),
    Case("Shopify", "shopify-token", "shpss_" + rand(HEX, 32)),
    Case("Linear", "linear-api-key", "lin_api_" + rand(ALNUM, 40)),
    Case("Doppler", "doppler-token", "dp.pt." + rand(ALNUM, 43)),
    Case("Doppler", "doppler-token", "dp.st.dev." + rand(ALNUM, 40)),
    Case("Discord", "discord-bot-token", discord(), "DISCORD_TOKEN: "),
    Case("Square", "square-access-token", "sq0atp-" + rand(B64URL, 22)),
    Case("Square", "square-oauth-secret", "sq0csp-" + rand(B64URL, 43)),
    Case("Mailchimp", "mailchimp-api-key", rand(HEX, 32) + "-us14"),
    Case("Groq", "groq-api-key", "gsk_" + rand(ALNUM, 52)),
    Case("age", "age-secret-key", "AGE-SECRET-KEY-1" + rand(BECH32_UPPER, 58)),
    Case("Private key", "private-key", pem("RSA"), "id_rsa:\n", "\nend of file"),
    Case("Private key", "private-key", pem(""), "key.pem:\n"),
    Case("Private key", "private-key", pem("OPENSSH"), "```\n", "\n```"),
    Case("Private key", "private-key", pem("PGP", 6).replace("KEY-", "KEY BLOCK-")),
    Case(
        "Private key",
        "private-key",
        pem("", 3, newline="\\n"),
        '{"type": "service_account", "private_key": "',
        '\\n", "client_email": "bot@demo.iam.gserviceaccount.com"}',
    ),
    Case("JSON Web Token", "jwt", jwt(), "Authorization: Bearer ", "\n"),
    Case("JSON Web Token", "jwt", jwt(), 'token = "', '"'),
    Case("Generic", "generic-secret-assignment", rand(ALNUM, 23) + "7", 'api_key = "', '"'),
    Case("Generic", "generic-secret-assignment", rand(ALNUM, 17) + "!", "password: '", "'"),
    Case("Generic", "generic-secret-assignment", rand(ALNUM, 31) + "0", '"clientSecret": "', '"}'),
    Case("Generic", "generic-secret-assignment", rand(ALNUM, 19) + "%", "DB_PASSWORD=", "\n"),
    Case(
        "Generic", "generic-secret-assignment", rand(ALNUM, 39) + "2", "export SERVICE_TOKEN=", ""
    ),
    Case("Generic", "generic-secret-assignment", rand(ALNUM, 15) + "9", "GH_TOKEN=", "\r\nX=1\r\n"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule_id)
def test_finds_each_provider_key(case: Case) -> None:
    findings = scan_secrets(case.text)
    assert [f.rule_id for f in findings] == [case.rule_id]
    (finding,) = findings
    assert finding.provider == case.provider
    assert (finding.start, finding.end) == (len(case.before), len(case.before) + len(case.secret))
    assert contains_secret(case.text)
    assert redact(case.text) == case.before + "[REDACTED]" + case.after
    assert case.secret not in repr(findings)
    assert case.secret not in str(findings)


def test_every_rule_has_a_sample() -> None:
    # Later rules have theirs in the format table and in test_secrets_formats.py
    # (CONTEXT_SAMPLES), or in test_secrets_spellings.py (SPELLING_SAMPLES).
    sampled = {c.rule_id for c in CASES} | {f.rule_id for f in FORMATS if f.rule_id}
    sampled |= {rule_id for rule_id, _, _ in CONTEXT_SAMPLES}
    sampled |= {rule_id for rule_id, _, _ in SPELLING_SAMPLES}
    assert sampled == {rule.id for rule in SECRET_RULES}


def test_rules_cover_enough_providers_with_unique_ids() -> None:
    ids = [rule.id for rule in SECRET_RULES]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", rule_id) for rule_id in ids)
    assert len({rule.provider for rule in SECRET_RULES} - NOT_PROVIDERS) >= 25
    for rule in SECRET_RULES:
        assert rule.description
        assert "\n" not in rule.description


def test_rules_and_findings_are_frozen() -> None:
    finding = SecretFinding(rule_id="x", provider="y", start=0, end=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.start = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SECRET_RULES[0].pattern = ""  # type: ignore[misc]
    assert isinstance(SECRET_RULES[0], SecretRule)
    # A finding has nowhere to keep the secret, by construction.
    assert {f.name for f in dataclasses.fields(SecretFinding)} == {
        "rule_id",
        "provider",
        "start",
        "end",
    }


_DATA_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA"
    + base64.b64encode(random.Random(7).randbytes(300)).decode()
)

NEGATIVES = {
    "prose": (
        "We agreed that the password policy requires rotation every 90 days. The token "
        "budget for the summariser is 4096, and the secret to a useful memory is brevity. "
        "Ask Dana before touching the API key settings; she keeps the access key list."
    ),
    "uuid": "request id 123e4567-e89b-12d3-a456-426614174000 failed",
    "git sha": "fixed in e83c5163316f89bfbde7d9ab23ca2e25604af290 (short: e83c516)",
    "data url": f'<img src="{_DATA_URL}">',
    "environment lookup": (
        'client = Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"])\n'
        'openai_key = os.getenv("OPENAI_API_KEY")\n'
        "token = settings.SLACK_BOT_TOKEN\n"
    ),
    "angle placeholder": 'api_key = "<your-key-here>"',
    "template placeholder": 'token: "${TOKEN}"',
    "jinja placeholder": 'secret_key: "{{secret_key_value}}"',
    "your placeholder": 'API_KEY="your-api-key-goes-here"',
    "x placeholder": 'password = "xxxxxxxxxxxxxxxx"',
    "same char": 'client_secret: "aaaaaaaaaaaaaaaa"',
    "masked": 'password = "************"',
    "changeme": "DB_PASSWORD=changeme-changeme",
    "env reference": "OPENAI_API_KEY=${OPENAI_API_KEY}",
    "header name": 'auth_token = "X-Auth-Token"',
    "sha256": "sha256:" + hashlib.sha256(b"memdir").hexdigest(),
    "semver": "upgraded memdir from 0.1.0 to 1.12.3-rc.1+build.5",
    "url with query": "https://example.com/search?q=memdir+tokens&page=2&sort=desc#results",
    "identifier with key-like infix": "see task_sk_live_demo1234567890abcdefghijkl for details",
    "short prefixes": "Slack tokens start with xoxb-, GitHub ones with ghp_, OpenAI with sk-proj-.",
    "truncated key": "the key looked like sk-ant-api03-abc... but I did not copy it",
    "pagination tokens": (
        '{"NextToken": "eyJOZXh0VG9rZW4iOiBudWxsfQ==", "next_page_token": "a1b2c3d4e5f6g7",'
        ' "LockToken": "447e55ac-0000-0000-0000-86b67c17f8b5"}'
    ),
    "aws documentation example": "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "key block quoted in prose": (
        "The file starts with -----BEGIN RSA PRIVATE KEY----- and ends with "
        "-----END RSA PRIVATE KEY-----, nothing else."
    ),
    "python constants": 'PASSWD = getpass.getpass("IMAP: ")\nERRORTOKEN = Types.ERRORTOKEN',
    "enum value": 'FORCE_CHANGE_PASSWORD = "FORCE_CHANGE_PASSWORD"',
    "json numbers": '{"max_tokens": 1024, "password_min_length": 12, "tokenizer": "cl100k"}',
}


@pytest.mark.parametrize("text", NEGATIVES.values(), ids=NEGATIVES.keys())
def test_ordinary_text_is_not_flagged(text: str) -> None:
    assert scan_secrets(text) == []
    assert not contains_secret(text)
    assert redact(text) == text


def test_findings_are_sorted_and_redaction_keeps_everything_else() -> None:
    gh, aws = "ghp_" + rand(ALNUM, 36), "AKIA" + rand(UPPER_DIGITS, 16)
    text = f"first {aws}, then {gh}; also {aws}."
    findings = scan_secrets(text)
    assert [f.rule_id for f in findings] == [
        "aws-access-key-id",
        "github-pat",
        "aws-access-key-id",
    ]
    assert [f.start for f in findings] == sorted(f.start for f in findings)
    assert redact(text) == "first [REDACTED], then [REDACTED]; also [REDACTED]."
    assert redact(text, replacement="***") == "first ***, then ***; also ***."
    assert redact(redact(text)) == redact(text)


def test_overlap_keeps_the_more_specific_rule() -> None:
    azure = rand(ALNUM, 3) + "7Q~" + rand(ALNUM, 34)
    text = f'client_secret = "{azure}"'
    assert [f.rule_id for f in scan_secrets(text)] == ["azure-ad-client-secret"]


def test_partial_overlap_is_redacted_as_a_whole() -> None:
    token = "ghp_" + rand(ALNUM, 36)
    text = f'secret = "github:{token}"'
    (finding,) = scan_secrets(text)
    assert finding.rule_id == "github-pat"
    assert text[finding.start : finding.end] == token
    assert redact(text) == 'secret = "[REDACTED]"'


def test_unterminated_private_key_is_still_hidden() -> None:
    body = "\n".join(rand(B64, 64) for _ in range(3))
    text = f"-----BEGIN PRIVATE KEY-----\n{body}\n\nThat was all I had."
    (finding,) = scan_secrets(text)
    assert finding.rule_id == "private-key"
    redacted = redact(text)
    assert redacted == "[REDACTED]\n\nThat was all I had."
    assert all(line not in redacted for line in body.splitlines())


def test_several_private_key_blocks_each_found() -> None:
    first, second = pem("EC"), pem("RSA")
    text = f"{first}\nand\n{second}\n"
    assert [f.rule_id for f in scan_secrets(text)] == ["private-key", "private-key"]
    assert redact(text) == "[REDACTED]\nand\n[REDACTED]\n"


def test_discord_lookalike_without_numeric_id_is_ignored() -> None:
    # Same shape as a bot token, but the first segment decodes to text, not a user id.
    lookalike = f"{b64url(b'4 is not an id, ok')}.{rand(ALNUM, 6)}.{rand(ALNUM, 27)}"
    assert lookalike[0] in "MNO"
    assert not contains_secret(f"id {lookalike} here")


@pytest.mark.parametrize(
    "text",
    [
        "sk-" * 300_000,
        "eyJ." * 250_000,
        'token="' * 150_000,
        "-----BEGIN PRIVATE KEY-----" * 40_000,
    ],
    ids=["sk-", "eyJ.", "token-quote", "pem-begin"],
)
def test_megabyte_of_near_misses_returns(text: str) -> None:
    # A regression guard against catastrophic backtracking: it must simply finish.
    findings = scan_secrets(text)
    assert isinstance(findings, list)
    assert isinstance(redact(text), str)


# Random keys for the main providers, in the alphabet and length each format uses.
def _text(alphabet: str, size: int, max_size: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=max_size or size)


ANTHROPIC_KEYS = _text(B64URL, 93).map(lambda body: f"sk-ant-api03-{body}AA")
OPENAI_KEYS = st.one_of(
    _text(B64URL, 40, 180).map(lambda body: f"sk-proj-{body}"),
    st.tuples(_text(ALNUM, 20), _text(ALNUM, 20)).map(lambda p: f"sk-{p[0]}T3BlbkFJ{p[1]}"),
)
AWS_KEYS = st.tuples(st.sampled_from(["AKIA", "ASIA", "ABIA", "ACCA"]), _text(UPPER_DIGITS, 16))
GITHUB_KEYS = st.tuples(st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]), _text(ALNUM, 36))
SLACK_KEYS = st.tuples(
    st.sampled_from(["xoxb", "xoxp"]),
    _text(string.digits, 6, 13),
    _text(ALNUM + "-", 16, 60),
).map(lambda p: f"{p[0]}-{p[1]}-{p[2]}")
KEYS = st.one_of(
    ANTHROPIC_KEYS,
    OPENAI_KEYS,
    AWS_KEYS.map("".join),
    GITHUB_KEYS.map("".join),
    SLACK_KEYS,
)
WORDS = st.lists(_text(string.ascii_letters + string.digits + string.punctuation, 1, 12))


@settings(max_examples=200, deadline=None, database=None)
@given(key=KEYS, before=WORDS, after=WORDS)
def test_random_keys_in_random_prose_are_found_and_redacted(
    key: str, before: list[str], after: list[str]
) -> None:
    text = " ".join([*before, key, *after])
    assert contains_secret(text)
    assert key not in redact(text)


@settings(max_examples=200, deadline=None, database=None)
@given(text=st.text())
def test_contains_agrees_with_scan_and_clean_text_is_untouched(text: str) -> None:
    findings = scan_secrets(text)
    assert contains_secret(text) == bool(findings)
    if not findings:
        assert redact(text) == text
    for earlier, later in itertools.pairwise(findings):
        assert earlier.end <= later.start
