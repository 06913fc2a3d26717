"""The token formats and syntaxes the secret guard used to let through.

One group per kind of miss: values known by the name before them when unquoted or in
other syntaxes; credentials inside commands and URLs; Kubernetes, NuGet and Terraform
configs; whole provider families; newer variants of known providers; a token right after
``=`` whose alphabet has ``=``; letter-only random values. Each case goes through the
write guard the way a memory file would, and must be refused and fully redacted. Every
sample is assembled from seeded random characters, so no literal here is a real key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from pathlib import Path

import pytest

from memdir.permissions import memory_write_guard
from memdir.store import format_memory_file
from memdir.store._secret_context import looks_like_name
from memdir.store._secrets import redact, scan_secrets

_RNG = random.Random(1302)
A62 = string.ascii_letters + string.digits
B64U = A62 + "-_"
B64 = A62 + "+/"
HEX = "0123456789abcdef"
LOW = string.ascii_lowercase + string.digits
UP = string.ascii_uppercase + string.digits


def rand(alphabet: str, size: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(size))


def uid() -> str:
    return str(uuid.UUID(int=_RNG.getrandbits(128), version=4))


def refused(tmp_path: Path, text: str) -> bool:
    """Whether the write guard refuses ``text`` as the body of a reference memory."""
    memory = tmp_path / "mem"
    memory.mkdir(exist_ok=True)
    guard = memory_write_guard(memory)
    body = format_memory_file(name="note", description="a note", type="reference", body=text)
    return guard(memory / "note.md", body) is not None


def assert_caught(tmp_path: Path, text: str, secret: str) -> None:
    assert secret in text
    assert refused(tmp_path, text)
    assert secret not in redact(text)
    at = text.index(secret)
    covering = [f for f in scan_secrets(text) if f.start <= at and at + len(secret) <= f.end]
    assert covering, scan_secrets(text)


def cases(table: dict[str, tuple[str, str]]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(("text", "secret"), table.values(), ids=table.keys())


# --- values known by the name before them ---------------------------------------------

_V = [rand(LOW, 32) for _ in range(12)]
NAME_KEYED = {
    "yaml unquoted": (f"adafruit_token: {_V[0]}", _V[0]),
    "ini unquoted": (f"[flickr]\nflickrToken = {_V[1]}\n", _V[1]),
    "makefile ?=": (f'algolia_TOKEN ?= "{_V[2]}"', _V[2]),
    "makefile ::=": (f'gitter_TOKEN ::= "{_V[3]}"', _V[3]),
    "makefile :::=": (f'twitch_TOKEN :::= "{_V[4]}"', _V[4]),
    "xml element": (f"<adobeToken>\n    {_V[5]}\n</adobeToken>", _V[5]),
    "java setProperty": (f'System.setProperty("CODECOV_TOKEN", "{_V[6]}")', _V[6]),
    "php .=": (f'$finicityToken .= "{_V[7]}";', _V[7]),
    "go var with type": (f'var droneciToken string = "{_V[8]}"', _V[8]),
    "escaped json": (json.dumps({"config.ini": f"OKTA_TOKEN={_V[9]}\nBACKUP=true"}), _V[9]),
    "json string in json": (json.dumps(json.dumps({"password": _V[10] + "!"})), _V[10] + "!"),
    "ini lower-case name": (f"[datadog]\napi_key = {_V[11]}\nsite = datadoghq.eu", _V[11]),
}


@cases(NAME_KEYED)
def test_name_keyed_values_in_every_syntax(tmp_path: Path, text: str, secret: str) -> None:
    assert_caught(tmp_path, text, secret)


# --- credentials inside commands and URLs ---------------------------------------------

_PW = [rand(A62, 10) + "!" + rand(A62, 5) for _ in range(6)]
_BEARER, _BASIC = rand(B64U, 40), base64.b64encode(f"ci:{_PW[0]}".encode()).decode()
_OCTOPUS = uid()
COMMANDS_AND_URLS = {
    "curl bearer header": (
        f'curl -X GET "https://api.example.com/v1/me" -H "Authorization: Bearer {_BEARER}"',
        _BEARER,
    ),
    "curl basic header": (f"curl -H 'Authorization: Basic {_BASIC}' https://ci.example", _BASIC),
    "curl -u": (f"curl --cacert ca.crt -u elastic:{_PW[1]} https://localhost:9200", _PW[1]),
    "curl --user quoted": (f"curl -s --user 'api:{_PW[2]}' https://api.mailgun.net/v3", _PW[2]),
    "url userinfo": (f"DATABASE_URL=postgres://app:{_PW[3]}@db.internal:5432/main", _PW[3]),
    "mongodb url": (f"mongodb+srv://admin:{_PW[4]}@cluster0.abcde.mongodb.net/app", _PW[4]),
    "api key header": (f'curl -H "X-Octopus-ApiKey: {_OCTOPUS}" https://octopus.example', _OCTOPUS),
}


@cases(COMMANDS_AND_URLS)
def test_credentials_in_commands_and_urls(tmp_path: Path, text: str, secret: str) -> None:
    assert_caught(tmp_path, text, secret)


# --- Kubernetes Secret data, NuGet and Terraform configs ------------------------------

_K8S = base64.b64encode(_PW[5].encode()).decode()
_NUGET = "TestSource" + rand(string.ascii_letters, 8)
_TF = "thisIs" + rand(string.ascii_letters, 3) + "42"
_TF_TOKEN = f"{rand(A62, 14)}.atlasv1.{rand(A62, 67)}"
_TF_VALUE = rand(A62, 36)
CONFIGS = {
    "kubernetes secret data": (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\n"
        f"data:\n  username: YWRtaW4=\n  password: {_K8S}\n",
        _K8S,
    ),
    "kubernetes secret, data first": (
        f"apiVersion: v1\ndata:\n\tpassword: {_K8S}\nkind: Secret\nmetadata:\n\tname: x\n",
        _K8S,
    ),
    "nuget cleartext password": (
        '<packageSourceCredentials>\n  <feed>\n    <add key="Username" value="ci" />\n'
        f'    <add key="ClearTextPassword" value="{_NUGET}" />\n  </feed>\n'
        "</packageSourceCredentials>",
        _NUGET,
    ),
    "terraform password": (
        f'resource "azurerm_sql_server" "db" {{\n  administrator_login_password = "{_TF}"\n}}',
        _TF,
    ),
    "terraform variable pair": (
        f'variable {{\n  name = "INFRACOST_API_KEY"\n  secret_value = "{_TF_VALUE}"\n}}',
        _TF_VALUE,
    ),
    "terraformrc": (f'credentials "app.terraform.io" {{\n  token = "{_TF_TOKEN}"\n}}', _TF_TOKEN),
}


@cases(CONFIGS)
def test_kubernetes_nuget_and_terraform(tmp_path: Path, text: str, secret: str) -> None:
    assert_caught(tmp_path, text, secret)


# --- provider families ------------------------------------------------------------------

_UP5 = "-".join(rand(UP, 5) for _ in range(3))
FAMILIES = {
    "Fly.io access token": f"fo1_{rand(B64U, 43)}",
    "Fly.io macaroon": f"fm2_{rand(B64, 200)}",
    "Sourcegraph": f"sgp_{rand('0123456789abcdefABCDEF', 16)}_{rand(HEX, 40)}",
    "1Password secret key": f"A3-{rand(UP, 6)}-{rand(UP, 6)}-{rand(UP, 5)}-{_UP5}",
    "1Password service account": f"ops_eyJ{rand(B64, 300)}",
    "Adobe client secret": f"p8e-{rand(HEX, 32)}",
    "Alibaba access key id": f"LTAI{rand(A62, 20)}",
    "Duffel": f"duffel_live_{rand(B64U, 43)}",
    "Facebook page token": f"EAAC{rand(A62, 150)}",
    "Facebook app token": f"{rand(string.digits, 16)}|{rand(B64U, 27)}",
    "Teams webhook path": f"{uid()}@{uid()}/IncomingWebhook/{rand(HEX, 32)}/{uid()}",
    "Notion": f"ntn_{rand(string.digits, 11)}{rand(A62, 35)}",
    "Shippo": f"shippo_live_{rand(HEX, 40)}",
    "Heroku v2": f"HRKU-AA{rand(B64U, 58)}",
    "Atlassian": f"ATATT3{rand(B64U, 182)}={rand('0123456789ABCDEF', 8)}",
    "Dynatrace": f"dt0c01.{rand(UP, 24)}.{rand(UP, 64)}",
    "New Relic": f"NRAK-{rand(UP, 27)}",
    "Telegram bot": f"{rand(string.digits, 10)}:AA{rand(B64U, 33)}",
    "OpenShift": f"sha256~{rand(B64U, 43)}",
    "Twitter bearer": f"{'A' * 22}{rand(A62, 90)}",
}


@pytest.mark.parametrize("token", FAMILIES.values(), ids=FAMILIES.keys())
def test_provider_families(tmp_path: Path, token: str) -> None:
    text = f"note: {token}"
    if "IncomingWebhook" in token:
        text = f"Teams hook https://contoso.webhook.office.com/webhookb2/{token} for alerts"
    assert_caught(tmp_path, text, token)


# --- newer variants of providers memdir already knew --------------------------------------

VARIANTS = {
    "Slack app token": f"xapp-1-A{rand(UP, 10)}-{rand(string.digits, 13)}-{rand(HEX, 64)}",
    "Slack refresh token": f"xoxe-1-{rand(A62, 140)}",
    "Slack config token": f"xoxe.xoxp-1-{rand(A62, 140)}",
    "Slack legacy token": f"xoxo-523423-234243-234233-{rand(HEX, 18)}",
    "GitLab feed token": f"glft-{rand(B64U, 20)}",
    "GitLab OAuth secret": f"gloas-{rand(B64U, 64)}",
    "GitLab CI job token": f"glcbt-{rand(A62, 5)}_{rand(B64U, 20)}",
    "GitLab agent token": f"glagent-{rand(B64U, 50)}",
    "GitLab runner registration": f"GR1348941{rand(B64U, 20)}",
    "Hugging Face org token": f"api_org_{rand(string.ascii_letters, 34)}",
    "Stripe rk_prod": f"rk_prod_{rand(A62, 99)}",
    "Vault legacy token": f"s.{rand(A62, 11)}7Q{rand(A62, 11)}",
    "test.pypi.org token": f"pypi-AgENdGVzdC5weXBpLm9yZw{rand(B64U, 120)}",
    "AWS A3T key id": f"A3T{rand(UP, 17)}",
}


@pytest.mark.parametrize("token", VARIANTS.values(), ids=VARIANTS.keys())
def test_newer_variants(tmp_path: Path, token: str) -> None:
    text = f"vault_reply: {token}" if token.startswith("s.") else f"found {token} in the log"
    assert_caught(tmp_path, text, token)


# --- tokens right after "=" whose alphabet has "=" ----------------------------------------

_SENTRY = f"sntrys_eyJ{rand(B64, 120)}"
_GRAFANA = f"glc_{rand(B64, 80)}="
_GITHUB = f"ghp_{rand(A62, 36)}"
EDGES = {
    "sentry after =": (f"SENTRY_AUTH_TOKEN={_SENTRY}", _SENTRY, "sentry-org-token"),
    "sentry in escaped json": (
        json.dumps({"env": f"SENTRY_TOKEN={_SENTRY}\nX=1"}),
        _SENTRY,
        "sentry-org-token",
    ),
    "grafana after =": (f"grafana={_GRAFANA}", _GRAFANA, "grafana-cloud-token"),
    "github after an escaped newline": (json.dumps(f"line one\n{_GITHUB}"), _GITHUB, "github-pat"),
}


@pytest.mark.parametrize(("text", "secret", "rule_id"), EDGES.values(), ids=EDGES.keys())
def test_token_after_an_equals_sign(tmp_path: Path, text: str, secret: str, rule_id: str) -> None:
    # The provider rule itself must see it: the name-keyed rule also would, which hid
    # the bug wherever a name stood before the "=".
    assert_caught(tmp_path, text, secret)
    assert rule_id in {f.rule_id for f in scan_secrets(text)}


# --- random values that happen to have no digits ------------------------------------------

_LETTERS = ["yqDVtkqPECriaLRi", rand(string.ascii_letters, 24), "qzkxjvbwpmrtlnhgdfsc"]
LETTERS_ONLY = {
    "curl -u letters": (f"curl -k -u developer:{_LETTERS[0]} https://cache:11222", _LETTERS[0]),
    "mixed-case letters": (f'CLIENT_SECRET = "{_LETTERS[1]}"', _LETTERS[1]),
    "lower-case letters": (f"api_token: {_LETTERS[2]}", _LETTERS[2]),
}


@cases(LETTERS_ONLY)
def test_letter_only_random_values(tmp_path: Path, text: str, secret: str) -> None:
    assert_caught(tmp_path, text, secret)


@pytest.mark.parametrize(
    "name", ["FORCE_CHANGE_PASSWORD", "X-Auth-Token", "TestSourcePassword", "XMLHttpRequest"]
)
def test_identifiers_still_read_as_names(name: str) -> None:
    assert looks_like_name(name)


@pytest.mark.parametrize("value", ["yqDVtkqPECriaLRi", "qzkxjvbwpmrtlnhgdfsc", "ab12cd34ef"])
def test_random_values_do_not_read_as_names(value: str) -> None:
    assert not looks_like_name(value)


# --- and ordinary memory text still passes -------------------------------------------------

_SHA1 = hashlib.sha1(b"memdir").hexdigest()
_SHA256 = hashlib.sha256(b"memdir").hexdigest()
_INTEGRITY = base64.b64encode(hashlib.sha512(b"memdir").digest()).decode()
ORDINARY = {
    "git sha": f"Bisected the regression to {_SHA1}; {_SHA1[:7]} is the short form.",
    "uuid": f'"correlationId": "{uid()}"',
    "uuid under an id name": f"request_id={uid()} failed twice",
    "docker digest": f"docker pull redis@sha256:{_SHA256}",
    "npm integrity": f'"integrity": "sha512-{_INTEGRITY}"',
    "url with query": "https://shop.example.com/sale?utm_source=mail&utm_content=k5wyu5kl&page=2",
    "masked github token": "GITHUB_TOKEN=ghp_" + "x" * 36,
    "masked with an ellipsis": "the token looks like ghp_xxxx… in the docs",
    "masked aws key": "aws_access_key_id = AKIA" + "X" * 16,
    "github actions reference": "token: ${{ secrets.GITHUB_TOKEN }}",
    "environment lookup": 'api_key = os.environ["API_KEY"]',
    "vault lookup": "export DB_PASSWORD=$(vault kv get -field=password secret/db)",
    "arn of a secret": '"SecretArn": "arn:aws:secretsmanager:us-east-1:1234:secret:prod/db-AbCdEf"',
    "paging token": '"next_page_token": "ioYVKeFePm5Oijl1qAgCSbVpUkK26GAS"',
    "public ssh key": "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAiI4vLnfMh0iTiR ana@laptop",
    "postgres default": "postgres://postgres:postgres@localhost:5432/test",
    "docker user": "docker run -u 1000:1000 builder",
    "config map": "kind: ConfigMap\ndata:\n  LOG_LEVEL: ZGVidWc=\n",
    "password flag": "docker login ghcr.io -u USERNAME --password-stdin",
    "tokenizer": 'tokenizer: "meta-llama/Llama-3.1-8B-Instruct"',
}


@pytest.mark.parametrize("text", ORDINARY.values(), ids=ORDINARY.keys())
def test_ordinary_memory_text_is_not_refused(tmp_path: Path, text: str) -> None:
    assert not refused(tmp_path, text), scan_secrets(text)


# --- one sample per rule that judges by context ---------------------------------------------

_NETRC_PW = rand(A62, 16)
_BUNDLE = f"{rand(HEX, 8)}:{rand(HEX, 8)}"
_MYSQL_PW = rand(A62, 12)
CONTEXT_SAMPLES: list[tuple[str, str, str]] = [
    ("generic-secret-assignment", f"DB_PASSWORD={_V[0]}", _V[0]),
    ("generic-secret-comparison", f'if ("{_V[1]}" == db_password) {{', _V[1]),
    ("generic-secret-element", f"<apiToken>{_V[2]}</apiToken>", _V[2]),
    ("generic-secret-pair", f'- name: DB_PASSWORD\n  value: "{_V[3]}"', _V[3]),
    ("http-authorization", f"Authorization: Token {_V[4]}", _V[4]),
    ("url-or-curl-password", f"redis://:{_PW[0]}@cache:6379", _PW[0]),
    ("credential-slot-password", f"machine ci.example\nlogin bot\npassword {_NETRC_PW}", _NETRC_PW),
    ("credential-slot-password", f"export BUNDLE_GEMS__CONTRIBSYS__COM={_BUNDLE}", _BUNDLE),
    ("credential-slot-password", f"mysql -u root -p{_MYSQL_PW} shop", _MYSQL_PW),
    ("kubernetes-secret-data", CONFIGS["kubernetes secret data"][0], _K8S),
    ("gitlab-session-cookie", f"Cookie: _gitlab_session={rand(LOW, 32)}", ""),
    ("softlayer-api-url", f"http://api.softlayer.com/soap/v3/{rand(LOW, 64)}", ""),
    (
        "jwt-base64",
        "jwt_b64: " + base64.b64encode(b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln").decode(),
        "",
    ),
    (
        "slack-webhook-url",
        f"https://hooks.slack.com/workflows/T{rand(UP, 8)}/A{rand(UP, 10)}"
        f"/{rand(string.digits, 18)}/{rand(A62, 24)}",
        "",
    ),
]


@pytest.mark.parametrize(("rule_id", "text", "secret"), CONTEXT_SAMPLES, ids=lambda v: str(v)[:40])
def test_each_context_rule_reports_its_sample(rule_id: str, text: str, secret: str) -> None:
    findings = scan_secrets(text)
    assert rule_id in {f.rule_id for f in findings}, findings
    if secret:
        assert secret not in redact(text)
