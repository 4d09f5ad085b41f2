"""Reading notes: decoding, frontmatter (including Claude Code's own format), chunks,
previews and entities. Pure functions, no index."""

import datetime as dt
import re

import pytest

from vaultmem.notes import Unreadable, chunk_body, extra_keys, extract_entities, parse_date, parse_note, parse_tags


def test_bom_does_not_hide_frontmatter():
    n = parse_note("v", "memory/a.md", "\ufeff---\ntopic: deploy\ntags: [ops]\n---\nbody".encode())
    assert n.topic == "deploy" and n.tags == ("ops",) and not n.errors


def test_crlf_line_endings_parse_and_keep_line_numbers():
    n = parse_note("v", "memory/a.md", b"---\r\ntopic: t\r\n---\r\n# Title\r\n\r\ntext here\r\n")
    assert n.topic == "t"
    assert n.chunks[0].line_start == 4 and n.chunks[0].line_end == 6


def test_malformed_yaml_indexes_body_and_records_error():
    data = b"---\nname: my note\ndescription: fix: the thing\ntype: feedback\n---\nThe body survives.\n"
    n = parse_note("v", "memory/a.md", data)
    assert "The body survives." in n.chunks[0].text
    assert n.errors and "malformed frontmatter" in n.errors[0]
    # fields salvaged line by line
    assert n.topic == "my note" and n.kind == "feedback" and n.summary == "fix: the thing"


def test_malformed_yaml_costs_only_the_bad_entry():
    """One unparsable line must not lose a block list, a nested mapping or typed values
    around it; an unclosed flow list is still read as its items."""
    data = ("---\ntopic: deploy: the new way\ntags:\n  - ops\n  - deploy\ndate: 2025-03-04\n"
            "importance: 0.9\nmetadata:\n  type: decision\n---\nShip it.\n").encode()
    n = parse_note("v", "memory/a.md", data)
    assert n.errors and "malformed frontmatter" in n.errors[0]
    assert (n.topic, n.tags, n.kind, n.importance) == ("deploy: the new way", ("ops", "deploy"), "decision", 0.9)
    assert n.date.startswith("2025-03-04")
    flow = parse_note("v", "memory/b.md", b"---\nname: x: y\ntags: [ops, deploy\n---\nbody\n")
    assert flow.tags == ("ops", "deploy")


def test_an_impossible_date_costs_the_date_only():
    """YAML reads 2025-13-45 as a timestamp and raises ValueError, not a YAMLError: the note
    must still be read, with every other key, and say what was wrong with the date."""
    n = parse_note("v", "memory/a.md", b"---\ntopic: t\ndate: 2025-13-45\ntags: [ops]\nimportance: 0.8\n---\nbody\n")
    assert (n.topic, n.tags, n.importance, n.date) == ("t", ("ops",), 0.8, None)
    assert any("2025-13-45" in e and "undated" in e for e in n.errors), n.errors


def test_frontmatter_aliases_can_neither_blow_up_nor_loop():
    """Nine lines of nested YAML aliases (a "billion laughs") expand to 387 million values, and
    turning them into a note took hours; an alias inside its own value never ended. Both are
    refused as malformed and the rest of the note is read; ordinary aliases still work."""
    import json
    levels = ["a: &a [" + ",".join(["lol"] * 10) + "]"]
    for prev, name in zip("abcd", "bcde"):  # e expands to 100,000 values
        levels.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    n = parse_note("v", "m.md", ("---\ntopic: t\n" + "\n".join(levels) + "\ntags: [ok]\n---\nbody\n").encode())
    assert (n.topic, n.tags) == ("t", ("ok",)) and "more than 50,000 values" in n.errors[0]
    assert len(json.dumps(n.meta)) < 10_000
    loop = parse_note("v", "m.md", b"---\ntopic: t\nx: &a [1, *a]\n---\nbody\n")
    assert loop.topic == "t" and "(a loop)" in loop.errors[0]
    fine = parse_note("v", "m.md", b"---\ntopic: t\nbase: &b {a: 1}\nother:\n  <<: *b\n  c: 2\ntags: &t [x]\n---\nbody\n")
    assert not fine.errors and fine.meta["other"] == {"a": 1, "c": 2} and fine.tags == ("x",)


