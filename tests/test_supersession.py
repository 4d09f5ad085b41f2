"""Supersession is derived from the files alone: deterministic, reversible, explicit retirement
honoured. Checked both as a pure function and through the real index."""

import os

import pytest

from conftest import note

from vaultmem.supersession import Facts, compute


def facts(key, topic=None, date=None, mtime=0.0, supersedes=()):
    return Facts(f"v:{key}", "v", key, topic, date, mtime, tuple(supersedes))


def test_newest_date_is_current_and_supersedes_the_rest():
    state = compute([facts("a.md", "t", 1.0), facts("b.md", "t", 3.0), facts("c.md", "t", 2.0)])
    assert state == {"v:a.md": "v:b.md", "v:b.md": None, "v:c.md": "v:b.md"}


def test_no_date_falls_back_to_mtime_and_ties_break_on_path():
    state = compute([facts("a.md", "t", None, mtime=5.0), facts("b.md", "t", None, mtime=4.0)])
    assert state["v:a.md"] is None and state["v:b.md"] == "v:a.md"
    tie = compute([facts("a.md", "t", 1.0), facts("b.md", "t", 1.0)])
    assert tie["v:b.md"] is None and tie["v:a.md"] == "v:b.md"
    # deterministic whatever the input order
    assert compute(list(reversed([facts("a.md", "t", 1.0), facts("b.md", "t", 1.0)]))) == tie


def test_topics_compare_after_case_folding_and_only_within_a_vault():
    state = compute([facts("a.md", "Deploy", 1.0), facts("b.md", "deploy ", 2.0),
                     Facts("w:c.md", "w", "c.md", "deploy", 3.0, 0.0)])
    assert state["v:a.md"] == "v:b.md" and state["w:c.md"] is None and state["v:b.md"] is None


def test_supersedes_retires_topics_and_paths():
    state = compute([
        facts("old.md", "legacy api", 1.0),
        facts("notes/x.md", "x", 1.0),
        facts("new.md", "api", 2.0, supersedes=["legacy api", "notes/x"]),
    ])
    assert state["v:old.md"] == "v:new.md" and state["v:notes/x.md"] == "v:new.md"
    assert state["v:new.md"] is None


def test_index_marks_history_and_deleting_newest_restores_previous(env):
    env.write("memory/d1.md", note("deploy", "deploy by hand over ssh\n", date="2025-01-01"))
    env.write("memory/d2.md", note("deploy", "deploy with the CI pipeline\n", date="2025-06-01"))
    env.write("memory/d3.md", note("deploy", "deploy through Argo CD on kubernetes\n", date="2026-01-01"))
    env.sync()
    current = env.query("deploy", mode="text")
    assert [h.path for h in current] == ["memory/d3.md"]
    hist = env.query("deploy", mode="text", history=True)
    assert [h.path for h in hist] == ["memory/d3.md", "memory/d2.md", "memory/d1.md"]
    assert [h.current for h in hist] == [True, False, False]
    assert hist[1].superseded_by == "memory/d3.md"
    (env.vault / "memory/d3.md").unlink()
    env.sync()
    assert [h.path for h in env.query("deploy", mode="text")] == ["memory/d2.md"]


def test_a_chain_without_dates_is_ordered_by_the_notes_updated_key_not_by_mtime(env):
    env.write("memory/a.md", note("t", "alpha as first written\n", updated="2025-06-01"), mtime=2_000_000_000)
    env.write("memory/b.md", note("t", "alpha as it is now\n", updated="2026-01-01"), mtime=1_000_000_000)
    env.sync()
    hits = env.query("alpha", mode="text", history=True)
    assert [(h.path, h.current, h.date) for h in hits] == [("memory/b.md", True, "2026-01-01"),
                                                          ("memory/a.md", False, "2025-06-01")]


def test_rebuild_from_scratch_gives_the_same_state(env, tmp_path):
    env.write("memory/a.md", note("t", "alpha version one\n"), mtime=1_000_000)
    env.write("memory/b.md", note("t", "alpha version two\n"), mtime=2_000_000)
    env.write("memory/c.md", note("u", "retire t\n", supersedes="[t]", date="2020-01-01"))
    env.sync()
    first = [(h.path, h.current, h.superseded_by) for h in env.query("alpha", mode="text", history=True)]
    import shutil
    shutil.rmtree(env.state)
    env.sync()
    again = [(h.path, h.current, h.superseded_by) for h in env.query("alpha", mode="text", history=True)]
    assert first == again
    # c matches no word, but it retired the notes that do: it comes with them, just above them
    assert again == [("memory/c.md", True, None), ("memory/b.md", False, "memory/c.md"),
                     ("memory/a.md", False, "memory/b.md")]


