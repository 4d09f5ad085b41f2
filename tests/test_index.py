"""Incremental, crash-safe indexing on the real engines: unchanged files cost a stat, unchanged
text is never re-embedded, bad files are skipped with a reason, and a restart after an
interrupted write converges to what the files say."""

import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import note, run_cli, write

from vaultmem.errors import EmbedderMismatchError, IndexMissingError, VaultmemError
from vaultmem.index import VaultIndex
from vaultmem.vectors import Vectors


GLOB_PARTS = ["memory", ".claude", "rules", "agent-memory-x", ".codex", "memories", "CLAUDE.md", "AGENTS.md", "a.md",
              "b.mdc", ".git", "node_modules", "x.md~", ".n.md.swp", "4913", "t.tmp", ".clinerules", "docs", "notes", "日本"]


@settings(max_examples=300, deadline=None)
@given(paths=st.lists(st.lists(st.sampled_from(GLOB_PARTS), min_size=1, max_size=6).map("/".join), min_size=1, max_size=40),
       extra=st.lists(st.sampled_from(["docs/*.md", "**", "notes/**", "*.md", "**/notes/?.md", "memory/**/*.md",
                                       "**/日本/**", "a.md"]), max_size=3))
def test_the_globs_one_regex_matches_the_paths_some_glob_matches(paths, extra):
    """A scan tests each file against all the include globs, and all the exclude ones, with one
    regex each, in which the globs that begin with `**/` share that beginning; it must match
    exactly the paths that one of the globs matches on its own."""
    import re
    from vaultmem import scan
    from vaultmem.config import DEFAULTS
    for globs in (tuple(DEFAULTS["index"]["include"]) + tuple(extra), tuple(DEFAULTS["index"]["exclude"]) + tuple(extra)):
        alone = [re.compile(scan._glob_source(g)) for g in globs]
        for path in paths:
            assert scan.matches(path, globs) == any(r.match(path) for r in alone), (path, globs)


def test_default_globs_pick_what_coding_agents_read_as_memory(env):
    env.write("CLAUDE.md", "# Rules\n\nbe kind\n")
    env.write("sub/project/CLAUDE.md", "# Sub\n\nnested rules\n")
    env.write("CLAUDE.local.md", "# Mine\n\nmy sandbox URL\n")
    env.write("AGENTS.md", "# Agents\n\nwhat Codex reads, and Claude Code where there is no CLAUDE.md\n")
    env.write("svc/api/AGENTS.md", "# API\n\nthe wombat rule, nested\n")
    env.write("svc/api/AGENTS.override.md", "# This week\n\nthe wombat rule is paused\n")  # Codex reads it instead
    env.write("GEMINI.md", "## Gemini Added Memories\n- the wombat rule came from Gemini CLI\n")
    env.write(".claude/rules/testing.md", "---\npaths: ['tests/**']\n---\nrun pytest -x\n")
    env.write("app/.claude/rules/frontend/react.md", "hooks first\n")
    env.write(".claude/memory/x.md", "claude memory\n")
    env.write(".claude/agent-memory/reviewer/MEMORY.md", "- [house style](house-style.md)\n")
    env.write(".claude/agent-memory/reviewer/house-style.md", "the reviewer's own notes\n")
    env.write("app/.claude/agent-memory-local/researcher/leads.md", "a subagent's local notes\n")
    env.write("agent-memory/r/x.md", "no note outside .claude\n")
    env.write("memory/deep/y.md", "deep memory\n")
    env.write("docs/readme.md", "not a note\n")
    env.write("rules/r.md", "not a note either\n")
    env.write("memory/.y.md.swp", "swap file\n")
    env.write("node_modules/memory/z.md", "dependency\n")
    env.write("node_modules/pkg/AGENTS.md", "a dependency's agent rules\n")
    report = env.sync()
    assert report.files == 14 and report.added == 14
    assert sorted(h.path for h in env.query("wombat", mode="text")) == [
        "GEMINI.md", "svc/api/AGENTS.md", "svc/api/AGENTS.override.md"]


def test_status_counts_are_read_from_their_index_and_the_note_scans_keep_to_the_rows(env):
    """The counts `status` gives (asked for while a first index is written, and polled by
    scripts) come from the notes_counts index, whatever mix of notes; the scans of every note
    (WHERE status='ok') still read the table, not that index (which made them slower)."""
    env.write("memory/old.md", note("deploy", "ship on fridays\n", date="2026-01-01"))
    env.write("memory/new.md", note("deploy", "never ship on fridays\n", date="2026-02-01"))
    env.write("memory/bad.md", "---\ntopic: [unclosed\n---\nthe body is kept\n")
    env.write("memory/blob.md", "\x00binary\x00")
    env.sync()
    with VaultIndex(env.settings()) as idx:
        assert idx.catalog.counts() == {"notes": 3, "skipped": 1, "current": 2, "read_with_problems": 1,
                                        "chunks": 3}
        assert [r.path for r in idx.catalog.skipped()] == ["memory/blob.md"]
        plan = lambda sql: " ".join(r[3] for r in idx.catalog.db.execute(f"EXPLAIN QUERY PLAN {sql}"))  # noqa: E731
        assert "notes_counts" in plan("SELECT status = 'ok', superseded_by IS NULL, errors IS NOT NULL AND errors "
                                      "NOT IN ('', '[]'), COUNT(*) FROM notes GROUP BY 1, 2, 3")
        assert "notes_skipped" in plan("SELECT key, path, reason FROM notes WHERE status='skipped' ORDER BY key")
        assert "notes_counts" not in plan("SELECT key, topic FROM notes WHERE status='ok'")

def test_cursor_rules_and_copilot_instructions_are_notes_read_as_those_tools_write_them(env):
    """Cursor's project rules (.mdc, whose frontmatter is key: text lines, `globs: **/*.ts`
    unquoted as its docs write it) and Copilot's instructions are notes: read without a
    frontmatter error, their description as the summary, their own keys kept; the inventory
    asks no topic of them, and Claude Code's hooks show them (Claude Code never loads them).
    A `.md` note with the same broken line is still said to be malformed."""
    from vaultmem.recall import passed_over
    from vaultmem.inventory import take
    from vaultmem.usage import Usage
    head = "---\ndescription: React component conventions\nglobs: **/*.tsx, src/**/*.ts\nalwaysApply: false\n---\n"
    env.write(".cursor/rules/frontend/react.mdc", head + "# React\n\nThe axolotl hook comes first.\n")
    env.write(".github/copilot-instructions.md", "# Copilot\n\nThe okapi style guide applies.\n")
    env.write(".github/instructions/ts.instructions.md", '---\napplyTo: "**/*.ts"\n---\nThe dugong types rule.\n')
    env.write(".github/workflows/notes.md", "the gharial is no note\n")
    env.write("memory/broken.md", head + "The numbat rule.\n")
    report = env.sync()
    assert (report.files, report.added, report.skipped) == (4, 4, 0)
    with VaultIndex(env.settings()) as idx:
        rows = {r["path"]: r for r in idx.catalog.db.execute("SELECT path, errors, summary FROM notes")}
    assert rows[".cursor/rules/frontend/react.mdc"]["errors"] == "[]"
    assert rows[".cursor/rules/frontend/react.mdc"]["summary"] == "React component conventions"
    assert "malformed frontmatter" in rows["memory/broken.md"]["errors"]
    [rule] = env.query("axolotl", mode="text")
    assert rule.path == ".cursor/rules/frontend/react.mdc"
    assert rule.extra == {"globs": "**/*.tsx, src/**/*.ts", "alwaysApply": False}
    assert sorted(h.path for h in env.query("okapi dugong", mode="text")) == [
        ".github/copilot-instructions.md", ".github/instructions/ts.instructions.md"]
    assert env.query("gharial", mode="text") == []
    roots = {"v": str(env.vault)}
    assert not any(passed_over(agent, {"vault": "v", "path": p}, roots) for agent in ("claude", "codex")
                   for p in (".cursor/rules/frontend/react.mdc", ".github/copilot-instructions.md"))
    s = env.settings()
    with VaultIndex(s) as idx:
        missing = [f["note"] for f in take(idx, Usage(s.state_dir), s)["findings"]["missing_topic"]]
    assert missing == ["v:memory/broken.md"]

