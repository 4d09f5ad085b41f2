"""Likely secrets: found, masked in everything derived from a note, the note left as it was."""

import hashlib

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
    assert (8, "assigned secret") in kinds
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