def test_a_touch_that_makes_an_undated_note_newest_makes_it_current_without_a_re_embed(env):
    """Same bytes, new mtime, seen by the daemon's path (update): only the catalog changes,
    and with it the chain that mtime orders."""
    from vaultmem.index import VaultIndex

    a = env.write("memory/a.md", note("t", "alpha version one\n"), mtime=1_000_000)
    env.write("memory/b.md", note("t", "alpha version two\n"), mtime=2_000_000)
    for i in range(8):  # enough other notes that only the touched chains are derived again
        env.write(f"memory/o{i}.md", note(f"o{i}", f"other note {i}\n"))
    env.sync()
    assert [h.path for h in env.query("alpha", mode="text")] == ["memory/b.md"]
    os.utime(a, (3_000_000, 3_000_000))
    s = env.settings()
    with VaultIndex(s, writable=True) as idx:
        report = idx.update(s.vaults[0], {"memory/a.md"})
    assert (report.updated, report.chunks_embedded, report.unchanged) == (0, 0, 1)
    assert [h.path for h in env.query("alpha", mode="text")] == ["memory/a.md"]


@pytest.mark.parametrize("seed", [5, 11, 23])
@pytest.mark.slow
def test_incremental_recompute_equals_a_full_one(env, seed):
    """Random edits, deletes and retirements; after each, the chains recomputed for the touched
    topics only must equal a recompute of everything."""
    import random
    from vaultmem.index import VaultIndex
    rng = random.Random(seed)
    for i in range(40):
        env.write(f"memory/n{i}.md", note(f"t{i % 6}", f"note {i}\n", date=f"2025-01-{1 + i % 27:02d}"))
    env.sync()
    s = env.settings()
    with VaultIndex(s, writable=True) as idx:
        vault = s.vaults[0]
        for step in range(120):
            i = rng.randrange(45)
            p = env.vault / f"memory/n{i}.md"
            action = rng.choice(["topic", "date", "delete", "retire", "untopic"])
            if action == "delete":
                p.unlink(missing_ok=True)
            elif action == "retire":
                p.write_text(note(f"r{i}", "retiring\n", supersedes=f"[t{rng.randrange(6)}, n{rng.randrange(40)}]",
                                  date="2024-06-01"))
            elif action == "untopic":
                p.write_text("no frontmatter at all\n")
            else:
                p.write_text(note(f"t{rng.randrange(6)}", f"edited {step}\n", date=f"2025-0{rng.randint(1, 9)}-01"))
            idx.update(vault, {f"memory/n{i}.md"})
            got = dict(idx.catalog.db.execute("SELECT key, superseded_by FROM notes").fetchall())
            idx.catalog.recompute_supersession()
            full = dict(idx.catalog.db.execute("SELECT key, superseded_by FROM notes").fetchall())
            assert got == full, f"step {step}: {action} on n{i}"


# ------------------------------------------------------------ mark_superseded: state written into notes

from vaultmem.writing import rewrite_note, set_frontmatter_key  # noqa: E402

ORIGINALS = [
    b"---\ntopic: deploy\ndate: 2024-01-01\n---\n\nDeploy with make.\n",
    b"\xef\xbb\xbf---\r\ntopic: deploy\r\ntags: [ops, ci]\r\n---\r\nCRLF body\r\n",
    b"# No frontmatter\n\nJust a body.\n",
    b"---\ntopic: x\n---",  # closing fence at the very end, no body
    "---\ntopic: 배포 절차\ndescription: |\n  superseded_by: inside a block, not a key\n---\n本文\n".encode(),
]


