"""The memory habit through the CLI, in process (no daemon): remember, forget, feedback, stats,
--as-of, inventory and secrets, on temp vaults with the real engines."""

import json
import os
import threading
import time
from pathlib import Path

import pytest

from vaultmem import writing
from vaultmem.notes import parse_note

from conftest import note, run_cli

GH = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"  # fabricated


def cli(env, *args, input=None):
    return run_cli(*args, "--state-dir", str(env.state), input=input)


def js(proc) -> dict:
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def paths(env, text, *extra) -> list[str]:
    out = cli(env, "query", text, "--json", "--mode", "text", *extra)
    return [h["path"] for h in js(out)["hits"]]


# ------------------------------------------------------------------ writing notes


def test_slug_is_readable_safe_and_keeps_every_script():
    assert writing.slug("Deploy procedure") == "deploy-procedure"
    assert writing.slug("../../etc/passwd") == "etc-passwd"
    assert writing.slug("배포 절차") == "배포-절차"
    assert writing.slug("テスト方針 (v2)") == "テスト方針-v2"
    assert writing.slug("///") == "note"
    assert len(writing.slug("x" * 500)) == writing.SLUG_CHARS


def test_rendered_note_parses_back_to_what_was_asked(tmp_path):
    text = writing.render("API: versioning", "Use /v2 for new clients.\n", tags=["api", "http"], kind="decision",
                          importance=0.8)
    n = parse_note("v", "memory/x.md", text.encode())
    assert (n.topic, n.tags, n.kind, n.importance) == ("API: versioning", ("api", "http"), "decision", 0.8)
    assert n.date and "T" in n.date and n.date_ts and abs(n.date_ts - time.time()) < 5
    assert n.errors == () and n.chunks[0].text.strip() == "Use /v2 for new clients."


