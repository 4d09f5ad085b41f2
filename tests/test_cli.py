"""The command line as scripts and users meet it: a real `vaultmem` process on a temp vault.
Checks the --json contract, batch mode, exit codes and one-line errors."""

import argparse
import json
import os
import re

import pytest

from conftest import ROOT, note, run_cli, write


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    vault, state = tmp / "vault", tmp / "state"
    write(vault, "memory/deploy.md", note("deploy", "# Deploy\n\nShip with `make release` on Fridays never.\n", tags="[ops]", date="2026-01-02"))
    write(vault, "memory/old.md", note("deploy", "Ship by hand.\n", date="2025-01-01"))
    write(vault, "CLAUDE.md", "# Rules\n\n## Testing\n\nRun pytest before every commit.\n")
    r = run_cli("index", "--vault", str(vault), "--state-dir", str(state))
    assert r.returncode == 0, r.stderr
    assert "3 added" in r.stdout
    return vault, state


def test_index_summary_and_no_change_rerun(indexed):
    vault, state = indexed
    r = run_cli("index", "--state-dir", str(state), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["unchanged"] == 3 and summary["chunks_embedded"] == 0


def test_a_bulk_index_is_compacted_as_the_daemon_does(tmp_path):
    import lancedb
    vault, state = tmp_path / "vault", tmp_path / "state"
    for name in "abcde":
        write(vault, f"memory/{name}.md", f"note {name} about otters\n")
    cfg = tmp_path / "vaultmem.toml"
    cfg.write_text("[index]\nbatch_files = 2\n")  # so that five notes are a bulk load, in three commits
    r = run_cli("index", "--vault", str(vault), "--state-dir", str(state), env={"VAULTMEM_CONFIG": str(cfg)})
    assert r.returncode == 0, r.stderr
    table = lancedb.connect(str(state / "lance")).open_table("chunks")
    assert len(table.list_versions()) == 1 and table.count_rows() == 5  # one compacted version left


def test_query_json_contract(indexed):
    _, state = indexed
    r = run_cli("query", "ship release", "--state-dir", str(state), "--json", "-k", "5")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"hits", "took_ms"}
    hit = out["hits"][0]
    for field in ("path", "vault", "line_start", "line_end", "heading", "score", "current", "superseded_by",
                  "topic", "tags", "kind", "date", "snippet", "preview"):
        assert field in hit
    assert hit["path"] == "memory/deploy.md" and hit["vault"] == "vault" and hit["tags"] == ["ops"]
    assert hit["current"] is True and hit["superseded_by"] is None and hit["date"] == "2026-01-02"
    assert "memory/old.md" not in [h["path"] for h in out["hits"]]


def test_query_history_marks_superseded(indexed):
    _, state = indexed
    out = json.loads(run_cli("query", "ship", "--history", "--state-dir", str(state), "--json", "--mode", "text").stdout)
    old = next(h for h in out["hits"] if h["path"] == "memory/old.md")
    assert old["current"] is False and old["superseded_by"] == "memory/deploy.md"


def test_batch_runs_plain_and_json_lines_and_reports_bad_ones(indexed):
    _, state = indexed
    lines = "ship release\n" + json.dumps({"text": "ship", "history": True, "mode": "text", "k": 1}) + "\n{not json\n"
    r = run_cli("query", "--batch", "-", "--state-dir", str(state), "--json", input=lines)
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(out) == 3
    assert out[0]["hits"][0]["path"] == "memory/deploy.md"
    assert len(out[1]["hits"]) == 1
    assert "error" in out[2] and out[2]["hits"] == []
    assert "1 batch line(s) could not be run: line 3:" in r.stderr
    # a line of another encoding is that line's error (it was a traceback); a BOM is no error
    batch = state.parent / "batch.txt"
    batch.write_bytes(b"\xef\xbb\xbfship\n\xff\xfe not utf-8\n   \nship release\n")
    r = run_cli("query", "--batch", str(batch), "--state-dir", str(state), "--json")
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.returncode == 0 and "Traceback" not in r.stderr and len(out) == 3
    assert out[0]["hits"] and out[1] == {"error": "line 2: not UTF-8 text", "hits": []} and out[2]["hits"]
    for missing in (state.parent / "nowhere.txt", state.parent):
        r = run_cli("query", "--batch", str(missing), "--state-dir", str(state), "--json")
        assert r.returncode == 2 and r.stderr.startswith(f"vaultmem: error: cannot read batch file {missing}: ")