@pytest.mark.parametrize("original", ORIGINALS)
def test_set_frontmatter_key_adds_one_line_and_removing_it_restores_every_byte(original):
    from vaultmem.notes import split_frontmatter
    marked = set_frontmatter_key(original, "superseded_by", "memory/deploy v2: final.md")
    assert marked is not None and marked != original
    added = [ln for ln in marked.splitlines() if ln not in original.splitlines()]
    assert len(added) <= 3 and b"superseded_by: 'memory/deploy v2: final.md'" in added  # quoted: YAML-safe
    meta, _, _, errors = split_frontmatter(marked.decode("utf-8-sig").replace("\r\n", "\n"))
    assert meta["superseded_by"] == "memory/deploy v2: final.md" and not errors
    assert set_frontmatter_key(marked, "superseded_by", "memory/deploy v2: final.md") == marked
    moved = set_frontmatter_key(marked, "superseded_by", "memory/v3.md")
    assert moved.count(b"superseded_by") == marked.count(b"superseded_by")  # replaced, not added
    assert set_frontmatter_key(moved, "superseded_by", None) == original
    assert set_frontmatter_key(original, "superseded_by", None) == original


def test_set_frontmatter_key_replaces_a_multi_line_value_of_its_own_key():
    data = b"---\ntopic: a\nsuperseded_by:\n  - x.md\n  - y.md\ntags: [t]\n---\nbody\n"
    assert set_frontmatter_key(data, "superseded_by", "z.md") == b"---\ntopic: a\nsuperseded_by: z.md\ntags: [t]\n---\nbody\n"


@pytest.mark.parametrize("data", [
    b"+++\ntopic = 'a'\n+++\nbody\n",  # TOML
    b'{\n  "topic": "a"\n}\nbody\n',  # JSON
    b"---\ntopic: a: b: c\n---\nbody\n",  # YAML that does not parse
    b"---\ntopic: a\nbody without a closing fence\n",
    b"\xff\xfe not utf-8",
    b"\n\n---\ntopic: a\n---\nindented frontmatter\n",
])
def test_set_frontmatter_key_refuses_what_it_cannot_edit_safely(data):
    assert set_frontmatter_key(data, "superseded_by", "x.md") is None


def test_rewrite_note_keeps_mode_and_mtime_and_refuses_a_changed_file_or_a_symlink(tmp_path):
    import os
    p = tmp_path / "n.md"
    p.write_bytes(b"old\n")
    os.chmod(p, 0o640)
    os.utime(p, ns=(1_000_000_000_000_000_000, 1_500_000_000_000_000_000))
    assert not rewrite_note(p, b"something else\n", b"new\n")  # the file is not what we read
    assert p.read_bytes() == b"old\n"
    assert rewrite_note(p, b"old\n", b"new\n")
    st = p.stat()
    assert p.read_bytes() == b"new\n" and (st.st_mode & 0o777) == 0o640
    assert st.st_mtime_ns == 1_500_000_000_000_000_000
    link = tmp_path / "link.md"
    link.symlink_to(p)
    assert not rewrite_note(link, b"new\n", b"newer\n") and p.read_bytes() == b"new\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["link.md", "n.md"]  # no temp file left


def test_mark_superseded_writes_the_state_into_the_notes_and_takes_it_back(env):
    import os
    env.overrides = {"index": {"mark_superseded": True}}
    # an undated chain, ordered by mtime: marking must not touch mtimes, or the order would flip
    a = env.write("memory/a.md", note("deploy", "deploy by hand over ssh\n"), mtime=1_000_000)
    b = env.write("memory/b.md", note("deploy", "deploy with the CI pipeline\n", tags="[ops]"), mtime=2_000_000)
    c = env.write("memory/c.md", note("deploy", "deploy through Argo CD\n"), mtime=3_000_000)
    old = env.write("memory/old.md", "An old note without frontmatter.\n", mtime=1_000_000)
    new = env.write("memory/new.md", note(None, "It retires the old one.\n", supersedes="[memory/old.md]"))
    original = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (a, b, c, old, new)}
    report = env.sync()
    assert report.marked == 3
    for p, by in ((a, "memory/c.md"), (b, "memory/c.md"), (old, "memory/new.md")):
        assert p.read_bytes().replace(f"superseded_by: {by}\n".encode(), b"").replace(b"---\n---\n", b"") \
            == original[p][0]
        assert p.stat().st_mtime_ns == original[p][1]
    assert c.read_bytes() == original[c][0] and new.read_bytes() == original[new][0]
    again = env.sync()
    assert (again.updated, again.marked) == (0, 0)  # the index already read what it wrote
    hist = {h.path: h for h in env.query("deploy", mode="text", history=True)}
    assert [hist[p].current for p in ("memory/c.md", "memory/b.md", "memory/a.md")] == [True, False, False]
    assert not any(h.changed or "superseded_by" in h.extra for h in hist.values())
    c.unlink()  # b is current again: its line goes, a's now names b
    assert env.sync().marked == 2
    assert b.read_bytes() == original[b][0]
    assert b"superseded_by: memory/b.md\n" in a.read_bytes()
    new.unlink()
    env.sync()
    assert old.read_bytes() == original[old][0]
    assert os.stat(old).st_mtime_ns == original[old][1]


