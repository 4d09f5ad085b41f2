"""Likely secrets in note text: found at index time and masked in everything vaultmem derives
from a note (the full-text index, vectors, snippets, previews, stored frontmatter), so that a
query never shows an agent or a terminal an API key pasted into a note. The note itself is never
changed; `vaultmem inventory` lists where the secrets are so the user can move them.

Detection favours precision: fixed-format tokens from well-known providers, private-key blocks,
JWTs, and `password = ...`-style assignments whose value looks random. Standard library only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MASK = "[secret masked]"

# (kind, pattern); the secret is group "s" when the pattern has one, else the whole match
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)")),
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})\b")),
    ("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer token", re.compile(r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9._~+/-]{20,}=*)")),
    ("password in URL", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:(?P<s>[^\s@/]{6,})@")),
    ("assigned secret", re.compile(
        r"(?i)(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|"
        r"client[_-]?secret|auth[_-]?token|bearer)[\w-]{0,20}[\"']?\s*[:=]\s*[\"']?(?P<s>[^\s\"'`,;]{12,})")),
]


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
    """A value worth masking: long, varied, letters and digits; not a word, path or placeholder."""
    if value.startswith(("$", "{", "<", "%")) or "/" in value:
        return False
    return bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value)) and _entropy(value) >= 3.0


def find(text: str) -> list[Secret]:
    """Non-overlapping likely secrets in `text`, in order."""
    spans: list[tuple[int, int, str]] = []
    for kind, pattern in PATTERNS:
        for m in pattern.finditer(text):
            start, end = (m.span("s") if "s" in pattern.groupindex else m.span())
            if kind == "assigned secret" and not _looks_random(text[start:end]):
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