def test_human_output_and_explain(indexed):
    _, state = indexed
    r = run_cli("query", "pytest", "--state-dir", str(state), "--explain", "--mode", "text")
    assert r.returncode == 0
    assert "vault:CLAUDE.md:3-5" in r.stdout and "CLAUDE.md › Rules › Testing" in r.stdout
    assert "explain: " in r.stdout and "bm25=" in r.stdout
    assert r.stdout.startswith("1. ") and "\n2. " not in r.stdout and re.search(r"^1 hit in [\d.]+ ms$", r.stderr, re.M)
    r = run_cli("query", "pytest", "--state-dir", str(state), "--explain")  # hybrid: the second look's words, as words
    assert re.search(r"expanded_with=\w+( \w+)*(, |$)", r.stdout, re.M) and "[" not in r.stdout.split("expanded_with=")[1].splitlines()[0]
    r = run_cli("query", "ship", "--state-dir", str(state), "--mode", "text", "--history")
    assert "\n2. " in r.stdout and re.search(r"^\d+ hits in [\d.]+ ms$", r.stderr, re.M)


def test_a_misspelt_word_is_named_and_still_found(indexed):
    _, state = indexed
    r = run_cli("query", "pytset", "--state-dir", str(state), "--mode", "text")
    assert r.returncode == 0, r.stderr
    assert 'no note has "pytset"; looked up by similar spelling' in r.stderr
    assert "vault:CLAUDE.md" in r.stdout and "**pytest**" in r.stdout
    out = json.loads(run_cli("query", "pytset", "--state-dir", str(state), "--json").stdout)
    assert set(out) == {"hits", "took_ms"}  # the --json contract is unchanged
    assert run_cli("query", "pytest", "--state-dir", str(state)).stderr.count("no note has") == 0


def test_nothing_found_exits_1(indexed):
    _, state = indexed
    r = run_cli("query", "zebra", "--state-dir", str(state), "--mode", "text")
    assert r.returncode == 1 and r.stdout == ""


@pytest.mark.slow
def test_quiet_prints_results_and_errors_only(tmp_path):
    vault, state = tmp_path / "vault", tmp_path / "state"
    write(vault, "memory/ok.md", note("ok", "the okapi note\n"))
    write(vault, "memory/bad.md", "---\ntopic: [unclosed\n---\nthe broken okapi note\n")
    (vault / "memory/gone.md").symlink_to(tmp_path / "nowhere.md")
    loud = run_cli("index", "--vault", str(vault), "--state-dir", str(state))
    assert loud.returncode == 0 and "malformed frontmatter" in loud.stderr and "dangling" in loud.stderr
    assert "2 added" in loud.stdout
    write(vault, "memory/new.md", note("new", "the newer okapi note\n"))
    quiet = run_cli("index", "--vault", str(vault), "--state-dir", str(state), "-q")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert run_cli("status", "--state-dir", str(state), "--json").stdout.count('"notes": 3') == 1
    found = run_cli("query", "okapi", "--state-dir", str(state), "--quiet", "--mode", "text")
    assert found.returncode == 0 and found.stdout.count("okapi") == 3 and found.stderr == ""
    assert "answering in-process" in run_cli("query", "okapi", "--state-dir", str(state), "--mode", "text").stderr
    none = run_cli("query", "zebra", "--state-dir", str(state), "-q", "--mode", "text")
    assert (none.returncode, none.stdout, none.stderr) == (1, "", "")
    err = run_cli("query", "x", "--state-dir", str(tmp_path / "none"), "-q")
    assert err.returncode == 3 and err.stderr.startswith("vaultmem: error: no index"), "errors still speak"


@pytest.mark.parametrize("text", ["foo:bar", "(テスト", "AND"])
def test_syntax_like_queries_are_not_errors(indexed, text):
    _, state = indexed
    r = run_cli("query", text, "--state-dir", str(state), "--json", "--mode", "text")
    assert r.returncode in (0, 1) and "error" not in r.stderr
    assert "hits" in json.loads(r.stdout)