def test_notes_are_not_marked_unless_asked(env):
    a = env.write("memory/a.md", note("deploy", "by hand\n", date="2024-01-01"))
    env.write("memory/b.md", note("deploy", "with CI\n", date="2025-01-01"))
    before = a.read_bytes()
    assert env.sync().marked == 0
    assert a.read_bytes() == before


def test_killed_between_marking_and_re_reading_the_next_sync_reads_the_note_again(env, monkeypatch):
    from vaultmem.index import VaultIndex
    env.overrides = {"index": {"mark_superseded": True}}
    a = env.write("memory/a.md", note("deploy", "by hand\n", date="2024-01-01"))
    env.write("memory/b1.md", note("deploy", "with CI\n", date="2025-01-01"))
    env.sync()
    size = a.stat().st_size
    env.write("memory/b2.md", note("deploy", "with Argo\n", date="2026-01-01"))

    def killed(self, vault, paths):
        if self._marking:
            raise KeyboardInterrupt  # as if killed after the write, before the re-read
        return real(self, vault, paths)
    real = VaultIndex.update
    monkeypatch.setattr(VaultIndex, "update", killed)
    with pytest.raises(KeyboardInterrupt):
        env.sync()
    monkeypatch.setattr(VaultIndex, "update", real)
    assert b"superseded_by: memory/b2.md\n" in a.read_bytes() and a.stat().st_size == size  # same size, same mtime
    env.sync()
    with VaultIndex(env.settings()) as idx:
        meta = idx.catalog.notes(["v:memory/a.md"])["v:memory/a.md"].meta
    assert meta["superseded_by"] == "memory/b2.md"


def test_mark_superseded_leaves_symlinks_and_foreign_frontmatter_alone_and_says_so(env, tmp_path, caplog):
    import logging
    env.overrides = {"index": {"mark_superseded": True}}
    outside = tmp_path / "elsewhere.md"
    outside.write_text("---\ntopic: deploy\ndate: 2024-01-01\n---\nlinked in\n")
    (env.vault / "memory").mkdir(parents=True)
    (env.vault / "memory/linked.md").symlink_to(outside)
    toml = env.write("memory/toml.md", "+++\ntopic = 'deploy'\ndate = 2024-02-01\n+++\nTOML frontmatter\n")
    plain = env.write("memory/plain.md", note("deploy", "plain\n", date="2024-03-01"))
    legacy = env.vault / "memory/legacy.md"  # read as Windows-1252; written back, it would be UTF-8
    legacy.write_bytes(b"---\ntopic: deploy\ndate: 2024-02-15\n---\nDon\x92t deploy on Friday\n")
    env.write("memory/new.md", note("deploy", "newest\n", date="2025-01-01"))
    before = (outside.read_bytes(), toml.read_bytes(), legacy.read_bytes())
    from vaultmem.index import VaultIndex
    s = env.settings()
    with caplog.at_level(logging.WARNING, logger="vaultmem.index"), VaultIndex(s, writable=True) as idx:
        assert idx.sync(list(s.vaults)).marked == 1
        assert idx.sync(list(s.vaults)).marked == 0  # said once, not on every pass (the daemon's case)
    assert b"superseded_by: memory/new.md" in plain.read_bytes()
    assert (outside.read_bytes(), toml.read_bytes(), legacy.read_bytes()) == before
    said = [m for m in (r.getMessage().replace(str(env.vault), "") for r in caplog.records) if "mark_superseded" in m]
    assert len(said) == 3 and any("symlink" in m for m in said) and any("not plain YAML" in m for m in said)
    assert any("legacy.md" in m and "not UTF-8" in m for m in said)


