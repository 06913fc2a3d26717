"""Finding credentials in text, so that memdir never writes one to disk.

Memories are plain Markdown files that outlive the conversation they came from, get
synced, committed and pasted elsewhere. An API key that slips into one is a leaked key.
So memdir refuses to write a memory file in which :func:`contains_secret` finds anything,
and where text is kept for other purposes (logs, transcripts shown back to the model) it
passes through :func:`redact` first.

The rules are deliberately high-confidence: a provider's fixed prefix, a fixed length or
alphabet, a checksum-like marker, or a name that says "this is a secret" right before a
quoted value. They are chosen so that ordinary prose, hashes, UUIDs and source code are
not flagged; a scanner that cries wolf gets switched off. Every regular expression is
linear-time (no nested quantifiers over overlapping alphabets) and each token rule is
anchored on the start of a run of token characters, so adversarial input cannot make
scanning quadratic. Findings carry only offsets, never the matched text.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = [
    "SECRET_RULES",
    "SecretFinding",
    "SecretRule",
    "contains_secret",
    "redact",
    "scan_secrets",
]

# Rules that name a provider outrank structural ones (JWT, a name-scoped value), which
# outrank the generic "name = value" rules, when two matches overlap.
_PROVIDER, _STRUCTURAL, _GENERIC = 2, 1, 0


@functools.cache
def _compile(pattern: str) -> re.Pattern[str]:
    # re.ASCII keeps \w and \b to [A-Za-z0-9_]: keys are ASCII, and a Unicode \w would let
    # a neighbouring accented letter hide the start of a key.
    return re.compile(pattern, re.ASCII)


@dataclass(frozen=True, kw_only=True)
class SecretRule:
    """One kind of credential and how to recognise it.

    ``pattern`` is a regular expression (compiled with ``re.ASCII`` on first use). If it
    has a group named ``secret``, only that group is the credential; otherwise the whole
    match is. ``block_end``, when set, makes the match run on to the first match of that
    expression (used for multi-line key blocks). ``check``, when set, gets the secret
    text and can veto a match that the pattern alone cannot rule out. Where matches of two
    rules overlap, the one with the higher ``specificity`` is the one reported.
    """

    id: str
    provider: str
    description: str
    pattern: str
    specificity: int = _PROVIDER
    block_end: str | None = None
    check: Callable[[str], bool] | None = field(default=None, repr=False, compare=False)

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        """Yield the ``(start, end)`` of each credential this rule finds in ``text``."""
        regex = _compile(self.pattern)
        if self.block_end is not None:
            spans = self._block_spans(text, regex, _compile(self.block_end))
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
                tail = _compile(_BASE64_LINES).match(text, head.end())
                covered = tail.end() if tail else head.end()
            yield head.start(), covered


@dataclass(frozen=True, kw_only=True)
class SecretFinding:
    """Where a credential was found: the rule that matched and the offsets in the text.

    The matched text itself is never kept, so logging a finding cannot leak it.
    """

    rule_id: str
    provider: str
    start: int
    end: int


# Template syntax (<key>, ${TOKEN}, {{ secret }}), masking runs, stock words in docs, and
# values of letters and separators only, which in code are names ("X-Auth-Token",
# "FORCE_CHANGE_PASSWORD"); a key or password almost always has a digit or symbol.
_PLACEHOLDER = (
    r"(?i)^[<$%{\[(]|>$|^[a-z_./-]*$|\$\{|\{\{|xxxx|\*\*\*|\.\.\."
    r"|change[_-]?me|placeholder|example|your|redacted|dummy|replace|insert"
)


def _not_placeholder(value: str) -> bool:
    """Whether a value assigned to a secret-sounding name looks real rather than a stub."""
    # Very few distinct characters ("aaaaaaaaaaaa", "abababababab") is filler, not a key.
    return _compile(_PLACEHOLDER).search(value) is None and len(set(value)) > 3


def _not_aws_example(value: str) -> bool:
    """AWS documentation's sample credentials all end in, or contain, ``EXAMPLE``."""
    return "EXAMPLE" not in value


def _has_key_material(block: str) -> bool:
    """A key block holds base64 lines; a BEGIN line quoted in prose or code does not."""
    return _compile(r"[A-Za-z0-9+/]{16}").search(block) is not None


