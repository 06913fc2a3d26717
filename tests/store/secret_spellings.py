"""Credentials in the spellings a name-and-shape scanner misses, and risky-looking text.

The second corpus of the secret guard, next to ``secret_corpus.py``: where that one
places each provider's token in many syntaxes, this one takes the credentials people
write in forms that hide them from a simple scan: a URL password holding ``#``, ``?``,
``/``, ``:``, a space, a bracket or a quote; a password said in a sentence; an Azure SAS
signature; an AWS secret key with no name beside it; a credential wrapped in base64 or
split over lines; Oracle's ``user/password@db``; PuTTY key files, ``.pgpass`` lines,
``ldapsearch -w``, ``htpasswd`` entries; Twilio's token passed by position; a key with a
zero-width or look-alike character in it. The benign side is text that looks as risky
and is not: digests, UUIDs, lockfile checksums, public keys, placeholders, API
documentation, URLs without a password, commit ids, sentences about passwords.

Everything is built at run time from the public shape of each format with seeded random
characters: no literal here is a real credential, and the corpus is the same on every
run. ``build_spellings()`` returns the entries; each positive's ``family`` names the
hole it probes, so a report can say which family still leaks.

A note on JWTs: a whole, decodable JWT is counted as a credential even when it comes
from documentation, since the scanner cannot know where a token came from and refusing a
documented one costs the writer only a rewording. Strings that only look like a JWT (a
cut ``eyJhbGciOi…``, ``header.payload.signature``) are benign.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator

from tests.store.secret_corpus import Entry, expand

SEED = 20261204

URL_SCHEMES = {
    "postgres": "postgres://{user}:{pw}@db.internal.example.com:5432/app",
    "mongodb+srv": "mongodb+srv://{user}:{pw}@cluster0.x1y2z.mongodb.net/app?retryWrites=true",
    "redis": "redis://{user}:{pw}@cache.example.net:6379/0",
    "amqp": "amqp://{user}:{pw}@rabbit.example.org:5672/vhost",
    "ftp": "ftp://{user}:{pw}@files.example.com/upload/",
    "jdbc": "jdbc:postgresql://{user}:{pw}@10.0.3.7:5432/ledger",
    "https": "https://{user}:{pw}@git.example.com/acme/api.git",
}
# The characters that end a naive URL-password pattern early.
URL_SPECIALS = ("#", "?", "/", ":", " ", "(", "[", "'", '"', "@")

FAMILIES = (
    "url password",
    "url password (percent-encoded)",
    "prose",
    "azure sas",
    "aws secret (bare)",
    "base64-wrapped",
    "line-split",
    "oracle",
    "putty",
    "pgpass",
    "ldapsearch",
    "htpasswd",
    "twilio positional",
    "zero-width",
    "look-alike",
)


def _pw(rng: random.Random, special: str = "") -> str:
    """A chosen password: a word, digits, symbols, with ``special`` somewhere inside."""
    word = rng.choice(["harbor", "Maple", "orbit", "Copper", "violet", "Falcon", "Tundra", "quill"])
    body = word + expand("{dig:2-4}", rng) + expand("{pw:3-6}", rng)
    cut = rng.randint(2, len(body) - 1)
    return body[:cut] + special + body[cut:]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _aws_secret(rng: random.Random) -> str:
    # AWS issues 40 characters of base64 (30 random bytes); most hold a / or +.
    secret = expand("{b64:40}", rng)
    while "/" not in secret and "+" not in secret:
        secret = expand("{b64:40}", rng)
    return secret


def _positives(rng: random.Random) -> Iterator[Entry]:
    def entry(family: str, syntax: str, text: str, secret: str) -> Entry:
        return Entry(text, "positive", family, syntax, secret)

    # --- URL user-info passwords with any character --------------------------------------
    users = ["app", "svc_reader", "deploy", "admin", "etl", "ana.lee"]
    for scheme, shape in URL_SCHEMES.items():
        for special in URL_SPECIALS:
            pw = _pw(rng, special)
            url = shape.format(user=rng.choice(users), pw=pw)
            lead = rng.choice(["Connection string for the worker: ", "DSN = ", "Use ", ""])
            yield entry("url password", f"{scheme} {special!r}", f"{lead}{url}", pw)
        for special in ("#", "/", "?"):
            pw = _pw(rng, special)
            quoted = urllib.parse.quote(pw, safe="")
            url = shape.format(user=rng.choice(users), pw=quoted)
            yield entry("url password (percent-encoded)", scheme, f"DSN = {url}", quoted)
    for scheme in ("postgres", "redis", "https"):
        pw = _pw(rng, "#") + "@" + expand("{a62:3}", rng)
        url = URL_SCHEMES[scheme].format(user="", pw=pw)
        yield entry("url password", f"{scheme} empty user", f"saved: {url} (staging)", pw)

    # --- passwords and keys stated in prose ------------------------------------------------
    prose = [
        "the db password is {v}",
        "The staging database password is {v} (rotate it on Friday).",
        "my token: {v}",
        "My GitHub token is {v}, keep it private.",
        "password for the admin console = {v}",
        "Password for prod is `{v}`.",
        "The wifi password is {v} btw",
        "use {v} as the password for the test account",
        "pw: {v}",
        "creds: user admin, pass {v}",
        "The API key for the weather service is {v}",
        "Ana's VPN passphrase is '{v}'.",
        "The new root password is now {v}",
        "Reset the jenkins password to {v} yesterday.",
        "secret key = {v}",
        'the key is "{v}"',
        "Login with admin / {v} on the router.",
        "The password we set: {v}",
        "{v} is the password for the shared mailbox.",
        "Note: redis auth password - {v}",
        "The access key for the bucket is {v}.",
        "the sftp password was changed to {v}",
        "Token for the metrics API → {v}",
        "passcode {v} for the door panel app",
        "db pass is {v}",
    ]
    for template in prose:
        for _ in range(2):
            wants_key = any(w in template.lower() for w in ("token", "key"))
            value = expand("{a62:32-40}", rng) if wants_key else _pw(rng)
            value = value.replace("'", "").replace('"', "").replace("`", "")
            yield entry(
                "prose",
                template.split("{v}")[0][:24] or "value first",
                template.format(v=value),
                value,
            )

    # --- Azure SAS signatures -------------------------------------------------------------
    for _ in range(16):
        sig = urllib.parse.quote(_b64(rng.randbytes(32)), safe="")
        account = expand("{lower:8-12}", rng)
        query = (
            f"sv=2022-11-02&ss=b&srt=sco&sp=rwdlac&se=2026-0{rng.randint(1, 9)}-01T00:00:00Z"
            f"&st=2025-01-01T00:00:00Z&spr=https&sig={sig}"
        )
        text = rng.choice(
            [
                f"https://{account}.blob.core.windows.net/backups?{query}",
                f"SAS token for the uploads container: ?{query}",
                f'"sasUrl": "https://{account}.blob.core.windows.net/in/x.csv?{query}"',
                f"azcopy copy ./dist 'https://{account}.blob.core.windows.net/web?{query}'",
            ]
        )
        yield entry("azure sas", "sas url", text, sig)

    # --- AWS secret keys with no name beside them ------------------------------------------
    for _ in range(16):
        key_id = expand("AKIA{up:16}", rng)
        secret = _aws_secret(rng)
        text = rng.choice(
            [
                f"Access key ID,Secret access key\n{key_id},{secret}\n",
                f"aws configure\n  {key_id}\n  {secret}\n  eu-west-1",
                f"The CI user's keys: {key_id} / {secret}",
                f"here is the secret for the deploy user: {secret}",
                f"{secret}",
                f"Keys from the IAM console ({key_id}): {secret}",
            ]
        )
        yield entry("aws secret (bare)", "bare", text, secret)

    # --- credentials wrapped in base64 -----------------------------------------------------
    for _ in range(16):
        token = expand("ghp_{a62:36}", rng)
        inner = rng.choice(
            [
                f"export GITHUB_TOKEN={token}\n",
                json.dumps({"user": "ci", "password": _pw(rng)}),
                f"DB_PASSWORD={_pw(rng)}",
                f"{rng.choice(users)}:{_pw(rng)}",
                f"aws_secret_access_key = {_aws_secret(rng)}",
            ]
        )
        wrapped = _b64(inner.encode())
        text = rng.choice(
            [
                f"echo {wrapped} | base64 -d > .env",
                f"The config blob (base64): {wrapped}",
                f'"credentials": "{wrapped}"',
                f"SETTINGS_B64={wrapped}",
            ]
        )
        yield entry("base64-wrapped", "base64", text, wrapped)

    # --- credentials split over lines or across string pieces -------------------------------
    for _ in range(16):
        token = rng.choice(
            [
                expand("ghp_{a62:36}", rng),
                expand("sk-ant-api03-{b64u:93}AA", rng),
                expand("xoxb-{dig:12}-{dig:12}-{a62:24}", rng),
                expand("glpat-{b64u:20}", rng),
                expand("AKIA{up:16}", rng),
            ]
        )
        cut = rng.randint(6, len(token) - 4)
        head, tail = token[:cut], token[cut:]
        text = rng.choice(
            [
                f"token (wrapped by the terminal):\n{head}\n{tail}\n",
                f'TOKEN = "{head}" + "{tail}"',
                f'token = ("{head}"\n         "{tail}")',
                f"> {head}\n> {tail}",
                f"const t = '{head}' +\n  '{tail}';",
            ]
        )
        yield entry("line-split", "split", text, head)

    # --- Oracle user/password@db ----------------------------------------------------------
    for _ in range(12):
        pw = _pw(rng)
        user = rng.choice(["scott", "hr", "system", "app_owner", "etl"])
        text = rng.choice(
            [
                f"sqlplus {user}/{pw}@//db.example.com:1521/ORCLPDB1",
                f"sqlplus -s {user}/{pw}@PROD @report.sql",
                f"expdp {user}/{pw}@orcl schemas=HR directory=DP_DIR dumpfile=hr.dmp",
                f"sqlldr userid={user}/{pw}@xe control=load.ctl",
                f"SQL> connect {user}/{pw}@ledger",
                f"rman target sys/{pw}@cdb1",
                f"jdbc:oracle:thin:{user}/{pw}@db.example.com:1521:ORCL",
            ]
        )
        yield entry("oracle", "user/pw@db", text, pw)

    # --- PuTTY private key files -----------------------------------------------------------
    for version in (2, 3, 2, 3, 2, 3, 2, 3):
        kind = rng.choice(["ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256"])
        public = "\n".join(expand("{b64:64}", rng) for _ in range(rng.randint(2, 6)))
        private = "\n".join(expand("{b64:64}", rng) for _ in range(rng.randint(1, 8)))
        kdf = "Key-Derivation: Argon2id\nArgon2-Memory: 8192\n" if version == 3 else ""
        text = (
            f"PuTTY-User-Key-File-{version}: {kind}\nEncryption: none\n{kdf}"
            f"Comment: ci@build\nPublic-Lines: {public.count(chr(10)) + 1}\n{public}\n"
            f"Private-Lines: {private.count(chr(10)) + 1}\n{private}\n"
            f"Private-MAC: {expand('{hex:64}', rng)}\n"
        )
        yield entry("putty", f"ppk v{version}", text, private.split("\n")[0])

    # --- .pgpass lines ---------------------------------------------------------------------
    for _ in range(12):
        pw = _pw(rng).replace(":", "")
        host = rng.choice(["db.internal", "localhost", "10.0.4.17", "*", "pg-replica-2"])
        line = f"{host}:{rng.choice(['5432', '*', '6432'])}:{rng.choice(['app', '*'])}:app:{pw}"
        text = rng.choice([f"~/.pgpass:\n{line}\n", f"{line}\n", f"added to pgpass: {line}"])
        yield entry("pgpass", "pgpass", text, pw)

    # --- ldapsearch -w ---------------------------------------------------------------------
    for _ in range(10):
        pw = _pw(rng)
        tool = rng.choice(["ldapsearch", "ldapmodify", "ldapadd", "ldapwhoami", "ldapdelete"])
        quote = rng.choice(["", "'", '"'])
        text = (
            f"{tool} -x -H ldaps://ldap.example.com -D 'cn=admin,dc=example,dc=com' "
            f"-w {quote}{pw}{quote} -b 'dc=example,dc=com' '(uid=ana)'"
        )
        yield entry("ldapsearch", tool, text, pw)

    # --- htpasswd --------------------------------------------------------------------------
    for index in range(12):
        user = rng.choice(["admin", "ana", "grafana", "ops"])
        if index % 3 == 0:
            pw = _pw(rng).replace("'", "")
            text = f"htpasswd -b{rng.choice(['', 'c', 'B'])} /etc/nginx/.htpasswd {user} '{pw}'"
            secret = pw
        else:
            secret = rng.choice(
                [
                    expand("$apr1${a62:8}${a62:22}", rng).replace("{", ""),
                    "{SHA}" + _b64(hashlib.sha1(rng.randbytes(8)).digest()),
                    expand("$2y$05${a62:53}", rng),
                ]
            )
            text = f".htpasswd:\n{user}:{secret}\n"
        yield entry("htpasswd", "htpasswd", text, secret)

    # --- Twilio's auth token passed by position --------------------------------------------
    for _ in range(10):
        sid, auth = expand("AC{hex:32}", rng), expand("{hex:32}", rng)
        text = rng.choice(
            [
                f'client = Client("{sid}", "{auth}")',
                f"const client = require('twilio')('{sid}', '{auth}');",
                f'new TwilioRestClient("{sid}", "{auth}")',
                f'Twilio.init("{sid}", "{auth}");',
                f'twilio.NewRestClientWithParams(twilio.ClientParams{{Username: "{sid}", '
                f'Password: "{auth}"}})',
            ]
        )
        yield entry("twilio positional", "positional", text, auth)

    # --- zero-width and look-alike characters ------------------------------------------------
    invisible = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]
    for _ in range(16):
        token = rng.choice(
            [
                expand("ghp_{a62:36}", rng),
                expand("AKIA{up:16}", rng),
                expand("sk-ant-api03-{b64u:93}AA", rng),
                expand("xoxb-{dig:12}-{dig:12}-{a62:24}", rng),
                expand("glpat-{b64u:20}", rng),
            ]
        )
        cut = rng.randint(1, 5)
        spelled = token[:cut] + rng.choice(invisible) + token[cut:]
        yield entry("zero-width", "zero-width", f"the token is {spelled} for now", spelled)
    # Cyrillic and Greek letters drawn like Latin ones, and full-width forms.
    lookalike = {
        "a": "\u0430",
        "e": "\u0435",
        "o": "\u043e",
        "p": "\u0440",
        "c": "\u0441",
        "x": "\u0445",
        "A": "\u0391",
        "K": "\u039a",
        "I": "\u0406",
        "S": "\u0405",
    }
    for _ in range(16):
        token = rng.choice(
            [
                expand("ghp_{a62:36}", rng),
                expand("AKIA{up:16}", rng),
                expand("sk-ant-api03-{b64u:93}AA", rng),
                expand("xoxp-{dig:12}-{dig:12}-{a62:24}", rng),
                expand("sk_live_{a62:24}", rng),
            ]
        )
        if rng.random() < 0.25:
            spelled = "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in token[:6])
            spelled += token[6:]
        else:
            at = [i for i, ch in enumerate(token[:8]) if ch in lookalike]
            spelled = (
                token if not at else (token[: at[0]] + lookalike[token[at[0]]] + token[at[0] + 1 :])
            )
        yield entry("look-alike", "look-alike", f"Saved the key {spelled} in the note.", spelled)


def _negatives(rng: random.Random) -> Iterator[tuple[str, str]]:
    def sha(bits: int = 256) -> str:
        return hashlib.new(f"sha{bits}" if bits != 1 else "sha1", rng.randbytes(16)).hexdigest()

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    for _ in range(30):
        yield (
            "hash",
            rng.choice(
                [
                    f"sha256: {sha()}",
                    f"The artifact digest is sha512:{sha(512)}",
                    f"SHA1 {sha(1)} matches the mirror.",
                    f"md5sum says {hashlib.md5(rng.randbytes(8)).hexdigest()}",
                    f"Checksum (base64 sha256): {_b64(hashlib.sha256(rng.randbytes(8)).digest())}",
                    f"docker pull ghcr.io/acme/api@sha256:{sha()}",
                    f'etag: W/"{hashlib.md5(rng.randbytes(8)).hexdigest()}"',
                ]
            ),
        )
    for _ in range(20):
        yield (
            "uuid",
            rng.choice(
                [
                    f"Tenant {uid()} is the staging one.",
                    f'subscription_id = "{uid()}"',
                    f"The run {uid()} failed at step 3; the retry {uid()} passed.",
                    f"X-Request-Id: {uid()}",
                ]
            ),
        )
    for _ in range(30):
        digest = _b64(hashlib.sha512(rng.randbytes(8)).digest())
        short = _b64(hashlib.sha256(rng.randbytes(8)).digest())
        yield (
            "lockfile checksum",
            rng.choice(
                [
                    f"  integrity sha512-{digest}",
                    f'"resolved": "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz", '
                    f'"integrity": "sha512-{digest}"',
                    f'checksum = "{sha()}"',
                    f"golang.org/x/text v0.14.0 h1:{short}",
                    f"golang.org/x/text v0.14.0/go.mod h1:{short}",
                    f'{{file = "idna-3.7-py3-none-any.whl", hash = "sha256:{sha()}"}}',
                    f"pyyaml==6.0.1 \\\n    --hash=sha256:{sha()} \\\n    --hash=sha256:{sha()}",
                    f"  checksum: {sha(512)}\n  languageName: node\n  linkType: hard",
                ]
            ),
        )
    for _ in range(20):
        body = "\n".join(expand("{b64:64}", rng) for _ in range(rng.randint(3, 6)))
        yield (
            "public key",
            rng.choice(
                [
                    f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{expand('{b64:43}', rng)} ana@laptop",
                    f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{expand('{b64:300}', rng)} deploy",
                    f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----",
                    f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----",
                    f"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{body}\n"
                    "-----END PGP PUBLIC KEY BLOCK-----",
                    f"age recipient: age1{expand('{lower:58}', rng)}",
                    f"Public-Lines: 2\n{expand('{b64:64}', rng)}\n{expand('{b64:40}', rng)}",
                ]
            ),
        )
    placeholders = [
        "postgres://app:<password>@db.internal:5432/app",
        "mongodb+srv://<username>:<password>@cluster0.mongodb.net/test",
        "redis://:****@cache:6379/0",
        "amqp://guest:guest@localhost:5672/",
        "ftp://user:changeme@files.example.com/",
        "https://USER:PASSWORD@git.example.com/repo.git",
        "jdbc:mysql://root:${MYSQL_ROOT_PASSWORD}@db:3306/app",
        "the db password is <password>",
        "my token: <your-token-here>",
        "The API key is YOUR_API_KEY (replace it).",
        "password: ****",
        "Set the password to changeme and rotate it on first login.",
        "sqlplus scott/<password>@orcl",
        "sqlplus / as sysdba",
        "sqlplus hr@ORCLPDB1  # prompts for the password",
        "ldapsearch -x -W -D 'cn=admin,dc=example,dc=com' -b dc=example,dc=com",
        'ldapsearch -x -w "$LDAP_PASSWORD" -D cn=admin -b dc=example,dc=com',
        "htpasswd -c /etc/nginx/.htpasswd admin  # asks for the password twice",
        "htpasswd -b .htpasswd user <password>",
        "*:*:*:postgres:<password> goes in ~/.pgpass",
        "hostname:port:database:username:password",
        'client = Client(os.environ["TWILIO_ACCOUNT_SID"], os.environ["TWILIO_AUTH_TOKEN"])',
        "Client(account_sid, auth_token)",
        "?sv=2022-11-02&ss=b&sp=r&se=<expiry>&sig=<signature>",
        "https://acct.blob.core.windows.net/c?sv=...&sig=...",
        "AWS_SECRET_ACCESS_KEY=" + expand("{b64:30}EXAMPLEKEY", rng),
        "aws_access_key_id = " + expand("AKIA{up:9}EXAMPLE", rng),
        "The token looks like ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.",
        'password = "********"',
        "DB_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
    ]
    for text in placeholders:
        yield "placeholder", text
        yield "placeholder", f"From the setup docs: `{text}`"
    for _ in range(2):
        for text in [
            "password (string, required): the user's password, 8 to 64 characters.",
            "`sig` — the signature, an HMAC-SHA256 of the string-to-sign, base64 and URL-encoded.",
            "Pass the token in the Authorization header: `Authorization: Bearer <token>`.",
            "The API key goes in the X-Api-Key header; keys start with sk_live_ or sk_test_.",
            "GET /v1/users/{id} returns the user; 401 if the token has expired.",
            "Tokens are JWTs of the form header.payload.signature, signed with RS256.",
            'A JWT starts with eyJhbGciOi… because the header is base64 of {"alg":…}.',
            "POST /oauth/token with grant_type=client_credentials, client_id and client_secret.",
            "Use `-w passwd` to give ldapsearch the bind password, or -W to be prompted.",
            "A .pgpass line is hostname:port:database:username:password; chmod 600 the file.",
            "htpasswd lines are user:hash, with the hash in $apr1$, {SHA} or bcrypt form.",
            "PuTTY keys (.ppk) hold Public-Lines and Private-Lines; convert with puttygen.",
            "The SAS token parameters are sv, ss, srt, sp, se, st, spr and sig.",
            "AWS secret access keys are 40 characters; access key ids start with AKIA.",
            "Twilio's client takes the account SID and the auth token, in that order.",
        ]:
            yield "api docs", text if _ == 0 else f"From the docs: {text}"
    for _ in range(40):
        yield (
            "url without password",
            rng.choice(
                [
                    f"https://grafana.example.org:3000/d/{expand('{low:9}', rng)}/latency?orgId=1",
                    "ssh://git@github.com:22/acme/api.git",
                    "git@github.com:acme/api.git",
                    f"http://localhost:{rng.randint(3000, 9000)}/api"
                    " (ask ops@example.com for access)",
                    "https://registry.npmjs.org/@types/node/-/node-20.11.0.tgz",
                    f"https://www.npmjs.com/package/@scope/pkg/v/1.{rng.randint(0, 9)}.0",
                    "postgres://app@localhost:5432/app",
                    "mongodb://db1.example.net:27017,db2.example.net:27017/?replicaSet=rs0",
                    "redis://localhost:6379/0",
                    "uses: actions/checkout@v4 and actions/setup-python@v5",
                    "pip install git+https://github.com/acme/tool.git@v1.2.3",
                    f"https://example.com/a/b?next=/c:d&ref=mail@{rng.randint(1, 9)}x",
                    "mailto:support@example.com?subject=Help",
                    f"http://[2001:db8::{rng.randint(1, 99)}]:8080/health",
                    "https://maps.example.com/@51.5074,-0.1278,12z",
                    "https://medium.com/@ana.lee/notes-on-retries-3f2a",
                    "ftp://ftp.example.com/pub/README",
                    "amqp://rabbit.example.org:5672/%2F",
                    "jdbc:postgresql://db.example.com:5432/ledger?ssl=true",
                    "http://proxy.internal:3128 then email me at bo@example.com",
                ]
            ),
        )
    for _ in range(20):
        full = sha(1)
        yield (
            "commit sha",
            rng.choice(
                [
                    f"Reverted {full} (the cache change).",
                    f"git cherry-pick {full[:10]}",
                    f"The bisect landed on {full}; see also {sha(1)}.",
                    f"commit {full}\nAuthor: Ana <ana@example.com>",
                ]
            ),
        )
    for text in [
        "the password is stored in 1Password under 'staging db'",
        "The db password is rotated every 90 days by the vault.",
        "my token expired yesterday, so I made a new one in the UI",
        "The key is to retry with exponential backoff.",
        "The API key is in the team vault, item billing-api.",
        "the password is at least 14 characters with a symbol",
        "The password was reset by Ana on Monday.",
        "my token: still the one from the CI secrets, nothing changed",
        "The access key for the bucket is managed by Terraform.",
        "The wifi password is on the fridge.",
        "Her password is the same as the staging one (she will change it).",
        "the secret key is generated at deploy time with secrets.token_hex(32)",
        "The token is valid for 3600 seconds.",
        "password is bcrypt-hashed with cost 12",
        "The passphrase is required only for the signing key.",
        "Token for the metrics API → see the runbook, section 4.",
        "use the password manager as the password source for CI",
        "The root password is now managed by LAPS.",
        "pw: see vault",
        "creds: ask Bo",
        "The new key is RSA-4096, generated on the HSM.",
        "The login password is the user's SSO password.",
        "The default password is blank for the dev container.",
        "my key: ed25519, made with ssh-keygen -t ed25519",
        "The password policy is NIST 800-63B.",
    ]:
        yield "prose about secrets", text
        yield "prose about secrets", f"- {text[0].upper()}{text[1:]}"
    for _ in range(12):
        payload = rng.choice(
            [
                json.dumps({"feature": "new-checkout", "rollout": rng.randint(1, 100)}),
                "hello world, this is a plain note",
                f"build {rng.randint(100, 999)} passed on main",
                json.dumps({"theme": "dark", "lang": "en"}),
            ]
        )
        yield "base64 of plain text", f"FLAGS_B64={_b64(payload.encode())}"
    for _ in range(10):
        yield (
            "split hex",
            (
                f"digest (wrapped):\n{sha()[:32]}\n{sha()[32:]}"
                if rng.random() < 0.5
                else f"commit {sha(1)[:20]}\n{sha(1)[:20]}"
            ),
        )
    for text in [
        "Привет! Пароль от wifi спросите у администратора.",  # noqa: RUF001
        "Ο κωδικός βρίσκεται στο vault της ομάδας.",  # noqa: RUF001
        "メモ：ＡＰＩキーはチームの保管庫にあります。",  # noqa: RUF001
        "The family emoji 👨\u200d👩\u200d👧 joins with zero-width joiners.",
        "Soft hyphen: en\u00adcyclo\u00adpedia wraps nicely.",
        "Ｆｕｌｌ－ｗｉｄｔｈ text in a heading: ＲＥＡＤＭＥ",  # noqa: RUF001
        "Сервис billing-api падает по вторникам; см. runbook.",
        "Ana wrote ｃａｆé in the doc title.",
        "The Greek letters Α, Β, Γ mark the release phases.",  # noqa: RUF001
        "Word\u200bjoiner test: see\u2060also the index.",
    ]:
        yield "unicode text", text
        yield "unicode text", f"Note: {text}"
    for _ in range(10):
        yield (
            "near-miss formats",
            rng.choice(
                [
                    f"Timestamps 12:30:45:{rng.randint(10, 99)} in the log",
                    "docker run -p 127.0.0.1:8080:80/tcp nginx",
                    f"MAC 4e:40:e3:9c:aa:{rng.randint(10, 99)}",
                    f"Twilio account {expand('AC{hex:32}', rng)} is the sandbox one.",
                    "Order ID: 1234/5678@warehouse-3",
                    "user/repo@main is what the action pins.",
                ]
            ),
        )


def build_spellings(seed: int = SEED) -> list[Entry]:
    """Every entry, positives first; the same list for the same seed."""
    rng = random.Random(seed)
    positives = list(_positives(rng))
    negatives = [Entry(text, "negative", family, family) for family, text in _negatives(rng)]
    return positives + negatives


if __name__ == "__main__":
    corpus = build_spellings()
    print(Counter((e.label, e.family) for e in corpus))
