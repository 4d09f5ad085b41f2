"""Likely secrets in note text: found at index time and masked in everything vaultmem derives
from a note (the full-text index, vectors, snippets, previews, stored frontmatter), so that a
query never shows an agent or a terminal an API key pasted into a note. The note itself is never
changed; `vaultmem inventory` lists where the secrets are so the user can move them.

Secrets are found by what they are and by how they look: fixed-format tokens of well-known
providers, private-key blocks, JWTs, passwords in URLs; any value after a key named for a
secret (`aws_secret_access_key = ...`, `AccountKey=...;`, `DB_PASSWORD=...` in an .env line,
a table cell beside a `password` cell) unless it is a placeholder or a reference in code; and a
random-looking value after a key that mentions one (`token_v2 = ...`). Standard library only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MASK = "[secret masked]"

# Key names whose value is a secret whatever it looks like (`aws_secret_access_key`, Azure's
# `AccountKey`, `.env` lines such as `DB_PASSWORD=`): the key ends in one of these words.
SECRET_KEYS = (r"password|passwd|passphrase|pwd|secret|secret[_-]?key|secret[_-]?access[_-]?key|access[_-]?key|"
               r"api[_-]?key|apikey|api[_-]?token|auth[_-]?token|access[_-]?token|refresh[_-]?token|token|"
               r"client[_-]?secret|private[_-]?key(?:[_-]?id)?|account[_-]?key|shared[_-]?access[_-]?key|"
               r"signing[_-]?key|encryption[_-]?key|master[_-]?key|webhook[_-]?secret")

# (kind, pattern); the secret is group "s" when the pattern has one, else the whole match
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)")),
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})\b")),
    ("GitLab token", re.compile(r"\b(?:glpat|gldt|glrt|glptt|glcbt|glft|glimt|glagent|gloas)-[A-Za-z0-9_-]{20,}")),
    ("Slack token", re.compile(r"\b(?:xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})")),
    ("Slack webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}")),
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b|\bwhsec_[A-Za-z0-9]{24,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("Google OAuth secret", re.compile(r"\bGOCSPX-[A-Za-z0-9_-]{20,}")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("PyPI token", re.compile(r"\bpypi-[A-Za-z0-9_-]{50,}")),
    ("SendGrid key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("Azure signature", re.compile(r"(?i)[?&;]sig=(?P<s>[A-Za-z0-9%+/]{20,}=*)")),
    ("bearer token", re.compile(r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9._~+/-]{20,}=*)")),
    ("password in URL", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<s>[^\s@/]{3,})@")),
    # what it is: a key named for a secret, then = or : (an .env line, YAML, TOML, JSON, a
    # connection string's AccountKey=...;) or a table cell, then the value
    ("named secret", re.compile(
        rf"(?i)(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_.-])*(?:{SECRET_KEYS})[\"']?(?P<sep>\s*[:=]\s*|\s*\|\s*)"
        r"[\"']?(?P<s>[^\s\"'`,;|]{6,})")),
    # how it looks: a key that mentions a secret (`token_v2`, `db_password_prod`), a random value
    ("assigned secret", re.compile(
        r"(?i)(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|"
        r"client[_-]?secret|auth[_-]?token|bearer)[\w-]{0,20}[\"']?\s*[:=]\s*[\"']?(?P<s>[^\s\"'`,;]{12,})")),
]

# What every match of a pattern holds, so that a text holding none of it is not scanned by that
# pattern: most notes hold no secret, and each scan cost ~6 us a note of the bench, the two of
# secrets found by a key's name (case-insensitive, tried at every position) 25 us each; a third
# of parse_note's time went here. Case-sensitive patterns: in the text as it is.
NEEDS: dict[str, tuple[str, ...]] = {
    "private key": ("-----BEGIN ",),
    "AWS access key": ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
    "GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "GitLab token": ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "glagent-", "gloas-"),
    "Slack token": ("xox", "xapp-"),
    "Slack webhook": ("https://hooks.slack.com/",),
    "Anthropic API key": ("sk-ant-",),
    "OpenAI API key": ("sk-",),
    "Stripe key": ("_live_", "_test_", "whsec_"),
    "Google API key": ("AIza",),
    "Google OAuth secret": ("GOCSPX-",),
    "Hugging Face token": ("hf_",),
    "npm token": ("npm_",),
    "PyPI token": ("pypi-",),
    "SendGrid key": ("SG.",),
    "JSON web token": ("eyJ",),
    "password in URL": ("://",),
}
# The case-insensitive patterns: in the text folded as re's IGNORECASE folds it (fold()).
NAMES_OF_SECRETS = ("pass", "pwd", "secret", "token", "key")  # in every name SECRET_KEYS and "assigned secret" list
FOLDED_NEEDS: dict[str, tuple[str, ...]] = {
    "named secret": NAMES_OF_SECRETS,
    "assigned secret": (*NAMES_OF_SECRETS, "bearer"),
    "bearer token": ("bearer",),
    "Azure signature": ("sig=",),
}
# IGNORECASE takes these for an i or an s (besides str.lower's mapping: the Kelvin sign is a k)
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})


def fold(text: str) -> str:
    """`text` in lower case, each character IGNORECASE matches with an ASCII letter made that
    letter: a word an (?i) pattern matches in `text` is in fold(text)."""
    return text.translate(_FOLD).lower()


# values after a secret's name that are no secret
_NOT_SECRETS = {"required", "optional", "none", "null", "nil", "true", "false", "string", "redacted", "example",
                "placeholder", "undefined", "unset", "empty", "hidden", "masked", "secret", "password", "default"}


@dataclass(frozen=True)
class Secret:
    kind: str
    line: int  # 1-based, within the text given
    start: int  # offsets of the masked span in that text
    end: int


def _entropy(s: str) -> float:
    counts: dict[str, int] = {}
    for ch in s:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(c / len(s) * math.log2(c / len(s)) for c in counts.values())


def _looks_random(value: str) -> bool:
    """A value worth masking: long, varied, letters and digits; not a word, path or placeholder
    (a base64 secret's `/` and `+` are fine; a path starts with `/`, `~` or `.`)."""
    if value.startswith(("$", "{", "<", "%", "/", "~", ".")) or "://" in value:
        return False
    return bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value)) and _entropy(value) >= 3.0