def test_the_chains_at_a_moment_are_those_of_the_notes_written_before_it(env):
    from vaultmem.index import VaultIndex
    env.write("memory/a.md", note("deploy", "by hand\n", date="2025-01-01"))
    env.write("memory/b.md", note("deploy", "through CI\n", date="2025-06-01"))
    env.write("memory/c.md", note("deploy", "through Argo\n"), mtime=1_767_225_600)  # no date: 2026-01-01 by mtime
    env.write("memory/d.md", note("api", "v2 replaces the legacy api\n", date="2025-09-01", supersedes="[deploy]"))
    env.sync()
    with VaultIndex(env.settings()) as idx:
        cat = idx.catalog
        everything = [f for f, _ in cat._facts().values()]
        for moment in (1_735_000_000, 1_735_689_600, 1_750_000_000, 1_760_000_000, 1_767_225_600, 1_800_000_000):
            # the SQL filter on the moment agrees with Facts.order, the time chains are ordered by
            assert cat.supersession_at(moment) == compute([f for f in everything if f.order[0] < moment])
        assert cat.supersession_at(1_750_000_000) == {"v:memory/a.md": "v:memory/b.md", "v:memory/b.md": None}
        assert cat.supersession_at(1_800_000_000)["v:memory/c.md"] == "v:memory/d.md"


def test_why_a_note_is_current_is_said_and_a_note_from_the_future_is_listed(env):
    """An undated note whose file's mtime is in the future won its chain without a word, and so
    did one whose date does not read (undated, its fresh mtime is "now"). `--explain` says when
    each was written and from what; the inventory lists the one ahead of now."""
    import json
    import time
    from vaultmem.backend import Backend
    ahead = time.time() + 400 * 86400
    env.write("memory/old.md", note("rota", "the old rota: Mondays\n", date="2025-01-01"))
    env.write("memory/skewed.md", note("rota", "the rota copied from a laptop with a wrong clock\n"), mtime=ahead)
    env.write("memory/bad.md", note("backup", "backups at night\n", date="2025-13-45"))
    env.write("memory/fine.md", note("backup", "backups at noon\n", updated="2024-03-04"))
    env.sync()
    b = Backend(env.settings(), no_daemon=True, quiet=True)
    try:
        out = b.request({"op": "query", "text": "rota backups", "k": 10, "history": True, "explain": True, "mode": "text"})
        written = {h["path"]: h["explain"]["written"] for h in out["hits"]}
        assert written["memory/old.md"].endswith("from date")
        assert "from the file's mtime (no date), 400 days ahead of now" in written["memory/skewed.md"]
        assert "from the file's mtime (no date)" in written["memory/bad.md"]
        assert written["memory/fine.md"].startswith("2024-03-04") and written["memory/fine.md"].endswith("from updated")
        current = {h["path"]: h["current"] for h in out["hits"]}
        assert current["memory/skewed.md"] and not current["memory/old.md"]
        inv = b.request({"op": "inventory"})
        assert [(f["note"], f["from"]) for f in inv["findings"]["dated_ahead"]] == \
            [("v:memory/skewed.md", "the file's mtime (no date)")]
        assert any(f["note"] == "v:memory/bad.md" and "no day of the calendar" in f["problem"]
                   for f in inv["findings"]["read_with_problems"]), json.dumps(inv["findings"])[:500]
    finally:
        b.close()