def test_windsurf_cline_and_legacy_cursor_rules_are_notes_read_as_those_tools_write_them(env):
    """Windsurf's rules (.windsurf/rules/*.md with `trigger`/`globs` frontmatter, `globs: *.py`
    unquoted; the legacy .windsurfrules), Cline's (.clinerules as a file in one project and as
    a folder in another, YAML `paths`) and Cursor's legacy .cursorrules are notes: read without a
    frontmatter error, their keys kept, no topic asked of them by the inventory, and shown by
    the Claude Code and Codex hooks (neither agent loads them). A look-alike path is no note."""
    from vaultmem.recall import passed_over
    from vaultmem.inventory import take
    from vaultmem.usage import Usage
    env.write(".windsurf/rules/python.md", "---\ntrigger: glob\nglobs: *.py\n---\n# Python\n\nThe axolotl typing rule.\n")
    env.write(".windsurfrules", "Use the okapi logger.\n")
    env.write(".clinerules", "# Cline\n\nThe dugong test layout.\n")
    env.write("web/.clinerules/01-style.md", '---\npaths:\n  - "src/**"\n---\nThe numbat naming rule.\n')
    env.write("web/.cursorrules", "The quokka component style.\n")
    env.write("docs/windsurf/rules/x.md", "the gharial is no note\n")
    report = env.sync()
    assert (report.files, report.added, report.skipped) == (5, 5, 0)
    with VaultIndex(env.settings()) as idx:
        errors = {r[0]: r[1] for r in idx.catalog.db.execute("SELECT path, errors FROM notes")}
    assert errors == dict.fromkeys([".windsurf/rules/python.md", ".windsurfrules", ".clinerules",
                                    "web/.clinerules/01-style.md", "web/.cursorrules"], "[]")
    [rule] = env.query("axolotl", mode="text")
    assert rule.extra == {"trigger": "glob", "globs": "*.py"}
    assert env.query("numbat", mode="text")[0].extra == {"paths": ["src/**"]}
    assert sorted(h.path for h in env.query("okapi dugong quokka", mode="text")) == [
        ".clinerules", ".windsurfrules", "web/.cursorrules"]
    assert env.query("gharial", mode="text") == []
    roots = {"v": str(env.vault)}
    assert not any(passed_over(agent, {"vault": "v", "path": p}, roots) for agent in ("claude", "codex")
                   for p in errors)
    s = env.settings()
    with VaultIndex(s) as idx:
        findings = take(idx, Usage(s.state_dir), s)["findings"]
    assert findings["missing_topic"] == [] and findings["missing_tags"] == []


def test_second_run_reads_nothing_and_embeds_nothing(env):
    for i in range(5):
        env.write(f"memory/n{i}.md", note(f"t{i}", f"# Note {i}\n\nbody {i}\n"))
    first = env.sync()
    assert first.added == 5 and first.chunks_embedded == 5
    again = env.sync()
    assert (again.added, again.updated, again.unchanged, again.chunks_embedded) == (0, 0, 5, 0)


def test_touch_without_change_is_not_re_embedded(env):
    p = env.write("memory/a.md", note("a", "# A\n\nsome text\n"))
    env.sync()
    os.utime(p, (1_900_000_000, 1_900_000_000))
    report = env.sync()
    assert report.chunks_embedded == 0 and report.updated == 0


def test_only_changed_chunks_are_embedded(env):
    body = "# Alpha\n\nfirst section\n\n## B\n\nsecond section\n\n## C\n\nthird section\n"
    p = env.write("memory/a.md", note("a", body))
    assert env.sync().chunks_embedded == 3
    p.write_text(p.read_text().replace("second section", "second section, edited"))
    report = env.sync()
    assert report.updated == 1 and report.chunks_embedded == 1 and report.chunks_reused == 2
    assert env.query("edited", mode="text")[0].heading == "a.md › Alpha › B"


def test_deleted_and_moved_files_leave_the_index(env):
    env.write("memory/a.md", note("a", "applesauce words\n"))
    env.write("memory/b.md", note("b", "bananabread words\n"))
    env.sync()
    (env.vault / "memory/a.md").unlink()
    (env.vault / "memory/sub").mkdir()
    os.rename(env.vault / "memory/b.md", env.vault / "memory/sub/b.md")
    report = env.sync()
    # a move is a delete plus an add, and the text's vector is found again by its hash
    assert report.removed == 2 and report.added == 1 and report.chunks_embedded == 0
    assert env.query("applesauce", mode="text") == []
    assert [h.path for h in env.query("bananabread", mode="text")] == ["memory/sub/b.md"]


def test_a_move_is_one_commit_so_readers_never_see_both_paths(env):
    """The daemon's reader sees each commit: a move written as an add, then a delete, was
    answered under both paths in between."""
    env.write("memory/a.md", note("a", "applesauce words\n"))
    env.sync()
    os.rename(env.vault / "memory/a.md", env.vault / "memory/moved.md")
    s = env.settings()
    with VaultIndex(s, writable=True) as idx:
        commits = []
        commit, replace = idx.fulltext.commit, idx.vectors.replace
        idx.fulltext.commit = lambda: (commits.append("text"), commit())[1]
        idx.vectors.replace = lambda gone, rows: (commits.append("vectors"), replace(gone, rows))[1]
        report = idx.update(s.vaults[0], {"memory/a.md", "memory/moved.md"})
    assert report.moved == {"v:memory/a.md": "v:memory/moved.md"} and commits == ["text", "vectors"]
    assert [h.path for h in env.query("applesauce", mode="text", history=True)] == ["memory/moved.md"]


def test_a_reader_sees_a_batch_and_its_chains_whole_or_not_at_all(env):
    """The daemon's reader (and every `vaultmem query`) has its own connection to the catalog.
    A batch's catalog write was one autocommitted statement after another: an edited note was
    gone from the catalog for a moment, and a new note of a topic was current beside the note
    it supersedes until supersession was derived again, in a second commit."""
    env.write("memory/a.md", note("deploy", "deploy with make\n", date="2024-01-01"))
    env.write("memory/b.md", note("deploy", "deploy with just\n", date="2024-02-01"))
    env.sync()
    env.write("memory/a.md", note("deploy", "deploy with make, edited\n", date="2024-01-01"))
    env.write("memory/c.md", note("deploy", "deploy with nix\n", date="2024-03-01"))
    s = env.settings()
    reader = VaultIndex(s)
    views = []

    def seen(_sql):
        views.append(dict(reader.catalog.db.execute("SELECT key, superseded_by FROM notes").fetchall()))

    with reader, VaultIndex(s, writable=True) as idx:
        idx.catalog.db.set_trace_callback(seen)  # what the reader sees before each statement
        idx.update(s.vaults[0], {"memory/a.md", "memory/c.md"})
        idx.catalog.db.set_trace_callback(None)
        seen(None)
    before = {"v:memory/a.md": "v:memory/b.md", "v:memory/b.md": None}
    after = {"v:memory/a.md": "v:memory/c.md", "v:memory/b.md": "v:memory/c.md", "v:memory/c.md": None}
    assert views[0] == before and views[-1] == after
    assert [v for v in views if v not in (before, after)] == []


def test_a_vault_whose_directory_is_gone_keeps_its_notes_until_it_is_back(env):
    """An unmounted drive, a vault moved aside for a fresh clone: a missing root is not "every
    note deleted". Its notes stay as last indexed (and searchable); back, nothing is re-embedded."""
    env.write("memory/a.md", note("a", "the aardvark digs\n"))
    env.write("memory/b.md", note("b", "the bison grazes\n"))
    env.sync()
    env.vault.rename(env.vault.with_name("aside"))
    gone = env.sync()
    assert gone.missing == ["v"] and gone.removed == 0 and gone.files == 0
    assert "vault v not found" in gone.summary()
    assert [h.path for h in env.query("aardvark", mode="text")] == ["memory/a.md"]
    said = run_cli("status", "--state-dir", str(env.state))
    assert f"vault v: {env.vault} (directory not found: its notes are kept" in said.stdout
    env.vault.with_name("aside").rename(env.vault)
    back = env.sync()
    assert back.missing == [] and (back.unchanged, back.removed, back.chunks_embedded) == (2, 0, 0)