def test_errors_are_one_line_with_meaningful_codes(tmp_path):
    r = run_cli("query", "x", "--state-dir", str(tmp_path / "none"))
    assert r.returncode == 3
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("vaultmem: error: no index")
    r = run_cli("index", "--vault", str(tmp_path / "missing"), "--state-dir", str(tmp_path / "s"))
    assert r.returncode == 2 and "vault directory not found" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("query", "x", "--state-dir", str(tmp_path), "--half-life", "soon")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_bytes_that_are_no_utf8_in_arguments_or_stdin_are_one_line_errors(indexed, tmp_path):
    """They reached Python as lone surrogates and failed later, as a traceback, wherever the
    text was written (the catalog, a note)."""
    import subprocess
    import sys
    from conftest import ROOT
    vault, state = indexed
    for args in (("query", "ship \udcff"), ("remember", "--topic", "t\udcff", "text"), ("feedback", "\udcff", "--useful")):
        r = run_cli(*args, "--state-dir", str(state))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is not UTF-8 text" in r.stderr, (args, r.stderr)
    r = subprocess.run([sys.executable, "-m", "vaultmem.cli", "remember", "--topic", "t", "-", "--state-dir", str(state),
                        "--vault", str(vault), "--no-daemon"], input=b"caf\xe9\n", capture_output=True, cwd=ROOT)
    assert r.returncode == 2 and b"stdin is not UTF-8" in r.stderr and b"Traceback" not in r.stderr
    assert sorted(p.name for p in (vault / "memory").iterdir()) == ["deploy.md", "old.md"], "no note written"


def test_a_state_dir_that_cannot_be_opened_is_one_line(tmp_path):
    """A read-only state directory (or a broken one) failed with an SQLite traceback."""
    import subprocess
    state = tmp_path / "state"
    (state / "catalog.sqlite3").mkdir(parents=True)  # not a database file
    r = run_cli("query", "x", "--state-dir", str(state), "--no-daemon")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot open" in r.stderr, r.stderr
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(ro)], capture_output=True).returncode:
        return  # mounting needs root: the read-only case is left to where it can be made
    try:
        vault = tmp_path / "vault"
        write(vault, "memory/a.md", note("a", "alpha\n"))
        assert run_cli("index", "--vault", str(vault), "--state-dir", str(ro / "st")).returncode == 0
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        r = run_cli("query", "alpha", "--state-dir", str(ro / "st"), "--no-daemon")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is not writable" in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)


