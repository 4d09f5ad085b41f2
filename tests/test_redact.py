"""Likely secrets: found, masked in everything derived from a note, the note left as it was."""

import hashlib

import pytest

from vaultmem import redact
from vaultmem.notes import parse_note

from conftest import note

# fabricated, well-formed but not real credentials
GH = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
AWS = "AKIA" + "IOSFODNN7EXAMPLQ"
OPENAI = "sk-proj-" + "Qm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1b2c3d4e5f6\nZm9vYmFyYmF6\n-----END RSA PRIVATE KEY-----"


def test_finds_provider_tokens_keys_and_assigned_secrets():
    text = (f"token for CI: {GH}\naws {AWS}\nOPENAI_API_KEY={OPENAI}\n{PEM}\n"
            "db_password: Xk9#mQ2!vL7pR4zW\nurl postgres://app:Hunter2Secret9@db.internal/app\n")
    kinds = [(s.line, s.kind) for s in redact.find(text)]
    assert (1, "GitHub token") in kinds
    assert (2, "AWS access key") in kinds
    assert (3, "OpenAI API key") in kinds
    assert (4, "private key") in kinds
    assert (8, "named secret") in kinds
    assert (9, "password in URL") in kinds
    masked = redact.mask(text)
    for secret in (GH, AWS, OPENAI, "MIIEowIBAAKCAQEA1b2c3d4e5f6", "Xk9#mQ2!vL7pR4zW", "Hunter2Secret9"):
        assert secret not in masked
    assert masked.count("\n") == text.count("\n"), "masking keeps line numbers"
    assert "postgres://app:" in masked and "@db.internal" in masked


def test_ordinary_prose_and_placeholders_are_not_secrets():
    text = ("The password policy says rotate every 90 days.\n"
            "api_key: ${OPENAI_API_KEY}\ntoken = <your-token-here>\n"
            "Set secret_name: production_database_credentials\n"
            "See https://example.com/path/to/thing and `sk-learn` in skeleton-keys.\n"
            "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39\n")
    assert redact.find(text) == []


def test_a_note_with_secrets_is_indexed_masked_and_records_where():
    body = f"# Deploy\n\nUse the bot token {GH} for the release job.\n\nNothing else here.\n"
    data = note("ci bot", body, tags="ci", api_key=OPENAI).encode()
    before = hashlib.sha256(data).hexdigest()
    n = parse_note("v", "memory/ci.md", data)
    derived = " ".join([n.preview, n.summary, str(n.meta), *(c.text for c in n.chunks), *n.entities])
    assert GH not in derived and OPENAI not in derived
    assert redact.MASK in n.chunks[0].text
    assert sorted(n.secrets) == [(4, "OpenAI API key"), (8, "GitHub token")]
    assert n.chunks[0].line_start == 6 and n.topic == "ci bot" and n.tags == ("ci",)
    assert hashlib.sha256(data).hexdigest() == before