def test_claude_code_format_maps_name_description_type():
    n = parse_note("v", ".claude/memory/x.md", b"---\nname: small prs\ndescription: keep PRs small\ntype: feedback\n---\nKeep them small.\n")
    assert (n.topic, n.summary, n.kind) == ("small prs", "keep PRs small", "feedback")


def test_claude_code_format_nested_under_metadata():
    data = b"---\nmetadata:\n  name: on-call\n  description: how to page\n  type: project\n---\nPage them.\n"
    n = parse_note("v", ".claude/memory/x.md", data)
    assert (n.topic, n.summary, n.kind) == ("on-call", "how to page", "project")


def test_topic_wins_over_name():
    n = parse_note("v", "m.md", b"---\ntopic: real\nname: other\n---\nx\n")
    assert n.topic == "real"


@pytest.mark.parametrize("value,expected", [
    (["a", "b"], ("a", "b")),
    ("a, b c", ("a", "b", "c")),
    ("#ops #deploy", ("ops", "deploy")),
    (None, ()),
])
def test_tags_list_or_comma_space_string(value, expected):
    assert parse_tags(value) == expected


@pytest.mark.parametrize("value,iso", [
    (dt.date(2025, 3, 2), "2025-03-02"),
    ("2025-03-02", "2025-03-02"),
    ("2025-03-02T10:30:00Z", "2025-03-02T10:30:00+00:00"),
    ("2025/03/02", "2025-03-02"),
    (dt.datetime(2025, 3, 2, 10, 30), "2025-03-02T10:30:00"),
])
def test_dates_any_iso_form(value, iso):
    text, ts = parse_date(value)
    assert text == iso and ts is not None


def test_bad_date_and_importance_are_recorded_not_fatal():
    n = parse_note("v", "m.md", b"---\ndate: someday\nimportance: high\n---\nx\n")
    assert n.date is None and n.importance == 0.5 and len(n.errors) == 2


def test_without_a_date_the_keys_other_tools_write_date_the_note():
    """Obsidian's `updated`/`created` (or its Linter's `date modified`), Hugo's `lastmod`: the last
    edit before the creation; an unreadable one is skipped quietly, an unreadable `date` is not."""
    def read(fm: str):
        return parse_note("v", "m.md", f"---\n{fm}\n---\nx\n".encode())
    n = read("created: 2024-01-02\nupdated: 2025-03-04T10:00:00")
    assert n.date == "2025-03-04T10:00:00" and not n.errors
    assert read("created: 2024-01-02").date == "2024-01-02"
    n = read("date modified: Wednesday, March 4th 2026\ncreated: 2024-01-02")
    assert n.date == "2024-01-02" and not n.errors
    assert read("date: 2023-05-06\nupdated: 2025-03-04").date == "2023-05-06"
    n = read("date: someday\nupdated: 2025-03-04")
    assert n.date == "2025-03-04" and n.errors == ("date 'someday' is not an ISO date; its 'updated' is used",)
    n = read("date: someday")
    assert n.date is None and n.errors == ("date 'someday' is not an ISO date; the note counts as undated",)
    assert read("lastmod: nope").date is None and not read("lastmod: nope").errors


def test_obsidians_singular_tag_and_alias_keys_are_read():
    n = parse_note("v", "m.md", b"---\ntags: [ops]\ntag: Deploy, OPS\nalias: Argo CD\n---\nx #deploy\n")
    assert n.tags == ("ops", "Deploy")
    assert "argo cd" in {e.lower() for e in n.entities}
    assert "tag" not in extra_keys(n.meta)  # shown as tags, not as a key of its own


def test_importance_clamped_and_kind_defaults():
    n = parse_note("v", "m.md", b"---\nimportance: 3\n---\nx\n")
    assert n.importance == 1.0 and n.kind == "knowledge"