def test_a_vault_renamed_in_the_config_is_not_indexed_twice(env):
    """`work = "~/src/x"` becomes `proj = "~/src/x"`: the notes were answered twice, once under
    each name, and the old name's were never reconciled again."""
    env.write("memory/a.md", note("a", "the aardvark digs\n"))
    env.write("CLAUDE.md", "# Rules\n\nbe kind\n")
    env.sync(vaults=[f"work={env.vault}"])
    renamed = env.sync(vaults=[f"proj={env.vault}"])
    assert (renamed.added, renamed.removed, renamed.chunks_embedded) == (2, 2, 0)
    assert renamed.moved == {"work:memory/a.md": "proj:memory/a.md", "work:CLAUDE.md": "proj:CLAUDE.md"}
    assert [(h.vault, h.path) for h in env.query("aardvark", mode="text")] == [("proj", "memory/a.md")]
    with VaultIndex(env.settings()) as idx:
        assert [v.name for v in idx.vaults()] == ["proj"]


def test_a_vault_inside_another_owns_its_notes(env):
    """`--vault ~/src --vault app=~/src/app`: each note of app was indexed twice, once per vault,
    so every query answered it twice and its topic had two current notes. The inner vault owns
    its files; an index made before (the outer vault holding them) converges, nothing re-embedded."""
    env.write("memory/outer.md", note("outer", "the okapi grazes\n"))
    env.write("app/memory/inner.md", note("inner", "the ibex climbs\n"))
    env.write("app/CLAUDE.md", "# Rules\n\nthe yak rule\n")
    env.sync()  # the outer vault alone: app's files are its own
    assert [(h.vault, h.path) for h in env.query("ibex", mode="text")] == [("v", "app/memory/inner.md")]
    both = [f"v={env.vault}", f"app={env.vault / 'app'}"]
    report = env.sync(vaults=both)
    assert (report.added, report.removed, report.chunks_embedded) == (2, 2, 0)
    env.overrides["vaults"] = both
    assert [(h.vault, h.path) for h in env.query("ibex", mode="text")] == [("app", "memory/inner.md")]
    assert [(h.vault, h.path) for h in env.query("yak", mode="text")] == [("app", "CLAUDE.md")]
    assert [(h.vault, h.path) for h in env.query("okapi", mode="text")] == [("v", "memory/outer.md")]
    again = env.sync(vaults=both)
    assert (again.added, again.removed, again.updated) == (0, 0, 0)
    with VaultIndex(env.settings()) as idx:
        assert {k.split(":", 1)[0] for k in idx.catalog.files("app")} == {"app"}
        assert sorted(idx.catalog.files("v")) == ["v:memory/outer.md"]


def test_a_vault_taken_out_of_the_config_is_listed_and_dropped_on_request(env, tmp_path):
    """Out of the config, a vault's notes are still answered but never updated: status says so,
    and `reindex --drop-vault` takes them out of both engines, leaving the files alone."""
    other = tmp_path / "other"
    zebra = write(other, "memory/z.md", note("zebra", "the zebra gallops\n"))
    env.write("memory/a.md", note("a", "the aardvark digs\n"))
    env.sync(vaults=[f"v={env.vault}", f"o={other}"])
    with VaultIndex(env.settings(), writable=True) as idx:  # the config names v only
        assert [(v["name"], v["configured"]) for v in idx.status()["vaults"]] == [("v", True), ("o", False)]
        with pytest.raises(VaultmemError, match="vault v is in the config"):
            idx.drop_vaults(["o", "v"])
        with pytest.raises(VaultmemError, match="no vault named nope"):
            idx.drop_vaults(["nope"])
        assert [v.name for v in idx.vaults()] == ["o", "v"], "nothing done when refused"
        assert idx.drop_vaults(["o"]).removed == 1
        assert [v.name for v in idx.vaults()] == ["v"]
        assert idx.vectors.table.count_rows() == idx.catalog.counts()["chunks"]
    for mode in ("text", "vector", "hybrid"):
        assert {h.vault for h in env.query("zebra gallops", mode=mode, history=True)} <= {"v"}, mode
    assert zebra.read_text() == note("zebra", "the zebra gallops\n"), "the files are not touched"
    out = run_cli("reindex", "--drop-vault", "o", "--no-daemon", "--state-dir", str(env.state))
    assert out.returncode == 2 and "no vault named o" in out.stderr


def test_a_vault_missing_when_the_pipeline_changes_is_read_again_when_back(env):
    env.write("memory/a.md", note("a", "the aardvark digs\n"))
    env.sync()
    env.vault.rename(env.vault.with_name("aside"))
    assert env.sync(index={"chunk_chars": 800}).missing == ["v"]  # an upgrade, or a new chunk size
    env.vault.with_name("aside").rename(env.vault)
    back = env.sync(index={"chunk_chars": 800})
    assert (back.updated, back.unchanged) == (1, 0)


def test_bad_files_are_skipped_with_reasons_and_the_rest_indexed(env):
    env.write("memory/good.md", note("g", "good note\n"))
    (env.vault / "memory/bin.md").write_bytes(b"\x00\x01binary\x00")
    (env.vault / "memory/latin1.md").write_bytes(b"caf\xe9\n")  # read as Windows-1252, and said so
    (env.vault / "memory/gbk.md").write_bytes("部署前先运行迁移".encode("gbk"))  # no encoding we can tell
    (env.vault / "memory/huge.md").write_bytes(b"x" * 2000)
    os.symlink(env.vault / "memory/nowhere.md", env.vault / "memory/dangling.md")
    os.symlink(env.vault / "memory/loop-b.md", env.vault / "memory/loop-a.md")
    os.symlink(env.vault / "memory/loop-a.md", env.vault / "memory/loop-b.md")
    env.write("memory/badyaml.md", "---\ntitle: a: b: c\n  - [\n---\nbody still indexed\n")
    os.mkfifo(env.vault / "memory/pipe.md")  # never opened: reading a pipe would wait for a writer
    (env.vault / "memory/folder.md").mkdir()  # a directory named like a note is a directory
    report = env.sync(index={"max_file_bytes": 1000})
    bad = {"v:memory/bin.md", "v:memory/gbk.md", "v:memory/huge.md", "v:memory/dangling.md",
           "v:memory/loop-a.md", "v:memory/loop-b.md", "v:memory/pipe.md"}
    assert report.added == 3 and report.skipped == 7
    assert set(report.problems) == bad
    assert "too large" in report.problems["v:memory/huge.md"]
    assert report.problems["v:memory/dangling.md"] == "dangling symlink"
    assert report.problems["v:memory/loop-a.md"] == "symlink loop"
    assert report.problems["v:memory/pipe.md"] == "not a regular file (a named pipe)"
    with VaultIndex(env.settings()) as idx:
        st = idx.status()
    assert {s["key"]: s["reason"] for s in st["skipped_files"]}["v:memory/dangling.md"] == "dangling symlink"
    assert {s["key"] for s in st["skipped_files"]} == bad
    assert [h.path for h in env.query("still indexed", mode="text")] == ["memory/badyaml.md"]
    assert [h.path for h in env.query("café", mode="text")] == ["memory/latin1.md"]
    again = env.sync(index={"max_file_bytes": 1000})  # skipped files are not read again, nor re-reported
    assert (again.skipped, again.unchanged, again.problems) == (0, 10, {})
    env.write("memory/nowhere.md", "the link's target, written at last\n")  # the link now reads as a note
    healed = env.sync(index={"max_file_bytes": 1000})
    # the link is now the note it points to, in the vault: indexed once, under its real path
    assert (healed.added, healed.updated, healed.removed) == (1, 0, 1)
    assert [h.path for h in env.query("written at last", mode="text")] == ["memory/nowhere.md"]
    with VaultIndex(env.settings()) as idx:
        assert "v:memory/dangling.md" not in {s["key"] for s in idx.status()["skipped_files"]}
    # a link to a place outside the vault (a dotfiles checkout not made yet) heals into a note
    outside = env.vault.parent / "dotfiles"
    outside.mkdir()
    os.symlink(outside / "CLAUDE.md", env.vault / "CLAUDE.md")
    assert env.sync(index={"max_file_bytes": 1000}).problems == {"v:CLAUDE.md": "dangling symlink"}
    (outside / "CLAUDE.md").write_text("the checkout arrived\n")
    healed = env.sync(index={"max_file_bytes": 1000})
    assert (healed.added, healed.updated, healed.removed) == (0, 1, 0)
    assert [h.path for h in env.query("checkout arrived", mode="text")] == ["CLAUDE.md"]