def test_write_new_never_replaces_a_file_even_under_races(tmp_path):
    (tmp_path / "a.md").write_text("mine\n")
    results: list[Path] = []
    threads = [threading.Thread(target=lambda i=i: results.append(writing.write_new(tmp_path, "a", f"note {i}\n")))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (tmp_path / "a.md").read_text() == "mine\n"
    assert len({p.name for p in results}) == 8
    assert sorted(p.read_text() for p in results) == sorted(f"note {i}\n" for i in range(8))
    assert not [p for p in tmp_path.iterdir() if "vaultmem-tmp" in p.name], "no temp file left behind"


# ------------------------------------------------------------------ remember


def test_a_write_removes_temp_files_a_killed_writer_left_and_nothing_else(tmp_path):
    stale = tmp_path / ".deploy.k3j_x.vaultmem-tmp"
    fresh = tmp_path / ".deploy.a8b9q.vaultmem-tmp"  # another writer's, in flight
    lookalike = tmp_path / "notes.vaultmem-tmp"  # not hidden: not a name vaultmem makes
    for p in (stale, fresh, lookalike):
        p.write_text("half a note")
    hour_ago = time.time() - 3700
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(lookalike, (hour_ago, hour_ago))
    (tmp_path / "old.md").write_text("mine\n")
    os.utime(tmp_path / "old.md", (hour_ago, hour_ago))
    writing.write_new(tmp_path, "deploy", "new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([fresh.name, lookalike.name, "old.md", "deploy.md"])


@pytest.mark.slow
def test_remember_round_trips_in_three_languages_and_supersedes(env):
    env.write("memory/old.md", note("deploy procedure", "Deploy by copying files over FTP.\n", date="2024-01-01"))
    env.write("CLAUDE.md", "# Project\n\nA ledger service.\n")
    assert cli(env, "index", "--vault", f"v={env.vault}").returncode == 0
    out = js(cli(env, "remember", "--topic", "deploy procedure", "--tag", "ops", "--kind", "decision", "--json",
                 "Deploy with the canary pipeline: make canary, then make ship."))
    assert out["path"] == f"memory/deploy-procedure-{time.strftime('%Y-%m-%d')}.md"
    assert out["superseded"] == ["memory/old.md"] and out["current"] is True
    written = (env.vault / out["path"]).read_text(encoding="utf-8")
    assert written.startswith("---\ntopic: deploy procedure\ndate: ") and "kind: decision" in written
    assert written.endswith("make ship.\n")
    assert paths(env, "canary pipeline") == [out["path"]]
    assert "memory/old.md" not in paths(env, "deploy")

    human = cli(env, "remember", "--topic", "deploy procedure", "-", input="Ship only on weekdays.\n")
    assert human.returncode == 0, human.stderr
    assert "supersedes v:" + out["path"] in human.stdout
    assert paths(env, "weekdays")[0].endswith("-2.md")

    ko = js(cli(env, "remember", "--topic", "배포 절차", "--json", "배포는 금요일에 하지 않는다"))
    ja = js(cli(env, "remember", "--topic", "テスト方針", "--json", "結合テストは実際のデータベースで行う"))
    assert ko["path"].startswith("memory/배포-절차-") and ja["path"].startswith("memory/テスト方針-")
    assert paths(env, "금요일") == [ko["path"]]
    assert paths(env, "データベース") == [ja["path"]]


def test_remember_refuses_bad_input_with_one_line(env):
    env.write("memory/a.md", note("a", "alpha\n"))
    cli(env, "index", "--vault", f"v={env.vault}")
    for args in (["--topic", "", "text"], ["--topic", "t", "--importance", "2", "text"],
                 ["--topic", "t", "--vault", "nope", "text"], ["--topic", "t", "   "]):
        r = cli(env, "remember", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.count("\n") <= 2 and "error:" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in (env.vault / "memory").iterdir()) == ["a.md"]


# ------------------------------------------------------------------ forget


@pytest.mark.slow
def test_forget_retires_restores_and_deletes(env):
    env.write("memory/a.md", note("yak", "the yak shaving rule\n", date="2025-01-01"))
    env.write("memory/b.md", note("yak", "yak shaving, second version\n", date="2025-06-01"))
    env.write("memory/c.md", note("zebra", "zebra crossing notes\n"))
    cli(env, "index", "--vault", f"v={env.vault}")
    assert paths(env, "yak") == ["memory/b.md"]

    r = cli(env, "forget", "memory/b.md")
    assert r.returncode == 0 and "retired v:memory/b.md" in r.stdout
    assert paths(env, "yak") == [], "a retired note is not current, and retiring did not revive the older one"
    hist = js(cli(env, "query", "yak", "--history", "--mode", "text", "--json"))["hits"]
    assert {(h["path"], h["current"], h["retired"]) for h in hist} == {("memory/b.md", False, True),
                                                                      ("memory/a.md", False, False)}
    assert (env.vault / "memory/b.md").exists(), "retiring never touches the file"
    assert "already retired" in cli(env, "forget", "memory/b.md").stdout
    assert cli(env, "forget", "--restore", "v:memory/b.md").returncode == 0
    assert paths(env, "yak") == ["memory/b.md"]

    by_topic = js(cli(env, "forget", "--topic", "YAK", "--json"))
    assert by_topic["notes"] == ["v:memory/a.md", "v:memory/b.md"]
    assert paths(env, "yak") == []

    refused = cli(env, "forget", "--delete", "memory/c.md")  # stdin is not a terminal
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert (env.vault / "memory/c.md").exists()
    dry = js(cli(env, "forget", "--delete", "--dry-run", "--json", str(env.vault / "memory/c.md")))
    assert dry["notes"] == ["v:memory/c.md"] and (env.vault / "memory/c.md").exists()
    assert cli(env, "forget", "--delete", "--yes", "memory/c.md").returncode == 0
    assert not (env.vault / "memory/c.md").exists()
    assert paths(env, "zebra") == []
    missing = cli(env, "forget", "memory/nothing.md")
    assert missing.returncode == 2 and "no such note" in missing.stderr


# ------------------------------------------------------------------ feedback, stats, as-of


@pytest.mark.slow
def test_feedback_moves_ranking_and_stats_record_retrievals_and_tasks(env):
    env.write("memory/one.md", note("one", "the walrus protocol for on-call handover\n"))
    env.write("memory/two.md", note("two", "the walrus protocol for release handover\n"))
    cli(env, "index", "--vault", f"v={env.vault}")
    first = paths(env, "walrus protocol handover", "--task", "T-1")
    assert sorted(first) == ["memory/one.md", "memory/two.md"]
    loser = first[1]
    for _ in range(3):
        out = js(cli(env, "feedback", loser, "--useful", "--task", "T-1", "--json"))
    assert out["feedback"] == pytest.approx(0.5 + 0.5 * (1 - 0.7 ** 3), abs=1e-3)
    hits = js(cli(env, "query", "walrus protocol handover", "--explain", "--json"))["hits"]
    assert hits[0]["path"] == loser, "useful feedback lifted the note above its twin"
    assert hits[0]["explain"]["feedback_factor"] > 1.0 == hits[1]["explain"]["feedback_factor"]
    js(cli(env, "feedback", loser, "--useless", "--json"))

    paths(env, "walrus protocol handover", "--no-record")
    st = js(cli(env, "stats", "--task", "T-1", "--json"))
    by = {n["note"]: n for n in st["notes"]}
    assert by["v:memory/one.md"]["retrieved"] == 2 and by["v:memory/two.md"]["retrieved"] == 2
    assert by[f"v:{loser}"]["useful"] == 3 and by[f"v:{loser}"]["useless"] == 1
    attribution = {a["note"]: a for a in st["attribution"]}
    assert set(attribution) == {"v:memory/one.md", "v:memory/two.md"}
    assert attribution[f"v:{loser}"]["credit"] == 3.0 and attribution[f"v:{loser}"]["best_rank"] == 2
    assert not (env.state / ".." / "vault" / "memory" / "one.md").read_text().count("retrieved")


def test_as_of_answers_with_the_notes_current_then(env):
    env.write("memory/v1.md", note("db choice", "we use the mammoth database\n", date="2024-01-10"))
    env.write("memory/v2.md", note("db choice", "we use the mastodon database\n", date="2025-03-01"))
    env.write("memory/later.md", note("other", "the mammoth migration plan\n", date="2025-06-01"))
    cli(env, "index", "--vault", f"v={env.vault}")
    assert paths(env, "database") == ["memory/v2.md"]
    assert paths(env, "database", "--as-of", "2024-12-31") == ["memory/v1.md"]
    assert paths(env, "mammoth", "--as-of", "2025-04-01") == [], "v1 was superseded, later.md not yet written"
    assert paths(env, "mammoth", "--as-of", "2024-01-10") == ["memory/v1.md"], "a date includes that day"
    assert paths(env, "database", "--as-of", "2023-01-01") == []
    hist = js(cli(env, "query", "database", "--as-of", "2025-04-01", "--history", "--mode", "text", "--json"))["hits"]
    assert [(h["path"], h["current"]) for h in hist] == [("memory/v2.md", True), ("memory/v1.md", False)]
    bad = cli(env, "query", "database", "--as-of", "last tuesday")
    assert bad.returncode == 2 and "ISO date" in bad.stderr
    assert paths(env, "database", "--history", "--since", "2025-01-01", "--until", "2025-12-31") == ["memory/v2.md"]
    assert cli(env, "query", "database", "--since", "soon").returncode == 2
    backwards = cli(env, "query", "database", "--since", "2025-12-31", "--until", "2025-01-01")
    assert backwards.returncode == 2 and "is after until" in backwards.stderr, "an empty range is a mistake, not 'nothing found'"
    assert paths(env, "database", "--since", "2025-03-01", "--until", "2025-03-01") == ["memory/v2.md"], "one day: both ends"


# ------------------------------------------------------------------ inventory and secrets


@pytest.mark.slow
def test_inventory_finds_each_kind_of_problem_and_exits_1(env):
    old = time.time() - 400 * 86400
    env.write("memory/ok.md", note("fine", "a fine note\n", tags="misc"))
    env.write("memory/stale.md", note("stale", "an ancient fact about gophers\n", tags="misc", date="2020-01-01"),
              mtime=old)
    env.write("memory/untagged.md", note("untagged", "no tags here\n"))
    env.write("memory/notopic.md", "plain note, no frontmatter\n")
    env.write(".claude/memory/feedback_x.md", "---\nname: x\ndescription: a Claude Code note\ntype: feedback\n---\nbody\n")
    env.write("memory/broken.md", note("broken", "retires a ghost\n", tags="misc", supersedes="ghost-topic"))
    env.write("memory/typo.md", note("typo", "dated 2205 for 2025\n", tags="misc", date="2205-03-01"))
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + 86400))  # a time zone ahead: not a finding
    env.write("memory/soon.md", note("soon", "dated tomorrow\n", tags="misc", date=tomorrow))
    dup = ("Rotate the signing keys every ninety days and log the rotation in the ops channel. "
           "Old keys stay valid for one week so that running jobs finish.\n")
    env.write("memory/dup1.md", note("dup one", dup, tags="x"))
    env.write("memory/dup2.md", note("dup two", dup.replace(" and log", " and then log"), tags="x"))
    env.write("memory/leak.md", note("leak", f"CI uses {GH} for releases\n", tags="ci"))
    env.write("CLAUDE.md", "# Rules\n\nNo frontmatter needed here.\n")
    env.write("GEMINI.md", "## Gemini Added Memories\n- The user prefers tabs.\n")  # Gemini CLI's own
    (env.vault / "memory/bin.md").write_bytes(b"\x00\x01\x02binary")
    env.write("memory/yaml.md", "---\ntopic: yaml\ntags: [misc]\ntitle: a: b\nimportance: high\n---\nstill read\n")
    cli(env, "index", "--vault", f"v={env.vault}")
    env.write("memory/late.md", note("late", "written after indexing\n", tags="misc"))
    (env.vault / "memory/untagged.md").write_text(note("untagged", "changed behind the index's back\n"))

    r = cli(env, "inventory", "--json")
    assert r.returncode == 1, r.stderr
    f = json.loads(r.stdout)["findings"]
    notes = lambda section: sorted(i["note"] for i in f[section])  # noqa: E731
    assert notes("stale") == ["v:memory/stale.md"]
    assert notes("missing_tags") == ["v:memory/notopic.md", "v:memory/untagged.md"]
    assert notes("missing_topic") == ["v:memory/notopic.md"], "CLAUDE.md, GEMINI.md need no topic"
    assert f["broken_supersedes"] == [{"note": "v:memory/broken.md", "ref": "ghost-topic"}]
    assert f["dated_ahead"] == [{"note": "v:memory/typo.md", "date": "2205-03-01", "from": "date"}]
    assert {(i["note"], i["problem"]) for i in f["out_of_sync"]} == {
        ("v:memory/late.md", "on disk, not indexed"), ("v:memory/untagged.md", "changed since indexed")}
    assert notes("unreadable") == ["v:memory/bin.md"]
    [partly] = f["read_with_problems"]
    assert partly["note"] == "v:memory/yaml.md" and "malformed frontmatter" in partly["problem"]
    assert "importance 'high' is not a number" in partly["problem"]
    status = cli(env, "status")
    assert "1 note(s) indexed despite problems in the file" in status.stdout, status.stdout
    assert js(cli(env, "status", "--json"))["read_with_problems"] == 1
    assert [d["notes"] for d in f["duplicates"]] == [["v:memory/dup1.md", "v:memory/dup2.md"]]
    assert f["secrets"] == [{"note": "v:memory/leak.md", "line": 5, "kind": "GitHub token"}]
    assert f["multiple_current"] == [] and f["never_retrieved"] == []  # records began just now

    human = cli(env, "inventory")
    assert human.returncode == 1
    assert "near-duplicate notes" in human.stdout and "v:memory/leak.md  (line 5: GitHub token)" in human.stdout
    assert GH not in human.stdout and "v:memory/typo.md  (dated 2205-03-01)" in human.stdout
    assert human.stdout.splitlines()[0].endswith(" findings")

    hit = js(cli(env, "query", "releases", "--json"))["hits"][0]
    assert hit["path"] == "memory/leak.md"
    assert GH not in json.dumps(hit) and "[secret masked]" in hit["snippet"] + hit["preview"]
    assert GH in (env.vault / "memory/leak.md").read_text(), "the note itself is unchanged"