def _is_discord_token(value: str) -> bool:
    """A Discord bot token opens with the bot's numeric user id, base64-encoded."""
    head = value.split(".", 1)[0]
    try:
        decoded = base64.b64decode(head + "=" * (-len(head) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return False
    return decoded.isdigit() and 15 <= len(decoded) <= 20


_B64 = r"[A-Za-z0-9+/]"
_LITERAL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
# Key material after a BEGIN line with no END: base64 lines, split by real newlines or
# by the escaped "\n" of a JSON string (as in a service-account key file).
_BASE64_LINES = r"(?:(?:\\[nr]|\s)*+[A-Za-z0-9+/=]{16,}+)*+"
_PEM_KINDS = r"(?:(?:RSA|EC|OPENSSH|DSA|PGP|ENCRYPTED) )?PRIVATE KEY(?: BLOCK)?-----"
# Pagination and concurrency tokens (NextToken, page_token, LockToken) are not credentials,
# and API output an agent reads is full of them.
_NOT_PAGING = "".join(
    f"(?<!{word}{sep})"
    for word in ("next", "page", "continuation", "lock", "change", "sync")
    for sep in ("", "_", "-")
)
_SECRET_NAME = (
    r"(?i:api[_-]?key|secret[_-]?key|client[_-]?secret|access[_-]?key|auth[_-]?key"
    rf"|secret|password|passwd|{_NOT_PAGING}token)"
)


def _rule(
    rule_id: str,
    provider: str,
    description: str,
    pattern: str,
    *,
    edge: str | None = r"\w-",
    specificity: int = _PROVIDER,
    check: Callable[[str], bool] | None = None,
) -> SecretRule:
    """A token rule; ``edge`` is the token alphabet the match may not touch on either side.

    The edge check means a rule only starts where a run of token characters starts, so
    ``task_sk_live_demo`` is not a Stripe key, and a megabyte of near-misses is scanned
    once rather than once per offset.
    """
    if edge is not None:
        # Checking the edge after a literal prefix, not before it, lets the regex engine
        # skip ahead to that prefix instead of trying every offset.
        size = len(pattern) - len(pattern.lstrip(_LITERAL))
        if pattern[size : size + 1] in ("{", "*", "+", "?"):
            size -= 1  # that character is quantified, so not part of the fixed prefix
        prefix = pattern[:size]
        pattern = rf"{prefix}(?<![{edge}]{prefix}){pattern[size:]}(?![{edge}])"
    return SecretRule(
        id=rule_id,
        provider=provider,
        description=description,
        pattern=pattern,
        specificity=specificity,
        check=check,
    )


SECRET_RULES: tuple[SecretRule, ...] = (
    # Issued keys are 95 characters after the prefix; any long tail is taken, so a key
    # copied with a character missing or added is still caught.
    _rule("anthropic-api-key", "Anthropic", "API key", r"sk-ant-api\d\d-[\w-]{80,}"),
    _rule("anthropic-admin-key", "Anthropic", "Admin API key", r"sk-ant-admin\d\d-[\w-]{80,}"),
    _rule("anthropic-oauth-token", "Anthropic", "OAuth token", r"sk-ant-o[ar]t01-[\w-]{40,}"),
    _rule("openai-project-key", "OpenAI", "Project/user key", r"sk-(?:proj|None)-[\w-]{40,}"),
    _rule("openai-service-account-key", "OpenAI", "Service account key", r"sk-svcacct-[\w-]{40,}"),
    _rule("openai-admin-key", "OpenAI", "Admin API key", r"sk-admin-[\w-]{40,}"),
    _rule("openai-legacy-key", "OpenAI", "Legacy key", r"sk-[^\W_]{20}T3BlbkFJ[^\W_]{20}"),
    _rule(
        "aws-access-key-id",
        "AWS",
        "Access key id",
        r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}",
        check=_not_aws_example,
    ),
    SecretRule(
        id="aws-secret-access-key",
        provider="AWS",
        description="Secret access key assigned to an AWS-style name",
        # A blank may separate the words too: "Secret access key: ..." in prose.
        pattern=r"(?i:aws[\s_.-]?secret[\s_.-]?(?:access[\s_.-]?)?key"
        r"|secret[\s_.-]?access[\s_.-]?key)"
        rf"[\"']?\s*(?::=|=>|[:=])\s*[\"']?(?P<secret>{_B64}{{40}})(?![\w+/=-])",
        specificity=_STRUCTURAL,
        check=_not_aws_example,
    ),
    _rule("gcp-api-key", "Google Cloud", "Google API key", r"AIza[\w-]{35}"),
    _rule("gcp-oauth-client-secret", "Google Cloud", "OAuth client secret", r"GOCSPX-[\w-]{28}"),
    _rule(
        "azure-storage-account-key",
        "Azure",
        "Storage account key in a connection string",
        rf"(?i:AccountKey)\s*=\s*(?P<secret>{_B64}{{86}}==)(?![\w+/=-])",
        edge=None,
    ),
    _rule(
        "azure-shared-access-key",
        "Azure",
        "Service Bus / Event Hubs shared access key",
        rf"(?i:SharedAccessKey)\s*=\s*(?P<secret>{_B64}{{43}}=)(?![\w+/=-])",
        edge=None,
    ),
    _rule(
        "azure-ad-client-secret",
        "Azure",
        "Entra ID (Azure AD) client secret",
        r"[\w~.]{3}\dQ~[\w~.-]{31,34}",
        edge=r"\w~.-",
    ),
    _rule("github-pat", "GitHub", "Classic personal access token", r"ghp_[^\W_]{36}"),
    _rule("github-oauth-token", "GitHub", "OAuth access token", r"gho_[^\W_]{36}"),
    _rule("github-user-token", "GitHub", "App user-to-server token", r"ghu_[^\W_]{36}"),
    _rule("github-app-token", "GitHub", "App installation token", r"ghs_[^\W_]{36}"),
    _rule("github-refresh-token", "GitHub", "App refresh token", r"ghr_[^\W_]{36}"),
    _rule("github-fine-grained-pat", "GitHub", "Fine-grained PAT", r"github_pat_\w{82}"),
    _rule("gitlab-pat", "GitLab", "Personal access token", r"glpat-[\w-]{20,}(?:\.[\w-]+)*"),
    _rule("gitlab-token", "GitLab", "Deploy/runner/trigger token", r"gl(?:dt|rt|ptt)-[\w-]{20,}"),
    _rule("slack-bot-token", "Slack", "Bot token", r"xoxb-[0-9]{6,}-[A-Za-z0-9-]{16,}"),
    _rule("slack-user-token", "Slack", "User token", r"xoxp-[0-9]{6,}-[A-Za-z0-9-]{16,}"),
    _rule("slack-token", "Slack", "App/refresh token", r"xox[ars]-[^\W_]+-[A-Za-z0-9-]{16,}"),
    _rule(
        "slack-webhook-url",
        "Slack",
        "Incoming webhook (the path is the secret)",
        r"https://hooks\.slack\.com/services/(?P<secret>T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[^\W_]{20,})",
        edge=None,
    ),
    _rule("stripe-secret-key", "Stripe", "Live secret key", r"sk_live_[^\W_]{20,}"),
    _rule("stripe-restricted-key", "Stripe", "Live restricted key", r"rk_live_[^\W_]{20,}"),
    _rule("stripe-test-key", "Stripe", "Test-mode secret key", r"[sr]k_test_[^\W_]{20,}"),
    _rule("stripe-webhook-secret", "Stripe", "Webhook signing secret", r"whsec_[^\W_]{32,}"),
    _rule("twilio-api-key", "Twilio", "API key (SK + 32 hex)", r"SK[0-9a-fA-F]{32}"),
    _rule("sendgrid-api-key", "SendGrid", "API key", r"SG\.[\w-]{22}\.[\w-]{43}"),
    _rule("npm-token", "npm", "Access token", r"npm_[^\W_]{36}"),
    _rule("pypi-token", "PyPI", "Upload token", r"pypi-AgEIcHlwaS5vcmc[\w-]{50,}"),
    _rule("huggingface-token", "Hugging Face", "User access token", r"hf_[^\W_]{34}"),
    _rule("digitalocean-token", "DigitalOcean", "API/OAuth token", r"do[opr]_v1_[a-f0-9]{64}"),
    _rule("databricks-token", "Databricks", "Access token", r"dapi[a-f0-9]{32}(?:-\d)?"),
    _rule(
        "terraform-cloud-token", "HashiCorp", "Terraform Cloud", r"[^\W_]{14}\.atlasv1\.[\w=-]{60,}"
    ),
    _rule("vault-token", "HashiCorp", "Vault service/batch token", r"hv[sb]\.[\w-]{24,}"),
    _rule("pulumi-token", "Pulumi", "Access token", r"pul-[a-f0-9]{40}"),
    _rule("postman-api-key", "Postman", "API key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    _rule(
        "grafana-cloud-token",
        "Grafana",
        "Cloud token",
        r"glc_[A-Za-z0-9+/]{32,}={0,2}",
        edge=r"\w+/=-",
    ),
    _rule(
        "grafana-service-account-token",
        "Grafana",
        "Service account",
        r"glsa_[^\W_]{32}_[\da-fA-F]{8}",
    ),
    _rule(
        "sentry-org-token", "Sentry", "Org auth token", r"sntrys_eyJ[\w+/=]{60,}", edge=r"\w+/=-"
    ),
    _rule("sentry-user-token", "Sentry", "User auth token", r"sntryu_[a-f0-9]{64}"),
    _rule("shopify-token", "Shopify", "App token/secret", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    _rule("linear-api-key", "Linear", "Personal API key", r"lin_api_[^\W_]{40}"),
    _rule(
        "doppler-token",
        "Doppler",
        "Personal, service, CLI or service-account token",
        r"dp\.(?:pt|ct|sa|scim|audit|st(?:\.[\w-]{1,60})?)\.[^\W_]{40,44}",
    ),
    _rule(
        "discord-bot-token",
        "Discord",
        "Bot token: base64 user id . timestamp . HMAC",
        r"[MNO][\w-]{22,26}\.[\w-]{6,7}\.[\w-]{27,40}",
        check=_is_discord_token,
    ),
    _rule("square-access-token", "Square", "Access token", r"sq0atp-[\w-]{22}"),
    _rule("square-oauth-secret", "Square", "OAuth application secret", r"sq0csp-[\w-]{43}"),
    _rule("mailchimp-api-key", "Mailchimp", "Marketing API key", r"[a-f0-9]{32}-us[0-9]{1,2}"),
    _rule("groq-api-key", "Groq", "API key", r"gsk_[^\W_]{48,56}"),
    _rule("age-secret-key", "age", "Encryption identity", r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}"),
    SecretRule(
        id="private-key",
        provider="Private key",
        description="PEM, OpenSSH or PGP private key block (also inside service-account JSON)",
        pattern=r"-----BEGIN " + _PEM_KINDS,
        block_end=r"-----END " + _PEM_KINDS,
        check=_has_key_material,
    ),
    _rule(
        "jwt",
        "JSON Web Token",
        "Signed JWT: three base64url segments, JSON header",
        r"eyJ[\w-]{8,}\.ey[\w-]{8,}\.[\w-]{20,}",
        specificity=_STRUCTURAL,
    ),
    SecretRule(
        id="generic-secret-assignment",
        provider="Generic",
        description="Quoted value of 12+ characters assigned to a secret-sounding name",
        pattern=_SECRET_NAME + r"[\"']?\s*(?::=|=>|[:=])\s*[\"'`](?P<secret>[^\s\"'`]{12,})[\"'`]",
        specificity=_GENERIC,
        check=_not_placeholder,
    ),
    SecretRule(
        id="generic-env-assignment",
        provider="Generic",
        description="Unquoted value in a .env / shell line such as API_TOKEN=...",
        pattern=r"(?m)^[ \t]*(?:export[ \t]+)?[A-Z0-9_]*"
        r"(?:API_KEY|SECRET_KEY|ACCESS_KEY|SECRET|TOKEN|PASSWORD|PASSWD)"
        r"=(?P<secret>[^\s\"'#]{12,})[ \t]*(?:#.*)?\r?$",
        specificity=_GENERIC,
        check=_not_placeholder,
    ),
)
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