def test_a_note_the_parser_fails_on_is_skipped_and_the_rest_indexed(env, monkeypatch, caplog):
    """However a note trips the parser (a bug of ours: `date: 2025-13-45` once raised out of
    the frontmatter salvage), it costs that note only: the batch is written, and the note is
    listed as skipped with the error until an edit makes it readable."""
    import vaultmem.index as index_module
    real = index_module.parse_note

    def parse(vault, path, data, **kw):
        if b"trips the parser" in data:
            raise ValueError("month must be in 1..12")
        return real(vault, path, data, **kw)

    monkeypatch.setattr(index_module, "parse_note", parse)
    env.write("memory/a.md", note("a", "the aardvark digs\n"))
    env.write("memory/bad.md", note("b", "this one trips the parser\n"))
    env.write("memory/z.md", note("z", "the zebra grazes\n"))
    report = env.sync()
    assert (report.added, report.skipped) == (2, 1)
    assert report.problems["v:memory/bad.md"] == "could not be parsed (ValueError: month must be in 1..12)"
    assert "please report" in caplog.text
    assert [h.path for h in env.query("zebra", mode="text")] == ["memory/z.md"]
    env.write("memory/bad.md", note("b", "now it reads\n"))
    assert env.sync().updated == 1 and [h.path for h in env.query("reads", mode="text")] == ["memory/bad.md"]


def test_interrupted_write_is_redone_on_next_sync(env):
    env.write("memory/a.md", note("a", "apple pie\n"))
    env.sync()
    # a crash after the engines took a new note but before the catalog recorded it: the note
    # is pending, and its file vanished meanwhile
    with VaultIndex(env.settings(), writable=True) as idx:
        idx.catalog.mark_pending(["v:memory/ghost.md"])
        from vaultmem.notes import parse_note
        ghost = parse_note("v", "memory/ghost.md", b"ghost banana\n")
        idx.fulltext.add_note(ghost, ["v:memory/ghost.md#0"])
        idx.fulltext.commit()
        idx.vectors.replace(set(), [("v:memory/ghost.md#0", "v:memory/ghost.md", "h", idx.embedder.embed(["ghost banana"])[0])])
    assert env.query("banana", mode="text") == []  # not in the catalog, so never shown
    env.sync()
    with VaultIndex(env.settings()) as idx:
        assert idx.fulltext.count() == 1 and idx.vectors.count() == 1 and not idx.catalog.pending()


def test_a_second_writer_is_refused(env):
    env.write("memory/a.md", "x\n")
    with VaultIndex(env.settings(), writable=True):
        with pytest.raises(VaultmemError, match=rf"another vaultmem process \(pid {os.getpid()}\).*`vaultmem reindex`"):
            VaultIndex(env.settings(), writable=True)
    with VaultIndex(env.settings(), writable=True):  # released on close: the next writer gets it
        pass


def test_embedder_identity_is_stored_and_a_mismatch_refused(env):
    env.write("memory/a.md", "x\n")
    env.sync()
    with pytest.raises(EmbedderMismatchError, match="--rebuild"):
        Vectors(env.state / "lance", "ollama:other-model", 768)


def test_vectors_are_stored_as_float16(env):
    env.write("memory/a.md", "some text\n")
    env.sync()
    with VaultIndex(env.settings()) as idx:
        assert str(idx.vectors.table.schema.field("vector").type) == "fixed_size_list<item: halffloat>[512]"


def test_missing_index_is_a_clear_error(env):
    with pytest.raises(IndexMissingError, match="vaultmem index"):
        VaultIndex(env.settings())


@pytest.mark.parametrize("layout, dropped", [("2", ["secrets", "imports", "preview_chars"]),
                                             ("3", ["imports", "preview_chars"]), ("4", ["preview_chars"])])
def test_an_older_catalog_is_migrated_in_place_without_re_embedding(env, layout, dropped):
    import sqlite3

    env.write("memory/a.md", note("alpha", "the aardvark note\n"))
    env.write("memory/b.md", note("beta", "the bison note\n"))
    env.write("CLAUDE.md", "# Rules\n\nSee @CONTRIBUTING.md\n")
    env.write("CONTRIBUTING.md", "# Agents\n\nthe capybara rule\n")
    env.sync()
    db = sqlite3.connect(env.state / "catalog.sqlite3")  # make it look like an older layout and pipeline
    db.execute("DROP INDEX IF EXISTS notes_imports")
    for column in dropped:
        db.execute(f"ALTER TABLE notes DROP COLUMN {column}")
    db.execute("DELETE FROM notes WHERE path='CONTRIBUTING.md'")  # that layout never knew of imports
    db.execute("UPDATE notes SET preview='as that layout stored it'")  # each note's own
    db.execute("UPDATE meta SET v=? WHERE k='schema'", (layout,))
    db.execute("UPDATE meta SET v='3:1500:500' WHERE k='pipeline'")
    db.commit()
    db.close()
    with pytest.raises(IndexMissingError, match=r"older layout; run `vaultmem index` .* up to date \(in place"):
        VaultIndex(env.settings())  # a reader (a query without a daemon) brings nothing forward
    report = env.sync()
    assert report.updated == 3 and report.added == 1 and report.chunks_embedded == 0 and report.chunks_reused == 4
    assert [h.path for h in env.query("aardvark", mode="text")] == ["memory/a.md"]
    assert [h.path for h in env.query("capybara", mode="text")] == ["CONTRIBUTING.md"]
    assert [h.preview for h in env.query("bison", mode="text")] == ["the bison note"]


def test_a_preview_that_begins_the_first_chunk_is_stored_once(env):
    """A preview is the body's first 500 characters, which most often begin the first chunk:
    kept there alone, and a hit's preview is the same either way."""
    import sqlite3

    from vaultmem.notes import parse_note

    long = "walrus " + " ".join(f"walrus{i}" for i in range(120))  # past 500 characters: one chunk
    texts = {
        "memory/one.md": note("one", long + "\n"),
        "memory/short-first.md": note("two", "# Two\n\nwalrus\n\n" + "\n\n".join(
            f"## Part {i}\n\n" + "lorem ipsum walrus dolor " * 20 for i in range(3))),
        "memory/summary-only.md": note("three", "", description="the walrus summary"),
        "memory/secret.md": note("four", "walrus token ghp_" + "a1B2c3D4e5" * 4 + "\n"),
    }
    for rel, text in texts.items():
        env.write(rel, text)
    env.sync()
    db = sqlite3.connect(env.state / "catalog.sqlite3")
    stored = dict(db.execute("SELECT path, preview FROM notes"))
    db.close()
    want = {rel: parse_note("v", rel, text.encode()).preview for rel, text in texts.items()}
    assert stored["memory/one.md"] is None and stored["memory/summary-only.md"] is None
    assert stored["memory/secret.md"] is None
    assert stored["memory/short-first.md"] == want["memory/short-first.md"]  # it runs past the first chunk
    assert len(want["memory/one.md"]) == 500 and "[secret masked]" in want["memory/secret.md"]
    got = {h.path: h.preview for h in env.query("walrus", mode="text", k=10)}
    assert got == want
    got = {h.path: h.preview for h in env.query("walrus", k=10)}
    assert got == want


def test_an_unknown_older_catalog_is_rebuilt_from_the_notes(env):
    import sqlite3

    env.write("memory/a.md", note("alpha", "the aardvark note\n"))
    env.sync()
    db = sqlite3.connect(env.state / "catalog.sqlite3")
    db.execute("UPDATE meta SET v='1' WHERE k='schema'")
    db.commit()
    db.close()
    report = env.sync()
    assert report.added == 1
    assert [h.path for h in env.query("aardvark", mode="text")] == ["memory/a.md"]