def test_binary_and_text_of_no_encoding_we_can_tell_are_unreadable():
    import random
    with pytest.raises(Unreadable, match="binary"):
        parse_note("v", "m.md", b"\x89PNG\x00\x00\x00")
    rng = random.Random(3)
    noise = bytes(rng.randrange(1, 256) for _ in range(3000))  # no NUL: not caught as binary
    chinese = "部署前先在测试环境运行迁移，回滚需要两个人审查。".encode("gbk")  # neither Japanese nor Korean
    for data in (noise, chinese, b"use the " + chinese + b" note"):
        with pytest.raises(Unreadable, match="not UTF-8.*iconv"):
            parse_note("v", "m.md", data)


@pytest.mark.parametrize("text, codec, how", [
    ("---\ntopic: café\n---\nDon’t deploy on Friday — the “freeze” rule.\n", "cp1252", "3 byte(s)|read as Windows-1252"),
    ("Die Größe der Füße; Ärger über Öl.\n", "latin-1", "read as Windows-1252"),
    ("---\ntopic: デプロイ\n---\n金曜日にはデプロイしない。ロールバックは二人で確認する。\n", "cp932", "read as Shift_JIS"),
    ("Use the テスト runner before a リリース.\n", "cp932", "read as Shift_JIS"),
    ("本番環境のデータベース移行は事前に検証する。\n", "euc_jp", "read as EUC-JP"),
    ("---\ntopic: 배포\n---\n배포는 금요일에 하지 않는다. 롤백은 두 사람이 확인한다.\n", "euc_kr", "read as EUC-KR"),
], ids=["cp1252", "latin-1", "shift_jis", "shift_jis-katakana", "euc-jp", "euc-kr"])
def test_a_note_in_a_legacy_encoding_is_read_and_says_so(text, codec, how):
    """One Windows-1252 byte (a quote pasted from Word) made a whole note unsearchable, and so
    did a Shift_JIS or EUC-KR note. They are read now, and the note's errors say how."""
    n = parse_note("v", "m.md", text.encode(codec))
    assert "\n".join(c.text for c in n.chunks) == text.split("---\n")[-1].strip()
    assert n.topic == (text.split("topic: ")[1].split("\n")[0] if "topic: " in text else None)
    assert n.errors and n.errors[0].startswith("not UTF-8") and re.search(how, n.errors[0])


def test_one_stray_byte_in_a_utf8_note_costs_only_that_character():
    data = "---\ntopic: 배포\n---\n".encode() + b"It\x92s the " + "デプロイ手順".encode() + b" caf\xe9.\n"
    n = parse_note("v", "m.md", data)
    assert n.topic == "배포" and n.chunks[0].text == "It’s the デプロイ手順 café."
    assert n.errors == ("not UTF-8: 2 byte(s) from offset 24 read as Windows-1252",)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be"])
def test_utf16_with_a_bom_is_read_as_text(codec):
    """Windows "Unicode" text (what PowerShell's `>` writes) is full of NUL bytes and used to
    be skipped as a binary file."""
    text = "---\r\ntopic: デプロイ\r\ntags: [ops]\r\n---\r\n# 배포\r\n\r\nShip with `make ship`.\r\n"
    data = ("\ufeff" + text if codec == "utf-16-be" else text).encode(codec)
    assert data[:2] in (b"\xff\xfe", b"\xfe\xff")
    n = parse_note("v", "CLAUDE.md", data)
    assert (n.topic, n.tags, n.errors) == ("デプロイ", ("ops",), ())
    assert n.chunks[0].text == "# 배포\n\nShip with `make ship`." and n.chunks[0].line_start == 5


def test_binary_that_starts_like_utf16_is_still_unreadable():
    import random
    rng = random.Random(7)
    noise = bytes(rng.randrange(256) for _ in range(3000))
    for data in (b"\xff\xfe" + noise, b"\xff\xfeok\x00\x00\x00"):
        with pytest.raises(Unreadable, match="binary"):
            parse_note("v", "m.md", data)