def _is_value(value: str, table: bool) -> bool:
    """Whether what follows a secret's name is a value to mask, not a placeholder
    (`${TOKEN}`, `<your-key>`, `xxxxxx`, `***`), a reference in code (`os.environ["X"]`,
    `settings.SECRET_KEY`, `getpass()`) or a word (`required`; in a table, one word, as a header
    `| Token | Description |` has)."""
    v = value.rstrip(".)]}")
    if v.lower() in _NOT_SECRETS or len(set(v.lower())) <= 2 or v.startswith(("$", "{", "<", "%", "(", "[", "*")):
        return False
    if any(c in v for c in "()[]{}<>…") or "..." in value or re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", v):
        return False
    if table and v.isalpha():  # a header cell
        return False
    if re.fullmatch(r"[a-z]+(?:[-_][a-z]+)*", v.lower()) and re.search(r"your|here|example|dummy", v, re.I):
        return False
    return True


def find(text: str) -> list[Secret]:
    """Non-overlapping likely secrets in `text`, in order."""
    spans: list[tuple[int, int, str]] = []
    folded = fold(text)
    for kind, pattern in PATTERNS:
        if not (any(n in text for n in NEEDS[kind]) if kind in NEEDS else
                any(n in folded for n in FOLDED_NEEDS[kind]) if kind in FOLDED_NEEDS else True):
            continue  # nothing the pattern needs is there
        for m in pattern.finditer(text):
            start, end = (m.span("s") if "s" in pattern.groupindex else m.span())
            value = text[start:end]
            if kind == "assigned secret" and not _looks_random(value):
                continue
            if kind == "named secret" and not _is_value(value, "|" in m.group("sep")):
                continue
            if any(s < end and start < e for s, e, _ in spans):
                continue
            spans.append((start, end, kind))
    spans.sort()
    return [Secret(kind, text.count("\n", 0, s) + 1, s, e) for s, e, kind in spans]


def mask(text: str, found: list[Secret] | None = None) -> str:
    """`text` with every likely secret replaced by MASK; line breaks inside a masked span are
    kept, so line numbers still point at the file."""
    found = find(text) if found is None else found
    if not found:
        return text
    out, pos = [], 0
    for s in found:
        out.append(text[pos : s.start])
        out.append(MASK + "\n" * text.count("\n", s.start, s.end))
        pos = s.end
    out.append(text[pos:])
    return "".join(out)