def _mapped_rss_kb(path) -> int:
    """Resident kB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and not head[0].endswith(":"):
            inside = head[-1] == str(path)
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


def test_the_model_table_can_be_served_from_a_file_map_with_the_same_vectors(tmp_path):
    import numpy as np
    from vaultmem.embedders import UseEmbedder
    emb = UseEmbedder()
    texts = ["deploy with make ship", "배포는 금요일에 하지 않는다", "デプロイ手順は金曜日に行わない"]
    before = emb.embed(texts)
    backend = emb._model._backend
    heap = backend.table
    try:
        assert emb.map_table(tmp_path / "cache") == heap.nbytes  # the daemon's call after warm-up
        assert isinstance(backend.table, np.memmap)
        assert np.array_equal(emb.embed(texts), before)
        assert emb.map_table(tmp_path / "cache") == 0  # already mapped: nothing to release
        # the rows a big index or a query touches are not left resident; the vectors do not change
        mapped = next((tmp_path / "cache").iterdir())
        many = [f"note {i}: " + " ".join(f"word{i * 7 + j} 単語{j} 낱말{i}" for j in range(40)) for i in range(60)]
        emb.embed(many)
        assert _mapped_rss_kb(mapped) < 64
        backend.table[np.arange(0, backend.table.shape[0], 64)].sum()  # touch the map, one row in 64
        assert _mapped_rss_kb(mapped) > 1024  # (which is why the embedder drops them)
        for q in ("who deploys on friday", "금요일 배포", "金曜日のデプロイ"):
            emb.embed_query([q])
        assert _mapped_rss_kb(mapped) < 64
        assert np.array_equal(emb.embed(texts), before)
        backend.table = heap
        assert not emb._release_pages()  # a table in the heap has nothing to give back
        assert emb.map_table(tmp_path / "cache") == heap.nbytes  # the file is reused, not rewritten
        assert len(list((tmp_path / "cache").iterdir())) == 1
    finally:
        backend.table = heap


def test_two_threads_asking_for_the_model_at_once_get_one_model():
    import threading
    from vaultmem.embedders import _load_use, _use_model
    got = []
    start = threading.Barrier(2)

    def ask():
        start.wait()
        got.append(_use_model())
    threads = [threading.Thread(target=ask) for _ in range(2)]
    _load_use.cache_clear()  # a first, slow load (the embedders made before keep their model)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] is got[1]


def test_arrow_allocates_from_the_system_pool_which_returns_freed_memory():
    # the default (jemalloc) pool keeps freed memory: 12-14 MB more daemon RSS (bench/daemon_bench.py)
    import pyarrow as pa
    import vaultmem.vectors  # noqa: F401  (sets the pool on import)
    assert pa.default_memory_pool().backend_name == "system"
    assert pa.table({"x": list(range(1000))}).num_rows == 1000  # and Arrow works with it


def test_the_rest_client_lancedb_imports_runs_only_when_used(tmp_path):
    """Opening, writing and searching a real vector table never runs the REST namespace
    client's package (its ~370 validated methods cost 1.0-1.4 s of `import lancedb`); a use of
    one of its names gets the package whole. A fresh process: this one may have run it already."""
    import subprocess
    import sys
    code = f"""
import sys
import numpy as np
from vaultmem.vectors import Vectors
from pathlib import Path
v = Vectors(Path({str(tmp_path / "vec")!r}), "probe", 8, "float16")
vec = np.eye(8, dtype=np.float32)[:2]
v.replace(set(), [("a:x.md#0", "a:x.md", "h0", vec[0]), ("a:x.md#1", "a:x.md", "h1", vec[1])])
hits = v.search(vec[1], 2)
assert [h[0] for h in hits][0] == "a:x.md#1", hits
assert "lance_namespace_urllib3_client.api" not in sys.modules, "the REST client ran"
from lance_namespace_urllib3_client import ApiClient, TableApi, __version__
assert "lance_namespace_urllib3_client.api" in sys.modules and ApiClient and TableApi and __version__
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


@pytest.mark.parametrize("dim", [64, 100])  # 100: no power of two divides it (remote embedders vary)
def test_past_the_exact_size_an_ann_index_answers_and_filters_lose_nothing(tmp_path, monkeypatch, dim):
    import numpy as np
    from vaultmem import vectors
    monkeypatch.setattr(vectors, "EXACT_MAX_ROWS", 300)  # the real size is 100,000 rows
    rng = np.random.default_rng(5)
    mat = rng.normal(size=(640, dim)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    v = Vectors(tmp_path / "lance", "test-embedder", dim)
    v.replace(set(), [(f"c{i}", f"v:n{i // 2}.md", f"h{i}", mat[i]) for i in range(600)])
    assert not v.has_index()
    assert v.search(mat[7], 5)[0][0] == "c7"  # exact, by LanceDB's scan
    v.optimize()
    assert v.has_index()
    for i in (3, 250, 599):  # a stored vector finds itself first through the index
        assert v.search(mat[i], 10)[0][0] == f"c{i}"
    # a filter is applied before ranking: every allowed row comes back, and nothing else
    allow = {f"v:n{n}.md" for n in (1, 40, 299)}
    assert sorted(c for c, _, _ in v.search(mat[0], 10, allow=allow)) == ["c2", "c3", "c598", "c599", "c80", "c81"]
    deny = {f"v:n{n}.md" for n in range(0, 295)}  # all but five notes left out
    assert {c for c, _, _ in v.search(mat[0], 20, deny=deny)} == {f"c{i}" for i in range(590, 600)}
    # rows added after the index was built are found too
    extra = rng.normal(size=dim).astype(np.float32)
    extra /= np.linalg.norm(extra)
    v.replace(set(), [("c600", "v:n300.md", "h600", extra)])
    assert v.search(extra, 3)[0][0] == "c600"


def test_files_a_killed_commit_left_behind_do_not_fail_the_next_one(env):
    """After a SIGKILL during a full-text commit, the delete file it was writing stays on disk
    (listed in Tantivy's .managed.json, not in meta.json); the next process's first commit
    wanted the same name and failed with FileAlreadyExists, again on every retry (seen once in
    the 50-SIGKILL test)."""
    import json
    env.write("memory/a.md", note("a", "alpha\n"))
    env.write("memory/b.md", note("b", "beta\n"))
    env.sync()
    tv = env.state / "tantivy"
    meta = json.loads((tv / "meta.json").read_text())
    managed = json.loads((tv / ".managed.json").read_text())
    for seg in meta["segments"]:  # what the killed commit wrote for the next few opstamps
        for op in range(meta["opstamp"], meta["opstamp"] + 8):
            name = f"{seg['segment_id'].replace('-', '')}.{op}.del"
            (tv / name).write_bytes(b"half-written")
            managed.append(name)
    (tv / ".managed.json").write_text(json.dumps(managed))
    env.write("memory/a.md", note("a", "alpha edited\n"))
    report = env.sync()
    assert report.updated == 1
    assert [h.path for h in env.query("edited", mode="text")] == ["memory/a.md"]
    assert all(p.read_bytes() != b"half-written" for p in tv.glob("*.del")), "the leftovers are gone"


def test_a_damaged_index_is_said_and_made_again_from_the_notes(env):
    """Derived data lost on disk: a garbled Tantivy meta.json, or a Lance data file gone, made
    every query (and `index`) end in an engine traceback."""
    env.write("memory/a.md", note("deploy", "Deploy with make ship.\n"))
    env.write("memory/b.md", note("cache", "Warm the cache first.\n"))
    env.sync()
    (env.state / "tantivy" / "meta.json").write_text("{garbage")
    with pytest.raises(IndexMissingError, match="full-text index .* cannot be opened.*`vaultmem index`"):
        VaultIndex(env.settings(), writable=False)
    report = env.sync()  # a writer makes it again from the notes; the vectors are reused
    assert (report.updated, report.chunks_embedded) == (2, 0)
    assert [h.path for h in env.query("ship", mode="text")] == ["memory/a.md"]

    for f in (env.state / "lance").rglob("data/*.lance"):
        f.unlink()
    with pytest.raises(IndexMissingError, match=r"vector index .* cannot be read .*`vaultmem index`"):
        env.query("ship")
    assert [h.path for h in env.query("ship", mode="text")] == ["memory/a.md"], "text search still answers"
    report = env.sync()  # the sync finds the table does not hold the catalog's chunks, and makes it again
    assert set(report.repaired) == {"vectors"} and report.chunks_embedded == 2
    assert [h.path for h in env.query("ship")][:1] == ["memory/a.md"]


def test_a_damaged_catalog_is_moved_aside_and_the_index_made_again(env):
    """A catalog whose bytes are not a database stopped every writer with "cannot open"; the
    daemon could never start again. A writer now keeps the damaged file (renamed) and rebuilds
    from the notes; a reader still says what is wrong."""
    from vaultmem.errors import IndexDamagedError
    env.write("memory/a.md", note("deploy", "Deploy with make ship.\n"))
    env.sync()
    catalog = env.state / "catalog.sqlite3"
    catalog.write_bytes(b"\x13garbage, not SQLite" * 50)
    for side in ("-wal", "-shm"):
        Path(f"{catalog}{side}").unlink(missing_ok=True)
    with pytest.raises(IndexDamagedError, match="file is not a database.*`vaultmem index`"):
        VaultIndex(env.settings(), writable=False)
    report = env.sync()
    assert report.added == 1
    assert [h.path for h in env.query("ship")] == ["memory/a.md"]
    assert [p.name.split("-")[0] for p in env.state.glob("catalog.sqlite3.damaged-*")] == ["catalog.sqlite3.damaged"]


def test_damaged_usage_records_are_kept_aside_and_start_afresh(env, caplog):
    """Retrievals and feedback cannot be made again from the notes, so the damaged file is kept,
    byte for byte, under another name (for `sqlite3 FILE .recover`); failing instead, every
    query failed, and a daemon could not start at all."""
    from vaultmem.usage import Usage
    env.write("memory/a.md", note("a", "alpha\n"))
    env.sync()
    usage = env.state / "usage.sqlite3"
    garbage = b"\x13not sqlite at all" * 50
    usage.write_bytes(garbage)
    u = Usage(env.state)
    try:
        u.record([("v:memory/a.md", 1.0)])
    finally:
        u.close()
    [kept] = env.state.glob("usage.sqlite3.damaged-*")
    assert kept.read_bytes() == garbage
    assert "kept as usage.sqlite3.damaged-" in caplog.text and ".recover" in caplog.text


def test_claude_codes_directory_by_another_name_has_its_rules_found(tmp_path, monkeypatch):
    """A dotfiles link (`~/.claude -> ~/dotfiles/claude`) or `$CLAUDE_CONFIG_DIR` gives Claude
    Code's directory another name: its rules are found as in a `~/.claude`. The same folders in
    a vault that is not Claude Code's directory stay no notes."""
    from conftest import Env
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)

    def rules_found(root: Path, vault: Path) -> list[str]:
        e = Env(root)
        e.vault = vault
        e.write("CLAUDE.md", "# Mine\n\nalways answer in English\n")
        e.write("rules/python.md", "# Python\n\nuse uv, never pip\n")
        e.sync()
        return [h.path for h in e.query("uv pip", mode="text")]

    (tmp_path / "a").mkdir()
    (tmp_path / "dotfiles" / "claude").mkdir(parents=True)
    (home / ".claude").symlink_to(tmp_path / "dotfiles" / "claude")
    assert rules_found(tmp_path / "a", home / ".claude") == ["rules/python.md"]  # --vault ~/.claude
    (tmp_path / "b").mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "config" / "claude-work"))
    assert rules_found(tmp_path / "b", tmp_path / "config" / "claude-work") == ["rules/python.md"]
    (tmp_path / "c").mkdir()
    assert rules_found(tmp_path / "c", tmp_path / "notes") == [], "not Claude Code's: rules/ is no note path"