def test_chunks_carry_heading_path_and_line_range():
    body = "# CLAUDE.md\n\nintro\n\n## Testing\n\n### Commands\n\nrun make test\n\n## Style\n\nshort lines\n"
    chunks = chunk_body(body, 1, "CLAUDE.md", 1500)
    by_head = {c.heading: c for c in chunks}
    assert "CLAUDE.md › Testing › Commands" in by_head
    cmd = by_head["CLAUDE.md › Testing › Commands"]
    assert (cmd.line_start, cmd.line_end) == (7, 9)
    assert "CLAUDE.md › Testing" not in by_head  # a heading with nothing under it
    assert by_head["CLAUDE.md › Style"].text.endswith("short lines")


def test_a_headings_closing_hashes_go_but_a_words_own_stay():
    body = "# Notes on C#\n\nlinq\n\n## Build ##\n\ndotnet build\n\n## F# and C# #\n\nboth\n"
    heads = [c.heading for c in chunk_body(body, 1, "n.md", 1500)]
    assert heads == ["n.md › Notes on C#", "n.md › Notes on C# › Build", "n.md › Notes on C# › F# and C#"]


def test_setext_headings_cut_as_atx_ones_do():
    """Pandoc writes levels 1 and 2 underlined; a --- under a run of text, a list item or a
    quote, and a fenced one, stay text."""
    body = ("Deploy guide\n============\n\nintro\n\nRollback\n--------\n\nhelm rollback\n\n### Caveats\n\nslow\n\n"
            "Pitfalls\n--------\n\nTwo lines\nof text\n---\n\n- a list item\n---\n\n```\nnot one\n---\n```\n")
    chunks = chunk_body(body, 3, "n.md", 1500)
    assert [(c.heading, c.line_start) for c in chunks] == [
        ("n.md › Deploy guide", 3), ("n.md › Deploy guide › Rollback", 8),
        ("n.md › Deploy guide › Rollback › Caveats", 13), ("n.md › Deploy guide › Pitfalls", 17)]
    assert chunks[1].text == "Rollback\n--------\n\nhelm rollback"
    assert chunks[-1].text.endswith("```")  # the rest stayed under Pitfalls, in one chunk


def test_headings_inside_code_fences_do_not_cut():
    body = "# A\n\n```sh\n# not a heading\n```\n"
    chunks = chunk_body(body, 1, "n.md", 1500)
    assert len(chunks) == 1 and "# not a heading" in chunks[0].text


def test_long_sections_split_at_paragraphs_with_exact_lines():
    paras = [f"paragraph {i} " + "word " * 60 for i in range(10)]
    body = "# Big\n\n" + "\n\n".join(paras) + "\n"
    chunks = chunk_body(body, 5, "n.md", 800)
    assert len(chunks) > 2
    lines = body.split("\n")
    for c in chunks:
        assert len(c.text) <= 800 + 400
        first = lines[c.line_start - 5]
        assert c.text.startswith(first)  # the range points at the chunk's own first line
        assert c.heading == "n.md › Big"


def test_a_line_longer_than_a_chunk_is_cut_within_the_line():
    """A paragraph an editor soft-wraps is one line; a pasted log may be one line of megabytes.
    Either used to be one chunk of any size: one vector for all of it, and BM25 over all of it."""
    english = " ".join(f"w{i}" for i in range(1200))  # ~6,000 characters, spaces only
    japanese = "".join(f"{i}番目の文です。" for i in range(400))  # sentence ends, no spaces
    unbroken = "x" * 2000  # neither
    body = f"# Long\n\n{english}\n\n{japanese}\n{unbroken}\nlast\n"
    chunks = chunk_body(body, 5, "n.md", 800)
    by_line: dict[int, list[str]] = {}
    for c in chunks:
        assert len(c.text) <= 800, (c.line_start, len(c.text))
        by_line.setdefault(c.line_start, []).append(c.text)
    assert "".join(by_line[7]) == english and len(by_line[7]) >= 8
    assert all(t.endswith(" ") for t in by_line[7][:-1])  # cut after a space: no word in two
    assert "".join(by_line[9]) == japanese and all(t.endswith("。") for t in by_line[9])
    assert chunks[-1].text.endswith("\nlast") and chunks[-1].line_end == 11
    assert "".join(t for c in chunks if c.line_start == 10 for t in [c.text.split("\n")[0]]) == unbroken