@pytest.mark.slow
def test_inventory_of_a_clean_vault_exits_0(env):
    env.write("memory/a.md", note("alpha", "the first note\n", tags="x"))
    env.write("memory/b.md", note("beta", "something else entirely about boats\n", tags="y"))
    cli(env, "index", "--vault", f"v={env.vault}")
    r = cli(env, "inventory")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "clean" in r.stdout.splitlines()[0]
    r = cli(env, "inventory", "--unretrieved-days", "0.000001", "--json")
    assert r.returncode == 1
    assert sorted(i["note"] for i in json.loads(r.stdout)["findings"]["never_retrieved"]) == \
        ["v:memory/a.md", "v:memory/b.md"]
    env.write("memory/c.md", note("gamma", "a third note about kites, untagged\n"))
    cli(env, "index", "--vault", f"v={env.vault}")
    assert cli(env, "inventory").stdout.splitlines()[0].endswith("; 1 finding")  # missing tags, said in the singular


def test_a_saved_inventory_marks_itself_saved_last(tmp_path):
    """latest.json's time is when the report was saved: whoever sees it (the daemon's status,
    a script waiting for it) must find latest.txt of the same report already there."""
    from vaultmem import inventory
    report = {"generated": "2026-12-01T00:00:00+0000", "notes": 0, "current": 0, "retired": 0,
              "thresholds": {"stale_days": 1, "unretrieved_days": 1, "duplicate_cosine": 0.9}, "clean": True,
              "counts": {s: 0 for s in inventory.SECTIONS}, "findings": {s: [] for s in inventory.SECTIONS}}
    inventory.save(report, tmp_path)
    folder = tmp_path / "inventory"
    assert (folder / "latest.txt").stat().st_mtime_ns <= (folder / "latest.json").stat().st_mtime_ns
    assert inventory.last_saved(tmp_path) == (folder / "latest.json").stat().st_mtime