def test_codexs_own_memory_is_found_in_its_directory_by_any_name_and_above_it(tmp_path, monkeypatch):
    """What Codex writes from past threads when its memories are on (~/.codex/memories/: the
    MEMORY.md handbook, memory_summary.md, rollout_summaries/) is found in a vault that is
    ~/.codex, $CODEX_HOME, or a folder that holds ~/.codex. raw_memories.md (its scratch input)
    and the rest of its directory are no notes (its sessions/ not even walked), nor is a
    `memories/` folder of anyone else's.
    The inventory asks no machine-written file for a topic or tags."""
    from conftest import Env
    from vaultmem.watches import concerns as _concerns
    from vaultmem.inventory import take
    from vaultmem.usage import Usage
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    summary = "memories/rollout_summaries/2026-05-01T10-00-00-abcd-settlement_clock.md"
    files = {"AGENTS.md": "# Mine\n\nalways answer in English\n",
             "memories/MEMORY.md": "# Task Group: payments\n\n## Reusable knowledge\n\n- freeze the clock in settlement tests\n",
             "memories/memory_summary.md": "v1\nUser profile: a backend engineer who wants small PRs\n",
             "memories/raw_memories.md": "thread 1: settlement clock frozen\n",
             summary: "thread_id: 019d0bea\n\n# Fixed the flaky settlement test\n\nthe clock is frozen now\n",
             "sessions/2026/05/01/recap.md": "no note\n", "prompts/review.md": "no note\n"}
    codex_notes = ["memories/MEMORY.md", "memories/memory_summary.md", summary]

    def notes(root: Path, vault: Path, under: str = "") -> list[str]:
        root.mkdir()
        e = Env(root)
        e.vault = vault
        for rel, text in files.items():
            e.write(under + rel, text)
        e.sync()
        s = e.settings()
        with VaultIndex(s) as idx:
            found = sorted(idx.catalog.paths("v"))
            missing = take(idx, Usage(s.state_dir), s)["findings"]
        assert not missing["missing_topic"] and not missing["missing_tags"], missing
        new = f"{under}memories/rollout_summaries/2026-05-02T09-00-00-efgh-next.md"  # the daemon agrees
        assert _concerns(s.vaults[0], new, False, s.index.include, s.index.exclude) == (f"{under}{summary}" in found)
        assert not _concerns(s.vaults[0], f"{under}memories/raw_memories.md", False, s.index.include, s.index.exclude)
        # Codex's transcripts (a JSONL file per thread, appended to as it runs): neither walked nor watched
        assert _concerns(s.vaults[0], f"{under}sessions", True, s.index.include, s.index.exclude) == (
            f"{under}{summary}" not in found)
        return found

    assert notes(tmp_path / "a", home / ".codex") == ["AGENTS.md", *codex_notes]  # --vault ~/.codex
    assert notes(tmp_path / "b", home, ".codex/") == [".codex/AGENTS.md", *(f".codex/{p}" for p in codex_notes)]
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "config" / "codex-work"))
    assert notes(tmp_path / "c", tmp_path / "config" / "codex-work") == ["AGENTS.md", *codex_notes]
    assert notes(tmp_path / "d", tmp_path / "notes") == ["AGENTS.md"], "not Codex's: memories/ is no note path"