def test_preview_is_first_500_chars_of_body():
    n = parse_note("v", "m.md", ("---\ntopic: t\n---\n" + "x" * 900).encode())
    assert n.preview == "x" * 500


def test_entities_from_links_tags_backticks_names_and_key():
    text = "Ask [[Alice Moreau]] about #deploy and `run_migrations`; Kubernetes runs it."
    ents = {e.lower() for e in extract_entities(text, ("Argo CD",))}
    assert {"alice moreau", "deploy", "run_migrations", "kubernetes", "argo cd"} <= ents
    assert "the" not in ents


def test_inline_tags_in_prose_are_tags_after_the_frontmatters():
    """Obsidian's inline tags: at a line start or after white space, letters needed, nested ones
    kept whole; not in code, not a heading, an issue number, a URL's anchor or a link's."""
    body = ("# Heading\n#deploy first, then #Infra/K8s and #배포 and #デプロイ/手順.\n"
            "Fixed in #123; see https://x.org/page#section and [[note#part]], C# and &#38;.\n"
            "`#not-in-span` and\n```\n#not-in-fence\n```\n#OPS again, #ops, and (#paren) #trail/.\n")
    n = parse_note("v", "memory/a.md", f"---\ntopic: t\ntags: [ops]\n---\n{body}".encode())
    assert n.tags == ("ops", "deploy", "Infra/K8s", "배포", "デプロイ/手順", "trail")
    assert parse_note("v", "CLAUDE.md", b"no tags # here\n## Not one\n").tags == ()
    # at most MAX_INLINE_TAGS of the body's own, however often the frontmatter repeats one
    from vaultmem.notes import MAX_INLINE_TAGS
    many = " ".join(f"#t{i}" for i in range(MAX_INLINE_TAGS + 10))
    n = parse_note("v", "memory/b.md", f"---\ntags: [a, A, a, a]\n---\n{many}\n".encode())
    assert n.tags == ("a", *(f"t{i}" for i in range(MAX_INLINE_TAGS)))


FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures" / "frontmatter"


@pytest.mark.parametrize("name,meta,body_start", [
    ("toml.md", {"author": "bob", "tags": ["a", "b"]}, "Body after TOML."),
    ("json.md", {"topic": "json topic", "tags": ["x"]}, "Body after JSON."),
    ("empty.md", {}, "I have frontmatter but no metadata."),
])
def test_yaml_toml_and_json_frontmatter(name, meta, body_start):
    n = parse_note("v", f"memory/{name}", (FIXTURES / name).read_bytes())
    for k, v in meta.items():
        assert n.meta[k] == v
    assert n.chunks[0].text == body_start and not n.errors


def test_quoted_scalar_followed_by_text_is_salvaged():
    n = parse_note("v", "memory/q.md", (FIXTURES / "quoted-then-text.md").read_bytes())
    assert n.errors and n.topic == "odd" and "Body survives." in n.chunks[0].text


def test_the_embedder_reads_the_text_without_markdown_markup():
    from vaultmem.notes import embed_text, index_text
    data = b"# Chat\n\n**Caroline** (D1:3): see [the guide](https://x.example/a_b) and `make ship`, __now__.\n"
    n = parse_note("v", "memory/chat.md", data)
    chunk = n.chunks[0]
    assert embed_text(n, chunk).endswith("# Chat\n\nCaroline (D1:3): see the guide and make ship, now.")
    assert "**Caroline**" in index_text(n, chunk) and "https://x.example/a_b" in index_text(n, chunk)