def test_usage_records_survive_a_rebuild_and_stay_out_of_the_notes(env):
    env.write("memory/a.md", note("alpha", "the quokka note\n"))
    cli(env, "index", "--vault", f"v={env.vault}")
    before = (env.vault / "memory/a.md").read_bytes()
    cli(env, "feedback", "memory/a.md", "--useful")
    cli(env, "forget", "memory/a.md")
    assert cli(env, "index", "--rebuild").returncode == 0
    assert paths(env, "quokka") == []
    st = js(cli(env, "stats", "--json"))
    assert st["notes"][0]["useful"] == 1 and st["notes"][0]["retired"] is True
    assert (env.vault / "memory/a.md").read_bytes() == before
    assert sorted(os.listdir(env.vault / "memory")) == ["a.md"]


@pytest.mark.slow
def test_usage_records_follow_a_note_that_is_renamed_or_filed(env):
    env.write("memory/a.md", note("alpha", "the okapi note\n"))
    env.write("memory/b.md", note("beta", "the okapi sequel\n"))
    env.write("memory/twin1.md", note("twin", "same bytes\n"))
    env.write("memory/twin2.md", note("twin", "same bytes\n"))
    cli(env, "index", "--vault", f"v={env.vault}")
    paths(env, "okapi")
    cli(env, "feedback", "memory/a.md", "--useful")
    cli(env, "forget", "memory/b.md")
    cli(env, "feedback", "memory/twin1.md", "--useless")
    (env.vault / "memory/archive").mkdir()
    os.rename(env.vault / "memory/a.md", env.vault / "memory/alpha.md")
    os.rename(env.vault / "memory/b.md", env.vault / "memory/archive/b.md")
    os.rename(env.vault / "memory/twin1.md", env.vault / "memory/archive/t1.md")
    os.rename(env.vault / "memory/twin2.md", env.vault / "memory/archive/t2.md")
    out = js(cli(env, "index", "--json"))
    assert out["moved"] == {"v:memory/a.md": "v:memory/alpha.md", "v:memory/b.md": "v:memory/archive/b.md"}, \
        "two files with the same bytes moved at once are not told apart"
    by = {n["note"]: n for n in js(cli(env, "stats", "--json"))["notes"]}
    assert by["v:memory/alpha.md"]["useful"] == 1 and by["v:memory/alpha.md"]["retrieved"] == 1
    assert by["v:memory/archive/b.md"]["retired"] is True and by["v:memory/archive/b.md"]["retrieved"] == 1
    assert "v:memory/a.md" not in by and "v:memory/b.md" not in by
    assert paths(env, "okapi") == ["memory/alpha.md"], "the filed note is still retired"


