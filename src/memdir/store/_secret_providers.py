"""Credentials that can be told by their own shape: a provider's prefix, length, alphabet.

Each entry is one published token format (prefix, alphabet and length as the provider
documents or issues them). A token rule only starts where a run of token characters
starts and only ends where one ends (:func:`token_rule`), so most of them cost one fast
search for their literal prefix. Formats without a fixed prefix are kept few, because
each of those has to be tried at every offset.
"""

from __future__ import annotations

import base64
import binascii
import re

from memdir.store._secret_rule import (
    STRUCTURAL,
    SecretRule,
    compile_ascii,
    token_rule,
)

_B64 = r"[A-Za-z0-9+/]"
_PEM_KINDS = r"(?:(?:RSA|EC|OPENSSH|DSA|PGP|ENCRYPTED) )?PRIVATE KEY(?: BLOCK)?-----"
_UUID = r"[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"


def _not_aws_example(value: str) -> bool:
    """AWS documentation's sample credentials all end in, or contain, ``EXAMPLE``."""
    return "EXAMPLE" not in value


def _has_key_material(block: str) -> bool:
    """A key block holds base64 lines; a BEGIN line quoted in prose or code does not."""
    return compile_ascii(r"[A-Za-z0-9+/]{16}").search(block) is not None


def _b64decode(segment: str) -> bytes | None:
    """``segment`` decoded as (url-safe or standard) base64, cut to whole quanta."""
    usable = segment[: len(segment) // 4 * 4] if len(segment) % 4 == 1 else segment
    try:
        return base64.b64decode(
            usable.replace("-", "+").replace("_", "/") + "=" * (-len(usable) % 4),
            validate=True,
        )
    except (binascii.Error, ValueError):
        return None


def _is_discord_token(value: str) -> bool:
    """A Discord bot token opens with the bot's numeric user id, base64-encoded.

    Ten digits among the decoded bytes is enough: random base64 of that length almost
    never decodes to that many ASCII digits, and tokens copied with a character changed
    keep most of the id.
    """
    decoded = _b64decode(value.split(".", 1)[0])
    return decoded is not None and sum(byte in b"0123456789" for byte in decoded) >= 10


def _is_jwt(value: str) -> bool:
    """A JWT without a signature is only trusted if its header decodes to a JSON object."""
    if value.count(".") >= 2:
        return True
    decoded = _b64decode(value.split(".", 1)[0])
    return decoded is not None and decoded.startswith(b'{"')


def _is_encoded_jwt(value: str) -> bool:
    """Base64 of a JWT (as some config files keep one): it decodes to ``eyJ….eyJ…``."""
    decoded = _b64decode(value.rstrip("="))
    return decoded is not None and re.match(rb"eyJ[\w-]+\.eyJ", decoded) is not None


def _mixed(value: str) -> bool:
    """Upper case, lower case and digits all present: a random body, not a word."""
    tail = value.split(".", 1)[-1]
    return (
        any(c.isdigit() for c in tail)
        and any(c.isupper() for c in tail)
        and any(c.islower() for c in tail)
    )


PROVIDER_RULES: tuple[SecretRule, ...] = (
    # --- model providers -------------------------------------------------------------
    # Issued keys are 95 characters after the prefix; any long tail is taken, so a key
    # copied with a character missing or added is still caught.
    token_rule("anthropic-api-key", "Anthropic", "API key", r"sk-ant-api\d\d-[\w-]{80,}"),
    token_rule("anthropic-admin-key", "Anthropic", "Admin API key", r"sk-ant-admin\d\d-[\w-]{80,}"),
    token_rule("anthropic-oauth-token", "Anthropic", "OAuth token", r"sk-ant-o[ar]t01-[\w-]{40,}"),
    token_rule("openai-project-key", "OpenAI", "Project/user key", r"sk-(?:proj|None)-[\w-]{40,}"),
    token_rule(
        "openai-service-account-key", "OpenAI", "Service account key", r"sk-svcacct-[\w-]{40,}"
    ),
    token_rule("openai-admin-key", "OpenAI", "Admin API key", r"sk-admin-[\w-]{40,}"),
    token_rule("openai-legacy-key", "OpenAI", "Legacy key", r"sk-[^\W_]{20}T3BlbkFJ[^\W_]{20}"),
    token_rule("openrouter-api-key", "OpenRouter", "API key", r"sk-or-v1-[a-f0-9]{64}"),
    token_rule("xai-api-key", "xAI", "API key", r"xai-[^\W_]{70,90}"),
    token_rule("perplexity-api-key", "Perplexity", "API key", r"pplx-[^\W_]{40,60}"),
    token_rule("groq-api-key", "Groq", "API key", r"gsk_[^\W_]{48,56}"),
    token_rule("replicate-api-token", "Replicate", "API token", r"r8_[^\W_]{37}"),
    token_rule("elevenlabs-api-key", "ElevenLabs", "API key", r"sk_[a-f0-9]{48}"),
    token_rule(
        "langsmith-api-key",
        "LangChain",
        "LangSmith personal or service key",
        r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
    ),
    token_rule("pinecone-api-key", "Pinecone", "API key", r"pcsk_[^\W_]{4,10}_[\w]{40,90}"),
    token_rule("huggingface-token", "Hugging Face", "User access token", r"hf_[^\W_]{34}"),
    token_rule(
        "huggingface-org-token",
        "Hugging Face",
        "Organization API token (letters only)",
        r"api_org_[A-Za-z]{34}",
    ),
    # --- clouds ----------------------------------------------------------------------
    token_rule(
        "aws-access-key-id",
        "AWS",
        "Access key id",
        (
            r"AKIA[A-Z0-9]{16}",
            r"ASIA[A-Z0-9]{16}",
            r"ABIA[A-Z0-9]{16}",
            r"ACCA[A-Z0-9]{16}",
            r"A3T[A-Z0-9]{17}",
        ),
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
        specificity=STRUCTURAL,
        check=_not_aws_example,
    ),
    token_rule(
        "aws-bedrock-api-key",
        "AWS",
        "Bedrock API key (long-lived, or short-lived presigned)",
        (
            r"ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{20,}={0,2}",
            r"bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[\w%&+/=.-]*",
        ),
        edge=r"\w+/=-",
    ),
    token_rule("gcp-api-key", "Google Cloud", "Google API key", r"AIza[\w-]{35}"),
    token_rule(
        "gcp-oauth-client-secret", "Google Cloud", "OAuth client secret", r"GOCSPX-[\w-]{28}"
    ),
    token_rule("gcp-oauth-access-token", "Google Cloud", "OAuth access token", r"ya29\.[\w-]{30,}"),
    token_rule(
        "firebase-cloud-messaging-key",
        "Google Cloud",
        "Firebase Cloud Messaging server key",
        r"AAAA[\w-]{7}:[\w-]{140}",
    ),
    token_rule(
        "azure-storage-account-key",
        "Azure",
        "Storage account key in a connection string",
        rf"(?i:AccountKey)\s*=\s*(?P<secret>{_B64}{{86}}==)(?![\w+/=-])",
        edge=None,
    ),
    token_rule(
        "azure-shared-access-key",
        "Azure",
        "Service Bus / Event Hubs shared access key",
        rf"(?i:SharedAccessKey)\s*=\s*(?P<secret>{_B64}{{43}}=)(?![\w+/=-])",
        edge=None,
    ),
    token_rule(
        "azure-ad-client-secret",
        "Azure",
        "Entra ID (Azure AD) client secret",
        r"[\w~.]{3}\dQ~[\w~.-]{31,34}",
        edge=r"\w~.-",
        hints=("Q~",),
    ),
    token_rule("alibaba-access-key-id", "Alibaba Cloud", "AccessKey id", r"LTAI[^\W_]{20}"),
    token_rule("tencent-secret-id", "Tencent Cloud", "API SecretId", r"AKID[^\W_]{32}"),
    token_rule(
        "yandex-cloud-key",
        "Yandex Cloud",
        "API key, static access key or IAM token",
        (r"AQVN[\w-]{35,38}", r"YC[\w-]{38}", r"t1\.[\w-]{20,}={0,2}\.[\w-]{86}={0,2}"),
        edge=r"\w=-",
    ),
    token_rule("scaleway-access-key", "Scaleway", "Access key", r"SCW[A-Z0-9]{17}"),
    token_rule("digitalocean-token", "DigitalOcean", "API/OAuth token", r"do[opr]_v1_[a-f0-9]{64}"),
    token_rule(
        "cloudflare-origin-ca-key",
        "Cloudflare",
        "Origin CA key",
        r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
    ),
    token_rule(
        "flyio-token",
        "Fly.io",
        "Access, deploy or macaroon token",
        (r"fo1_[\w-]{43}", r"fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3}"),
        edge=r"\w+/=-",
    ),
    token_rule("heroku-api-key", "Heroku", "Platform API key (v2)", r"HRKU-AA[\w-]{58}"),
    token_rule("render-api-key", "Render", "API key", r"rnd_[^\W_]{32}"),
    token_rule("supabase-token", "Supabase", "Personal access token", r"sbp_[a-f0-9]{40}"),
    token_rule(
        "planetscale-token",
        "PlanetScale",
        "Service token, OAuth token or database password",
        r"pscale_(?:tkn|pw|oauth)_[\w=.-]{32,64}",
        edge=r"\w=.-",
    ),
    token_rule("tailscale-key", "Tailscale", "Auth or API key", r"tskey-[a-z]+-[\w-]{20,}"),
    token_rule("databricks-token", "Databricks", "Access token", r"dapi[a-f0-9]{32}(?:-\d)?"),
    # --- infrastructure, CI, package registries -----------------------------------------
    token_rule(
        "terraform-cloud-token",
        "HashiCorp",
        "Terraform Cloud",
        r"[^\W_]{14}\.atlasv1\.[\w=-]{60,}",
        hints=(".atlasv1.",),
    ),
    token_rule(
        "vault-token", "HashiCorp", "Vault service/batch/recovery token", r"hv[sbr]\.[\w-]{24,}"
    ),
    # Before 1.10 Vault issued "s." plus 24 characters; the mix of cases and digits keeps
    # dotted names ("s.getElementById") out.
    token_rule(
        "vault-legacy-token",
        "HashiCorp",
        "Vault service token (pre-1.10)",
        r"s\.[^\W_]{24}",
        check=_mixed,
    ),
    token_rule("pulumi-token", "Pulumi", "Access token", r"pul-[a-f0-9]{40}"),
    token_rule(
        "doppler-token",
        "Doppler",
        "Personal, service, CLI or service-account token",
        r"dp\.(?:pt|ct|sa|scim|audit|st(?:\.[\w-]{1,60})?)\.[^\W_]{40,44}",
    ),
    token_rule("github-pat", "GitHub", "Classic personal access token", r"ghp_[^\W_]{36}"),
    token_rule("github-oauth-token", "GitHub", "OAuth access token", r"gho_[^\W_]{36}"),
    token_rule("github-user-token", "GitHub", "App user-to-server token", r"ghu_[^\W_]{36}"),
    token_rule("github-app-token", "GitHub", "App installation token", r"ghs_[^\W_]{36}"),
    token_rule("github-refresh-token", "GitHub", "App refresh token", r"ghr_[^\W_]{36}"),
    token_rule("github-fine-grained-pat", "GitHub", "Fine-grained PAT", r"github_pat_\w{82}"),
    token_rule("gitlab-pat", "GitLab", "Personal access token", r"glpat-[\w-]{20,}(?:\.[\w-]+)*"),
    token_rule(
        "gitlab-token",
        "GitLab",
        "Deploy, runner, trigger, feed, OAuth, CI job, incoming-mail, agent or SCIM token",
        r"gl(?:dt|rt|ptt|ft|oas|cbt|ffct|imt|agent|soat|wt)-[\w-]{20,}",
    ),
    token_rule(
        "gitlab-runner-registration-token",
        "GitLab",
        "Runner registration token",
        r"GR1348941[\w-]{20,}",
    ),
    token_rule(
        "gitlab-session-cookie",
        "GitLab",
        "Session cookie",
        r"_gitlab_session=(?P<secret>[a-z0-9]{32})",
    ),
    token_rule("bitbucket-app-password", "Bitbucket", "App password", r"ATBB[^\W_]{32}"),
    token_rule(
        "atlassian-api-token",
        "Atlassian",
        "API token (Jira, Confluence)",
        r"ATATT3[\w=-]{150,}",
        edge=r"\w=-",
    ),
    token_rule("npm-token", "npm", "Access token", r"npm_[^\W_]{36}"),
    token_rule(
        "pypi-token",
        "PyPI",
        "Upload token (pypi.org or test.pypi.org)",
        r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[\w-]{50,}",
    ),
    token_rule("rubygems-token", "RubyGems", "API key", r"rubygems_[a-f0-9]{48}"),
    token_rule("clojars-token", "Clojars", "Deploy token", r"CLOJARS_[^\W_]{60}"),
    token_rule("nuget-api-key", "NuGet", "nuget.org API key", r"oy2[a-z0-9]{43}"),
    token_rule(
        "docker-hub-pat", "Docker", "Docker Hub personal access token", r"dckr_pat_[\w-]{27}"
    ),
    token_rule(
        "jfrog-token",
        "JFrog",
        "Artifactory API key or reference token",
        (r"AKCp[^\W_]{69}", r"cmVmdGtuOjAxOj[A-Za-z0-9+/]{40,}={0,2}"),
        edge=r"\w+/=-",
    ),
    token_rule("octopus-deploy-key", "Octopus Deploy", "API key", r"API-[A-Z0-9]{26}"),
    token_rule("buildkite-token", "Buildkite", "User access token", r"bkua_[a-f0-9]{40}"),
    token_rule(
        "circleci-token", "CircleCI", "Personal API token", r"CCIPAT_[^\W_]{22}_[a-f0-9]{40}"
    ),
    token_rule(
        "sonar-token", "SonarQube", "User, project or global token", r"sq[pua]_[a-f0-9]{40}"
    ),
    token_rule("prefect-token", "Prefect", "API key", r"pnu_[^\W_]{36}"),
    token_rule(
        "harness-token",
        "Harness",
        "Personal or service-account token",
        (r"pat\.[\w-]{22}\.[^\W_]{24}\.[^\W_]{20}", r"sat\.[\w-]{22}\.[^\W_]{24}\.[^\W_]{20}"),
    ),
    token_rule("infracost-token", "Infracost", "API key", r"ico-[^\W_]{32}"),
    token_rule(
        "defined-networking-token",
        "Defined Networking",
        "Nebula API token",
        r"dnkey-[\w=-]{26}-[\w=-]{52}",
        edge=r"\w=-",
    ),
    token_rule("openshift-token", "Red Hat", "OpenShift user token", r"sha256~[\w-]{43}"),
    token_rule("scalingo-token", "Scalingo", "API token", r"tk-us-[\w-]{48}"),
    token_rule(
        "intra42-client-secret",
        "42",
        "Intra API client secret",
        r"s-s4t2(?:ud|af)-[a-f0-9]{64}",
    ),
    token_rule(
        "authress-access-key",
        "Authress",
        "Service client access key",
        tuple(
            rf"{kind}_[a-z0-9]{{5,30}}\.[a-z0-9]{{4,6}}\.acc[_-][a-z0-9-]{{10,32}}\.[\w+/=-]{{30,120}}"
            for kind in ("sc", "ext", "scauth", "authress")
        ),
        edge=r"\w+/=-",
    ),
    # --- observability ------------------------------------------------------------------
    token_rule("postman-api-key", "Postman", "API key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    token_rule(
        "grafana-cloud-token",
        "Grafana",
        "Cloud token",
        r"glc_[A-Za-z0-9+/]{32,}={0,2}",
        edge=r"\w+/=-",
    ),
    token_rule(
        "grafana-service-account-token",
        "Grafana",
        "Service account",
        r"glsa_[^\W_]{32}_[\da-fA-F]{8}",
    ),
    token_rule(
        "sentry-org-token",
        "Sentry",
        "Org auth token",
        r"sntrys_eyJ[\w+/=]{60,}",
        edge=r"\w+/=-",
    ),
    token_rule("sentry-user-token", "Sentry", "User auth token", r"sntryu_[a-f0-9]{64}"),
    token_rule(
        "new-relic-key",
        "New Relic",
        "User API key, insert key or browser key",
        (r"NRAK-[A-Z0-9]{27}", r"NRII-[\w-]{32}", r"NRJS-[a-f0-9]{19}"),
    ),
    token_rule(
        "dynatrace-token",
        "Dynatrace",
        "API token",
        r"dt0c01\.[^\W_]{24}\.[^\W_]{64}",
    ),
    token_rule(
        "sourcegraph-token",
        "Sourcegraph",
        "Access token",
        r"sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}",
    ),
    # --- messaging and webhooks ---------------------------------------------------------
    token_rule("slack-bot-token", "Slack", "Bot token", r"xoxb-[0-9]{6,}-[A-Za-z0-9-]{16,}"),
    token_rule("slack-user-token", "Slack", "User token", r"xoxp-[0-9]{6,}-[A-Za-z0-9-]{16,}"),
    token_rule(
        "slack-token",
        "Slack",
        "App, refresh, legacy or workspace token",
        r"xox[aeors]-[^\W_]+-[A-Za-z0-9-]{16,}",
    ),
    token_rule(
        "slack-config-token",
        "Slack",
        "Configuration access token",
        r"xoxe\.xox[bp]-\d-[A-Za-z0-9]{100,}",
    ),
    token_rule(
        "slack-app-token",
        "Slack",
        "App-level token",
        r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+",
    ),
    token_rule(
        "slack-webhook-url",
        "Slack",
        "Incoming webhook or workflow trigger (the path is the secret)",
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"(?P<secret>T[A-Z0-9]{6,}/[AB][A-Z0-9]{6,}/(?:\d+/)?[^\W_]{20,})",
        edge=None,
    ),
    token_rule(
        "microsoft-teams-webhook-url",
        "Microsoft Teams",
        "Incoming webhook (the path is the secret)",
        r"https://[\w.-]+\.webhook\.office\.com/webhookb2/"
        r"(?P<secret>[\w-]{8,}@[\w-]{8,}/IncomingWebhook/[^\W_]{20,}/[\w-]{8,}(?:/[\w-]+)?)",
        edge=None,
    ),
    token_rule(
        "discord-webhook-url",
        "Discord",
        "Webhook (the path is the secret)",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/"
        r"(?P<secret>\d{17,20}/[\w-]{60,68})",
        edge=None,
    ),
    token_rule(
        "zapier-webhook-url",
        "Zapier",
        "Catch hook (the path is the secret)",
        r"https://hooks\.zapier\.com/hooks/catch/(?P<secret>\d+/[a-z0-9]+)",
        edge=None,
    ),
    token_rule(
        "discord-bot-token",
        "Discord",
        "Bot token: base64 user id . timestamp . HMAC",
        tuple(rf"{first}[\w-]{{22,26}}\.[\w-]{{6,7}}\.[\w-]{{27,40}}" for first in "MNO"),
        check=_is_discord_token,
    ),
    token_rule(
        "telegram-bot-token",
        "Telegram",
        "Bot API token: bot id, colon, 35 characters",
        r"\d{5,16}:A[\w-]{34}",
        hints=(":A",),
    ),
    token_rule("twilio-api-key", "Twilio", "API key (SK + 32 hex)", r"SK[0-9a-fA-F]{32}"),
    token_rule(
        "sendgrid-api-key",
        "SendGrid",
        "API key",
        r"SG\.(?:[\w-]{22}\.[\w-]{43}|[\w-]{60,70})",
    ),
    token_rule(
        "sendinblue-api-key",
        "Brevo",
        "Sendinblue/Brevo API key",
        r"xkeysib-[a-f0-9]{64}-[^\W_]{16}",
    ),
    token_rule("mailgun-api-key", "Mailgun", "Private API key", r"key-[a-f0-9]{32}"),
    token_rule(
        "mailchimp-api-key",
        "Mailchimp",
        "Marketing API key",
        r"[a-f0-9]{32}-us[0-9]{1,2}",
        hints=("-us",),
    ),
    # --- payments and commerce ------------------------------------------------------------
    token_rule("stripe-secret-key", "Stripe", "Live secret key", r"sk_(?:live|prod)_[^\W_]{20,}"),
    token_rule(
        "stripe-restricted-key",
        "Stripe",
        "Live restricted key",
        r"rk_(?:live|prod)_[^\W_]{20,}",
    ),
    token_rule(
        "stripe-test-key",
        "Stripe",
        "Test-mode secret key",
        (r"sk_test_[^\W_]{20,}", r"rk_test_[^\W_]{20,}"),
    ),
    token_rule("stripe-webhook-secret", "Stripe", "Webhook signing secret", r"whsec_[^\W_]{32,}"),
    token_rule(
        "square-access-token", "Square", "Access token", (r"sq0atp-[\w-]{22}", r"EAAA[\w-]{60}")
    ),
    token_rule("square-oauth-secret", "Square", "OAuth application secret", r"sq0csp-[\w-]{43}"),
    token_rule(
        "braintree-access-token",
        "PayPal",
        "Braintree access token",
        r"access_token\$production\$[a-z0-9]{16}\$[a-f0-9]{32}",
    ),
    token_rule("razorpay-key", "Razorpay", "API key id", r"rzp_(?:live|test)_[^\W_]{14}"),
    token_rule(
        "plaid-access-token",
        "Plaid",
        "Access token",
        rf"access-(?:sandbox|development|production)-{_UUID}",
    ),
    token_rule(
        "flutterwave-secret-key",
        "Flutterwave",
        "Secret or encryption key",
        r"FLWSECK(?:_TEST)?-[a-hA-H0-9]{12,32}(?:-X)?",
    ),
    token_rule("duffel-token", "Duffel", "API token", r"duffel_(?:test|live)_[\w-]{43}"),
    token_rule("shippo-token", "Shippo", "API token", r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    token_rule("easypost-api-key", "EasyPost", "Production or test API key", r"EZ[AT]K[^\W_]{54}"),
    token_rule(
        "shopify-token", "Shopify", "App token/secret", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"
    ),
    # --- SaaS ----------------------------------------------------------------------------
    token_rule(
        "onepassword-secret-key",
        "1Password",
        "Account secret key",
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}"
        r"-[A-Z0-9]{5}",
    ),
    token_rule(
        "onepassword-service-account-token",
        "1Password",
        "Service account token",
        r"ops_eyJ[\w+/=]{200,}",
        edge=r"\w+/=-",
    ),
    token_rule("adobe-client-secret", "Adobe", "OAuth client secret", r"p8e-[a-fA-F0-9]{32}"),
    token_rule(
        "facebook-access-token",
        "Facebook",
        "User or page access token",
        r"EAA[A-Z0-9][A-Za-z0-9]{90,}",
    ),
    token_rule(
        "facebook-app-token",
        "Facebook",
        "App access token: app id | app secret",
        r"\d{15,16}(?:\||%7C)[\w-]{27,40}",
        hints=("|", "%7C"),
    ),
    token_rule(
        "twitter-bearer-token",
        "X (Twitter)",
        "App bearer token",
        r"AAAAAAAAAAAAAAAAAAAAA[A-Za-z0-9%]{80,}",
    ),
    token_rule(
        "notion-token",
        "Notion",
        "Integration token (ntn_, or the older secret_)",
        (r"ntn_\d{11}[^\W_]{35}", r"secret_[^\W_]{43}"),
    ),
    token_rule("linear-api-key", "Linear", "Personal API key", r"lin_api_[^\W_]{40}"),
    token_rule("linear-oauth-token", "Linear", "OAuth access token", r"lin_oauth_[a-f0-9]{64}"),
    token_rule("airtable-pat", "Airtable", "Personal access token", r"pat[^\W_]{14}\.[a-f0-9]{64}"),
    token_rule(
        "asana-pat",
        "Asana",
        "Personal access token",
        (r"1/\d{12,20}(?:/\d{12,20})?:[a-f0-9]{32}", r"2/\d{12,20}(?:/\d{12,20})?:[a-f0-9]{32}"),
    ),
    token_rule(
        "typeform-token", "Typeform", "Personal access token", r"tfp_[\w.=-]{59}", edge=r"\w.=-"
    ),
    token_rule("figma-token", "Figma", "Personal access token", r"figd_[\w-]{40}"),
    token_rule("frameio-token", "Frame.io", "Developer token", r"fio-u-[\w=-]{64}", edge=r"\w=-"),
    token_rule(
        "contentful-token", "Contentful", "Management personal access token", r"CFPAT-[\w-]{43}"
    ),
    token_rule(
        "mapbox-token",
        "Mapbox",
        "Access token",
        (r"pk\.[\w-]{50,}\.[\w-]{20,}", r"sk\.[\w-]{50,}\.[\w-]{20,}"),
    ),
    token_rule(
        "maxmind-license-key",
        "MaxMind",
        "GeoIP license key",
        r"[^\W_]{6}_[^\W_]{29}_mmk",
        hints=("_mmk",),
    ),
    token_rule(
        "dropbox-token",
        "Dropbox",
        "Short-lived access token",
        r"sl\.[\w=-]{130,}",
        edge=r"\w=-",
    ),
    token_rule(
        "dropbox-long-lived-token",
        "Dropbox",
        "Long-lived access token",
        r"[a-z0-9]{11}AAAAAAAAAA[\w=-]{43}",
        edge=r"\w=-",
        hints=("AAAAAAAAAA",),
    ),
    token_rule(
        "settlemint-token",
        "SettleMint",
        "Application, personal or service access token",
        r"sm_(?:aat|pat|sat)_[^\W_]{16}",
    ),
    token_rule(
        "softlayer-api-url",
        "IBM",
        "SoftLayer API key in an API URL",
        r"api\.softlayer\.com/soap/v3(?:\.1)?/(?P<secret>[a-z0-9]{64})",
        edge=None,
    ),
    token_rule(
        "age-secret-key", "age", "Encryption identity", r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}"
    ),
    SecretRule(
        id="private-key",
        provider="Private key",
        description="PEM, OpenSSH or PGP private key block (also inside service-account JSON)",
        pattern=r"-----BEGIN " + _PEM_KINDS,
        block_end=r"-----END " + _PEM_KINDS,
        check=_has_key_material,
    ),
    token_rule(
        "jwt",
        "JSON Web Token",
        "JWT: base64 JSON header . payload, usually . signature",
        r"eyJ[\w-]{8,}\.ey[\w-]{8,}(?:\.[\w-]{20,})?",
        specificity=STRUCTURAL,
        check=_is_jwt,
    ),
    token_rule(
        "jwt-base64",
        "JSON Web Token",
        "A JWT, base64-encoded once more",
        r"ZXlK[A-Za-z0-9+/]{40,}={0,2}",
        edge=r"\w+/=-",
        specificity=STRUCTURAL,
        check=_is_encoded_jwt,
    ),
)
"""Every provider-shaped rule, in the order they are tried."""