def test_status_lists_counts(indexed):
    _, state = indexed
    st = json.loads(run_cli("status", "--state-dir", str(state), "--json").stdout)
    assert st["notes"] == 3 and st["current"] == 2 and st["embedder"] == "use-multilingual-v3"


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_status_says_when_an_agents_own_memory_is_in_no_vault(indexed, tmp_path, agent):
    """Claude Code keeps the user's CLAUDE.md and each project's auto memory in its own
    directory, Codex (with its memories on) what it learned from past threads, and Gemini CLI
    what save_memory is told in its GEMINI.md: a user who indexed only a project never searches
    them, and is told how. (GEMINI_CLI_HOME names the home .gemini/ is in.)"""
    _, state = indexed
    home = tmp_path / "home"
    folder, variable, kept, elsewhere, hint, what = {
        "claude": (".claude", "CLAUDE_CONFIG_DIR", "projects/-src-app/memory/feedback.md", "agent-memory/reviewer/style.md",
                   "Claude Code's own memory in", "(CLAUDE.md, projects/*/memory/, agent-memory/)"),
        "codex": (".codex", "CODEX_HOME", "memories/rollout_summaries/2026-05-01T10-00-00-abcd-x.md", "memories/MEMORY.md",
                  "Codex's own memory in", "(memories/)"),
        "gemini": (".gemini", "GEMINI_CLI_HOME", "GEMINI.md", ".gemini/GEMINI.md",
                   "Gemini CLI's own memory in", "(GEMINI.md, where save_memory keeps facts)")}[agent]
    sub = ".gemini" if agent == "gemini" else ""
    write(home, f"{folder}/{kept}", note("tests", "run the tests first\n"))

    def status(*flags, **env) -> str:
        r = run_cli("status", "--state-dir", str(state), *flags, env={"HOME": str(home), **env})
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert (f"{hint} {home / folder} {what} is in no vault, so it is not searched: "
            f"add `--vault {home / folder}`") in status()
    assert hint not in status("-q"), "-q: results and errors only"
    assert hint not in status(**{variable: str(tmp_path / "elsewhere")}), "no memory there"
    write(tmp_path, f"elsewhere/{elsewhere}", "memory kept where the variable says\n")
    assert f"{hint} {tmp_path / 'elsewhere' / sub} " in status(**{variable: str(tmp_path / "elsewhere")})
    other = tmp_path / "state2"
    r = run_cli("index", "--vault", str(home / folder), "--state-dir", str(other), env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    r = run_cli("status", "--state-dir", str(other), env={"HOME": str(home)})
    assert r.returncode == 0 and hint not in r.stdout and "1 notes" in r.stdout, r.stdout


def test_a_command_parsed_alone_reads_as_with_every_command_built(capsys):
    """A process builds the parser of the command it runs alone (all thirteen cost ~8 ms of every
    start, and the hooks start on every prompt): each must read and explain its arguments as
    the full parser does, and a wrong name still gets the list of commands."""
    from vaultmem.cli import COMMANDS, main
    from vaultmem.parser import build_parser

    def commands(parser):
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    full = commands(build_parser())
    assert list(full) == list(COMMANDS)
    for name in COMMANDS:
        alone = commands(build_parser(name))
        assert list(alone) == [name] and alone[name].format_help() == full[name].format_help(), name
    with pytest.raises(SystemExit) as wrong:
        main(["quer", "deploy"])
    err = capsys.readouterr().err
    assert wrong.value.code == 2 and "invalid choice: 'quer'" in err and "'query', 'status'" in err, err


def test_help_is_as_wide_as_argparse_makes_it(monkeypatch):
    """parser.py tells argparse the terminal's width, so that no process imports shutil (and
    bz2, lzma) to ask for it: help must wrap exactly where argparse's own formatter wraps it."""
    from vaultmem.parser import build_parser

    for columns in ("44", "100", ""):
        monkeypatch.setenv("COLUMNS", columns)
        top = build_parser("status")
        status = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices["status"]
        ours = top.format_help(), status.format_help()
        top.formatter_class, status.formatter_class = argparse.RawDescriptionHelpFormatter, argparse.HelpFormatter
        assert (top.format_help(), status.format_help()) == ours, columns
        assert max(len(line) for line in ours[1].splitlines()) <= int(columns or 80) - 2


def test_help_teaches(tmp_path):
    r = run_cli("query", "--help")
    assert r.returncode == 0 and "--history" in r.stdout and "examples:" in r.stdout
    for command in ("index", "query", "reindex", "remember", "forget", "tags", "inventory", "hook", "daemon"):
        out = run_cli(command, "--help", env={"COLUMNS": "80"}).stdout
        wide = [line for line in out.splitlines() if len(line) > 80 and not line[0].isspace()]
        assert not wide, (command, wide)  # descriptions wrapped; indented examples kept as written


@pytest.mark.slow
def test_the_readmes_quick_start_runs_as_printed(tmp_path):
    """Every line of the README's "use it on your own notes" block, as printed, in a fresh home
    with Claude Code's memory and one project (no daemon): each exits 0. The `remember` line
    failed ("several vaults are indexed; name one") right after the two-vault `index` line; it
    now goes to the user-wide vault (~/.claude) and keeps the tags of the note it supersedes, so
    `query --tag ops` still finds the deploy procedure."""
    import re
    import shlex
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"Then use it on your own notes:\n\n```sh\n(.*?)```", readme, re.S).group(1)
    lines = [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip()]
    assert [ln.split()[1] for ln in lines] == ["index", "query", "query", "query", "remember"]
    home = tmp_path / "home"
    write(home, ".claude/CLAUDE.md", "# Me\n\nAnswer tersely.\n")
    write(home, ".claude/memory/deploy.md", note("deploy procedure", "# デプロイ手順\n\nDeploy with make release.\n",
                                                  tags="[ops]", kind="procedure", date="2026-01-05"))
    write(home, "src/myproject/CLAUDE.md", "# myproject\n\nRun the tests with make test.\n")
    env = {"HOME": str(home), "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}
    for line in lines:
        argv = shlex.split(line.replace("~", str(home)))
        assert argv[0] == ".venv/bin/vaultmem"
        r = run_cli(*argv[1:], env=env)
        assert r.returncode == 0, (line, r.stderr)
    wrote = sorted((home / ".claude/memory").glob("deploy-procedure-*.md"))
    assert len(wrote) == 1 and "tags: [ops]" in wrote[0].read_text() and "kind: procedure" in wrote[0].read_text()
    r = run_cli("query", "deploy", "--tag", "ops", "--json", env=env)
    hits = json.loads(r.stdout)["hits"]
    assert [h["path"] for h in hits] == [f"memory/{wrote[0].name}"] and hits[0]["current"]


def test_a_mistyped_option_gets_the_commands_usage_and_the_option_meant():
    r = run_cli("query", "deploy", "--hisotry")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: vaultmem query") and r.stderr.strip().endswith(
        "vaultmem query: error: unrecognized arguments: --hisotry (did you mean --history?)"), r.stderr
    r = run_cli("--json", "status")  # an option of the command, given before it
    assert r.returncode == 2 and r.stderr.strip().endswith(
        "vaultmem status: error: unrecognized arguments: --json (an option of the command: "
        "`vaultmem status --json`)"), r.stderr