def test_forget_delete_asks_on_a_terminal(env):
    """Typed answers on a real pseudo-terminal: 'n' keeps the file, 'y' deletes it."""
    import os
    import pty
    import subprocess
    import sys

    from conftest import ROOT

    env.write("memory/a.md", note("alpha", "the axolotl note\n"))
    assert cli(env, "index", "--vault", f"v={env.vault}").returncode == 0
    e = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent-vaultmem-test",
         "VAULTMEM_SOCKET": "/nonexistent-vaultmem-test/s.sock"}

    def run(answer: str) -> tuple[int, str]:
        master, slave = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "vaultmem.cli", "forget", "--delete", "memory/a.md",
                                 "--state-dir", str(env.state)], stdin=slave, stdout=slave, stderr=slave,
                                env=e, cwd=ROOT)
        os.close(slave)
        out = b""
        while b"[y/N]" not in out:
            out += os.read(master, 4096)
        os.write(master, answer.encode() + b"\n")
        rc = proc.wait(timeout=120)
        try:
            while chunk := os.read(master, 4096):
                out += chunk
        except OSError:  # the terminal closed with the process
            pass
        os.close(master)
        return rc, out.decode(errors="replace")

    rc, out = run("n")
    assert rc == 1 and "v:memory/a.md" in out and "nothing deleted" in out
    assert (env.vault / "memory/a.md").exists()
    rc, out = run("y")
    assert rc == 0 and "deleted v:memory/a.md" in out
    assert not (env.vault / "memory/a.md").exists()