def test_a_vault_that_is_a_claude_directory_has_its_rules_found(tmp_path):
    """`~/.claude` as a vault: the user's rules are `rules/*.md` there, which the default globs
    find as `.claude/rules/` (a project's `rules/` folder stays no note path)."""
    from conftest import Env
    e = Env(tmp_path)
    e.vault = tmp_path / "home" / ".claude"
    e.write("CLAUDE.md", "# Mine\n\nalways answer in English\n")
    e.write("rules/python.md", "# Python\n\nuse uv, never pip; see @../shared/py.md\n")
    e.write("shared/py.md", "# Shared\n\nruff, line length 100\n")  # a rule's import
    e.write("projects/-home-me-app/memory/m.md", "the app deploys on Fridays\n")
    e.write("agent-memory/reviewer/style.md", "a user-scope subagent's notes: tabs are fine\n")
    e.write("todos/t.md", "not a note\n")
    e.write("rules/node_modules/x/README.md", "never a note\n")
    # Claude Code's plugins: clones of other people's repositories, not this user's memory
    e.write("plugins/marketplaces/tools/CLAUDE.md", "# Marketplace\n\nbump the skills count\n")
    e.write("plugins/cache/tools/lint/1.0.3/memory/notes.md", "a plugin's own notes\n")
    assert e.sync().added == 5
    assert [h.path for h in e.query("uv pip", mode="text")] == ["rules/python.md"]
    assert [h.path for h in e.query("tabs", mode="text")] == ["agent-memory/reviewer/style.md"]
    assert [h.imported_by for h in e.query("ruff", mode="text")] == ["rules/python.md"]
    s = e.settings()
    with VaultIndex(s, writable=True) as idx:  # the daemon's per-path update agrees
        e.write("rules/go.md", "# Go\n\ngofmt on save\n")
        e.write("todos/u.md", "still not a note\n")
        assert idx.update(s.vaults[0], {"rules/go.md", "todos/u.md"}).added == 1
    from vaultmem.inventory import take
    from vaultmem.usage import Usage
    with VaultIndex(s) as idx:  # rules are instructions, asked for no topic, as in a project
        missing = take(idx, Usage(s.state_dir), s)["findings"]["missing_topic"]
    assert [f["note"] for f in missing] == ["v:agent-memory/reviewer/style.md", "v:projects/-home-me-app/memory/m.md"]
    from vaultmem.watches import concerns as _concerns
    cfg = s.index
    assert _concerns(s.vaults[0], "rules/go.md", False, cfg.include, cfg.exclude)
    assert not _concerns(s.vaults[0], "todos/u.md", False, cfg.include, cfg.exclude)
    assert not _concerns(s.vaults[0], "rules/node_modules", True, cfg.include, cfg.exclude)
    assert not _concerns(s.vaults[0], "plugins", True, cfg.include, cfg.exclude)