def test_an_empty_query_is_no_query_whether_given_as_nothing_or_as_empty_text(tmp_path):
    """`query` refused with a usage error while `query ""` listed the newest notes: both are a
    usage error now; a filter alone lists notes, newest first."""
    vault = tmp_path / "vault"
    write(vault, "memory/a.md", note("a", "alpha\n", tags="ops"))
    state = tmp_path / "state"
    assert run_cli("index", "--vault", str(vault), "--state-dir", str(state)).returncode == 0
    for args in ((), ("",), ("  ",)):
        r = run_cli("query", *args, "--state-dir", str(state), "--no-daemon")
        assert r.returncode == 2 and "nothing to search for" in r.stderr, (args, r)
    r = run_cli("query", "", "--tag", "ops", "--state-dir", str(state), "--no-daemon")
    assert r.returncode == 0 and "memory/a.md" in r.stdout


@pytest.mark.slow
def test_a_hit_of_a_vault_moved_away_says_so(tmp_path):
    """A vault's directory moved aside: its notes stay findable as last indexed; each hit said
    "file changed since indexed" instead of that the vault is not there."""
    vault = tmp_path / "vault"
    write(vault, "memory/a.md", note("a", "the ibex climbs\n"))
    state = tmp_path / "state"
    assert run_cli("index", "--vault", f"v={vault}", "--state-dir", str(state)).returncode == 0
    vault.rename(tmp_path / "elsewhere")
    r = run_cli("query", "ibex", "--state-dir", str(state), "--no-daemon")
    assert r.returncode == 0 and "(vault v not found: as last indexed)" in r.stdout and "changed" not in r.stdout
    hit = json.loads(run_cli("query", "ibex", "--json", "--state-dir", str(state), "--no-daemon").stdout)["hits"][0]
    assert hit["vault_missing"] is True and hit["changed"] is False


def test_a_client_command_logs_as_asked_though_it_sets_logging_up_only_when_it_logs(indexed, tmp_path):
    """A client answered by the daemon never imports logging (logs.py); what a client process
    does log still comes as `vaultmem: LEVEL: ...`, at the level --quiet and --debug ask for:
    a config file's retired setting, and what opening the index in this process says."""
    vault, state = indexed
    cfg = tmp_path / "old.toml"
    cfg.write_text("[agent]\nprompt_min_cosine = 0.3\n")
    r = run_cli("query", "deploy", "--state-dir", str(state), "--config", str(cfg), "--no-daemon")
    assert r.returncode == 0
    assert f"vaultmem: WARNING: {cfg} [agent]: 'prompt_min_cosine' is no longer read" in r.stderr, r.stderr
    r = run_cli("query", "deploy", "--state-dir", str(state), "--config", str(cfg), "--no-daemon", "-q")
    assert r.returncode == 0 and r.stderr == ""
    r = run_cli("query", "deploy", "--state-dir", str(state), "--no-daemon", "--debug")
    assert r.returncode == 0 and "vaultmem: DEBUG: integrity check of" in r.stderr, r.stderr
    r = run_cli("query", "deploy", "--state-dir", str(state), "--no-daemon")
    assert r.returncode == 0 and "DEBUG" not in r.stderr
