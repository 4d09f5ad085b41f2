"""Files a CLAUDE.md imports with `@path` are notes of the vault: found by the parser, followed
by the index (in process, on the real engines), answered with who imports them, and left out of
what Claude Code loads anyway (the inventory's topic and tag checks)."""

from __future__ import annotations

import os

from conftest import note, write

from vaultmem.config import Vault, resolve
from vaultmem.imports import imported, locate
from vaultmem.index import VaultIndex
from vaultmem.inventory import take
from vaultmem.notes import find_imports
from vaultmem.search import Query, Searcher
from vaultmem.usage import Usage


def test_imports_are_found_as_claude_code_reads_them():
    body = (
        "See @AGENTS.md for the rules, and @README.\n"
        "- git workflow @docs/git-instructions.md\n"
        "- mine: @~/.claude/my-project.md; @/etc/vaultmem/team.md\n"
        "Not these: `@docs/in-a-span.md`, mail@example.com, (@in-brackets.md), @@twice\n"
        "```\n@in/a/fence.md\n```\n"
        "~~~md\n@in/a/tilde-fence.md\n~~~\n"
        "@notes/with\\ space.md @AGENTS.md\n"
    )
    assert find_imports(body) == ("AGENTS.md", "README", "docs/git-instructions.md", "~/.claude/my-project.md",
                                  "/etc/vaultmem/team.md", "notes/with space.md")


def test_an_import_is_taken_from_the_importing_file_and_belongs_to_the_vault_that_holds_it(tmp_path):
    vault = Vault("v", tmp_path.resolve(), ("nested",))
    nested = Vault("n", tmp_path.resolve() / "nested")
    both = [vault, nested]

    def at(importer, raw, vaults=both):
        found = locate(vaults, vault, importer, raw)
        return found and (found[0].name, found[1])

    assert at("pkg/CLAUDE.md", "./rules.md") == ("v", "pkg/rules.md")
    assert at("pkg/CLAUDE.md", "../AGENTS.md") == ("v", "AGENTS.md")
    assert at("CLAUDE.md", "nested/inner.md") == ("n", "inner.md")
    assert at("CLAUDE.md", "nested/inner.md", [vault]) is None  # the nested vault's, not served
    assert at("CLAUDE.md", "../elsewhere.md") is None
    assert at("CLAUDE.md", str(tmp_path / "docs" / "a.md")) == ("v", "docs/a.md")
    assert at("CLAUDE.md", "/etc/passwd") is None
    assert at("CLAUDE.md", "~no-such-user-here/x.md") is None
    home = os.path.expanduser("~")
    assert at("CLAUDE.md", "~/x.md") == (("v", os.path.relpath(os.path.join(home, "x.md"), tmp_path))
                                         if home.startswith(str(tmp_path) + "/") else None)
    assert locate([nested], nested, "CLAUDE.md", "../up.md") is None
    assert locate(both, nested, "CLAUDE.md", "../up.md") == (vault, "up.md")
    # followed from CLAUDE.md files only, hop by hop, at most five hops, each file once
    chain = {"CLAUDE.md": ("a.md",), "a.md": ("b.md",), "b.md": ("c.md",), "c.md": ("d.md",),
             "d.md": ("e.md",), "e.md": ("f.md",), "memory/x.md": ("g.md",),
             "pkg/CLAUDE.md": ("../a.md", ".git/config", "../nested/inner.md", "node_modules/m/README.md"),
             ".claude/rules/api.md": ("../../docs/api.md",), "CLAUDE.local.md": ("mine.md",)}
    excluded = ("**/.git/**", "**/node_modules/**")
    within = {"a.md": "CLAUDE.md", "b.md": "a.md", "c.md": "b.md", "d.md": "c.md", "e.md": "d.md",
              "docs/api.md": ".claude/rules/api.md", "mine.md": "CLAUDE.local.md"}
    assert imported([vault], {"v": chain}, excluded) == {"v": within}
    # the nested vault's file is its own note, imported from the other vault (and on from there)
    got = imported(both, {"v": chain, "n": {"inner.md": ("deeper.md",)}, "x": {"CLAUDE.md": ("y.md",)}}, excluded)
    assert got == {"v": within, "n": {"inner.md": "v:pkg/CLAUDE.md", "deeper.md": "inner.md"}}


def paths(env, text):
    return [h.path for h in env.query(text, mode="text")]