def test_the_vector_table_is_made_once_when_threads_open_it_at_once(env):
    """The daemon's reader shares the writer's vectors: on a first start a query's thread and
    the writer's opened the table at once, both found none, and the writer's create failed
    ("Table 'chunks' already exists"), failing the first index."""
    import threading
    s = env.settings()
    with VaultIndex(s, writable=True) as writer:
        reader = VaultIndex(s, writable=False, share_vectors_of=writer)
        try:
            start = threading.Barrier(4)
            got, errors = [], []

            def open_table(idx):
                start.wait()
                try:
                    got.append(idx.vectors)
                except Exception as err:  # noqa: BLE001 - the failure under test
                    errors.append(err)

            threads = [threading.Thread(target=open_table, args=(idx,)) for idx in (writer, reader, writer, reader)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            reader.close()
    assert errors == [] and len(got) == 4 and all(v is got[0] for v in got), errors


def _vectors_by_chunk(idx) -> dict:
    import numpy as np
    got = idx.vectors.table.to_arrow()
    return dict(zip(got["chunk"].to_pylist(), (np.asarray(v, dtype=np.float32) for v in got["vector"].to_pylist())))


def test_a_big_batch_is_searchable_by_words_at_once_and_gets_the_same_vectors_later(env, tmp_path):
    """[daemon] vectors_later_at: a batch with that many chunks to embed writes its notes
    without vectors (searchable by words, said in every answer that could use meaning) and
    fill_vectors embeds them afterwards from what the catalog keeps: the same vectors as an
    index that embedded them at once, and the engines check out at every step."""
    import numpy as np
    from vaultmem import integrity
    from vaultmem.query import Query
    from vaultmem.search import Searcher
    for i in range(9):
        env.write(f"memory/n{i}.md", note(f"orchard {i}", f"# Kiwi {i}\n\nthe **kiwi** orchard [row](http://x) {i} "
                                          f"needs water\n\n## More\n\nsecond section {i}\n"))
    with VaultIndex(env.settings(), writable=True) as idx:
        idx.vectors_later_at = 1
        report = idx.sync(list(env.settings().vaults))
        assert report.vectors_later == 9 and report.chunks_embedded == 0
        # the vector table is not even opened (LanceDB's import and its thread, beside the
        # parsing, cost a first index of 10,000 notes 1.2 s) until vectors are written to it
        assert not idx.vectors_open and integrity.vector_files(env.state / "lance") == ""
        assert integrity.engine_problems(idx) == {} and not idx.vectors_open  # no table, none wanted
        assert idx.sync(list(env.settings().vaults)).unchanged == 9 and not idx.vectors_open
        assert idx.vectors.count() == 0 and idx.catalog.unembedded_count() == 9
        assert integrity.engine_problems(idx) == {}
        hits, info = Searcher(idx, None).search(Query(text="kiwi orchard", record=False))
        assert len(hits) == 9 and all(h.no_vector for h in hits) and info["without_vectors"] == 9
        assert Searcher(idx, None).search(Query(text="kiwi orchard", mode="vector", record=False))[0] == []
        assert "without_vectors" not in Searcher(idx, None).search(Query(text="kiwi", mode="text", record=False))[1]
        assert idx.fill_vectors(4) == 4 and idx.catalog.unembedded_count() == 5
        assert integrity.engine_problems(idx) == {}  # a note has all its vectors or none
        while idx.fill_vectors(4):
            pass
        assert integrity.engine_problems(idx) == {} and idx.status()["vectors_to_embed"] == 0
        later = _vectors_by_chunk(idx)
        hits, info = Searcher(idx, None).search(Query(text="kiwi orchard", record=False))
        assert len(hits) == 9 and not any(h.no_vector for h in hits) and "without_vectors" not in info
    env.overrides = {"state_dir": str(tmp_path / "at-once")}
    with VaultIndex(env.settings(), writable=True) as idx:
        idx.sync(list(env.settings().vaults))
        at_once = _vectors_by_chunk(idx)
    assert later.keys() == at_once.keys() and len(later) == 18
    assert all(np.allclose(later[c], at_once[c], atol=1e-3) for c in later)  # float16 in the table


def test_a_fill_cut_short_is_redone_and_an_index_in_this_process_leaves_no_note_without_vectors(env, monkeypatch):
    from vaultmem import integrity
    from vaultmem.catalog import Catalog
    for i in range(6):
        env.write(f"memory/n{i}.md", note(f"t{i}", f"plum tree {i}\n"))
    with VaultIndex(env.settings(), writable=True) as idx:
        idx.vectors_later_at = 1
        idx.sync(list(env.settings().vaults))
    # what a user sees meanwhile, from the command line, with no daemon
    r = run_cli("status", "--state-dir", str(env.state))
    assert r.returncode == 0 and "6 notes have no vectors yet" in r.stdout, r.stdout + r.stderr
    r = run_cli("query", "plum tree", "--state-dir", str(env.state), "--no-record")
    assert r.returncode == 0 and "6 notes have no vector yet" in r.stderr, r.stderr
    assert "no vector" not in run_cli("query", "plum", "--mode", "text", "--state-dir", str(env.state)).stderr
    with VaultIndex(env.settings(), writable=True) as idx:

        def killed(self, keys):
            raise RuntimeError("killed")
        monkeypatch.setattr(Catalog, "embedded", killed)
        with pytest.raises(RuntimeError):
            idx.fill_vectors(3)  # the vector table has them, the catalog not yet
        monkeypatch.undo()
        assert len(idx.catalog.pending()) == 3 and idx.catalog.unembedded_count() == 6
    with VaultIndex(env.settings(), writable=True) as idx:  # `vaultmem index`: vectors_later_at is 0
        report = idx.sync(list(env.settings().vaults))
        assert report.updated == 3 and not report.repaired
        assert idx.catalog.unembedded_count() == 0 and not idx.catalog.pending()
        assert idx.vectors.count() == 6 and integrity.engine_problems(idx) == {}


def test_the_in_memory_vectors_make_room_once_for_the_rows_a_fill_will_add(tmp_path):
    """Grown by appends, the matrix was copied each time it filled, old and new copies both
    resident; told what is coming, it makes room once, and the rows land in that matrix."""
    import numpy as np
    rng = np.random.default_rng(3)
    mat = rng.normal(size=(3000, 16)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    v = Vectors(tmp_path / "lance", "test-embedder", 16)
    v.replace(set(), [(f"c{i}", f"v:n{i}.md", f"h{i}", mat[i]) for i in range(10)])
    assert v.search(mat[3], 1)[0][0] == "c3"  # the in-memory copy is made
    v.expect(2990)
    kept = v._memory.rows
    assert len(kept) >= 3000
    for start in range(10, 3000, 100):  # as fill steps append
        v.replace(set(), [(f"c{i}", f"v:n{i}.md", f"h{i}", mat[i]) for i in range(start, min(start + 100, 3000))])
    assert v._memory.rows is kept  # never copied again
    assert [v.search(mat[i], 1)[0][0] for i in (0, 1500, 2999)] == ["c0", "c1500", "c2999"]
    fresh = Vectors(tmp_path / "lance2", "test-embedder", 16)
    fresh.expect(500)  # before its copy is made: made with the room
    fresh.replace(set(), [("c0", "v:n0.md", "h0", mat[0])])
    assert fresh.search(mat[0], 1)[0][0] == "c0" and len(fresh._memory.rows) >= 501


def test_the_in_memory_copy_is_read_a_batch_at_a_time_and_holds_every_row(tmp_path, monkeypatch):
    """The copy is read LOAD_BATCH rows at a time (the whole table read at once was 64 MB above
    what it keeps at 50,000 notes), from a table of several fragments, and with rows added
    between the count and the read (the matrix grows for them): every row is in it, each found
    by its own vector, with its note's rows and its hash."""
    import numpy as np
    from vaultmem import vectors
    monkeypatch.setattr(vectors, "LOAD_BATCH", 100)
    rng = np.random.default_rng(5)
    n = 1100  # past the smallest matrix (1024 rows), so that a short count makes it grow
    mat = rng.normal(size=(n, 16)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    writer = Vectors(tmp_path / "lance", "test-embedder", 16)
    for start, end in ((0, 400), (400, 750), (750, n)):  # three appends: three fragments
        writer.replace(set(), [(f"c{i}", f"v:n{i // 2}.md", f"h{i}", mat[i]) for i in range(start, end)])
    for counted in (n, 5):  # 5: the rest came after the count
        reader = Vectors(tmp_path / "lance", "test-embedder", 16, writable=False)
        monkeypatch.setattr(reader, "count", lambda counted=counted: counted)
        assert [reader.search(mat[i], 1)[0][0] for i in range(n)] == [f"c{i}" for i in range(n)]
        memory, view = reader._memory_view()
        assert view.n == n and len(memory.rows) >= n
        assert sorted(memory.chunks[r] for r in view.rows_of["v:n507.md"]) == ["c1014", "c1015"]
        assert memory.chunks[memory.row_of_hash["h1099"]] == "c1099"


def test_past_its_rerank_size_the_vector_search_scans_coarsely_and_scores_exactly(tmp_path, monkeypatch):
    """Past COARSE_RERANK rows a query is scanned on the rows' projections, then its best rows
    are scored on the stored vectors: the answer is the exact one (chunks, order and cosines),
    filtered or not, and stays so as rows are added and the projection is made again."""
    import numpy as np
    from vaultmem import vectors
    monkeypatch.setattr(vectors, "COARSE_DIMS", 8)
    monkeypatch.setattr(vectors, "COARSE_RERANK", 60)
    rng = np.random.default_rng(7)
    # like embeddings, the rows vary most along a few directions (each a third less than the last)
    rotation, _ = np.linalg.qr(rng.normal(size=(32, 32)))
    mat = ((rng.normal(size=(1600, 32)) * 0.7 ** np.arange(32)) @ rotation).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    v = Vectors(tmp_path / "lance", "test-embedder", 32)
    v.replace(set(), [(f"c{i}", f"v:n{i}.md", f"h{i}", mat[i]) for i in range(400)])

    def exact(q, k, keep):
        stored = mat.astype(np.float16).astype(np.float32)  # what the table keeps
        rows = [i for i in range(len(stored)) if keep(i)]
        scores = stored[rows] @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [(f"c{rows[j]}", float(scores[j])) for j in order]

    def check(n, allow=None, deny=None):
        keep = lambda i: i < n and (allow is None or f"v:n{i}.md" in allow) and f"v:n{i}.md" not in (deny or ())  # noqa: E731
        for q in mat[rng.integers(0, n, 12)] + 0.05 * rng.normal(size=(12, 32)).astype(np.float32):
            q = (q / np.linalg.norm(q)).astype(np.float32)
            got = v.search(q, 5, allow, deny)
            want = exact(q, 5, keep)
            assert [c for c, _, _ in got] == [c for c, _ in want], (got, want)
            assert np.allclose([s for _, _, s in got], [s for _, s in want], atol=1e-5)

    check(400)
    memory = v._memory
    assert memory.coarse is not None and memory.basis_rows == 400  # it scans coarsely
    first_basis = memory.basis
    v.replace(set(), [(f"c{i}", f"v:n{i}.md", f"h{i}", mat[i]) for i in range(400, 700)])
    assert memory.basis is first_basis  # 700 rows: not doubled, the rows added are projected on it
    check(700)
    v.replace({f"v:n{i}.md" for i in range(0, 700, 3)}, [(f"c{i}", f"v:n{i}.md", f"h{i}", mat[i]) for i in range(700, 1600)])
    assert memory.basis is not first_basis and memory.basis_rows == 1600  # doubled: found again
    check(1600, deny={f"v:n{i}.md" for i in range(0, 700, 3)})
    check(1600, allow={f"v:n{i}.md" for i in range(1, 1600, 2)}, deny={f"v:n{i}.md" for i in range(0, 700, 3)})


def test_a_chunks_cosine_is_the_same_whatever_chunks_are_asked_with_it(tmp_path):
    """A hit's relevance reads its chunk's cosine (Vectors.cosines); a hybrid query asks for
    its likely hits' cosines first and for the rest later, so a chunk's cosine must not depend
    on the chunks asked beside it. BLAS's matrix-vector product summed a row in an order that
    did (its fourth decimal moved)."""
    import numpy as np
    rng = np.random.default_rng(3)
    mat = rng.normal(size=(64, 512)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    v = Vectors(tmp_path / "lance", "test-embedder", 512)
    v.replace(set(), [(f"v:n{i}.md#0", f"v:n{i}.md", f"h{i}", mat[i]) for i in range(64)])
    q = rng.normal(size=512).astype(np.float32)
    q /= np.linalg.norm(q)
    ids = [f"v:n{i}.md#0" for i in range(64)]
    alone = {cid: v.cosines(q, [cid])[cid] for cid in ids}
    for size in (2, 3, 5, 7, 13, 64):
        for _ in range(4):
            asked = list(rng.choice(ids, size, replace=False))
            assert v.cosines(q, asked) == {cid: alone[cid] for cid in asked}
    stored = mat.astype(np.float16).astype(np.float32)
    assert np.allclose([alone[cid] for cid in ids], stored @ q, atol=1e-5)


def test_a_rebuild_never_reuses_vectors_from_the_table_it_takes_away(env, monkeypatch):
    """The daemon's reader shares the writer's vector table and opens it from another thread
    (its warm-up, a query). A rebuild that dropped the table and then removed its directory,
    without the lock that opens it, let such a thread open the old table in between: the
    rebuild's sync then took the note's vector from that table's copy in memory (nothing
    embedded) and wrote into a table whose files were going."""
    import shutil
    import threading
    from vaultmem.index import VaultIndex
    env.write("memory/a.md", note("otters", "the otter floats\n"))
    env.sync()
    with VaultIndex(env.settings(), writable=True) as idx:
        reader = VaultIndex(env.settings(), writable=False, share_vectors_of=idx)
        assert reader.vectors.count() == 1
        query = idx.embedder.embed_query(["otter"])[0]
        remove = shutil.rmtree
        opened = []

        def rmtree(path, *args, **kwargs):
            if str(path).endswith("lance"):  # a query comes just now, from another thread
                t = threading.Thread(target=lambda: opened.append(reader.vectors.search(query, 1)))
                t.start()
                t.join(0.5)
            remove(path, *args, **kwargs)

        monkeypatch.setattr(shutil, "rmtree", rmtree)
        idx.rebuild()
        monkeypatch.undo()
        report = idx.sync(list(env.settings().vaults))
        assert report.added == 1 and report.chunks_embedded == 1 and report.chunks_reused == 0
        assert idx.vectors.count() == 1 and reader.vectors is idx.vectors
