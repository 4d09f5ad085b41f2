"""Supersession is derived from the files alone: deterministic, reversible, explicit retirement
honoured. Checked both as a pure function and through the real index."""

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
    assert dict((p, sb) for p, _, sb in again) == {"memory/b.md": "memory/c.md", "memory/a.md": "memory/b.md"}


@pytest.mark.parametrize("seed", [5, 11, 23])
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