def test_imported_files_are_indexed_followed_and_dropped_with_their_import(env):
    env.write("CLAUDE.md", "# Project\n\nSee @CONTRIBUTING.md.\n- git: @docs/git.md\n")
    env.write("CONTRIBUTING.md", "# Agents\n\nRun the flamingo linter first.\n")
    env.write("docs/git.md", "# Git\n\nRebase, never merge. More in @./deeper.md\n")
    env.write("docs/deeper.md", "# Deeper\n\nSquash the pelican commits.\n")
    env.write("docs/other.md", "# Other\n\nThe walrus is no note.\n")
    report = env.sync()
    assert report.added == 4 and report.skipped == 0
    assert paths(env, "flamingo") == ["CONTRIBUTING.md"]
    assert paths(env, "pelican") == ["docs/deeper.md"]
    assert paths(env, "walrus") == []
    hits = {h.path: h for h in env.query("flamingo pelican rebase", mode="text", k=10)}
    assert hits["CONTRIBUTING.md"].imported_by == "CLAUDE.md"
    assert hits["docs/deeper.md"].imported_by == "docs/git.md"
    assert env.query("project", mode="text")[0].imported_by is None  # CLAUDE.md itself

    again = env.sync()  # nothing changed: nothing read
    assert (again.added, again.updated, again.removed, again.unchanged) == (0, 0, 0, 4)

    env.write("docs/deeper.md", "# Deeper\n\nSquash the heron commits.\n")  # an imported file edited
    assert env.sync().updated == 1 and paths(env, "heron") == ["docs/deeper.md"]

    env.write("CLAUDE.md", "# Project\n\nSee CONTRIBUTING.md (no import).\n- git: @docs/git.md\n- @docs/other.md\n")
    report = env.sync()
    assert (report.updated, report.added, report.removed) == (1, 1, 1)
    assert paths(env, "flamingo") == [] and paths(env, "walrus") == ["docs/other.md"]
    assert (env.vault / "CONTRIBUTING.md").read_text().startswith("# Agents")  # only ever read

    os.remove(env.vault / "docs" / "git.md")  # the link in the middle of the chain goes
    report = env.sync()
    assert report.removed == 2 and paths(env, "heron") == [] and paths(env, "rebase") == []


def test_agents_md_is_one_note_under_its_own_name_and_its_imports_are_followed(env):
    """A repository that keeps its instructions in AGENTS.md links CLAUDE.md to it, or has no
    CLAUDE.md at all (Claude Code then reads AGENTS.md): either way the text is one note, found
    under AGENTS.md, and the files it imports are notes as they would be from a CLAUDE.md."""
    env.write("repo/AGENTS.md", "# Agents\n\nThe narwhal rule. Architecture: @docs/arch.md\n")
    (env.vault / "repo/CLAUDE.md").symlink_to("AGENTS.md")
    env.write("repo/docs/arch.md", "# Architecture\n\nThe ocelot service owns billing.\n")
    env.write("lib/AGENTS.md", "# Lib\n\nThe pangolin rule.\n")
    report = env.sync()
    assert (report.files, report.added) == (3, 3)
    assert paths(env, "narwhal") == ["repo/AGENTS.md"]
    assert paths(env, "pangolin") == ["lib/AGENTS.md"]
    hits = env.query("ocelot", mode="text")
    assert [(h.path, h.imported_by) for h in hits] == [("repo/docs/arch.md", "repo/AGENTS.md")]
    assert (env.vault / "repo/CLAUDE.md").is_symlink()  # only ever read


def test_gemini_md_imports_are_followed_and_not_taken_for_what_claude_code_loads(env):
    """Gemini CLI reads a GEMINI.md's `@./path` imports (nested too) into its context: those
    files are notes. A file only a GEMINI.md's chain reaches is said to be imported by that
    GEMINI.md, so Claude Code's hooks still show it (Claude Code never loads it), while the
    inventory asks no topic of it; one a CLAUDE.md also imports stays Claude Code's."""
    from vaultmem.recall import passed_over
    env.write("GEMINI.md", "# Gemini\n\n@./docs/style.md and @./docs/shared.md\n")
    env.write("docs/style.md", "# Style\n\nThe capybara naming rule. See @./deeper.md\n")
    env.write("docs/deeper.md", "# Deeper\n\nThe tapir rule.\n")
    env.write("docs/shared.md", "# Shared\n\nThe quokka rule.\n")
    env.write("CLAUDE.md", "# Project\n\n@docs/shared.md\n")
    report = env.sync()
    assert report.added == 5 and report.skipped == 0
    hits = {h.path: h for h in env.query("capybara tapir quokka", mode="text", k=10)}
    assert {p: hits[p].imported_by for p in ("docs/style.md", "docs/deeper.md", "docs/shared.md")} == {
        "docs/style.md": "GEMINI.md", "docs/deeper.md": "GEMINI.md", "docs/shared.md": "CLAUDE.md"}
    roots = {"v": str(env.vault)}
    shown = {p for p, h in hits.items() if not passed_over("claude", {"vault": "v", "path": p,
                                                                      "imported_by": h.imported_by}, roots)}
    assert shown == {"docs/style.md", "docs/deeper.md"}
    s = env.settings()
    with VaultIndex(s) as idx:
        assert take(idx, Usage(s.state_dir), s)["findings"]["missing_topic"] == []
    env.write("GEMINI.md", "# Gemini\n\nno imports now\n")
    assert env.sync().removed == 2 and paths(env, "capybara") == [] and paths(env, "quokka") == ["docs/shared.md"]