@pytest.mark.slow
def test_history_never_loses_a_hit_that_only_an_old_version_has(daemon):
    """The one note that holds `quixotically` is superseded by a newer version that does not.
    With --history it was rank 1 in text mode and lost in hybrid mode, its score capped under
    its newer version's (which matched nothing), below five unrelated notes. Now the newer
    version is brought in just above it, marked, in every mode, through the CLI and the socket."""
    import json
    import random
    from conftest import atomic_save, run_cli
    rng = random.Random(5)
    words = "deploy cache queue review budget ledger schedule retry index release memory agent".split()
    for i in range(300):
        atomic_save(daemon.vault / f"memory/n{i:03d}.md",
                    note(f"t{i}", " ".join(rng.choice(words) for _ in range(40)) + "\n", date="2025-03-01"))
    atomic_save(daemon.vault / "memory/old.md", note("style guide", "We write quixotically long comments.\n",
                                                       date="2024-01-01"))
    atomic_save(daemon.vault / "memory/new.md", note("style guide", "Comments are short and plain.\n",
                                                       date="2025-06-01"))
    daemon.start()
    e = {"VAULTMEM_SOCKET": str(daemon.sock)}
    for mode in ("text", "hybrid"):
        out = daemon.request({"op": "query", "text": "quixotically", "mode": mode, "history": True, "explain": True})
        paths = [h["path"] for h in out["hits"]]
        assert paths[:2] == ["memory/new.md", "memory/old.md"], (mode, paths)
        new, old = out["hits"][:2]
        assert new["current"] and not old["current"] and old["superseded_by"] == "memory/new.md"
        assert new["explain"]["newer_version_of_a_match"] == "memory/old.md"
        assert "capped_below_newer_version" not in old["explain"]
        r = run_cli("query", "quixotically", "--history", "--mode", mode, "--json", "--state-dir", str(daemon.state),
                    env=e)
        assert [h["path"] for h in json.loads(r.stdout)["hits"]][:2] == ["memory/new.md", "memory/old.md"], mode
        plain = daemon.request({"op": "query", "text": "quixotically", "mode": mode})
        assert "memory/old.md" not in [h["path"] for h in plain["hits"]]  # without history: current notes only


@pytest.mark.slow
def test_a_projects_memory_in_claude_code_chains_with_its_repository(tmp_path, monkeypatch):
    """Claude Code keeps a project's memory in ~/.claude/projects/<slug>/memory/, the repository
    its own memory/. remember(topic="release freeze", vault="ledger") left the Claude Code note
    on that topic current too, and the session-start hook showed both dates. One topic, one
    current note per project: the folder chains with the project's vault (--explain says so);
    another project keeps its own chain; [vaults] share_topics joins two vaults."""
    import json
    from conftest import run_cli, write
    from vaultmem.agents import claude_slug
    home = tmp_path / "home"
    ledger, webshop, notes = tmp_path / "src/ledger", tmp_path / "src/webshop", tmp_path / "notes"
    slug = claude_slug(str(ledger))
    write(home, f".claude/projects/{slug}/memory/project_freeze.md", note(
        "release freeze", "Release freeze from 2026-12-01: only hotfixes ship.\n", date="2026-11-20"))
    write(ledger, "CLAUDE.md", "# ledger\n")
    write(webshop, "memory/freeze.md", note("release freeze", "The webshop freezes on Black Friday.\n",
                                             date="2026-11-01"))
    write(notes, "memory/a.md", note("on call", "Ana is on call.\n", date="2026-01-01"))
    write(ledger, "memory/oncall.md", note("on call", "Ben is on call.\n", date="2026-02-01"))
    cfg = tmp_path / "vaultmem.toml"
    cfg.write_text(f'[vaults]\nclaude = "{home / ".claude"}"\nledger = "{ledger}"\nwebshop = "{webshop}"\n'
                   f'notes = "{notes}"\nshare_topics = [["ledger", "notes"]]\n')
    e = {"HOME": str(home)}
    args = ["--config", str(cfg), "--state-dir", str(tmp_path / "st")]
    assert run_cli("index", *args, env=e).returncode == 0
    r = run_cli("remember", "--vault", "ledger", "--topic", "release freeze",
                "The freeze is lifted on 2026-12-15.", *args, "--no-daemon", env=e)
    assert r.returncode == 0, r.stderr
    out = json.loads(run_cli("query", "release freeze", "--history", "--explain", "--json", "-k", "10", *args,
                             "--no-daemon", env=e).stdout)
    by = {f"{h['vault']}:{h['path']}": h for h in out["hits"]}
    [new] = [k for k in by if k.startswith("ledger:memory/release-freeze")]
    assert by[new]["current"] and not by[f"claude:projects/{slug}/memory/project_freeze.md"]["current"]
    assert by[f"claude:projects/{slug}/memory/project_freeze.md"]["superseded_by"] == new.split(":", 1)[1]
    assert by["webshop:memory/freeze.md"]["current"], "another project keeps its own chain"
    assert f"claude:projects/{slug}/" in by[new]["explain"]["chain"] and "ledger" in by[new]["explain"]["chain"]
    oncall = json.loads(run_cli("query", "on call", "--history", "--json", *args, "--no-daemon", env=e).stdout)
    assert {h["path"]: h["current"] for h in oncall["hits"] if h["topic"]} == {"memory/oncall.md": True,
                                                                               "memory/a.md": False}
    inv = json.loads(run_cli("inventory", "--json", *args, "--no-daemon", env=e).stdout)
    assert not [f for f in inv["findings"]["multiple_current"] if "project_freeze" in json.dumps(f)], \
        "the project's two folders hold one current note; another project's note on the topic is its own"