# Real formats, fabricated values: (what, the line as it is written, the secret in it). Each is
# masked by what it is: a provider's format, or the name of the key it is given to.
SAMPLES = [
    ("AWS secret key with / and +", "aws_secret_access_key = 9xQ2/Lm4Vb7Rt0Pz+Kd3Wq8Ys1Nf6Hj5Gc2Ea9Ub",
     "9xQ2/Lm4Vb7Rt0Pz+Kd3Wq8Ys1Nf6Hj5Gc2Ea9Ub"),
    ("AWS access key id", "aws_access_key_id = AKIA" + "Q3EGRT5YHN7UJM2K", "AKIAQ3EGRT5YHN7UJM2K"),
    ("Azure storage connection string",
     "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFy+/xQ3bY7Lp2Wk9Rt4Vn8Hs6Jd1Fg5Cq0Ma3Eu7Ti2Oy9"
     "Pl4Kx6Bw8Nz1Rv5Sa0Dh3Gj7Ck2Lm9+/xQ==;EndpointSuffix=core.windows.net",
     "Zm9vYmFy+/xQ3bY7Lp2Wk9Rt4Vn8Hs6Jd1Fg5Cq0Ma3Eu7Ti2Oy9Pl4Kx6Bw8Nz1Rv5Sa0Dh3Gj7Ck2Lm9+/xQ=="),
    ("Azure SAS signature", "https://acme.blob.core.windows.net/c?sv=2022-11-02&sig=Qm9vYmFyYmF6cXV4%2BcXV1eDEy%3D",
     "Qm9vYmFyYmF6cXV4%2BcXV1eDEy%3D"),
    ("GCP service account key id", '"private_key_id": "4f1c2d3e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d",',
     "4f1c2d3e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d"),
    ("GCP service account private key",
     '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASC\\nBKgwggSkAgEAAoIBAQC7\\n'
     '-----END PRIVATE KEY-----\\n",', "MIIEvgIBADANBgkqhkiG9w0BAQEFAASC"),
    ("GitHub token", "export GH_TOKEN=ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"),
    ("GitLab token", "the runner uses glpat-" + "xY9zAb3Cd5Ef7Gh9Ij1K", "glpat-xY9zAb3Cd5Ef7Gh9Ij1K"),
    ("Slack bot token", "slack: xoxb-" + "2048736512-4096123456789-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8", "xoxb-2048736512"),
    ("Slack webhook", "alerts go to https://hooks.slack.com/services/" + "T024BE7LD/B08ABCDEF12/x9Yz1Ab2Cd3Ef4Gh5Ij6Kl7",
     "x9Yz1Ab2Cd3Ef4Gh5Ij6Kl7"),
    ("Stripe secret key", "stripe live key sk_live_" + "51Hx9Yz1Ab2Cd3Ef4Gh5Ij6Kl7Mn8", "sk_live_51Hx9Yz1Ab2Cd3Ef4Gh5Ij6Kl7Mn8"),
    ("OpenAI key", "OPENAI_API_KEY=sk-proj-" + "Qm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA", "sk-proj-Qm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"),
    ("Anthropic key", "key: sk-ant-api03-" + "Xy9Zab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St", "sk-ant-api03-Xy9Zab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St"),
    ("OpenSSH private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"),
    ("JWT", "Authorization: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
     "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
    ("password in a URL", "DATABASE_URL=postgres://app:S3cr3t-Pa55@db.internal:5432/app", "S3cr3t-Pa55"),
    (".env password", "DB_PASSWORD=Tr0ub4dor&3xyz", "Tr0ub4dor&3xyz"),
    (".env secret of words", "SECRET_KEY=django-insecure-correct-horse-battery", "django-insecure-correct-horse-battery"),
]


def _contexts(line: str) -> dict[str, str]:
    """The sample as a note holds it: in the body, in the frontmatter, in code, in a table."""
    key, sep, value = next(((line[:i], line[i], line[i + 1:]) for i, c in enumerate(line) if c in "=:"), ("", "", line))
    cell = f"| {key.strip()} | {value.strip()} |" if key and " " not in key.strip() else f"| secret | {line} |"
    indented = "\n".join("  " + ln for ln in line.splitlines())
    return {
        "body": f"# Credentials\n\nWe use this for the deploy:\n\n{line}\n",
        "frontmatter": f"---\ntopic: credentials\nsetup: |\n{indented}\n---\n# Credentials\n\nSee the setup key.\n",
        "code": f"# Credentials\n\n```sh\n{line}\n```\n\nand inline: `{line.splitlines()[0]}`\n",
        "table": f"# Credentials\n\n| name | value |\n| --- | --- |\n{cell}\n",
    }


@pytest.mark.parametrize("what,line,secret", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_each_real_format_secret_is_masked_wherever_a_note_holds_it(what, line, secret):
    for where, text in _contexts(line).items():
        n = parse_note("v", "memory/creds.md", text.encode())
        derived = " ".join([n.preview, n.summary, str(n.meta), *(c.text for c in n.chunks), *n.entities])
        assert secret not in derived, (what, where, derived)
        assert n.secrets, (what, where)


def test_prose_about_secrets_is_not_masked():
    text = ("| Token | Description |\n| --- | --- |\n| password | the admin's, in 1Password |\n"
            "password = getpass()\ntoken = os.environ['GITHUB_TOKEN']\nsecret_key: settings.SECRET_KEY\n"
            "api_key: <your-api-key-here>\nPASSWORD=changeme-example\nmax_tokens: 4096\nOPENAI_API_KEY=sk-...\n"
            "The access key rotates: see the runbook.\n")
    assert redact.find(text) == [], [text[s.start:s.end] for s in redact.find(text)]


def test_a_pattern_is_skipped_only_where_nothing_it_needs_is(monkeypatch):
    """find() runs a pattern only on text holding something every match of it holds (NEEDS; the
    case-insensitive ones in fold(text), as re's IGNORECASE folds: the Kelvin sign is a k, the
    long s an s, the dotless and the dotted I an i): the same secrets as running every pattern
    everywhere, on every sample in every context, on a token of each provider, on case variants,
    and on prose."""
    assert set(redact.NEEDS) | set(redact.FOLDED_NEEDS) == {kind for kind, _ in redact.PATTERNS}
    tokens = ["AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "GOCSPX-" + "a1B2c3D4e5F6g7H8i9J0k1", "hf_" + "a" * 8 + "B2c3D4e5F6g7H8i9J0k1l2M3n4",
              "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "pypi-" + "AgEIcHlwaS5vcmc" * 4, "SG." + "a1B2c3D4e5F6g7H8" + ".i9J0k1L2m3N4o5P6",
              "xapp-1-" + "A0B1C2D3E4F5", "gho_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "whsec_" + "a1B2c3D4e5F6g7H8i9J0k1L2"]
    texts = [t for _, line, _ in SAMPLES for t in _contexts(line).values()] + [f"key {t} here" for t in tokens]
    texts += ["DB_PASSWORD=Tr0ub4dor&3xyz", "db_paſsword: Xk9#mQ2!vL7pR4zW", "API_\u212aEY = Zm9vYmFyYmF6cXV4cXV1",
              "Authorization: BEARER abcdefghijklmnopqrstuvwxyz0123", "https://x.blob.core.windows.net/c?SİG=Qm9vYmFyYmF6cXV4cXV1eDEy",
              "https://x.blob.core.windows.net/c?sıg=Qm9vYmFyYmF6cXV4cXV1eDEy", "the quokka smiles at 9:30 = fine\n" * 3,
              "ｐａｓｓｗｏｒｄ = fullwidth0123x", f"token for CI: {GH}\naws {AWS}\n{PEM}\n"]
    gated = [redact.find(t) for t in texts]
    assert sum(1 for found in gated if found) >= len(SAMPLES) * 3 + len(tokens)
    assert [s.kind for s in redact.find("db_paſsword: Xk9#mQ2!vL7pR4zW")] == ["named secret"]
    assert [s.kind for s in redact.find("?SİG=Qm9vYmFyYmF6cXV4cXV1eDEy")] == ["Azure signature"]
    monkeypatch.setattr(redact, "NEEDS", {})  # every pattern on every text
    monkeypatch.setattr(redact, "FOLDED_NEEDS", {})
    assert [redact.find(t) for t in texts] == gated


@pytest.mark.slow
def test_no_secret_reaches_a_state_file_or_an_answer(daemon):
    """Every sample in every place a note holds it: indexed by a real daemon, then looked for in
    every byte of the state dir, in `query`, both hooks, MCP recall (processes), and counted by
    `inventory`."""
    import json

    from conftest import atomic_save, run_cli
    from test_agent import mcp_session, structured

    for i, (_what, line, _secret) in enumerate(SAMPLES):
        for where, text in _contexts(line).items():
            atomic_save(daemon.vault / f"memory/creds-{i:02d}-{where}.md", text.replace(
                "Credentials", f"Credentials zebrafinch{i:02d}"))
    atomic_save(daemon.vault / "CLAUDE.md", "# Project\n\nThe deploy credentials are in memory/; zebrafinch.\n")
    daemon.start()
    secrets = [secret for _, _, secret in SAMPLES]
    state_bytes = {p: p.read_bytes() for p in daemon.state.rglob("*") if p.is_file()}
    assert any(b"zebrafinch07" in data for data in state_bytes.values())  # a plain word is found where it is kept
    for p, data in state_bytes.items():
        for secret in secrets:
            assert secret.encode() not in data, (secret, p)
    sock = {"VAULTMEM_SOCKET": str(daemon.sock)}
    answers = []
    for i in range(0, len(SAMPLES), 3):
        q = run_cli("query", f"credentials zebrafinch{i:02d} deploy", "-k", "8", "--json", "--state-dir",
                    str(daemon.state), env=sock)
        assert q.returncode == 0 and "answering in-process" not in q.stderr, q.stderr
        answers.append(q.stdout)
        answers.append(run_cli("hook", "user-prompt-submit", "--prompt", f"what are the deploy credentials zebrafinch{i:02d}",
                               "--state-dir", str(daemon.state), env=sock).stdout)
    answers.append(run_cli("hook", "session-start", "--cwd", str(daemon.vault), "--state-dir", str(daemon.state),
                           env=sock).stdout)

    async def steps(client):
        return [json.dumps(structured(await client.call_tool("recall", {"query": f"credentials zebrafinch{i:02d}", "k": 10})))
                for i in range(len(SAMPLES))]
    answers += mcp_session(["--state-dir", str(daemon.state)], {"VAULTMEM_SOCKET": str(daemon.sock)}, steps)
    assert sum("[secret masked]" in a for a in answers) >= len(SAMPLES) // 2  # the answers did show those notes
    for a in answers:
        for secret in secrets:
            assert secret not in a, (secret, a[:500])
    inv = run_cli("inventory", "--json", "--state-dir", str(daemon.state), env=sock)
    found = json.loads(inv.stdout)["findings"]["secrets"]
    for i, (what, _, _) in enumerate(SAMPLES):
        for where in ("body", "frontmatter", "code", "table"):
            assert any(f["note"] == f"v:memory/creds-{i:02d}-{where}.md" for f in found), (what, where)
