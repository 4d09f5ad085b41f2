"""The parser on real files that nobody on this project wrote: every CLAUDE.md and memory file
of ../shared/eval/claude-corpus, and python-frontmatter's own golden cases. Read in place (not
copied; their licences differ); skipped where ../shared is not beside the project."""

import json
from pathlib import Path

import pytest

from vaultmem.notes import Unreadable, parse_note

EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval"
CORPUS = EVAL / "claude-corpus" / "files"
GOLDEN = EVAL / "frontmatter-fixtures"

pytestmark = pytest.mark.skipif(not EVAL.is_dir(), reason="../shared/eval is not beside the project")


def test_every_real_claude_file_parses_without_crashing():
    files = [p for p in CORPUS.rglob("*") if p.is_file()]
    assert len(files) > 50
    notes = 0
    for p in files:
        try:
            n = parse_note("corpus", p.relative_to(CORPUS).as_posix(), p.read_bytes())
        except Unreadable:
            continue
        notes += 1
        assert n.chunks, p
        text_lines = p.read_bytes().decode("utf-8-sig").replace("\r\n", "\n").split("\n")
        for c in n.chunks:
            assert 1 <= c.line_start <= c.line_end <= len(text_lines), p
            first = text_lines[c.line_start - 1].strip()
            assert first and first in c.text, (p, c.line_start)
    assert notes == len(files)


def _golden_cases():
    for result in sorted(GOLDEN.rglob("*.result.json")) if GOLDEN.is_dir() else []:
        stem = result.name[: -len(".result.json")]
        source = next(p for p in result.parent.iterdir() if p.name.startswith(stem + ".") and p != result)
        yield pytest.param(source, result, id=source.name)


@pytest.mark.parametrize("source,result", list(_golden_cases()))
def test_python_frontmatter_golden_cases(source, result):
    want = json.loads(result.read_text())
    n = parse_note("g", source.name, source.read_bytes())
    content = want.pop("content")
    for k, v in want.items():
        assert n.meta[k] == v, k
    # the chunks hold the content in order, less blank lines and headings with nothing under
    # them (each still named in the heading path of the chunks after it)
    kept = [ln for c in n.chunks for ln in c.text.split("\n") if ln.strip()]
    named = {h for c in n.chunks for h in c.heading.split(" › ")}
    dropped = [ln for ln in content.split("\n") if ln.strip() and ln not in kept]
    assert all(ln.strip() in named or set(ln.strip()) <= set("=-") for ln in dropped), dropped
    assert [ln for ln in content.split("\n") if ln in kept] == kept