def test_claude_codes_project_folder_chains_with_its_vault_for_any_path():
    """Scopes names a project's folder as Claude Code does (agents.claude_slug, the one place):
    a character beyond the BMP is two dashes (the folder of a path with an emoji or a rare kanji
    chained with nothing before), and a path past 200 characters is cut there with a hash added."""
    from vaultmem.supersession import Scopes
    rare = "/home/u/𠮷-notes"
    deep = "/home/u/" + "/".join(["segment"] * 30)
    scopes = Scopes({"claude": "/home/u/.claude", "rare": rare, "deep": deep, "other": "/home/u/other"}, "claude")
    assert scopes("claude", "projects/-home-u----notes/memory/a.md") == "rare"
    folder = deep.replace("/", "-")[:200] + "-1a2b3c"
    assert scopes("claude", f"projects/{folder}/memory/a.md") == "deep"
    assert scopes("claude", "projects/-home-u-elsewhere/memory/a.md") == "claude"


def test_a_restart_derives_every_chain_again_only_when_scopes_or_rules_changed(env, tmp_path, monkeypatch):
    """Every restart is a full sync, and it re-derived the chains of every note even when none
    had changed: ~0.35 s of a 50,000-note restart. It does so now only when the chains were not
    last derived whole under the scopes and rules in use: an index an older vaultmem wrote (no
    stamp), vaults that come to share topics. Otherwise each change derived its own chains."""
    from conftest import write
    from vaultmem.catalog import Catalog
    from vaultmem.index import VaultIndex
    other = tmp_path / "other"
    env.write("memory/a.md", note("deploy", "deploy by hand\n", date="2025-01-01"))
    env.write("memory/b.md", note("deploy", "deploy with CI\n", date="2025-06-01"))
    write(other, "memory/c.md", note("deploy", "deploy with Argo\n", date="2026-01-01"))
    two = {"vaults": [f"v={env.vault}", f"w={other}"]}
    shared = tmp_path / "shared.toml"
    shared.write_text(f'[vaults]\nv = "{env.vault}"\nw = "{other}"\nshare_topics = [["v", "w"]]\n')
    env.sync(**two)
    whole = []
    real = Catalog.recompute_supersession
    monkeypatch.setattr(Catalog, "recompute_supersession",
                        lambda self, keys=None, topics=None: (whole.append(keys is None), real(self, keys, topics))[1])

    def chains(**flags):
        s = env.settings(**flags)
        with VaultIndex(s, writable=True) as idx:
            idx.sync(list(s.vaults))
            return dict(idx.catalog.db.execute("SELECT key, superseded_by FROM notes").fetchall())

    assert chains(**two) == {"v:memory/a.md": "v:memory/b.md", "v:memory/b.md": None, "w:memory/c.md": None}
    assert whole == []  # nothing changed: nothing derived again
    with VaultIndex(env.settings(**two), writable=True) as idx:  # as an older vaultmem left it
        idx.catalog.db.execute("UPDATE notes SET superseded_by=NULL")
        idx.catalog.db.execute("DELETE FROM meta WHERE k='chains'")
        idx.catalog.db.commit()
    assert chains(**two)["v:memory/a.md"] == "v:memory/b.md" and whole == [True]
    assert chains(vaults=None, config=str(shared)) == {"v:memory/a.md": "w:memory/c.md", "v:memory/b.md": "w:memory/c.md",
                                     "w:memory/c.md": None}
    assert whole == [True, True]
    env.write("memory/d.md", note("deploy", "deploy on Fridays: never\n", date="2026-06-01"))
    assert chains(vaults=None, config=str(shared))["w:memory/c.md"] == "v:memory/d.md"
