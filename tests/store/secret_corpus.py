"""A corpus of fake credentials and ordinary memory text, for measuring the secret guard.

Every credential is built at run time from a format table written for this file: each
provider's published shape (prefix, alphabet, length), filled with seeded random
characters, so the corpus is the same on every run, holds no real key, and no literal in
this file trips a push-protection scanner. Each one is then placed in a syntax people
paste into notes: a .env line, YAML, INI, JSON (also escaped inside a string), XML,
a Makefile, Go, PHP, Java, a curl command, a URL, a Kubernetes manifest, Terraform, a
NuGet config, prose. The benign side is what memories are really full of: prose, commit
ids, UUIDs, digests, lockfile integrity lines, URLs with query strings, masked
placeholders, references to where a secret is kept, and code that names secrets without
holding one.

``build_corpus()`` returns the entries; ``python -m tests.store.secret_corpus`` prints
their counts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SEED = 20261202

_ALPHABETS = {
    "a62": string.ascii_letters + string.digits,
    "alpha": string.ascii_letters,
    "lower": string.ascii_lowercase,
    "low": string.ascii_lowercase + string.digits,
    "up": string.ascii_uppercase + string.digits,
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "hexm": "0123456789abcdefABCDEF",
    "dig": string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "b64u": string.ascii_letters + string.digits + "-_",
    "bech": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
    "pw": string.ascii_letters + string.digits + "!@#%^*-_+=~",
}
_FIELD = re.compile(r"\{(\w+)(?::(\d+)(?:-(\d+))?)?\}")


def expand(recipe: str, rng: random.Random) -> str:
    """Fill a recipe such as ``ghp_{a62:36}`` or ``{hex:32}-us{dig:2}`` with random text.

    ``{alphabet:n}`` is n characters, ``{alphabet:n-m}`` between n and m, ``{uuid}`` a
    version-4 UUID.
    """

    def fill(match: re.Match[str]) -> str:
        name, low, high = match.groups()
        if name == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        size = int(low) if high is None else rng.randint(int(low), int(high))
        return "".join(rng.choice(_ALPHABETS[name]) for _ in range(size))

    return _FIELD.sub(fill, recipe)


@dataclass(frozen=True)
class Format:
    """One token format: who issues it, what variable it usually lives in, its shape."""

    provider: str
    kind: str
    env: str
    recipe: str | Callable[[random.Random], str]
    rule_id: str | None = None
    """The memdir rule expected to name it in prose, or None where only the name it is
    assigned to gives it away (no fixed prefix)."""

    def make(self, rng: random.Random) -> str:
        if callable(self.recipe):
            return self.recipe(rng)
        return expand(self.recipe, rng)


def _discord_bot(rng: random.Random) -> str:
    user_id = base64.urlsafe_b64encode(expand("{dig:18}", rng).encode()).decode().rstrip("=")
    return f"{user_id}.{expand('{b64u:6}', rng)}.{expand('{b64u:38}', rng)}"


def _jwt(rng: random.Random) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    header = part({"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"})
    payload = part(
        {"sub": expand("{dig:8}", rng), "iat": rng.randrange(1_600_000_000, 1_800_000_000)}
    )
    return f"{header}.{payload}.{expand('{b64u:43}', rng)}"


def _pem(kind: str) -> Callable[[random.Random], str]:
    def make(rng: random.Random) -> str:
        label = f"{kind} PRIVATE KEY".strip()
        body = "\n".join(expand("{b64:64}", rng) for _ in range(5))
        return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"

    return make


# The table. Facts about shapes only: which prefix a provider puts on its tokens, over
# which alphabet, how long. Where a provider has several kinds, each is its own row.
FORMATS: tuple[Format, ...] = (
    # model providers
    Format(
        "Anthropic", "API key", "ANTHROPIC_API_KEY", "sk-ant-api03-{b64u:93}AA", "anthropic-api-key"
    ),
    Format(
        "Anthropic",
        "Admin key",
        "ANTHROPIC_ADMIN_KEY",
        "sk-ant-admin01-{b64u:93}AA",
        "anthropic-admin-key",
    ),
    Format(
        "Anthropic",
        "OAuth token",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "sk-ant-oat01-{b64u:95}",
        "anthropic-oauth-token",
    ),
    Format(
        "OpenAI",
        "Project key",
        "OPENAI_API_KEY",
        "sk-proj-{b64u:74}T3BlbkFJ{b64u:74}",
        "openai-project-key",
    ),
    Format(
        "OpenAI",
        "Service account key",
        "OPENAI_API_KEY",
        "sk-svcacct-{b64u:74}T3BlbkFJ{b64u:74}",
        "openai-service-account-key",
    ),
    Format(
        "OpenAI",
        "Admin key",
        "OPENAI_ADMIN_KEY",
        "sk-admin-{b64u:74}T3BlbkFJ{b64u:74}",
        "openai-admin-key",
    ),
    Format(
        "OpenAI", "Legacy key", "OPENAI_API_KEY", "sk-{a62:20}T3BlbkFJ{a62:20}", "openai-legacy-key"
    ),
    Format(
        "OpenRouter", "API key", "OPENROUTER_API_KEY", "sk-or-v1-{hex:64}", "openrouter-api-key"
    ),
    Format("xAI", "API key", "XAI_API_KEY", "xai-{a62:80}", "xai-api-key"),
    Format("Perplexity", "API key", "PERPLEXITY_API_KEY", "pplx-{a62:48}", "perplexity-api-key"),
    Format("Groq", "API key", "GROQ_API_KEY", "gsk_{a62:52}", "groq-api-key"),
    Format("Replicate", "API token", "REPLICATE_API_TOKEN", "r8_{a62:37}", "replicate-api-token"),
    Format("ElevenLabs", "API key", "ELEVENLABS_API_KEY", "sk_{hex:48}", "elevenlabs-api-key"),
    Format(
        "LangSmith",
        "API key",
        "LANGSMITH_API_KEY",
        "lsv2_pt_{hex:32}_{hex:10}",
        "langsmith-api-key",
    ),
    Format("Pinecone", "API key", "PINECONE_API_KEY", "pcsk_{a62:6}_{a62:60}", "pinecone-api-key"),
    Format("Hugging Face", "User token", "HF_TOKEN", "hf_{a62:34}", "huggingface-token"),
    Format(
        "Hugging Face",
        "Org token",
        "HUGGINGFACEHUB_API_TOKEN",
        "api_org_{alpha:34}",
        "huggingface-org-token",
    ),
    Format("Mistral", "API key", "MISTRAL_API_KEY", "{a62:32}"),
    Format("Cohere", "API key", "COHERE_API_KEY", "{a62:40}"),
    Format("Deepgram", "API key", "DEEPGRAM_API_KEY", "{hex:40}"),
    Format("AssemblyAI", "API key", "ASSEMBLYAI_API_KEY", "{hex:32}"),
    Format("Azure OpenAI", "API key", "AZURE_OPENAI_API_KEY", "{hex:32}"),
    # clouds
    Format("AWS", "Access key id", "AWS_ACCESS_KEY_ID", "AKIA{up:16}", "aws-access-key-id"),
    Format(
        "AWS", "Temporary access key id", "AWS_ACCESS_KEY_ID", "ASIA{up:16}", "aws-access-key-id"
    ),
    Format("AWS", "Secret access key", "AWS_SECRET_ACCESS_KEY", "{b64:40}"),
    Format(
        "AWS",
        "Bedrock API key",
        "AWS_BEARER_TOKEN_BEDROCK",
        "ABSKQmVkcm9ja0FQSUtleS{b64:108}",
        "aws-bedrock-api-key",
    ),
    Format("Google Cloud", "API key", "GOOGLE_API_KEY", "AIza{b64u:35}", "gcp-api-key"),
    Format(
        "Google Cloud",
        "OAuth client secret",
        "GOOGLE_CLIENT_SECRET",
        "GOCSPX-{b64u:28}",
        "gcp-oauth-client-secret",
    ),
    Format(
        "Google Cloud",
        "OAuth access token",
        "GOOGLE_ACCESS_TOKEN",
        "ya29.{b64u:120}",
        "gcp-oauth-access-token",
    ),
    Format(
        "Firebase",
        "FCM server key",
        "FCM_SERVER_KEY",
        "AAAA{b64u:7}:{b64u:140}",
        "firebase-cloud-messaging-key",
    ),
    Format(
        "Azure",
        "Entra client secret",
        "AZURE_CLIENT_SECRET",
        "{a62:3}8Q~{a62:34}",
        "azure-ad-client-secret",
    ),
    Format("Azure", "DevOps PAT", "AZURE_DEVOPS_PAT_TOKEN", "{low:52}"),
    Format(
        "Alibaba Cloud",
        "AccessKey id",
        "ALIBABA_CLOUD_ACCESS_KEY_ID",
        "LTAI{a62:20}",
        "alibaba-access-key-id",
    ),
    Format("Alibaba Cloud", "AccessKey secret", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "{a62:30}"),
    Format(
        "Tencent Cloud", "SecretId", "TENCENTCLOUD_SECRET_ID", "AKID{a62:32}", "tencent-secret-id"
    ),
    Format("Yandex Cloud", "API key", "YC_API_KEY", "AQVN{b64u:36}", "yandex-cloud-key"),
    Format("Yandex Cloud", "Static key", "YC_SECRET_KEY", "YC{b64u:38}", "yandex-cloud-key"),
    Format("Scaleway", "Access key", "SCW_ACCESS_KEY", "SCW{up:17}", "scaleway-access-key"),
    Format(
        "DigitalOcean",
        "Personal token",
        "DIGITALOCEAN_TOKEN",
        "dop_v1_{hex:64}",
        "digitalocean-token",
    ),
    Format(
        "DigitalOcean", "OAuth token", "DO_OAUTH_TOKEN", "doo_v1_{hex:64}", "digitalocean-token"
    ),
    Format(
        "Cloudflare",
        "Origin CA key",
        "CLOUDFLARE_ORIGIN_CA_KEY",
        "v1.0-{hex:24}-{hex:146}",
        "cloudflare-origin-ca-key",
    ),
    Format("Cloudflare", "API token", "CLOUDFLARE_API_TOKEN", "{b64u:40}"),
    Format("Linode", "Personal token", "LINODE_TOKEN", "{hex:64}"),
    Format("Hetzner", "API token", "HCLOUD_TOKEN", "{a62:64}"),
    Format("Vultr", "API key", "VULTR_API_KEY", "{up:36}"),
    Format("Fly.io", "Access token", "FLY_ACCESS_TOKEN", "fo1_{b64u:43}", "flyio-token"),
    Format("Fly.io", "Deploy token", "FLY_API_TOKEN", "fm2_{b64:220}", "flyio-token"),
    Format("Heroku", "API key v2", "HEROKU_API_KEY", "HRKU-AA{b64u:58}", "heroku-api-key"),
    Format("Heroku", "Legacy API key", "HEROKU_API_KEY", "{uuid}"),
    Format("Render", "API key", "RENDER_API_KEY", "rnd_{a62:32}", "render-api-key"),
    Format("Supabase", "Access token", "SUPABASE_ACCESS_TOKEN", "sbp_{hex:40}", "supabase-token"),
    Format(
        "PlanetScale",
        "Service token",
        "PLANETSCALE_SERVICE_TOKEN",
        "pscale_tkn_{b64u:43}",
        "planetscale-token",
    ),
    Format(
        "PlanetScale",
        "Password",
        "PLANETSCALE_PASSWORD",
        "pscale_pw_{b64u:43}",
        "planetscale-token",
    ),
    Format(
        "Tailscale", "Auth key", "TS_AUTHKEY", "tskey-auth-{a62:12}CNTRL-{a62:30}", "tailscale-key"
    ),
    Format("Databricks", "Access token", "DATABRICKS_TOKEN", "dapi{hex:32}", "databricks-token"),
    Format("Railway", "API token", "RAILWAY_TOKEN", "{uuid}"),
    Format("Vercel", "Access token", "VERCEL_TOKEN", "{a62:24}"),
    Format("Netlify", "Access token", "NETLIFY_AUTH_TOKEN", "{b64u:43}"),
    # infrastructure, CI, registries
    Format(
        "HashiCorp",
        "Terraform Cloud token",
        "TF_TOKEN_app_terraform_io",
        "{a62:14}.atlasv1.{a62:67}",
        "terraform-cloud-token",
    ),
    Format("HashiCorp", "Vault service token", "VAULT_TOKEN", "hvs.{b64u:90}", "vault-token"),
    Format("HashiCorp", "Vault batch token", "VAULT_TOKEN", "hvb.{b64u:130}", "vault-token"),
    Format(
        "HashiCorp",
        "Vault legacy token",
        "VAULT_TOKEN",
        "s.{a62:11}7Q{a62:11}",
        "vault-legacy-token",
    ),
    Format("Pulumi", "Access token", "PULUMI_ACCESS_TOKEN", "pul-{hex:40}", "pulumi-token"),
    Format("Doppler", "Personal token", "DOPPLER_TOKEN", "dp.pt.{a62:43}", "doppler-token"),
    Format("Doppler", "Service token", "DOPPLER_TOKEN", "dp.st.prd.{a62:40}", "doppler-token"),
    Format("GitHub", "Classic PAT", "GITHUB_TOKEN", "ghp_{a62:36}", "github-pat"),
    Format("GitHub", "OAuth token", "GH_TOKEN", "gho_{a62:36}", "github-oauth-token"),
    Format("GitHub", "User-to-server token", "GITHUB_TOKEN", "ghu_{a62:36}", "github-user-token"),
    Format("GitHub", "Installation token", "GITHUB_TOKEN", "ghs_{a62:36}", "github-app-token"),
    Format(
        "GitHub", "Refresh token", "GITHUB_REFRESH_TOKEN", "ghr_{a62:36}", "github-refresh-token"
    ),
    Format(
        "GitHub",
        "Fine-grained PAT",
        "GITHUB_TOKEN",
        "github_pat_{a62:22}_{a62:59}",
        "github-fine-grained-pat",
    ),
    Format("GitLab", "Personal token", "GITLAB_TOKEN", "glpat-{b64u:20}", "gitlab-pat"),
    Format("GitLab", "Deploy token", "GITLAB_DEPLOY_TOKEN", "gldt-{b64u:20}", "gitlab-token"),
    Format("GitLab", "Runner token", "CI_RUNNER_TOKEN", "glrt-{b64u:20}", "gitlab-token"),
    Format("GitLab", "Trigger token", "TRIGGER_TOKEN", "glptt-{hex:40}", "gitlab-token"),
    Format("GitLab", "Feed token", "GITLAB_FEED_TOKEN", "glft-{b64u:20}", "gitlab-token"),
    Format("GitLab", "OAuth app secret", "GITLAB_OAUTH_SECRET", "gloas-{b64u:64}", "gitlab-token"),
    Format("GitLab", "CI job token", "CI_JOB_TOKEN", "glcbt-{a62:5}_{b64u:20}", "gitlab-token"),
    Format(
        "GitLab", "Feature-flag client token", "UNLEASH_TOKEN", "glffct-{b64u:20}", "gitlab-token"
    ),
    Format("GitLab", "Incoming mail token", "GITLAB_MAIL_TOKEN", "glimt-{b64u:25}", "gitlab-token"),
    Format("GitLab", "Agent token", "GITLAB_AGENT_TOKEN", "glagent-{b64u:50}", "gitlab-token"),
    Format("GitLab", "SCIM token", "GITLAB_SCIM_TOKEN", "glsoat-{b64u:20}", "gitlab-token"),
    Format(
        "GitLab",
        "Runner registration token",
        "REGISTRATION_TOKEN",
        "GR1348941{b64u:20}",
        "gitlab-runner-registration-token",
    ),
    Format(
        "Bitbucket",
        "App password",
        "BITBUCKET_APP_PASSWORD",
        "ATBB{a62:32}",
        "bitbucket-app-password",
    ),
    Format(
        "Atlassian",
        "API token",
        "JIRA_API_TOKEN",
        "ATATT3{b64u:182}={HEX:8}",
        "atlassian-api-token",
    ),
    Format("npm", "Access token", "NPM_TOKEN", "npm_{a62:36}", "npm-token"),
    Format("PyPI", "Upload token", "PYPI_TOKEN", "pypi-AgEIcHlwaS5vcmc{b64u:150}", "pypi-token"),
    Format("RubyGems", "API key", "GEM_HOST_API_KEY", "rubygems_{hex:48}", "rubygems-token"),
    Format("Clojars", "Deploy token", "CLOJARS_TOKEN", "CLOJARS_{low:60}", "clojars-token"),
    Format("NuGet", "API key", "NUGET_API_KEY", "oy2{low:43}", "nuget-api-key"),
    Format("Docker", "Hub PAT", "DOCKERHUB_TOKEN", "dckr_pat_{b64u:27}", "docker-hub-pat"),
    Format("JFrog", "API key", "ARTIFACTORY_API_KEY", "AKCp{a62:69}", "jfrog-token"),
    Format(
        "JFrog", "Reference token", "JFROG_ACCESS_TOKEN", "cmVmdGtuOjAxOj{b64:52}", "jfrog-token"
    ),
    Format("Octopus Deploy", "API key", "OCTOPUS_API_KEY", "API-{up:26}", "octopus-deploy-key"),
    Format("Buildkite", "Access token", "BUILDKITE_API_TOKEN", "bkua_{hex:40}", "buildkite-token"),
    Format(
        "CircleCI", "Personal token", "CIRCLECI_TOKEN", "CCIPAT_{a62:22}_{hex:40}", "circleci-token"
    ),
    Format("SonarQube", "User token", "SONAR_TOKEN", "squ_{hex:40}", "sonar-token"),
    Format("SonarQube", "Project token", "SONAR_TOKEN", "sqp_{hex:40}", "sonar-token"),
    Format("Prefect", "API key", "PREFECT_API_KEY", "pnu_{a62:36}", "prefect-token"),
    Format(
        "Harness",
        "Personal token",
        "HARNESS_API_KEY",
        "pat.{b64u:22}.{a62:24}.{a62:20}",
        "harness-token",
    ),
    Format("Infracost", "API key", "INFRACOST_API_KEY", "ico-{a62:32}", "infracost-token"),
    Format(
        "Defined Networking",
        "API token",
        "DN_API_TOKEN",
        "dnkey-{b64u:26}-{b64u:52}",
        "defined-networking-token",
    ),
    Format("Red Hat", "OpenShift token", "OPENSHIFT_TOKEN", "sha256~{b64u:43}", "openshift-token"),
    Format("Scalingo", "API token", "SCALINGO_API_TOKEN", "tk-us-{b64u:48}", "scalingo-token"),
    Format(
        "42",
        "Intra client secret",
        "FT_CLIENT_SECRET",
        "s-s4t2ud-{hex:64}",
        "intra42-client-secret",
    ),
    Format(
        "Authress",
        "Access key",
        "AUTHRESS_KEY",
        "sc_{low:10}.{low:4}.acc_{low:12}.{b64u:60}",
        "authress-access-key",
    ),
    Format("Travis CI", "API token", "TRAVIS_TOKEN", "{a62:22}"),
    Format("Codecov", "Upload token", "CODECOV_TOKEN", "{uuid}"),
    Format("Snyk", "API token", "SNYK_TOKEN", "{uuid}"),
    # observability
    Format("Postman", "API key", "POSTMAN_API_KEY", "PMAK-{hex:24}-{hex:34}", "postman-api-key"),
    Format("Grafana", "Cloud token", "GRAFANA_CLOUD_TOKEN", "glc_{b64:80}=", "grafana-cloud-token"),
    Format(
        "Grafana",
        "Service account token",
        "GRAFANA_TOKEN",
        "glsa_{a62:32}_{hex:8}",
        "grafana-service-account-token",
    ),
    Format("Sentry", "Org token", "SENTRY_AUTH_TOKEN", "sntrys_eyJ{b64:120}", "sentry-org-token"),
    Format("Sentry", "User token", "SENTRY_AUTH_TOKEN", "sntryu_{hex:64}", "sentry-user-token"),
    Format("New Relic", "User key", "NEW_RELIC_API_KEY", "NRAK-{up:27}", "new-relic-key"),
    Format("New Relic", "Insert key", "NEW_RELIC_INSERT_KEY", "NRII-{b64u:32}", "new-relic-key"),
    Format("New Relic", "License key", "NEW_RELIC_LICENSE_KEY", "{hex:36}NRAL"),
    Format("Dynatrace", "API token", "DT_API_TOKEN", "dt0c01.{up:24}.{up:64}", "dynatrace-token"),
    Format(
        "Sourcegraph",
        "Access token",
        "SRC_ACCESS_TOKEN",
        "sgp_{hexm:16}_{hex:40}",
        "sourcegraph-token",
    ),
    Format(
        "Sourcegraph", "Local token", "SRC_ACCESS_TOKEN", "sgp_local_{hex:40}", "sourcegraph-token"
    ),
    Format("Datadog", "API key", "DD_API_KEY", "{hex:32}"),
    Format("Datadog", "Application key", "DD_APP_KEY", "{hex:40}"),
    Format("Rollbar", "Access token", "ROLLBAR_ACCESS_TOKEN", "{hex:32}"),
    Format("Honeycomb", "API key", "HONEYCOMB_API_KEY", "{a62:32}"),
    Format("Splunk", "HEC token", "SPLUNK_HEC_TOKEN", "{uuid}"),
    # messaging and webhooks
    Format(
        "Slack",
        "Bot token",
        "SLACK_BOT_TOKEN",
        "xoxb-{dig:12}-{dig:13}-{a62:24}",
        "slack-bot-token",
    ),
    Format(
        "Slack",
        "User token",
        "SLACK_USER_TOKEN",
        "xoxp-{dig:12}-{dig:12}-{dig:13}-{hex:32}",
        "slack-user-token",
    ),
    Format("Slack", "Refresh token", "SLACK_REFRESH_TOKEN", "xoxe-1-{a62:140}", "slack-token"),
    Format(
        "Slack", "Config token", "SLACK_CONFIG_TOKEN", "xoxe.xoxp-1-{a62:140}", "slack-config-token"
    ),
    Format(
        "Slack",
        "App token",
        "SLACK_APP_TOKEN",
        "xapp-1-A{up:10}-{dig:13}-{hex:64}",
        "slack-app-token",
    ),
    Format(
        "Microsoft Teams",
        "Webhook",
        "TEAMS_WEBHOOK_URL",
        "https://contoso.webhook.office.com/webhookb2/{uuid}@{uuid}/IncomingWebhook/{hex:32}/{uuid}",
        "microsoft-teams-webhook-url",
    ),
    Format(
        "Discord",
        "Webhook",
        "DISCORD_WEBHOOK_URL",
        "https://discord.com/api/webhooks/{dig:18}/{b64u:68}",
        "discord-webhook-url",
    ),
    Format("Discord", "Bot token", "DISCORD_BOT_TOKEN", _discord_bot, "discord-bot-token"),
    Format(
        "Zapier",
        "Catch hook",
        "ZAPIER_HOOK_URL",
        "https://hooks.zapier.com/hooks/catch/{dig:7}/{low:6}/",
        "zapier-webhook-url",
    ),
    Format(
        "Telegram", "Bot token", "TELEGRAM_BOT_TOKEN", "{dig:10}:AA{b64u:33}", "telegram-bot-token"
    ),
    Format("Twilio", "API key", "TWILIO_API_KEY", "SK{hex:32}", "twilio-api-key"),
    Format("Twilio", "Auth token", "TWILIO_AUTH_TOKEN", "{hex:32}"),
    Format("SendGrid", "API key", "SENDGRID_API_KEY", "SG.{b64u:22}.{b64u:43}", "sendgrid-api-key"),
    Format("Brevo", "API key", "BREVO_API_KEY", "xkeysib-{hex:64}-{a62:16}", "sendinblue-api-key"),
    Format("Mailgun", "API key", "MAILGUN_API_KEY", "key-{hex:32}", "mailgun-api-key"),
    Format("Mailchimp", "API key", "MAILCHIMP_API_KEY", "{hex:32}-us{dig:2}", "mailchimp-api-key"),
    Format("Mailjet", "Secret key", "MAILJET_SECRET_KEY", "{hex:32}"),
    Format("Postmark", "Server token", "POSTMARK_SERVER_TOKEN", "{uuid}"),
    Format("Pusher", "App secret", "PUSHER_APP_SECRET", "{hex:20}"),
    # payments and commerce
    Format(
        "Stripe", "Live secret key", "STRIPE_SECRET_KEY", "sk_live_{a62:99}", "stripe-secret-key"
    ),
    Format(
        "Stripe",
        "Live restricted key",
        "STRIPE_RESTRICTED_KEY",
        "rk_live_{a62:99}",
        "stripe-restricted-key",
    ),
    Format(
        "Stripe",
        "Restricted key (prod)",
        "STRIPE_RESTRICTED_KEY",
        "rk_prod_{a62:99}",
        "stripe-restricted-key",
    ),
    Format("Stripe", "Test secret key", "STRIPE_SECRET_KEY", "sk_test_{a62:99}", "stripe-test-key"),
    Format(
        "Stripe",
        "Webhook secret",
        "STRIPE_WEBHOOK_SECRET",
        "whsec_{a62:32}",
        "stripe-webhook-secret",
    ),
    Format("Square", "Access token", "SQUARE_ACCESS_TOKEN", "EAAA{b64u:60}", "square-access-token"),
    Format(
        "Square",
        "Legacy access token",
        "SQUARE_ACCESS_TOKEN",
        "sq0atp-{b64u:22}",
        "square-access-token",
    ),
    Format(
        "Square", "OAuth secret", "SQUARE_OAUTH_SECRET", "sq0csp-{b64u:43}", "square-oauth-secret"
    ),
    Format(
        "PayPal",
        "Braintree token",
        "BRAINTREE_ACCESS_TOKEN",
        "access_token$production${low:16}${hex:32}",
        "braintree-access-token",
    ),
    Format("Razorpay", "Key id", "RAZORPAY_KEY_ID", "rzp_live_{a62:14}", "razorpay-key"),
    Format(
        "Plaid",
        "Access token",
        "PLAID_ACCESS_TOKEN",
        "access-production-{uuid}",
        "plaid-access-token",
    ),
    Format("Plaid", "Secret", "PLAID_SECRET", "{hex:30}"),
    Format(
        "Flutterwave",
        "Secret key",
        "FLW_SECRET_KEY",
        "FLWSECK_TEST-{hex:32}-X",
        "flutterwave-secret-key",
    ),
    Format("Duffel", "API token", "DUFFEL_ACCESS_TOKEN", "duffel_live_{b64u:43}", "duffel-token"),
    Format("Shippo", "API token", "SHIPPO_API_TOKEN", "shippo_live_{hex:40}", "shippo-token"),
    Format("EasyPost", "API key", "EASYPOST_API_KEY", "EZAK{a62:54}", "easypost-api-key"),
    Format("Shopify", "Admin token", "SHOPIFY_ACCESS_TOKEN", "shpat_{hex:32}", "shopify-token"),
    Format("Shopify", "Shared secret", "SHOPIFY_API_SECRET", "shpss_{hex:32}", "shopify-token"),
    Format("Coinbase", "API secret", "COINBASE_API_SECRET", "{b64:88}"),
    Format("Kraken", "Private key", "KRAKEN_PRIVATE_KEY", "{b64:86}=="),
    # SaaS
    Format(
        "1Password",
        "Secret key",
        "OP_SECRET_KEY",
        "A3-{up:6}-{up:6}-{up:5}-{up:5}-{up:5}-{up:5}",
        "onepassword-secret-key",
    ),
    Format(
        "1Password",
        "Service account token",
        "OP_SERVICE_ACCOUNT_TOKEN",
        "ops_eyJ{b64:300}",
        "onepassword-service-account-token",
    ),
    Format("Adobe", "Client secret", "ADOBE_CLIENT_SECRET", "p8e-{hex:32}", "adobe-client-secret"),
    Format(
        "Facebook", "Page token", "FACEBOOK_ACCESS_TOKEN", "EAAC{a62:150}", "facebook-access-token"
    ),
    Format("Facebook", "App token", "FB_APP_TOKEN", "{dig:16}|{b64u:27}", "facebook-app-token"),
    Format("Facebook", "App secret", "FACEBOOK_APP_SECRET", "{hex:32}"),
    Format(
        "X (Twitter)",
        "Bearer token",
        "TWITTER_BEARER_TOKEN",
        "AAAAAAAAAAAAAAAAAAAAA{a62:90}",
        "twitter-bearer-token",
    ),
    Format("X (Twitter)", "Consumer secret", "TWITTER_CONSUMER_SECRET", "{a62:50}"),
    Format("Notion", "Integration token", "NOTION_TOKEN", "ntn_{dig:11}{a62:35}", "notion-token"),
    Format(
        "Notion", "Legacy integration token", "NOTION_API_KEY", "secret_{a62:43}", "notion-token"
    ),
    Format("Linear", "API key", "LINEAR_API_KEY", "lin_api_{a62:40}", "linear-api-key"),
    Format(
        "Linear", "OAuth token", "LINEAR_ACCESS_TOKEN", "lin_oauth_{hex:64}", "linear-oauth-token"
    ),
    Format("Airtable", "Personal token", "AIRTABLE_TOKEN", "pat{a62:14}.{hex:64}", "airtable-pat"),
    Format(
        "Asana", "Personal token", "ASANA_ACCESS_TOKEN", "2/{dig:16}/{dig:16}:{hex:32}", "asana-pat"
    ),
    Format("Typeform", "Personal token", "TYPEFORM_TOKEN", "tfp_{b64u:59}", "typeform-token"),
    Format("Figma", "Personal token", "FIGMA_TOKEN", "figd_{b64u:40}", "figma-token"),
    Format("Frame.io", "Developer token", "FRAMEIO_TOKEN", "fio-u-{b64u:64}", "frameio-token"),
    Format(
        "Contentful",
        "Management token",
        "CONTENTFUL_MANAGEMENT_TOKEN",
        "CFPAT-{b64u:43}",
        "contentful-token",
    ),
    Format("Contentful", "Delivery token", "CONTENTFUL_DELIVERY_TOKEN", "{b64u:43}"),
    Format(
        "Mapbox",
        "Secret token",
        "MAPBOX_SECRET_TOKEN",
        "sk.eyJ1Ijoi{b64u:50}.{b64u:22}",
        "mapbox-token",
    ),
    Format(
        "MaxMind",
        "License key",
        "MAXMIND_LICENSE_KEY",
        "{a62:6}_{a62:29}_mmk",
        "maxmind-license-key",
    ),
    Format("Dropbox", "Short-lived token", "DROPBOX_TOKEN", "sl.{b64u:135}", "dropbox-token"),
    Format(
        "Dropbox",
        "Long-lived token",
        "DROPBOX_TOKEN",
        "{low:11}AAAAAAAAAA{b64u:43}",
        "dropbox-long-lived-token",
    ),
    Format(
        "SettleMint",
        "Personal token",
        "SETTLEMINT_ACCESS_TOKEN",
        "sm_pat_{a62:16}",
        "settlemint-token",
    ),
    Format("Okta", "API token", "OKTA_API_TOKEN", "00{b64u:40}"),
    Format("Auth0", "Client secret", "AUTH0_CLIENT_SECRET", "{b64u:64}"),
    Format("Zendesk", "API token", "ZENDESK_API_TOKEN", "{a62:40}"),
    Format("HubSpot", "Private app token", "HUBSPOT_ACCESS_TOKEN", "pat-na1-{uuid}"),
    Format("Algolia", "Admin key", "ALGOLIA_ADMIN_API_KEY", "{hex:32}"),
    Format("Segment", "Write key", "SEGMENT_WRITE_KEY", "{a62:32}"),
    Format("Trello", "API token", "TRELLO_TOKEN", "{hex:64}"),
    Format("Spotify", "Client secret", "SPOTIFY_CLIENT_SECRET", "{hex:32}"),
    Format("Twitch", "Client secret", "TWITCH_CLIENT_SECRET", "{low:30}"),
    Format("LaunchDarkly", "SDK key", "LAUNCHDARKLY_SDK_KEY", "sdk-{uuid}"),
    Format("age", "Secret key", "SOPS_AGE_KEY", "AGE-SECRET-KEY-1{bech:58}", "age-secret-key"),
    Format("JSON Web Token", "Signed JWT", "SESSION_TOKEN", _jwt, "jwt"),
    Format("Private key", "RSA key", "TLS_PRIVATE_KEY", _pem("RSA"), "private-key"),
    Format("Private key", "OpenSSH key", "SSH_PRIVATE_KEY", _pem("OPENSSH"), "private-key"),
    Format("Private key", "PKCS#8 key", "SIGNING_PRIVATE_KEY", _pem(""), "private-key"),
)


# ---------------------------------------------------------------------------------------
# Where a credential stands: one function per syntax, each given the variable name the
# format usually lives in and the value.


def _camel(env: str) -> str:
    words = env.lower().split("_")
    return words[0] + "".join(word.capitalize() for word in words[1:])


def _kebab(env: str) -> str:
    return env.lower().replace("_", "-")


Syntax = Callable[[str, str, random.Random], str]

SYNTAXES: dict[str, Syntax] = {
    "dotenv": lambda env, v, rng: f"# staging\n{env}={v}\nLOG_LEVEL=debug",
    "shell export": lambda env, v, rng: f'export {env}="{v}"',
    "yaml": lambda env, v, rng: f"service:\n  region: eu-west-1\n  {env.lower()}: {v}\n",
    "yaml quoted": lambda env, v, rng: f'{_camel(env)}: "{v}"',
    "ini": lambda env, v, rng: f"[default]\nregion = us-east-1\n{env.lower()} = {v}\n",
    "toml": lambda env, v, rng: f'[auth]\n{env.lower()} = "{v}"\n',
    "json": lambda env, v, rng: json.dumps({"name": "worker", _camel(env): v}),
    "escaped json": lambda env, v, rng: json.dumps({"config.env": f"{env}={v}\nDEBUG=false"}),
    "json in a string": lambda env, v, rng: json.dumps(json.dumps({env.lower(): v})),
    "xml element": lambda env, v, rng: (
        f"<settings>\n  <{_camel(env)}>{v}</{_camel(env)}>\n</settings>"
    ),
    "dotnet appsettings": lambda env, v, rng: (
        f'<appSettings>\n  <add key="{_camel(env)}" value="{v}" />\n</appSettings>'
    ),
    "makefile ?=": lambda env, v, rng: f"{env} ?= {v}\nbuild:\n\tgo build ./...",
    "makefile ::=": lambda env, v, rng: f'{env} ::= "{v}"',
    "go var": lambda env, v, rng: f'var {_camel(env)} string = "{v}"',
    "go short": lambda env, v, rng: f'{_camel(env)} := "{v}"',
    "php append": lambda env, v, rng: f'${_camel(env)} .= "{v}";',
    "php define": lambda env, v, rng: f"define('{env}', '{v}');",
    "java setProperty": lambda env, v, rng: f'System.setProperty("{env}", "{v}");',
    "java properties": lambda env, v, rng: f"app.{_kebab(env).replace('-', '.')}={v}",
    "python constant": lambda env, v, rng: f'{env} = "{v}"',
    "python environ": lambda env, v, rng: f'os.environ["{env}"] = "{v}"',
    "python kwarg": lambda env, v, rng: f'client = Client({env.lower()}="{v}", timeout=30)',
    "js const": lambda env, v, rng: f"const {_camel(env)} = '{v}';",
    "ts object": lambda env, v, rng: f'export const config = {{\n  {_camel(env)}: "{v}",\n}};',
    "rust const": lambda env, v, rng: f'const {env}: &str = "{v}";',
    "csharp verbatim": lambda env, v, rng: f'string {_camel(env)} = @"{v}";',
    "ruby env": lambda env, v, rng: f"ENV['{env}'] = '{v}'",
    "powershell": lambda env, v, rng: f'$env:{env} = "{v}"',
    "dockerfile env": lambda env, v, rng: f"FROM python:3.12-slim\nENV {env} {v}\n",
    "dockerfile arg": lambda env, v, rng: f"ARG {env}={v}",
    "compose": lambda env, v, rng: f"services:\n  app:\n    environment:\n      - {env}={v}\n",
    "github actions env": lambda env, v, rng: f"env:\n  {env}: {v}\nsteps:\n  - run: make deploy",
    "k8s env": lambda env, v, rng: f'env:\n  - name: {env}\n    value: "{v}"\n',
    "terraform variable": lambda env, v, rng: (
        f'variable {{\n  name         = "{env}"\n  secret_value = "{v}"\n}}'
    ),
    "cli flag": lambda env, v, rng: f"deploy-tool push --{_kebab(env)} {v} --region eu",
    "cli flag =": lambda env, v, rng: f"helm upgrade app ./chart --set auth.{_camel(env)}={v}",
    "curl header": lambda env, v, rng: (
        f'curl -s -H "X-{_kebab(env).title()}: {v}" https://api.example.com/v1/items'
    ),
    "markdown note": lambda env, v, rng: f"- **{env}:** `{v}` (from the staging vault)",
    "url query": lambda env, v, rng: (
        f"https://api.example.com/v2/export?format=csv&{env.lower()}={v}&page=1"
    ),
    "cmake": lambda env, v, rng: f'set({env} "{v}")',
    "makefile :=": lambda env, v, rng: f"{env} := {v}",
    "comparison": lambda env, v, rng: f'if ({_camel(env)} == "{v}") {{ allow(); }}',
}
KEYED = tuple(SYNTAXES)
# Syntaxes where the value is identified by its own shape, with no name beside it.
PROSE: dict[str, Syntax] = {
    "prose": lambda env, v, rng: (
        f"Note to self: the staging credential is {v} (rotate it on Friday)."
    ),
    "log line": lambda env, v, rng: f"2024-05-02T10:11:12Z INFO request sent with {v} ok",
    "chat paste": lambda env, v, rng: f"Here you go:\n\n{v}\n\nlet me know if it works",
}


@dataclass(frozen=True)
class Entry:
    """One corpus text and what it is."""

    text: str
    label: str
    """``positive`` (holds a credential) or ``negative``."""
    family: str
    """For a positive, the provider (or "password" for a chosen one); for a negative, the
    kind of benign text."""
    syntax: str
    """How the credential is written; for a negative, the same as the family."""
    secret: str = ""
    """The credential, for a positive."""
    rule_id: str | None = None
    """The rule expected to report it, where one specific rule should."""


def _human_password(rng: random.Random) -> str:
    words = ["harbor", "Maple", "orbit", "Copper", "violet", "Falcon", "ember", "Tundra"]
    return (
        rng.choice(words)
        + rng.choice(words).lower()
        + expand("{dig:2-4}", rng)
        + rng.choice("!#%*-_")
    )


def _password(rng: random.Random) -> str:
    return _human_password(rng) if rng.random() < 0.4 else expand("{a62:1}{pw:13-21}", rng)


def _credential_slots(rng: random.Random) -> Iterator[Entry]:
    """Passwords and tokens in the places that are credential slots by definition."""

    def entry(text: str, syntax: str, secret: str, family: str = "password") -> Entry:
        return Entry(text, "positive", family, syntax, secret)

    hosts = ["db.internal.example.com", "10.0.4.17", "cluster0.abcde.mongodb.net", "localhost"]
    for scheme in (
        "postgres",
        "postgresql",
        "mysql",
        "mongodb+srv",
        "redis",
        "amqp",
        "https",
        "ftp",
    ):
        for _ in range(2):
            user = rng.choice(["app", "svc_reader", "deploy", "", "admin", "etl"])
            secret = _password(rng).replace("#", "").replace("%", "").replace("@", "")
            host = rng.choice(hosts)
            text = f"DATABASE_URL used by the worker: {scheme}://{user}:{secret}@{host}:5432/main"
            yield entry(text, f"url userinfo ({scheme})", secret)
    gh = expand("ghs_{a62:36}", rng)
    yield entry(
        f"git clone https://x-access-token:{gh}@github.com/acme/api.git", "git url", gh, "GitHub"
    )
    for flag in ("-u", "--user"):
        for _ in range(3):
            user, secret = (
                rng.choice(["elastic", "admin", "ci-bot", "jane.doe@example.com"]),
                _password(rng),
            )
            quote = rng.choice(["", "'", '"'])
            yield entry(
                f"curl -s {flag} {quote}{user}:{secret}{quote} https://search.example.com:9200/_cat/indices",
                f"curl {flag}",
                secret,
            )
    key = expand("sk_test_{a62:24}", rng)
    yield entry(
        f"curl https://api.stripe.com/v1/charges -u {key}: -d amount=2000",
        "curl -u key:",
        key,
        "Stripe",
    )
    for scheme in ("Bearer", "Basic", "Token"):
        for _ in range(2):
            secret = expand("{b64:40}", rng) if scheme == "Basic" else expand("{b64u:32-48}", rng)
            yield entry(
                'curl -X POST -H "Content-Type: application/json"'
                f' -H "Authorization: {scheme} {secret}" https://api.example.com/v1/jobs',
                f"authorization header ({scheme})",
                secret,
            )
    secret = expand("{hex:32}", rng)
    yield entry(f"Authorization: {secret}", "authorization header (bare)", secret)
    for _ in range(4):
        values = {
            "username": base64.b64encode(b"app").decode(),
            "password": base64.b64encode(_password(rng).encode()).decode(),
        }
        body = "\n".join(f"  {k}: {v}" for k, v in values.items())
        text = (
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-creds\ntype: Opaque\n"
            f"data:\n{body}\n"
        )
        yield entry(text, "kubernetes secret data", values["password"], "Kubernetes")
    cert = base64.b64encode(_pem("RSA")(rng).encode()).decode()
    text = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\ndata:\n"
        f"  tls.key: |\n    {cert[:76]}\n    {cert[76:152]}\n"
    )
    yield entry(text, "kubernetes secret block", cert[:76], "Kubernetes")
    for name in ("ClearTextPassword", "Password"):
        for _ in range(2):
            secret = _password(rng)
            text = (
                "<packageSourceCredentials>\n  <internal>\n"
                '    <add key="Username" value="build" />\n'
                f'    <add key="{name}" value="{secret}" />\n'
                "  </internal>\n</packageSourceCredentials>"
            )
            yield entry(text, "nuget config", secret, "NuGet")
    for _ in range(3):
        secret = _password(rng)
        yield entry(
            f"machine api.example.com\n  login deploy\n  password {secret}\n", "netrc", secret
        )
    for host in (
        "GEMS__CONTRIBSYS__COM",
        "ENTERPRISE__CONTRIBSYS__COM",
        "RUBYGEMS__PKG__GITHUB__COM",
    ):
        secret = expand("{hex:8}:{hex:8}", rng)
        yield entry(f"export BUNDLE_{host}={secret}", "bundler credentials", secret, "Bundler")
    for _ in range(2):
        secret = _password(rng)
        yield entry(f"mysqldump -u root -p'{secret}' shop > shop.sql", "mysql -p", secret)
        secret = _password(rng)
        yield entry(f"sshpass -p '{secret}' ssh deploy@10.0.0.12 uptime", "sshpass", secret)
        secret = _password(rng)
        yield entry(
            f"CREATE USER 'report'@'%' IDENTIFIED BY '{secret}';", "sql identified by", secret
        )
    for _ in range(3):
        secret = _password(rng)
        yield entry(
            'resource "azurerm_mssql_server" "main" {\n  administrator_login = "sqladmin"\n'
            f'  administrator_login_password = "{secret}"\n}}',
            "terraform resource",
            secret,
            "Terraform",
        )
    token = expand("{a62:14}.atlasv1.{a62:67}", rng)
    yield entry(
        f'credentials "app.terraform.io" {{\n  token = "{token}"\n}}',
        "terraformrc",
        token,
        "HashiCorp",
    )
    for _ in range(2):
        secret = _password(rng)
        yield entry(
            "Server=tcp:sql.example.net,1433;Database=shop;User ID=app;"
            f"Password={secret};Encrypt=True;",
            "connection string",
            secret,
        )
        secret = _password(rng).replace("&", "")
        yield entry(
            f"jdbc:postgresql://db:5432/app?user=app&password={secret}&ssl=true", "jdbc url", secret
        )
    token = expand("npm_{a62:36}", rng)
    yield entry(f"//registry.npmjs.org/:_authToken={token}", "npmrc", token, "npm")
    legacy = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    yield entry(f"//registry.npmjs.org/:_authToken={legacy}", "npmrc (legacy uuid)", legacy, "npm")
    token = expand("pypi-AgEIcHlwaS5vcmc{b64u:120}", rng)
    yield entry(f"[pypi]\nusername = __token__\npassword = {token}\n", "pypirc", token, "PyPI")
    auth = base64.b64encode(f"ci:{_password(rng)}".encode()).decode()
    yield entry(
        json.dumps({"auths": {"ghcr.io": {"auth": auth}}}, indent=2),
        "docker config auth",
        auth,
        "Docker",
    )
    for _ in range(2):
        secret = _password(rng)
        yield entry(f'if (password === "{secret}") {{ login(); }}', "comparison", secret)
        secret = _password(rng)
        yield entry(f'if ("{secret}" == db_password) return true;', "reversed comparison", secret)


def _positives(rng: random.Random) -> Iterator[Entry]:
    for fmt in FORMATS:
        # Shape-known tokens also go into prose (about a third of their placements);
        # name-known ones only where a name stands beside them.
        choices = list(KEYED) + (list(PROSE) * 6 if fmt.rule_id else [])
        for syntax in rng.sample(choices, 2 if fmt.rule_id else 3):
            value = fmt.make(rng)
            place = SYNTAXES.get(syntax) or PROSE[syntax]
            if "\n" in value and syntax not in PROSE:
                place, syntax = PROSE["chat paste"], "chat paste"
            yield Entry(
                place(fmt.env, value, rng),
                "positive",
                fmt.provider,
                syntax,
                value,
                fmt.rule_id if syntax in PROSE else None,
            )
    yield from _credential_slots(rng)


# ---------------------------------------------------------------------------------------
# Ordinary memory text

_PEOPLE = ["Ana", "Bo", "Chen", "Dana", "Efe", "Farah", "Gus", "Hana", "Ivo", "Jun"]
_SERVICES = ["billing-api", "search-indexer", "web-frontend", "ml-serving", "etl-nightly"]
_PROSE = [
    "{p} prefers small commits with conventional-commit messages and hates squash merges.",
    "{p} owns {s}; ask before changing its retry policy.",
    "The token budget for {s} summaries is {n} tokens; longer inputs are chunked.",
    "We agreed the password policy requires rotation every {n} days and a 14-character minimum.",
    "The secret to a stable test suite was freezing time with a fixture, not more retries.",
    "{p} keeps the API key list for {s} in the team vault; never paste keys in chat.",
    "Access tokens for {s} expire after {n} seconds, refresh tokens after 30 days.",
    "Use polars, never pandas, in {s}; {p} said so twice.",
    "Deploys of {s} happen Tuesdays and Thursdays after 14:00 UTC.",
    "The staging DB for {s} is read-only on Sundays; migrations wait for Monday.",
    "{p} is on call this week; escalation goes to {q}.",
    "Rotated the {s} credentials on 2024-0{m}-1{m}; the old key was revoked the same day.",
    "The key insight from the incident: {s} retried without backoff and melted the queue.",
    "Remember that {p} wants password fields masked in every screenshot.",
    "Feature flag new-checkout is at {n}% rollout; {p} decides when to go to 100.",
    "The auth service issues JWTs signed with RS256; keys rotate monthly via the KMS.",
    "To log in to the registry: `gh auth token | docker login ghcr.io -u USER --password-stdin`.",
    "Token counts in the dashboard are per request, not per session.",
    "{p} asked that secrets never appear in memory notes; say where they are kept instead.",
    "Passwords for the lab printers are on the sticker under each printer, per {p}.",
]


def _benign(rng: random.Random) -> Iterator[tuple[str, str]]:
    def sha1() -> str:
        return hashlib.sha1(rng.randbytes(16)).hexdigest()

    def sha256() -> str:
        return hashlib.sha256(rng.randbytes(16)).hexdigest()

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    for _ in range(80):
        template = rng.choice(_PROSE)
        yield (
            "prose",
            template.format(
                p=rng.choice(_PEOPLE),
                q=rng.choice(_PEOPLE),
                s=rng.choice(_SERVICES),
                n=rng.choice([30, 90, 3600, 4096, 8000, 25]),
                m=rng.randint(1, 9),
            ),
        )
    for _ in range(20):
        full = sha1()
        yield (
            "git sha",
            rng.choice(
                [
                    f"Bisected the regression to commit {full}: 'fix retry loop'.",
                    f"Last good build was at {full[:12]}; the next one broke tests.",
                    f"git revert {full}  # reverted the cache change",
                    f"The fix landed in {full[:7]} (see PR #{rng.randint(100, 999)}).",
                ]
            ),
        )
    for _ in range(16):
        yield (
            "uuid",
            rng.choice(
                [
                    f"request_id={uid()} is the failing request in Tuesday's logs.",
                    json.dumps({"correlationId": uid(), "status": 502}),
                    f"The staging tenant id is {uid()}; prod uses another one.",
                    f"idempotency_key: {uid()} was reused by the retry.",
                ]
            ),
        )
    for _ in range(24):
        digest = sha256()
        yield (
            "digest",
            rng.choice(
                [
                    f"sha256sum release.tar.gz -> {digest}",
                    f"Pin the base image: python@sha256:{digest}",
                    f"{digest}  installer.sh",
                    f"uv.lock: fastapi wheel hash sha256:{digest}",
                    f"requirements.txt pins orjson==3.9.{rng.randint(0, 15)} --hash=sha256:"
                    + digest,
                    f"sha512 of the model: {hashlib.sha512(rng.randbytes(8)).hexdigest()}",
                    f"md5 {hashlib.md5(rng.randbytes(8)).hexdigest()} matched the vendor's file",
                ]
            ),
        )
    for _ in range(14):
        integrity = base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode()
        yield (
            "npm integrity",
            rng.choice(
                [
                    f'"lodash": {{ "version": "4.17.{rng.randint(0, 21)}",'
                    f' "integrity": "sha512-{integrity}" }}',
                    f"The lockfile conflict was only the integrity line: sha512-{integrity}.",
                    f"  integrity sha512-{integrity}",
                ]
            ),
        )
    for _ in range(8):
        checksum = base64.b64encode(hashlib.sha256(rng.randbytes(8)).digest()).decode()
        yield "go.sum", f"go.sum conflict on github.com/google/uuid v1.6.0 h1:{checksum}"
    for _ in range(20):
        yield (
            "url with query",
            rng.choice(
                [
                    "https://shop.example.com/sale?utm_source=newsletter&utm_campaign=spring"
                    f"&utm_content={expand('{low:8}', rng)}",
                    f"https://grafana.example.org/d/{expand('{low:9}', rng)}/latency"
                    "?orgId=1&from=now-24h&to=now",
                    f"https://www.youtube.com/watch?v={expand('{b64u:11}', rng)}"
                    f"&t={rng.randint(10, 900)}s",
                    f"https://api.example.com/v1/items?page={rng.randint(2, 40)}"
                    "&per_page=100&sort=created_at",
                    "https://logs.example.net/app/discover#/"
                    f"?_a=(query:'trace.id:{expand('{hex:32}', rng)}')",
                    "OAuth callback: https://app.example.com/callback"
                    f"?state={expand('{hex:16}', rng)}&token_type=bearer",
                ]
            ),
        )
    masks = [
        "ghp_" + "x" * 36,
        "ghp_xxxxxxxx…",
        "sk-ant-api03-…",
        "sk_live_" + "*" * 24,
        "AKIA" + "X" * 16,
        "xoxb-XXXXXXXXXXXX-XXXXXXXXXXXXX-XXXXXXXXXXXXXXXXXXXXXXXX",
        "glpat-xxxxxxxxxxxxxxxxxxxx",
        "sk-proj-...",
        "hf_" + "x" * 34,
        "npm_" + "•" * 20,
    ]
    for mask in masks:
        yield "masked placeholder", f"The token looks like {mask} (masked in the docs)."
        yield "masked placeholder", f'GITHUB_TOKEN="{mask}"'
    for text in [
        'api_key = "<your-api-key>"',
        "OPENAI_API_KEY=your-api-key-here",
        'password: "********"',
        "DB_PASSWORD=changeme",
        'token = "REPLACE_ME"',
        'client_secret: "{{ client_secret }}"',
        'SECRET_KEY = "insert-secret-here"',
        "STRIPE_SECRET_KEY=sk_live_...",
        "export AWS_SECRET_ACCESS_KEY=<redacted>",
        'password = "[REDACTED]"',
    ]:
        yield "placeholder", text
    for text in [
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "DATABASE_PASSWORD: ${{ secrets.DATABASE_PASSWORD }}",
        'api_key = os.environ["ANTHROPIC_API_KEY"]',
        'openai_key = os.getenv("OPENAI_API_KEY")',
        "const token = process.env.SLACK_BOT_TOKEN;",
        "export DB_PASSWORD=$(vault kv get -field=password secret/app/db)",
        "password: ${DB_PASSWORD}",
        "token = settings.SLACK_BOT_TOKEN",
        'api_key: "{{ .Values.apiKey }}"',
        'secret = ENV.fetch("SECRET_KEY_BASE")',
        'String password = System.getenv("DB_PASSWORD");',
        'client_secret = config.get("oauth", "client_secret")',
        "valueFrom:\n  secretKeyRef:\n    name: api-credentials\n    key: token",
        "MasterUserPassword: !Ref DBPassword",
        "password = var.db_password",
        'token = data.vault_generic_secret.ci.data["token"]',
        "password: ENC[AES256_GCM,data:Zm9vYmFy,iv:abc,tag:def,type:str]",
        "The OPENAI_API_KEY lives in 1Password (vault Engineering, item search-indexer).",
        "AWS_SECRET_ACCESS_KEY is set by the deploy role, never in the repo.",
        'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me',
        'curl -u "$USER:$API_TOKEN" https://ci.example.com/api/json',
        "docker run --rm -u 1000:1000 -v $PWD:/src builder make",
        "psql postgres://app@localhost:5432/app",
        "git remote add origin ssh://git@github.com/acme/api.git",
        "postgres://postgres:postgres@localhost:5432/test is the throwaway test database.",
        "redis://localhost:6379/0",
        "https://user:<password>@proxy.example.com:8080",
        "machine github.com login octocat",
        "password_file: /run/secrets/postgres_password",
        "ssh_key: ~/.ssh/id_ed25519",
        "kubectl create secret generic db --from-literal=user=app --from-file=password=./pw",
        "PGPASSWORD=$PGPASS psql -h db -U app",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"
        "data:\n  LOG_LEVEL: debug\n  FEATURE_FLAGS: bmV3LWNoZWNrb3V0\n",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n"
        "stringData:\n  password: ${DB_PASSWORD}\n",
    ]:
        yield "secret reference", text
    for text in [
        '{"max_tokens": 4096, "password_min_length": 12, "tokenizer": "cl100k_base"}',
        'tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B-Instruct")',
        "token_type: bearer",
        "ACCESS_TOKEN_EXPIRE_MINUTES = 30",
        'api_key_header = "X-API-Key"',
        'PASSWORD_FIELD = "password"',
        'FORCE_CHANGE_PASSWORD = "FORCE_CHANGE_PASSWORD"',
        'auth_token = "X-Auth-Token"',
        "sort_key: created_at",
        'primary_key = "user_id"',
        f"public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{expand('{b64:43}', rng)} ana@laptop",
        'cache_key = f"user:{user_id}:profile"',
        'eos_token: "</s>"',
        'pad_token = "[PAD]"',
        f'"next_page_token": "{expand("{a62:32}", rng)}"',
        f'{{"NextToken": "{base64.b64encode(json.dumps({"page": 7}).encode()).decode()}"}}',
        f'"LockToken": "{uid()}"',
        f"Resume the export with page_token={expand('{a62:40}', rng)}",
        'password_reset_url = "https://accounts.example.com/reset"',
        '"token_endpoint": "https://oauth2.googleapis.com/token"',
        "secret_scanning: enabled, push_protection: enabled",
        "JWT_ALGORITHM = RS256",
        'SECRET_MANAGER_PATH = "projects/acme-prod-3141/secrets/db-password/versions/7"',
        '"SecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf"',
        "def login(username: str, password: str) -> Token:",
        "if not token:\n    raise AuthError('missing token')",
        "password = getpass.getpass('DB password: ')",
        "token = secrets.token_urlsafe(32)",
        'hotkey: "ctrl+shift+p"',
        'routing_key = "orders.created.v1"',
        "Frontend uses the publishable key pk_test_TYooMQauvdEDq54NiTphI7jx (safe in client code).",
        "Stripe customer cus_NffrFeUfNV2Hib disputed charge ch_3MmlLrLkdIwHu7ix0snN0B15.",
        "Slack thread: https://acme.slack.com/archives/C024BE91L/p1712345678901234",
        "tokens_per_minute: 90000\nrequests_per_minute: 3500",
        'key_vault_name = "kv-acme-prod"',
        "The header is X-Api-Key, not Authorization.",
        "Authorization: see the wiki page on service accounts",
        "Bearer tokens go in the Authorization header, never in the URL.",
        f"feature_key: new-checkout-{rng.randint(2020, 2026)}",
        "passkey support ships in v3.2; password login stays as a fallback.",
    ]:
        yield "code near miss", text
    for _ in range(6):
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(60)).decode()
        yield "data url", f'<img alt="logo" src="data:image/png;base64,{png}">'
    for _ in range(6):
        body = "\n".join(expand("{b64:64}", rng) for _ in range(4))
        yield (
            "public key",
            rng.choice(
                [
                    f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----",
                    f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----",
                    "Deploy key (public half): ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ"
                    f"{expand('{b64:200}', rng)} ci@example.org",
                ]
            ),
        )
    for _ in range(40):
        octets = ".".join(str(rng.randint(1, 254)) for _ in range(3))
        version = f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 30)}"
        yield (
            "identifiers",
            rng.choice(
                [
                    f"Release v{version} shipped on 2024-07-22.",
                    f"Upgrade chalk from 4.1.2 to {version}-rc.{rng.randint(1, 5)}+build.7.",
                    f"The printer is at 10.{octets}, MAC 4e:40:e3:9c:aa:{rng.randint(10, 99)}.",
                    f"IPv6 of the bastion: 2001:db8:{expand('{hex:4}::{hex:4}', rng)}",
                    f"Instance i-0{expand('{hex:16}', rng)} in us-east-2 runs the cron jobs.",
                    f"Role arn:aws:iam::{expand('{dig:12}', rng)}:role/deploy is assumed by CI.",
                    f"ReplicaSet {rng.choice(_SERVICES)}-{expand('{low:10}', rng)} was rolled back",
                    f"Container {sha256()} kept restarting with OOMKilled.",
                    f"Trace id {expand('{hex:32}, span {hex:16}', rng)} shows the slow call.",
                    f"Mongo document {expand('{hex:24}', rng)} has the bad payload.",
                    f"ULID 01{expand('{up:24}', rng)} is the first event after the deploy.",
                    f"The dark theme uses {expand('--surface: #{hex:6}; --text: #{hex:8};', rng)}",
                    f"Ticket PAY-{rng.randint(100, 9999)} tracks the refund bug.",
                    f"Nix path /nix/store/{expand('{low:32}', rng)}-python3-3.11.8/bin/python3",
                    f"Build id {expand('{hex:12}', rng)} on buildkite, job {uid()}",
                ]
            ),
        )


def build_corpus(seed: int = SEED) -> list[Entry]:
    """Every entry, positives first; the same list for the same seed."""
    rng = random.Random(seed)
    positives = list(_positives(rng))
    negatives = [Entry(text, "negative", family, family) for family, text in _benign(rng)]
    return positives + negatives


def describe(entries: list[Entry]) -> dict[str, int]:
    """Counts the tests and the benchmark report."""
    positives = [e for e in entries if e.label == "positive"]
    return {
        "positives": len(positives),
        "negatives": len(entries) - len(positives),
        "providers": len({e.family for e in positives}),
        "syntaxes": len({e.syntax for e in positives}),
        "formats": len(FORMATS),
    }


if __name__ == "__main__":
    corpus = build_corpus()
    print(json.dumps(describe(corpus), indent=2))
    print(Counter(e.family for e in corpus if e.label == "negative"))