def test_a_gemini_md_that_a_claude_md_imports_is_loaded_by_claude_code_with_its_imports(env):
    """`@GEMINI.md` in a CLAUDE.md (one context file for both agents): Claude Code loads the
    GEMINI.md and what it imports, so the hooks pass over both, and the GEMINI.md's imports are
    named by the CLAUDE.md (not by a GEMINI.md, which would say only Gemini CLI loads them);
    deeper imports keep their own importer. A second GEMINI.md no CLAUDE.md imports stays
    Gemini CLI's alone."""
    from vaultmem.recall import passed_over
    env.write("CLAUDE.md", "# Project\n\n@GEMINI.md\n")
    env.write("GEMINI.md", "# Shared context\n\nThe axolotl rule. @./docs/style.md\n")
    env.write("docs/style.md", "# Style\n\nThe capybara rule. @./deeper.md\n")
    env.write("docs/deeper.md", "# Deeper\n\nThe tapir rule.\n")
    env.write("web/GEMINI.md", "# Web\n\nThe quokka rule. @./web-style.md\n")
    env.write("web/web-style.md", "# Web style\n\nThe okapi rule.\n")
    assert env.sync().added == 6
    hits = {h.path: h for h in env.query("axolotl capybara tapir quokka okapi", mode="text", k=10)}
    assert {p: h.imported_by for p, h in hits.items()} == {
        "GEMINI.md": "CLAUDE.md", "docs/style.md": "CLAUDE.md", "docs/deeper.md": "docs/style.md",
        "web/GEMINI.md": None, "web/web-style.md": "web/GEMINI.md"}
    roots = {"v": str(env.vault)}
    shown = {p for p, h in hits.items() if not passed_over("claude", {"vault": "v", "path": p,
                                                                      "imported_by": h.imported_by}, roots)}
    assert shown == {"web/GEMINI.md", "web/web-style.md"}


def test_update_follows_an_edited_claude_md_at_once(env):
    env.write("CLAUDE.md", "# Project\n\nnothing imported yet\n")
    env.write("CONTRIBUTING.md", "# Agents\n\nThe okapi rule.\n")
    env.write("team/rules.md", "# Team\n\nThe quokka rule. @../CONTRIBUTING.md\n")
    env.sync()
    assert paths(env, "okapi") == []
    s = env.settings()
    vault = s.vaults[0]
    with VaultIndex(s, writable=True) as idx:
        env.write("CLAUDE.md", "# Project\n\n@team/rules.md\n")
        report = idx.update(vault, {"CLAUDE.md"})
        assert (report.updated, report.added) == (1, 2)  # the rules, and CONTRIBUTING.md through them
        assert set(idx.imported(vault)) == {"team/rules.md", "CONTRIBUTING.md"}
        env.write("CONTRIBUTING.md", "# Agents\n\nThe tapir rule.\n")
        assert idx.update(vault, {"CONTRIBUTING.md"}).updated == 1
        os.remove(env.vault / "team" / "rules.md")
        assert idx.update(vault, {"team"}).removed == 2  # a directory event: its file and what it imported
    assert paths(env, "quokka") == [] and paths(env, "tapir") == []


def test_the_inventory_asks_no_topic_of_instructions_and_imported_files_and_sees_them_in_sync(env):
    env.write("CLAUDE.md", "# Project\n\n@docs/style.md\n")
    env.write("docs/style.md", "# Style\n\nTabs, never spaces.\n")
    env.write("memory/fact.md", note(None, "a fact without topic\n"))
    env.write(".claude/rules/testing.md", "---\npaths: ['tests/**']\n---\nRun pytest -x.\n")
    env.write("CLAUDE.local.md", "# Mine\n\nmy sandbox URL\n")
    env.sync()
    s = env.settings()
    with VaultIndex(s) as idx:
        report = take(idx, Usage(s.state_dir), s)
    assert [f["note"] for f in report["findings"]["missing_topic"]] == ["v:memory/fact.md"]
    assert report["findings"]["out_of_sync"] == []