def test_remembering_one_topic_twice_in_a_second_keeps_the_newest_current(env):
    from vaultmem import ops

    env.write("memory/seed.md", note("seed", "seed\n"))
    env.sync()
    ctx = ops.LocalContext(env.settings())
    try:
        outs = [ops.remember(ctx, {"topic": "rapid fire", "text": f"version {i} of the fact"}) for i in range(4)]
    finally:
        ctx.close()
    assert all(o["current"] for o in outs), outs
    assert [o["superseded"] for o in outs[1:]] == [[outs[0]["path"]], [outs[1]["path"]], [outs[2]["path"]]]
    assert paths(env, "fact") == [outs[-1]["path"]]


def test_remember_where_the_memory_folder_cannot_be_made_is_one_clear_error(env):
    env.write("CLAUDE.md", "# Rules\n\nbe kind\n")
    (env.vault / "memory").write_text("a file where the folder should be\n")
    cli(env, "index", "--vault", f"v={env.vault}")
    r = cli(env, "remember", "--topic", "t", "some text")
    assert r.returncode == 2 and "cannot write a note in" in r.stderr and "Traceback" not in r.stderr
    assert (env.vault / "memory").read_text() == "a file where the folder should be\n"


def test_remember_into_a_vault_whose_directory_is_missing_writes_nothing(env):
    """An unmounted drive: writing would make the directory under the mount point, where the
    note would hide once the drive is mounted again."""
    env.write("CLAUDE.md", "# Rules\n\nbe kind\n")
    cli(env, "index", "--vault", f"v={env.vault}")
    env.vault.rename(env.vault.with_name("unmounted"))
    r = cli(env, "remember", "--topic", "t", "some text")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1] == f"vaultmem: error: vault v: directory {env.vault} not found; nothing written"
    assert not env.vault.exists()