def test_follow_imports_off_leaves_imported_files_out(env):
    env.write("CLAUDE.md", "# Project\n\n@CONTRIBUTING.md\n")
    env.write("CONTRIBUTING.md", "# Agents\n\nthe gerenuk rule\n")
    env.sync()
    assert paths(env, "gerenuk") == ["CONTRIBUTING.md"]
    env.overrides = {"index": {"follow_imports": False}}
    assert env.sync().removed == 1 and paths(env, "gerenuk") == []
    env.overrides = {}
    assert env.sync().added == 1 and paths(env, "gerenuk") == ["CONTRIBUTING.md"]


def test_an_import_from_outside_every_vault_is_said_once_per_read(env, caplog):
    env.write("CLAUDE.md", "# Project\n\n@../shared/rules.md and @AGENTS.md; ask @alice\n")
    env.write("memory/m.md", "a note that mentions @../elsewhere.md, which is no import\n")
    with caplog.at_level("WARNING", logger="vaultmem.index"):
        env.sync()
        env.sync()  # not read again: nothing said again
    said = [r.getMessage() for r in caplog.records if "in no vault" in r.getMessage()]
    assert len(said) == 1 and "imports ../shared/rules.md, which is in no vault: not indexed" in said[0]


def test_a_file_another_vault_holds_is_a_note_there_when_a_claude_md_imports_it(tmp_path, monkeypatch, caplog):
    """Claude Code's own way to keep instructions out of a repository is `@~/.claude/my-project.md`
    in its CLAUDE.md. With ~/.claude and the project both vaults, that file is in the ~/.claude
    vault, where no glob makes it a note: it must be one there, imported by the project's
    CLAUDE.md, and not said to be in no vault. The same for a file of a vault nested in the
    importer's, and for what the imported file imports in turn."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    write(home, ".claude/CLAUDE.md", "# Global\n\nbe brief\n")
    write(home, ".claude/my-project.md", "# Mine\n\nMy sandbox is the kestrel host. See @team.md\n")
    write(home, ".claude/team.md", "# Team\n\nThe heron channel for reviews.\n")
    write(home, "src/proj/CLAUDE.md", "# Proj\n\n@~/.claude/my-project.md, @app/docs/guide.md\n")
    write(home, "src/proj/app/docs/guide.md", "# Guide\n\nThe ibis release train.\n")
    s = resolve({"state_dir": str(tmp_path / "state"), "vaults": [f"claude={home / '.claude'}",
                 f"proj={home / 'src/proj'}", f"app={home / 'src/proj/app'}"]}, env={})

    def found(text):
        with VaultIndex(s) as idx:
            hits, _ = Searcher(idx).search(Query(text, mode="text"))
        return [(h.vault, h.path, h.imported_by) for h in hits]

    with caplog.at_level("WARNING", logger="vaultmem.index"), VaultIndex(s, writable=True) as idx:
        report = idx.sync(list(s.vaults))
    assert (report.files, report.added) == (5, 5)
    assert not [r for r in caplog.records if "in no vault" in r.getMessage()]
    assert found("kestrel") == [("claude", "my-project.md", "proj:CLAUDE.md")]
    assert found("heron") == [("claude", "team.md", "my-project.md")]
    assert found("ibis") == [("app", "docs/guide.md", "proj:CLAUDE.md")]
    with VaultIndex(s) as idx:  # loaded with the CLAUDE.md, so asked for no topic: instructions, not facts
        assert take(idx, Usage(s.state_dir), s)["findings"]["missing_topic"] == []

    write(home, "src/proj/CLAUDE.md", "# Proj\n\nnothing imported now\n")  # seen as the daemon sees it
    with VaultIndex(s, writable=True) as idx:
        report = idx.update(s.vaults[1], {"CLAUDE.md"})
    assert (report.updated, report.removed) == (1, 3)
    assert found("kestrel") == [] and found("heron") == [] and found("ibis") == []
    assert (home / ".claude/my-project.md").read_text().startswith("# Mine")  # only ever read


def test_a_first_index_counts_an_imported_file_the_globs_match_once(env):
    """A CLAUDE.md importing a memory note (which the globs match anyway) and a file they do not:
    a first index said "4 files: 3 added, 1 unchanged" of three files."""
    env.write("CLAUDE.md", "# P\n\nSee @memory/x.md and @docs/style.md\n")
    env.write("memory/x.md", "x note\n")
    env.write("docs/style.md", "style\n")
    first = env.sync()
    assert (first.files, first.added, first.unchanged) == (3, 3, 0), first.summary()
    again = env.sync()
    assert (again.files, again.added, again.unchanged) == (3, 0, 3), again.summary()