@pytest.mark.slow
def test_tags_flags_take_a_comma_list_like_the_frontmatter_key(env):
    env.write("CLAUDE.md", "# Rules\n\nbe kind\n")
    assert cli(env, "index", "--vault", f"v={env.vault}").returncode == 0
    r = cli(env, "remember", "--topic", "espresso care", "--tags", "office, kitchen", "--tag", "#office", "--tag", "ops",
            "descale the espresso machine")
    assert r.returncode == 0, r.stderr
    path = next((env.vault / "memory").glob("espresso-care-*.md"))
    assert "tags: [office, kitchen, ops]" in path.read_text()
    assert paths(env, "espresso", "--tags", "kitchen,ops") == [f"memory/{path.name}"]
    assert paths(env, "espresso", "--tags", "kitchen,nope") == []
    assert paths(env, "espresso", "--tags", "kitchen,nope", "--any-tag") != []


def test_remember_into_a_configured_vault_that_was_never_indexed(env, tmp_path):
    cfg = tmp_path / "vaultmem.toml"
    cfg.write_text(f'state_dir = "{env.state}"\n[vaults]\nmine = "{env.vault}"\n')
    r = run_cli("remember", "--topic", "first note", "--config", str(cfg), "the very first quetzal note")
    assert r.returncode == 0, r.stderr
    assert "remembered mine:memory/first-note-" in r.stdout
    out = js(run_cli("query", "quetzal", "--json", "--mode", "text", "--config", str(cfg)))
    assert [h["vault"] for h in out["hits"]] == ["mine"]


@pytest.mark.slow
def test_remember_into_a_vault_taken_out_of_the_config_writes_nothing(env, tmp_path):
    """Its later edits would never be read: no sync or daemon looks at it any more. The
    stock-take lists the vault itself."""
    old = tmp_path / "old"
    (old / "memory").mkdir(parents=True)
    (old / "memory/x.md").write_text("an older note\n")
    assert run_cli("index", "--vault", f"old={old}", "--state-dir", str(env.state)).returncode == 0
    cfg = tmp_path / "vaultmem.toml"
    cfg.write_text(f'state_dir = "{env.state}"\n[vaults]\nmine = "{env.vault}"\n')
    r = run_cli("remember", "--topic", "t", "--vault", "old", "--config", str(cfg), "some text")
    assert r.returncode == 2 and r.stderr.splitlines()[-1] == (
        "vaultmem: error: vault old is not in the config, so its notes are not kept up to date; "
        "add it there, or name another with --vault; nothing written")
    assert sorted(p.name for p in (old / "memory").iterdir()) == ["x.md"]
    assert run_cli("remember", "--topic", "t", "--config", str(cfg), "some text").returncode == 0  # into mine
    f = js(run_cli("inventory", "--json", "--config", str(cfg)))["findings"]["out_of_sync"]
    assert f == [{"note": "old:", "problem": "vault not in the config: its notes are not updated "
                  "(`vaultmem reindex --drop-vault old` takes them out)"}]


def test_inventory_finds_a_topic_current_in_two_vaults_and_a_file_gone_from_disk(env, tmp_path):
    other = tmp_path / "other"
    (other / "memory").mkdir(parents=True)
    (other / "memory/deploy.md").write_text(note("Deploy Procedure", "deploy from the other vault\n", tags="x"))
    env.write("memory/deploy.md", note("deploy procedure", "deploy from this vault\n", tags="x"))
    env.write("memory/gone.md", note("gone", "about to vanish\n", tags="x"))
    assert cli(env, "index", "--vault", f"v={env.vault}", "--vault", f"o={other}").returncode == 0
    (env.vault / "memory/gone.md").unlink()
    f = js(cli(env, "inventory", "--json"))["findings"]
    assert f["multiple_current"] == [{"topic": "deploy procedure", "notes": ["o:memory/deploy.md", "v:memory/deploy.md"]}]
    assert {(i["note"], i["problem"]) for i in f["out_of_sync"]} == {("v:memory/gone.md", "indexed, gone from disk")}
