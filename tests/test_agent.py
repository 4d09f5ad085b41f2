"""Agents: the MCP server driven over stdio by the SDK's own client, against a real daemon and
without one; the session-start and prompt hooks' budgets and relevance on vault-example, and
their installation; recall budgets."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vaultmem.recall import estimate_tokens

from conftest import ENGINES, CLIENT_UNNEEDED, ROOT, atomic_save, imported_by, note, run_cli, write

EXAMPLE = ROOT / "vault-example"


def mcp_session(args: list[str], env: dict, steps, cwd: Path = ROOT):
    """Start `vaultmem mcp` as a subprocess (in `cwd`, as an agent starts it in its project) and
    run `steps(client)` in one MCP session."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "vaultmem.cli", "mcp", *args],
                                   env={"XDG_CONFIG_HOME": "/nonexistent-vaultmem-test", "PYTHONPATH": str(ROOT), **env},
                                   cwd=str(cwd))

    async def main():
        async with Client(params) as client:
            return await steps(client)
    return asyncio.run(main())


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


@pytest.mark.slow
def test_mcp_remember_then_recall_through_a_real_daemon(daemon):
    atomic_save(daemon.vault / "memory/old.md", note("release train", "releases leave on Mondays\n",
                                                     date="2024-01-01", tags="ops"))
    daemon.start()

    async def steps(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"recall", "tags", "remember", "forget", "feedback", "inventory", "status"}
        assert {"query", "k", "tags", "kind", "history"} <= set(tools["recall"].input_schema["properties"])
        assert {"topic", "text", "tags", "kind", "importance"} <= set(tools["remember"].input_schema["properties"])
        assert "before" in tools["recall"].description  # written for a model: when to call it
        saved = structured(await client.call_tool("remember", {
            "topic": "release train", "text": "Releases now leave on Thursdays, after the platypus review.",
            "tags": ["ops"], "kind": "decision"}))
        got = structured(await client.call_tool("recall", {"query": "platypus review", "k": 3}))
        hist = structured(await client.call_tool("recall", {"query": "releases leave", "k": 5, "history": True}))
        st = structured(await client.call_tool("status", {}))
        st["tags"] = structured(await client.call_tool("tags", {"kind": "decision"}))
        fb = structured(await client.call_tool("feedback", {"path": got["hits"][0]["file"], "useful": True}))
        gone = structured(await client.call_tool("forget", {"path": got["hits"][0]["file"]}))
        after = structured(await client.call_tool("recall", {"query": "platypus review", "k": 3}))
        inv = structured(await client.call_tool("inventory", {}))
        bad = await client.call_tool("recall", {"query": "x", "k": "many"})
        return saved, got, hist, st, fb, gone, after, inv, bad

    saved, got, hist, st, fb, gone, after, inv, bad = mcp_session(
        ["--socket", str(daemon.sock), "--state-dir", str(daemon.state)], {}, steps)
    assert saved["superseded"] == ["memory/old.md"] and saved["path"].startswith("memory/release-train-")
    top = got["hits"][0]
    assert top["file"] == str(daemon.vault / saved["path"]) and top["current"] is True
    assert top["lines"] == "7-7" and "platypus" in top["section"] and "snippet" not in top and top["kind"] == "decision"
    assert "answered_by" not in got, "the daemon answered"
    old = [h for h in hist["hits"] if h["file"].endswith("memory/old.md")]
    assert old and old[0]["current"] is False and old[0]["superseded_by"] == saved["path"]
    assert st["daemon"] is True and st["notes"] == 2
    assert st["tags"] == {"tags": [{"tag": "ops", "notes": 1}], "notes": 1}  # the daemon's answer, bounded
    assert fb["feedback"] > 0.5
    assert gone == {"retired": [f"v:{saved['path']}"], "count": 1}
    assert all(h["file"] != top["file"] for h in after["hits"])
    assert "counts" in inv and inv["counts"]["secrets"] == 0
    assert bad.is_error


@pytest.mark.slow
def test_mcp_without_a_daemon_answers_in_process_and_says_so(tmp_path):
    vault = tmp_path / "vault"
    (vault / "memory").mkdir(parents=True)
    (vault / "memory/a.md").write_text(note("capybara", "the capybara note\n", tags="x"))
    for i in range(25):
        (vault / f"memory/bulk{i}.md").write_text(note("bulk", f"bulk note {i}\n"))
    for i in range(60):
        (vault / f"memory/more{i}.md").write_text(note(f"more {i}", f"more note {i}\n", tags=f"[y, m{i:02d}]"))
    assert run_cli("index", "--vault", f"v={vault}", "--state-dir", str(tmp_path / "st")).returncode == 0

    async def steps(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        hit = structured(await client.call_tool("recall", {"query": "capybara"}))
        every = structured(await client.call_tool("tags", {}))
        with_m = structured(await client.call_tool("tags", {"tags": ["m07"]}))
        err = await client.call_tool("forget", {"path": "memory/nope.md"})
        bulk = structured(await client.call_tool("forget", {"topic": "bulk"}))
        return tools, hit, err, bulk, every, with_m

    tools, hit, err, bulk, every, with_m = mcp_session(["--state-dir", str(tmp_path / "st")],
                                                       {"VAULTMEM_SOCKET": str(tmp_path / "none.sock")}, steps)
    # the tags in use, most used first, bounded; with a tag, the ones that go with it
    assert every["tags"][0] == {"tag": "y", "notes": 60} and every["notes"] == 62  # a bulk note is current
    assert len(every["tags"]) == 50 and every["note"] == "12 less used tags not listed"
    assert with_m == {"tags": [{"tag": "m07", "notes": 1}, {"tag": "y", "notes": 1}], "notes": 1,
                      "answered_by": with_m["answered_by"]}
    assert hit["hits"][0]["file"] == str(vault / "memory/a.md")
    assert "no vaultmem daemon" in hit["answered_by"]
    assert err.is_error and "no such note" in err.content[0].text
    assert bulk["count"] == 25 and len(bulk["retired"]) == 20 and "5 more" in bulk["note"], "answers stay bounded"
    # what a client needs to decide what to ask the user first, and descriptions without indentation
    hints = {name: t.annotations for name, t in tools.items()}
    assert {n for n, a in hints.items() if a.read_only_hint} == {"recall", "tags", "inventory", "status"}
    assert {n for n, a in hints.items() if a.destructive_hint} == {"forget"}
    assert all(a.open_world_hint is False and t.title for a, t in zip(hints.values(), tools.values()))
    for t in tools.values():
        assert not any(line.startswith(" ") for line in t.description.splitlines()), t.name


@pytest.mark.slow
def test_mcp_remember_names_its_vault_when_several_could_take_the_note(tmp_path):
    """The agent's working directory (this repository) is in neither vault: remember cannot
    guess, says which vaults there are, and writes where the agent names."""
    vaults = {name: tmp_path / name for name in ("home", "work")}
    for name, root in vaults.items():
        (root / "memory").mkdir(parents=True)
        (root / "memory/a.md").write_text(note(f"{name} note", f"the {name} note\n"))
    cfg = tmp_path / "vaultmem.toml"
    cfg.write_text("[vaults]\n" + "".join(f'{n} = "{r}"\n' for n, r in vaults.items()))
    args = ["--config", str(cfg), "--state-dir", str(tmp_path / "st")]
    assert run_cli("index", *args).returncode == 0

    async def steps(client):
        guess = await client.call_tool("remember", {"topic": "pager", "text": "The pager rota is on the wiki."})
        named = structured(await client.call_tool("remember", {"topic": "pager", "text": "The pager rota is on the wiki.",
                                                               "vault": "work"}))
        elsewhere = await client.call_tool("forget", {"topic": "home note", "vault": "work"})
        gone = structured(await client.call_tool("forget", {"topic": "pager", "vault": "work"}))
        st = structured(await client.call_tool("status", {}))
        return guess, named, elsewhere, gone, st

    (tmp_path / "user/.claude").mkdir(parents=True)
    (tmp_path / "user/.claude/CLAUDE.md").write_text("# Mine\n\nanswer tersely\n")
    write(tmp_path, "user/.codex/memories/MEMORY.md", "# Task Group: ledgerline\n")
    guess, named, elsewhere, gone, st = mcp_session(
        args, {"VAULTMEM_SOCKET": str(tmp_path / "none.sock"), "HOME": str(tmp_path / "user")}, steps)
    assert f"memory in {tmp_path / 'user/.claude'}" in st["note"] and "in no vault" in st["note"], st
    assert f"Codex's own memory in {tmp_path / 'user/.codex'}" in st["note"], st
    assert elsewhere.is_error and "no note has the topic" in elsewhere.content[0].text, "home's note is not work's"
    assert gone["retired"] == [f"work:{named['path']}"] and gone["count"] == 1
    assert guess.is_error and "home, work" in guess.content[0].text
    assert named["path"].startswith("memory/pager-") and (vaults["work"] / named["path"]).is_file()
    assert sorted(p.name for p in (vaults["home"] / "memory").iterdir()) == ["a.md"], "nothing written elsewhere"


@pytest.mark.slow
def test_mcp_answers_every_request_read_before_its_input_ended(tmp_path):
    """`printf '...' | vaultmem mcp`: the input ends long before an in-process recall is done
    (the model loads first). The SDK alone cancelled it and answered only `initialize`."""
    vault = tmp_path / "vault"
    (vault / "memory").mkdir(parents=True)
    (vault / "memory/a.md").write_text(note("capybara", "the capybara note\n", tags="x"))
    assert run_cli("index", "--vault", f"v={vault}", "--state-dir", str(tmp_path / "st")).returncode == 0
    sent = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "printf", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "capybara"}}},
        {"jsonrpc": "2.0", "id": "three", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"},
    ]
    r = run_cli("mcp", "--state-dir", str(tmp_path / "st"), input="".join(json.dumps(m) + "\n" for m in sent))
    assert r.returncode == 0, r.stderr
    got = {m["id"]: m for m in map(json.loads, r.stdout.splitlines())}
    assert set(got) == {1, 2, "three", 4}, r.stdout[:500]
    assert got[2]["result"]["structuredContent"]["hits"][0]["file"] == str(vault / "memory/a.md")
    assert "recall" in {t["name"] for t in got["three"]["result"]["tools"]}
    assert "error" in got[4]
    # started with no stdin at all (not from a client): one line, a usage error, no traceback
    closed = subprocess.run([sys.executable, "-m", "vaultmem.cli", "mcp", "--state-dir", str(tmp_path / "st")],
                            capture_output=True, text=True, cwd=ROOT, timeout=60, preexec_fn=lambda: os.close(0))
    assert closed.returncode == 2 and closed.stderr.count("\n") == 1 and "stdin is closed" in closed.stderr, closed.stderr


# ------------------------------------------------------------------ the session-start hook


@pytest.fixture(scope="module")
def example_state(tmp_path_factory):
    state = tmp_path_factory.mktemp("example-state")
    r = run_cli("index", "--vault", f"example={EXAMPLE}", "--state-dir", str(state))
    assert r.returncode == 0, r.stderr
    return state


def hook(state: Path, *args, input: str | None = None):
    return run_cli("hook", "session-start", "--state-dir", str(state), *args, input=input)


def test_session_start_digest_is_relevant_current_and_within_budget(example_state):
    r = hook(example_state, input=json.dumps({"hook_event_name": "SessionStart", "cwd": str(EXAMPLE),
                                              "source": "startup"}))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(("# Memories for vault-example", f"# Memories for {ROOT.name}"))  # the git work tree
    assert estimate_tokens(out) <= 1500
    assert "deploy-2026-05.md" in out, "the current deploy procedure is there"
    assert "deploy-2025-03.md" not in out and "deploy-2025-09.md" not in out, "superseded versions are not"
    assert "legacy-api.md" not in out, "a note retired by supersedes is not"
    assert "CLAUDE.md" not in out and "MEMORY.md" not in out, "Claude Code loads those itself"
    assert "code-review.md" not in out, "and the files they import"
    for expected in ("api-versioning.md", "money-as-cents.md", "テスト方針.md", "배포-체크리스트.md"):
        assert expected in out
    assert f"{EXAMPLE}/memory/deploy-2026-05.md:" in out, "entries say where to open the file"


def test_claude_project_dir_is_named_as_claude_code_names_it():
    """Every character but an ASCII letter or digit is a dash (Claude Code's
    `replace(/[^a-zA-Z0-9]/g, "-")`, over UTF-16 units), a name over 200 characters is cut there
    and gets a hash suffix."""
    from vaultmem.agents import claude_project_dir
    assert claude_project_dir(Path("/Users/me/git/my_repo")) == "projects/-Users-me-git-my-repo"
    assert claude_project_dir(Path("/Users/me/.agents")) == "projects/-Users-me--agents"
    assert claude_project_dir(Path("/home/u/Проект v2")) == "projects/-home-u--------v2"
    assert claude_project_dir(Path("/home/u/𠮷")) == "projects/-home-u---"  # one character, two UTF-16 units
    deep = Path("/home/u/" + "/".join(["segment"] * 30))
    assert claude_project_dir(deep) == "projects/" + str(deep).replace("/", "-")[:200] + "-*"


@pytest.mark.parametrize("vault_at", [".claude", ""], ids=["vault-claude-dir", "vault-home"])
def test_session_start_shows_claude_codes_memory_for_the_project(tmp_path, vault_at):
    """Claude Code keeps each project's auto memory in ~/.claude/projects/<project path>/memory:
    it is the project's own, found whether the vault is ~/.claude or a folder above it; another
    project's is not. (The project's name has what Claude Code writes as dashes.)"""
    home, app = tmp_path / "home", tmp_path / "src" / "my_app アプリ"
    app.mkdir(parents=True)
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(app.resolve()))
    write(home, f".claude/projects/{slug}/memory/quokka.md", note("build", "the quokka build runs with make quokka\n"))
    write(home, ".claude/projects/-elsewhere/memory/other.md", note("other", "the wombat deploy is manual\n"))
    state = tmp_path / "state"
    assert run_cli("index", "--vault", str(home / vault_at), "--state-dir", str(state)).returncode == 0
    r = hook(state, "--cwd", str(app))
    assert r.returncode == 0 and "quokka.md" in r.stdout, r.stdout + r.stderr
    assert "other.md" not in r.stdout


@pytest.mark.slow
def test_notes_shown_at_session_start_count_as_retrieved(tmp_path):
    state = tmp_path / "state"
    assert run_cli("index", "--vault", f"example={EXAMPLE}", "--state-dir", str(state)).returncode == 0
    out = hook(state, "--cwd", str(EXAMPLE), "--budget", "300").stdout
    st = json.loads(run_cli("stats", "--json", "--state-dir", str(state)).stdout)
    retrieved = {n["note"].split(":", 1)[1] for n in st["notes"] if n["retrieved"]}
    shown = {p for p in (n["note"].split(":", 1)[1] for n in st["notes"]) if f"/{p}:" in out}
    assert shown and retrieved == shown, "exactly the notes in the digest were counted"
    assert "CLAUDE.md" not in retrieved


class _AnsweredOnce:
    """A backend that asks the index each distinct query once and gives its answer again: for
    tests of what is done with the answers, over an index that does not change meanwhile."""

    def __init__(self, backend):
        self.backend, self.answers = backend, {}

    def request(self, obj: dict) -> dict:
        if obj.get("op") not in ("query", "status"):
            return self.backend.request(obj)
        key = json.dumps(obj, sort_keys=True)
        if key not in self.answers:
            self.answers[key] = json.dumps(self.backend.request(obj))
        return json.loads(self.answers[key])


@pytest.mark.slow
def test_session_start_digest_fits_every_budget(tmp_path, monkeypatch):
    """Whatever the budget and however long the project's name and path (the heading names the
    project, the entries name files by their full path), the digest is never over it: budget
    120 gave 121 tokens from a clone at /work/ci-clone, when the blank line under the heading
    went uncounted. Four name lengths, one of each length mod 4, and every budget. What the
    project is (git) and what the index answers are asked once per project: 1,280 digests
    asking each again took 30 s of the suite."""
    import functools
    import shutil
    from vaultmem import recall
    from vaultmem.recall import session_start
    from vaultmem.backend import Backend
    from vaultmem.config import resolve
    from vaultmem.index import VaultIndex
    monkeypatch.setattr(recall, "project_of", functools.cache(recall.project_of))
    monkeypatch.setattr(recall, "project_words", functools.cache(recall.project_words))
    for n in range(4):
        root = tmp_path / ("project" + "x" * n)
        shutil.copytree(EXAMPLE, root)
        settings = resolve({"state_dir": str(tmp_path / f"state{n}"), "vaults": [f"example={root}"]}, env={})
        with VaultIndex(settings, writable=True) as idx:  # in this process: its model is loaded once
            idx.sync(list(settings.vaults))
        backend = Backend(settings, no_daemon=True, quiet=True)
        once = _AnsweredOnce(backend)
        try:
            sizes = {}
            for budget in range(80, 400):
                out = session_start(once, settings, str(root), budget)
                assert not out or out.startswith(f"# Memories for {root.name} (vaultmem)")
                assert estimate_tokens(out) <= budget, (root.name, budget, estimate_tokens(out))
                sizes[budget] = estimate_tokens(out)
        finally:
            backend.close()
        assert 0 < sizes[150] and sizes[399] > 300  # the budget is used, not just respected


def test_recall_answers_fit_their_budget_as_sent(example_state):
    """The MCP `recall` answer, as the JSON the agent receives (list separators and the `note`
    included), stays within the budget; only a single first hit may be over (it is always kept,
    clipped). The hits' own sizes alone once let 45 of 272 budgets go over by up to 17 tokens."""
    from vaultmem.recall import recall
    from vaultmem.backend import Backend
    from vaultmem.config import resolve
    settings = resolve({"state_dir": str(example_state), "vaults": [f"example={EXAMPLE}"]}, env={})
    backend = Backend(settings, no_daemon=True, quiet=True)
    try:
        counts = {}
        for budget in range(100, 2000, 7):
            answer = recall(backend, settings, "deploy rollback tests", k=20, budget=budget)
            counts[budget] = len(answer["hits"])
            if counts[budget] > 1:
                assert estimate_tokens(json.dumps(answer, ensure_ascii=False)) <= budget, budget
    finally:
        backend.close()
    assert counts[100] >= 1 and counts[1997] > counts[401] > 1  # the budget is used, not just respected


@pytest.mark.slow
def test_session_start_budget_is_a_hard_bound(example_state):
    for budget in (120, 300, 600):
        r = hook(example_state, "--cwd", str(EXAMPLE), "--budget", str(budget))
        assert r.returncode == 0
        assert r.stdout and estimate_tokens(r.stdout) <= budget, (budget, estimate_tokens(r.stdout))
    small = hook(example_state, "--cwd", str(EXAMPLE), "--budget", "300").stdout
    full = hook(example_state, "--cwd", str(EXAMPLE)).stdout
    assert small.count("\n- **") < full.count("\n- **")


def test_session_start_never_fails_a_session(tmp_path):
    r = hook(tmp_path / "no-index", "--cwd", str(tmp_path), input="not json")
    assert r.returncode == 0 and r.stdout == ""
    assert "no memories" in r.stderr


def test_hook_install_keeps_the_settings_file_and_is_idempotent(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]},
                                    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}))
    r = run_cli("hook", "install", "--settings", str(settings))
    assert r.returncode == 0 and r.stdout.count("added") == 2, r.stdout
    data = json.loads(settings.read_text())
    assert data["permissions"] == {"allow": ["Bash(ls)"]} and data["hooks"]["Stop"]
    [entry] = data["hooks"]["SessionStart"]
    assert entry["hooks"][0]["command"].endswith("hook session-start") and entry["matcher"]
    [entry] = data["hooks"]["UserPromptSubmit"]
    assert entry["hooks"][0]["command"].endswith("hook user-prompt-submit") and "matcher" not in entry
    again = run_cli("hook", "install", "--settings", str(settings))
    assert again.stdout.count("already") == 2 and json.loads(settings.read_text()) == data
    settings.write_text("{broken")
    bad = run_cli("hook", "install", "--settings", str(settings))
    assert bad.returncode == 2 and settings.read_text() == "{broken"


def test_hook_install_adds_the_prompt_hook_beside_an_installed_session_start_hook(tmp_path):
    """A user who installed the session-start hook before the prompt hook existed runs install
    again: the prompt hook is added, the session-start entry stays as it was (one, not two);
    --only installs one hook alone."""
    settings = tmp_path / "settings.json"
    assert run_cli("hook", "install", "--only", "session-start", "--settings", str(settings)).returncode == 0
    first = json.loads(settings.read_text())
    assert list(first["hooks"]) == ["SessionStart"]
    r = run_cli("hook", "install", "--settings", str(settings))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"the session-start hook is already in {settings}",
                                     f"added the user-prompt-submit hook to {settings}"]
    data = json.loads(settings.read_text())
    assert data["hooks"]["SessionStart"] == first["hooks"]["SessionStart"] and len(data["hooks"]["UserPromptSubmit"]) == 1
    printed = json.loads(run_cli("hook", "print", "--only", "user-prompt-submit").stdout)
    assert list(printed["hooks"]) == ["UserPromptSubmit"]
    assert printed["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].endswith(" hook user-prompt-submit")


def test_installed_hooks_run_as_claude_code_runs_them_from_a_path_with_a_space(example_state, tmp_path):
    """Claude Code runs a hook's command through the shell, with the event's JSON on stdin: the
    command install writes must survive that from wherever vaultmem is installed."""
    tools = tmp_path / "my tools"
    tools.mkdir()
    script = tools / "vaultmem"
    shutil.copy2(Path(sys.executable).parent / "vaultmem", script)  # a console script: its shebang names the venv
    settings = tmp_path / "settings.json"
    env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent-vaultmem-test", "VAULTMEM_STATE_DIR": str(example_state),
           "VAULTMEM_SOCKET": "/nonexistent-vaultmem-test/vaultmem.sock"}
    r = subprocess.run([str(script), "hook", "install", "--settings", str(settings)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    hooks = json.loads(settings.read_text())["hooks"]
    events = {"SessionStart": {"session_id": "q", "cwd": str(EXAMPLE), "source": "startup"},
              "UserPromptSubmit": {"session_id": "q2", "cwd": str(EXAMPLE),
                                   "prompt": "Can I store the invoice total as a float?"}}
    for event, payload in events.items():
        [entry] = hooks[event]
        command = entry["hooks"][0]["command"]
        assert str(tools) in command
        got = subprocess.run(["/bin/sh", "-c", command], input=json.dumps({"hook_event_name": event, **payload}),
                             capture_output=True, text=True, env=env, timeout=120)
        assert got.returncode == 0 and "money-as-cents.md" in got.stdout, (event, command, got.stdout, got.stderr)


@pytest.mark.parametrize("end", ["\n", ""], ids=["newline", "no-newline"])
def test_hook_uninstall_gives_back_the_settings_file_as_it_was(tmp_path, end):
    """Claude Code writes its settings as JSON.stringify(data, null, 2): install, then
    uninstall, and every byte is as before."""
    settings = tmp_path / "settings.json"
    original = json.dumps({"model": "opus", "env": {"FOO": "ü"}, "permissions": {"allow": ["Read"]}},
                          indent=2, ensure_ascii=False) + end
    settings.write_text(original, encoding="utf-8")
    assert run_cli("hook", "install", "--settings", str(settings)).returncode == 0
    assert settings.read_text(encoding="utf-8") != original
    r = run_cli("hook", "uninstall", "--settings", str(settings))
    assert r.returncode == 0 and r.stdout.count("removed") == 2, r.stdout + r.stderr
    assert settings.read_text(encoding="utf-8") == original


def test_hook_uninstall_takes_out_vaultmems_commands_and_nothing_else(tmp_path):
    settings = tmp_path / "settings.json"
    mine = "/opt/bin/vaultmem hook session-start"
    data = {"hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"},
                                                          {"type": "command", "command": mine}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/opt/bin/vaultmem hook user-prompt-submit"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}
    settings.write_text(json.dumps(data, indent=4))
    r = run_cli("hook", "uninstall", "--only", "session-start", "--settings", str(settings))
    assert r.stdout.strip() == f"removed the session-start hook from {settings}", r.stdout + r.stderr
    after = json.loads(settings.read_text())
    assert after["hooks"]["SessionStart"] == [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}]
    assert after["hooks"]["UserPromptSubmit"] == data["hooks"]["UserPromptSubmit"] and after["hooks"]["Stop"]
    assert settings.read_text().startswith('{\n    "hooks": {'), "the file's indentation stays"
    r = run_cli("hook", "uninstall", "--settings", str(settings))
    assert r.stdout.splitlines() == [f"the session-start hook is not in {settings}",
                                     f"removed the user-prompt-submit hook from {settings}"]
    assert json.loads(settings.read_text()) == {"hooks": {"SessionStart": after["hooks"]["SessionStart"],
                                                          "Stop": data["hooks"]["Stop"]}}
    before = settings.read_bytes()
    r = run_cli("hook", "uninstall", "--settings", str(settings))
    assert r.returncode == 0 and r.stdout.count("is not in") == 2 and settings.read_bytes() == before
    settings.write_text('{"hooks": {"UserPromptSubmit": "x"}}')
    bad = run_cli("hook", "uninstall", "--settings", str(settings))
    assert bad.returncode == 2 and settings.read_text() == '{"hooks": {"UserPromptSubmit": "x"}}'


def test_status_says_when_only_some_of_the_hooks_are_installed(example_state, tmp_path):
    home = tmp_path / "home"
    env = {"HOME": str(home)}
    status = lambda: run_cli("status", "--state-dir", str(example_state), env=env)  # noqa: E731
    assert "hook" not in status().stdout, "no settings file: nothing to say"
    assert run_cli("hook", "install", "--only", "session-start", env=env).returncode == 0
    r = status()
    assert r.returncode == 0 and "runs vaultmem's session-start hook but not its user-prompt-submit hook" in r.stdout, r.stdout
    assert run_cli("hook", "install", env=env).returncode == 0
    assert "hook" not in status().stdout


@pytest.mark.slow
def test_codex_runs_the_installed_hooks_and_is_shown_what_it_does_not_load_itself(example_state, tmp_path):
    """Codex reads hooks of Claude Code's shape from hooks.json in $CODEX_HOME and runs each
    command through `$SHELL -lc` with its event's JSON on stdin. It loads AGENTS.md itself but
    no CLAUDE.md, rule or imported file: to a Codex session those are notes to show."""
    home, codex = tmp_path / "home", tmp_path / "codex home"
    home.mkdir()
    env = {"HOME": str(home), "CODEX_HOME": str(codex), "VAULTMEM_STATE_DIR": str(example_state)}
    r = run_cli("hook", "install", "--agent", "codex", env=env)
    hooks_json = codex / "hooks.json"
    assert r.returncode == 0 and r.stdout.splitlines()[:2] == [
        f"added the {a} hook to {hooks_json}" for a in ("session-start", "user-prompt-submit")], r.stdout + r.stderr
    assert "open /hooks and trust" in r.stdout, "Codex runs a new hook only once trusted: install says where"
    assert not (home / ".claude").exists() and not (home / ".codex").exists()
    again = run_cli("hook", "install", "--agent", "codex", env=env)
    assert again.stdout.count("already") == 2 and "trust" not in again.stdout

    hooks = json.loads(hooks_json.read_text())["hooks"]
    codex_event = {"session_id": "019d036d-c7fa-72d2-b6fd-78878bfe34e4", "cwd": str(EXAMPLE), "transcript_path": None,
                   "model": "gpt-5.5", "permission_mode": "default"}
    events = {"SessionStart": {"source": "startup"},
              "UserPromptSubmit": {"session_id": "another session, whose digest did not show it", "turn_id": "t1",
                                   "prompt": "How many approving reviews does a change of 300 lines need?"}}
    shell_env = {**os.environ, **env, "XDG_CONFIG_HOME": "/nonexistent-vaultmem-test",
                 "VAULTMEM_SOCKET": "/nonexistent-vaultmem-test/vaultmem.sock"}
    out = {}
    for event, payload in events.items():
        [entry] = hooks[event]
        command = entry["hooks"][0]["command"]
        assert command.endswith("--agent codex"), command
        got = subprocess.run(["/bin/sh", "-lc", command], input=json.dumps({"hook_event_name": event, **codex_event, **payload}),
                             capture_output=True, text=True, env=shell_env, cwd=EXAMPLE, timeout=120)
        assert got.returncode == 0 and got.stdout, (event, got.stderr)
        out[event] = got.stdout
    digest = out["SessionStart"]
    assert "deploy-2026-05.md" in digest and "deploy-2025-09.md" not in digest
    assert "CLAUDE.md:" in digest and "code-review.md:" in digest, "Codex loads neither: the digest shows them"
    assert "AGENTS.md" not in digest, "Codex loads AGENTS.md itself"
    assert "MEMORY.md" not in digest, "an index of notes that are shown on their own"
    assert "docs/code-review.md:" in out["UserPromptSubmit"], out["UserPromptSubmit"]
    claude = prompt_hook(example_state, events["UserPromptSubmit"]["prompt"])
    assert claude.returncode == 0 and "code-review.md" not in claude.stdout, "Claude Code has it: CLAUDE.md imports it"

    r = run_cli("hook", "uninstall", "--agent", "codex", env=env)
    assert r.stdout.count("removed") == 2 and json.loads(hooks_json.read_text()) == {}, r.stdout + r.stderr


@pytest.mark.slow
def test_gemini_cli_runs_the_installed_hooks_and_reads_what_they_add_as_json(example_state, tmp_path):
    """Gemini CLI reads hooks from ~/.gemini/settings.json (SessionStart, and BeforeAgent for
    each prompt), each with a name and a timeout in milliseconds, and reads a hook's stdout as
    JSON: what vaultmem adds is hookSpecificOutput.additionalContext, and nothing is `{}` (an
    empty stdout would make it read stderr instead). It loads its context files itself
    (`context.fileName`: AGENTS.md and GEMINI.md here) but no CLAUDE.md or its imports. The
    settings file's other keys stay (installed: every byte of them), and uninstall takes out only
    what install added."""
    home = tmp_path / "home"
    before = '{\n  "theme": "Default",\n  "context": {"fileName": ["AGENTS.md", "GEMINI.md"]}\n}\n'
    write(home, ".gemini/settings.json", before)
    env = {"HOME": str(home), "VAULTMEM_STATE_DIR": str(example_state)}
    r = run_cli("hook", "install", "--agent", "gemini", env=env)
    settings = home / ".gemini/settings.json"
    assert r.returncode == 0 and r.stdout.splitlines() == [
        f"added the {a} hook to {settings}" for a in ("session-start", "user-prompt-submit")], r.stdout + r.stderr
    assert settings.read_text().startswith(before.rstrip()[:-1].rstrip())
    data = json.loads(settings.read_text())
    assert data["theme"] == "Default" and set(data["hooks"]) == {"SessionStart", "BeforeAgent"}
    assert data["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"] == 10000
    assert run_cli("hook", "install", "--agent", "gemini", env=env).stdout.count("already") == 2

    shell_env = {**os.environ, **env, "XDG_CONFIG_HOME": "/nonexistent-vaultmem-test",
                 "VAULTMEM_SOCKET": "/nonexistent-vaultmem-test/vaultmem.sock"}
    base = {"session_id": "g-1", "cwd": str(EXAMPLE), "transcript_path": "/tmp/t.json", "timestamp": "2026-12-06T06:00:00Z"}

    def run(event: str, state_env: dict | None = None, **payload) -> dict:
        [entry] = data["hooks"][event]
        command = entry["hooks"][0]["command"]
        assert command.endswith("--agent gemini") and entry["hooks"][0]["name"].startswith("vaultmem-"), entry
        got = subprocess.run(["/bin/sh", "-c", command], input=json.dumps({"hook_event_name": event, **base, **payload}),
                             capture_output=True, text=True, env={**shell_env, **(state_env or {})}, cwd=EXAMPLE,
                             timeout=120)
        assert got.returncode == 0, got.stderr
        return json.loads(got.stdout)
    start = run("SessionStart", source="startup")
    assert start["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    digest = start["hookSpecificOutput"]["additionalContext"]
    assert "deploy-2026-05.md" in digest and "CLAUDE.md:" in digest, "Gemini CLI loads no CLAUDE.md: shown"
    assert "AGENTS.md" not in digest and "MEMORY.md" not in digest, digest
    ask = run("BeforeAgent", session_id="g-2", prompt="How many approving reviews does a change of 300 lines need?")
    assert ask["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    assert "docs/code-review.md:" in ask["hookSpecificOutput"]["additionalContext"], "a CLAUDE.md's import: shown"
    assert run("BeforeAgent", prompt="?!") == {}
    assert run("BeforeAgent", {"VAULTMEM_STATE_DIR": str(tmp_path / "no-index")},
               prompt="What must I check before I deploy to production?") == {}

    r = run_cli("hook", "uninstall", "--agent", "gemini", env=env)
    assert r.stdout.count("removed") == 2 and json.loads(settings.read_text()) == json.loads(before), r.stdout + r.stderr
    # GEMINI_CLI_HOME moves the home Gemini CLI keeps .gemini/ in
    moved = tmp_path / "profile"
    r = run_cli("hook", "install", "--agent", "gemini", env={**env, "GEMINI_CLI_HOME": str(moved)})
    assert r.returncode == 0 and (moved / ".gemini/settings.json").is_file(), r.stdout + r.stderr
    assert json.loads(settings.read_text()) == json.loads(before)


def test_gemini_cli_is_not_shown_its_context_files_or_what_they_import(tmp_path, monkeypatch):
    from vaultmem.recall import passed_over
    vault = tmp_path / "vault"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no settings: GEMINI.md alone
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    roots = {"v": str(vault)}
    assert passed_over("gemini", {"vault": "v", "path": "web/GEMINI.md"}, roots)
    assert passed_over("gemini", {"vault": "v", "path": "docs/style.md", "imported_by": "web/GEMINI.md"}, roots)
    assert not passed_over("gemini", {"vault": "v", "path": "docs/review.md", "imported_by": "CLAUDE.md"}, roots)
    assert not passed_over("gemini", {"vault": "v", "path": "CLAUDE.md"}, roots)
    assert not passed_over("gemini", {"vault": "v", "path": "AGENTS.md"}, roots)
    assert not passed_over("claude", {"vault": "v", "path": "web/GEMINI.md"}, roots)


def test_hook_install_keeps_the_comments_of_a_gemini_settings_file(tmp_path, monkeypatch):
    """Gemini CLI reads settings.json with its comments stripped, so people comment it: install
    reads it, adds "hooks" last and keeps every byte and comment before it (a comma goes after
    the last value, not into the comment that ends its line); its context.fileName is read
    through the comments too; uninstall gives the file back byte for byte."""
    home = tmp_path / "home"
    before = ('{\n  // the look\n  "theme": "GitHub", /* dark at night: "Dracula" */\n'
              '  "context": {"fileName": ["AGENTS.md"]} // Codex and Gemini share it\n}\n')
    settings = write(home, ".gemini/settings.json", before)
    env = {"HOME": str(home)}
    r = run_cli("hook", "install", "--agent", "gemini", env=env)
    assert r.returncode == 0 and r.stdout.count("added") == 2, r.stdout + r.stderr
    text = settings.read_text()
    assert text.startswith(before[: before.index(" // Codex")] + ", // Codex and Gemini share it\n  \"hooks\": {\n"), text
    stripped = "\n".join(line.split(" //")[0].split("/*")[0] if not line.strip().startswith("//") else ""
                         for line in text.splitlines())  # strip-json-comments, for this file
    data = json.loads(stripped)
    assert data["theme"] == "GitHub" and set(data["hooks"]) == {"SessionStart", "BeforeAgent"}
    from vaultmem import agents, recall
    agents.gemini_context_names.cache_clear()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    roots = {"v": str(tmp_path / "vault")}
    assert recall.passed_over("gemini", {"vault": "v", "path": "AGENTS.md"}, roots), "its fileName, read past comments"
    assert not recall.passed_over("gemini", {"vault": "v", "path": "GEMINI.md"}, roots)
    agents.gemini_context_names.cache_clear()
    r = run_cli("hook", "uninstall", "--agent", "gemini", env=env)
    assert r.returncode == 0 and r.stdout.count("removed") == 2, r.stdout + r.stderr
    assert settings.read_text() == before


def test_hook_install_changes_only_the_hooks_of_a_settings_file_that_has_them(tmp_path):
    """A hand-kept settings file that runs the session-start hook and another hook already, on
    one line: adding the prompt hook adds its entry and changes no byte of the user's (it
    reformatted their one-line entries); a comment inside "hooks" stays where it was."""
    settings = tmp_path / "settings.json"
    head = '{\n    "model": "opus",\n    "permissions": {"allow": ["Bash(ls:*)", "Read"]},\n    "hooks": '
    tail = ',\n    "env": {"A": "1", "B": "2"}\n}\n'
    hooks = {"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "/x/vaultmem hook session-start"}]}],
             "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}
    settings.write_text(head + json.dumps(hooks) + tail)
    r = run_cli("hook", "install", "--settings", str(settings))
    assert r.returncode == 0 and r.stdout.splitlines()[1] == f"added the user-prompt-submit hook to {settings}", r.stdout
    text = settings.read_text()
    assert text.startswith(head + json.dumps(hooks)[:-1] + ', "UserPromptSubmit": [{') and text.endswith("]}" + tail), text
    after = json.loads(text)["hooks"]
    assert after["SessionStart"] == hooks["SessionStart"] and after["Stop"] == hooks["Stop"] and after["UserPromptSubmit"]
    r = run_cli("hook", "uninstall", "--only", "user-prompt-submit", "--settings", str(settings))
    assert r.returncode == 0 and settings.read_text() == head + json.dumps(hooks) + tail, "byte for byte"
    commented = head + '{"Stop": [] /* off for now */}' + tail
    settings.write_text(commented)
    r = run_cli("hook", "install", "--settings", str(settings))
    assert r.returncode == 0 and "/* off for now */" in settings.read_text(), r.stderr
    assert run_cli("hook", "uninstall", "--settings", str(settings)).returncode == 0
    assert settings.read_text() == commented


def test_status_says_when_codex_runs_only_some_of_the_hooks(example_state, tmp_path):
    env = {"HOME": str(tmp_path)}
    assert run_cli("hook", "install", "--agent", "codex", "--only", "user-prompt-submit", env=env).returncode == 0
    r = run_cli("status", "--state-dir", str(example_state), env=env)
    assert ("Codex runs vaultmem's user-prompt-submit hook but not its session-start hook "
            f"({tmp_path / '.codex/hooks.json'}): `vaultmem hook install --agent codex` adds it") in r.stdout, r.stdout
    assert "Claude Code runs" not in r.stdout


def test_hook_install_goes_where_claude_code_reads_its_settings(tmp_path):
    """With `CLAUDE_CONFIG_DIR` set, Claude Code reads the settings there, not in ~/.claude: a
    hook installed in ~/.claude/settings.json would never run."""
    home, moved = tmp_path / "home", tmp_path / "config" / "claude"
    home.mkdir()
    r = run_cli("hook", "install", env={"HOME": str(home), "CLAUDE_CONFIG_DIR": str(moved)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"added the {a} hook to {moved / 'settings.json'}"
                                     for a in ("session-start", "user-prompt-submit")]
    assert json.loads((moved / "settings.json").read_text())["hooks"]["SessionStart"]
    assert not (home / ".claude").exists()
    r = run_cli("hook", "install", env={"HOME": str(home)})
    assert r.returncode == 0 and (home / ".claude/settings.json").is_file(), r.stderr


def test_hook_install_changes_no_byte_of_a_hand_kept_settings_file_and_follows_its_symlink(tmp_path):
    """A dotfiles checkout links ~/.claude/settings.json to a file kept by hand (four spaces,
    lists on one line, 0644): the link stays a link, every byte of the file stays, the hook is
    added last in its indentation. Shapes that are no settings file are refused untouched."""
    kept = tmp_path / "dotfiles/settings.json"
    kept.parent.mkdir()
    original = '{\n    "model": "opus",\n    "permissions": {"allow": ["Bash(ls:*)", "Read"]}\n}\n'
    kept.write_text(original)
    kept.chmod(0o644)
    link = tmp_path / ".claude/settings.json"
    link.parent.mkdir()
    link.symlink_to(kept)
    r = run_cli("hook", "install", "--settings", str(link))
    assert r.returncode == 0 and "added" in r.stdout, r.stderr
    assert link.is_symlink() and (kept.stat().st_mode & 0o777) == 0o644
    text = kept.read_text()
    assert text.startswith(original.rstrip()[:-1].rstrip() + ',\n    "hooks": {\n        "SessionStart": [\n')
    assert text.endswith("\n    }\n}\n")
    assert json.loads(text)["permissions"] == {"allow": ["Bash(ls:*)", "Read"]}
    for shape in ('[]', '{"hooks": []}', '{"hooks": {"SessionStart": {}}}', '{"hooks": {"SessionStart": ["x"]}}',
                  '{"hooks": {"SessionStart": [{"hooks": "x"}]}}'):
        kept.write_text(shape)
        bad = run_cli("hook", "install", "--settings", str(link))
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert "is not shaped as Claude Code's settings are" in bad.stderr and kept.read_text() == shape


# ------------------------------------------------------------------ the prompt hook


def prompt_hook(state: Path, prompt: str, *args, session: str | None = None, raw: str | None = None):
    event = {"hook_event_name": "UserPromptSubmit", "cwd": str(EXAMPLE), "prompt": prompt}
    if session:
        event["session_id"] = session
    return run_cli("hook", "user-prompt-submit", "--state-dir", str(state), *args,
                   input=raw if raw is not None else json.dumps(event))


@pytest.mark.slow
def test_prompt_hook_adds_the_current_note_a_prompt_bears_on_and_nothing_otherwise(example_state, tmp_path):
    r = prompt_hook(example_state, "What must I check before I deploy to production?")
    assert r.returncode == 0, r.stderr
    assert "deploy-2026-05.md:" in r.stdout, r.stdout
    assert "deploy-2025-03.md" not in r.stdout and "deploy-2025-09.md" not in r.stdout, "superseded versions are not"
    assert estimate_tokens(r.stdout) <= 500
    r = prompt_hook(example_state, "배포하기 전에 스테이징에서 무엇을 확인해야 하나요?")
    assert "배포-체크리스트.md:" in r.stdout, r.stdout
    assert "AGENTS.md" not in prompt_hook(example_state, "npm or pnpm for the web dashboard?").stdout, \
        "an AGENTS.md is in the session already: Claude Code loads it"
    unrelated = "Write a haiku about autumn leaves falling on a quiet pond"
    assert prompt_hook(example_state, unrelated).stdout == ""
    ungated = tmp_path / "ungated.toml"
    ungated.write_text("[agent]\nprompt_min_relevance = 0\n")
    assert prompt_hook(example_state, unrelated, "--config", str(ungated)).stdout, \
        "without the gate the same prompt gets notes: the gate is what keeps it quiet"
    ask = "deploy procedure on Kubernetes with Argo CD"
    out = prompt_hook(example_state, ask, "--budget", "100").stdout
    assert out and estimate_tokens(out) <= 100, out
    assert prompt_hook(example_state, ask, "--budget", "80").stdout == "", "no entry fits: nothing, not half of one"


@pytest.mark.slow
def test_prompt_hook_shows_a_note_once_per_session_and_again_after_compaction(tmp_path):
    state = tmp_path / "state"
    assert run_cli("index", "--vault", f"example={EXAMPLE}", "--state-dir", str(state)).returncode == 0
    ask = "What must I check before I deploy to production?"
    outs = [prompt_hook(state, ask, session="s-1").stdout]
    assert "deploy-2026-05.md" in outs[0]
    outs.append(prompt_hook(state, ask, session="s-1").stdout)
    assert "deploy-2026-05.md" not in outs[1], "the session holds it already"
    outs.append(prompt_hook(state, ask, session="s-2").stdout)
    assert "deploy-2026-05.md" in outs[2], "another session does not"
    st = json.loads(run_cli("stats", "--json", "--state-dir", str(state)).stdout)
    retrieved = {n["note"].split(":", 1)[1] for n in st["notes"] if n["retrieved"]}
    assert retrieved == {p for p in (n["note"].split(":", 1)[1] for n in st["notes"]) if any(f"/{p}:" in o for o in outs)}, \
        "exactly the notes the hook showed count as retrieved"
    start = {"hook_event_name": "SessionStart", "session_id": "s-3", "cwd": str(EXAMPLE), "source": "startup"}
    digest = run_cli("hook", "session-start", "--state-dir", str(state), input=json.dumps(start)).stdout
    assert "deploy-2026-05.md" in digest
    assert prompt_hook(state, ask, session="s-3").stdout == "", "the session-start digest showed it"
    compacted = {**start, "source": "compact"}
    assert run_cli("hook", "session-start", "--state-dir", str(state), "--budget", "1",
                   input=json.dumps(compacted)).stdout == ""
    assert "deploy-2026-05.md" in prompt_hook(state, ask, session="s-3").stdout, \
        "after compaction the context no longer holds what it was shown"


def test_a_sessions_record_goes_two_days_after_it_was_last_written(example_state):
    import time
    from vaultmem.recall import SessionNotes

    old, recent = SessionNotes(example_state, "old"), SessionNotes(example_state, "recent")
    old.add(["example:memory/a.md"])
    recent.add(["example:memory/b.md"])
    now = time.time()
    os.utime(old.path, (now - 2.1 * 86400, now - 2.1 * 86400))
    os.utime(recent.path, (now - 1.9 * 86400, now - 1.9 * 86400))
    assert "deploy-2026-05.md" in prompt_hook(example_state, "What must I check before I deploy to production?",
                                              session="another").stdout
    assert not old.path.exists() and recent.load() == {"example:memory/b.md"}


@pytest.mark.slow
def test_prompt_hook_passes_over_the_files_claude_code_loads_to_the_note_below_them(tmp_path):
    """Instruction files that match a prompt best are in the session already; the memory note
    that ranks under three of them is the one to show."""
    vault = tmp_path / "vault"
    ask = "How do we roll back a failed database migration in production?"
    for rel in ("CLAUDE.md", "AGENTS.md", ".claude/rules/migrations.md", "api/CLAUDE.md"):
        write(vault, rel, f"# Rules\n\n{ask} Roll back a failed database migration with make rollback.\n")
    write(vault, "memory/rollback.md", note("rollback", "A failed migration in production is rolled back "
                                            "with the down script, then the release tag is moved back.\n"))
    state = tmp_path / "state"
    assert run_cli("index", "--vault", str(vault), "--state-dir", str(state)).returncode == 0
    hits = json.loads(run_cli("query", ask, "--json", "-k", "5", "--state-dir", str(state)).stdout)["hits"]
    assert hits[-1]["path"] == "memory/rollback.md", "the four instruction files rank above the note"
    out = prompt_hook(state, ask).stdout
    assert "memory/rollback.md:" in out, out
    assert "CLAUDE.md" not in out and "AGENTS.md" not in out and "rules" not in out


@pytest.mark.slow
def test_codexs_memory_is_shown_to_each_agent_but_what_it_loads_itself(tmp_path):
    """Codex's MEMORY.md is a handbook it searches, not an index like Claude Code's: both agents
    are shown it. Its memory_summary.md, and an AGENTS.override.md (read in place of AGENTS.md),
    Codex puts into every thread itself: Claude Code is shown them, Codex is not. None of them
    is asked for a topic or tags."""
    codex = tmp_path / "home" / ".codex"
    write(codex, "memories/MEMORY.md", "# Task Group: ledgerline\n\n## User preferences\n\n- Integration tests "
                                       "run against a throwaway PostgreSQL container, never the shared staging database.\n")
    write(codex, "memories/memory_summary.md", "v1\nUser profile: a backend engineer on ledgerline who runs "
                                               "integration tests against a throwaway PostgreSQL container.\n")
    write(codex, "AGENTS.override.md", "# This week\n\nThe shared staging database is frozen: integration tests "
                                       "run against the throwaway PostgreSQL container only.\n")
    state = tmp_path / "state"
    assert run_cli("index", "--vault", str(codex), "--state-dir", str(state)).returncode == 0
    ask = "Which database do the integration tests run against?"
    claude = prompt_hook(state, ask).stdout
    assert all(f"{p}:" in claude for p in ("memories/MEMORY.md", "memories/memory_summary.md", "AGENTS.override.md")), \
        claude
    codex_out = prompt_hook(state, ask, "--agent", "codex").stdout
    assert "memories/MEMORY.md:" in codex_out and "memory_summary.md" not in codex_out, codex_out
    assert "AGENTS.override.md" not in codex_out, codex_out
    r = run_cli("inventory", "--state-dir", str(state), "--json")
    counts = json.loads(r.stdout)["counts"]
    assert (counts["missing_topic"], counts["missing_tags"]) == (0, 0), r.stdout


def test_codex_is_not_shown_the_one_instruction_file_a_directory_it_reads_itself(tmp_path, monkeypatch):
    """Codex reads, in each directory, the first non-empty one of AGENTS.override.md, AGENTS.md
    and the names of `project_doc_fallback_filenames` in its config.toml (CLAUDE.md, to share a
    project's instructions with Claude Code): that file is passed over for Codex, the others in
    that directory are shown. In its own home only the first two count."""
    from vaultmem.recall import passed_over
    home, vault = tmp_path / "codex", tmp_path / "vault"
    write(home, "config.toml", 'model = "x"\nproject_doc_fallback_filenames = ["TEAM.md", "CLAUDE.md"]\n')
    monkeypatch.setenv("CODEX_HOME", str(home))
    write(vault, "solo/CLAUDE.md", "# Solo\n")  # no AGENTS.md: read in its place
    write(vault, "both/CLAUDE.md", "# Both\n")
    write(vault, "both/AGENTS.md", "# Both\n")
    write(vault, "team/TEAM.md", "# Team\n")  # the first fallback name wins over the second
    write(vault, "team/CLAUDE.md", "# Team\n")
    write(vault, "over/AGENTS.override.md", "# This week\n")
    write(vault, "over/AGENTS.md", "# Usual\n")
    write(vault, "blank/AGENTS.override.md", "")  # empty: skipped
    write(vault, "blank/AGENTS.md", "# Usual\n")
    write(vault, "notes/memory/a.md", "# A note\n")
    write(home, "CLAUDE.md", "# Not read in Codex's home\n")
    roots = {"v": str(vault), "c": str(home)}
    shown = {p for p in ("solo/CLAUDE.md", "both/CLAUDE.md", "both/AGENTS.md", "team/TEAM.md", "team/CLAUDE.md",
                         "over/AGENTS.override.md", "over/AGENTS.md", "blank/AGENTS.md", "notes/memory/a.md")
             if not passed_over("codex", {"vault": "v", "path": p}, roots)}
    assert shown == {"both/CLAUDE.md", "team/CLAUDE.md", "over/AGENTS.md", "notes/memory/a.md"}
    assert not passed_over("codex", {"vault": "c", "path": "CLAUDE.md"}, roots)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-config"))  # no fallback names
    assert not passed_over("codex", {"vault": "v", "path": "solo/CLAUDE.md"}, roots)
    assert passed_over("claude", {"vault": "v", "path": "solo/CLAUDE.md"}, roots)


@pytest.mark.slow
def test_prompt_hook_finds_the_question_around_a_pasted_log(example_state):
    """A prompt of 75,000 characters: a question before or after a pasted log. The question is
    searched on its own line, not only drowned in the log."""
    log = "INFO worker heartbeat ok\n" * 3000
    ask = "Can I store the invoice total as a float?"
    for prompt in (f"Here is the worker log:\n{log}{ask}", f"{ask} Here is the worker log:\n{log}"):
        r = prompt_hook(example_state, prompt)
        assert r.returncode == 0 and "money-as-cents.md:" in r.stdout, r.stdout + r.stderr
    assert prompt_hook(example_state, f"Here is the worker log:\n{log}Why does the heartbeat stall?").stdout == ""


def test_prompt_hook_never_fails_a_prompt(example_state, tmp_path):
    for raw in ("not json", "[1, 2]", json.dumps({"prompt": 42}), "", r'{"prompt": "\ud800 deploy to production"}'):
        r = prompt_hook(example_state, "", raw=raw)
        assert r.returncode == 0 and r.stdout == "", (raw, r.stdout, r.stderr)
    for prompt in ("/clear", "   ", "?!", "/compact"):
        r = prompt_hook(example_state, prompt)
        assert r.returncode == 0 and r.stdout == "" and r.stderr == "", prompt
    r = prompt_hook(tmp_path / "no-index", "What must I check before I deploy to production?")
    assert r.returncode == 0 and r.stdout == "" and "no memories" in r.stderr


@pytest.mark.slow
def test_prompt_hook_through_a_real_daemon_sees_a_note_saved_a_moment_ago(daemon):
    atomic_save(daemon.vault / "memory/ops.md", note("on-call", "The on-call rota changes every Monday.\n"))
    daemon.start()
    atomic_save(daemon.vault / "memory/pager.md",
                note("pager escalation", "When the pager fires twice in an hour, escalate to the platform lead.\n"))
    daemon.wait_for(lambda: "memory/pager.md" in daemon.paths("pager escalation"))
    env = {"VAULTMEM_SOCKET": str(daemon.sock)}
    event = json.dumps({"session_id": "d-1", "prompt": "The pager fired twice this hour, whom do I escalate to?"})
    r = run_cli("hook", "user-prompt-submit", "--state-dir", str(daemon.state), input=event, env=env,
                python_flags=("-X", "importtime"))
    assert r.returncode == 0 and f"{daemon.vault}/memory/pager.md:" in r.stdout, r.stdout + r.stderr
    assert "ops.md" not in r.stdout
    # the hook runs before every prompt: answered by the daemon, it loads no engine, nor what it
    # does without (OpenSSL for a session file's name)
    imported = imported_by(r.stderr)
    assert "vaultmem" in imported and not imported & (ENGINES | CLIENT_UNNEEDED), sorted(imported & (ENGINES | CLIENT_UNNEEDED))


# ------------------------------------------------------------------ recall budgets


def test_recall_answers_within_budget_with_the_matching_section(env):
    from vaultmem.recall import recall
    from vaultmem.backend import Backend

    filler = "\n\n".join(f"Paragraph {i} about routine maintenance of the build farm." for i in range(60))
    long_note = f"# Intro\n\n{filler}\n\n# Ocelot\n\nThe ocelot switch turns off nightly builds.\n\n# More\n\n{filler}\n"
    env.write("memory/long.md", note("farm", long_note))
    for i in range(15):
        env.write(f"memory/n{i}.md", note(f"t{i}", f"ocelot related note number {i}. " + filler[:1500]))
    env.sync()
    settings = env.settings()
    backend = Backend(settings, socket=str(env.state / "none.sock"), quiet=True)
    try:
        out = recall(backend, settings, "ocelot switch nightly builds", k=20, budget=900)
    finally:
        backend.close()
    assert estimate_tokens(json.dumps(out, ensure_ascii=False)) <= 1000
    assert "left out" in out["note"]
    top = out["hits"][0]
    assert top["file"].endswith("memory/long.md") and top["heading"].endswith("Ocelot")
    assert "ocelot switch" in top["section"].lower() and "Paragraph 1 " not in top["section"]
    assert (top["lines"].split("-")[0]) != "1"


@pytest.mark.slow
def test_relevance_lets_recall_and_the_cli_say_that_nothing_is_relevant(daemon):
    """Every hit carries a relevance (0..1); MCP recall answers nothing, and says so, when no hit
    reaches [agent] min_relevance (it gave five unrelated notes to "Write a haiku about autumn
    leaves", with no score at all), and `query --min-relevance` drops hits from the shell."""
    shutil.copy(EXAMPLE / "memory" / "deploy-2026-05.md", daemon.vault / "memory/deploy.md")
    atomic_save(daemon.vault / "memory/cache.md", note("cache", "Warm the Redis cache before the release window.\n"))
    atomic_save(daemon.vault / "memory/budget.md", note("budget", "The cloud budget is reviewed each quarter.\n"))
    daemon.start()
    e = {"VAULTMEM_SOCKET": str(daemon.sock)}
    out = daemon.request({"op": "query", "text": "how do we deploy to production"})
    assert out["hits"] and all(0.0 <= h["relevance"] <= 1.0 for h in out["hits"])
    assert out["hits"][0]["path"] == "memory/deploy.md" and out["hits"][0]["relevance"] > 0.2, out["hits"][0]
    r = run_cli("query", "how do we deploy to production", "--json", "--min-relevance", "0.2", "--state-dir",
                str(daemon.state), env=e)
    assert r.returncode == 0, r.stderr
    assert [h["path"] for h in json.loads(r.stdout)["hits"]] == ["memory/deploy.md"]
    r = run_cli("query", "how do we deploy to production", "--min-relevance", "0.9999", "--state-dir",
                str(daemon.state), env=e)
    assert r.returncode == 1 and r.stdout == "", r
    human = run_cli("query", "how do we deploy to production", "--state-dir", str(daemon.state), env=e)
    assert "relevance 0." in human.stdout

    async def steps(client):
        off = structured(await client.call_tool("recall", {"query": "Write a haiku about autumn leaves"}))
        on = structured(await client.call_tool("recall", {"query": "warm the cache before a release"}))
        return off, on
    off, on = mcp_session(["--state-dir", str(daemon.state)], e, steps)
    assert off["hits"] == [] and "nothing in memory bears on this" in off["note"], off
    assert on["hits"][0]["file"].endswith("cache.md") and on["hits"][0]["relevance"] >= 0.015, on


@pytest.mark.slow
def test_mcp_tools_are_written_for_a_model(tmp_path):
    """Parameter schemas carry descriptions and bounds, and the tool checks them (k=0 gave 5
    hits, k=500 gave 13); errors name the tool's parameters (`vault`, not --vault) with no link
    to a library's documentation; answers are compact JSON with no field repeating another (on
    short notes the snippet repeated the section: ~40% of a recall answer was repetition or
    indentation)."""
    state = tmp_path / "st"
    (tmp_path / "other/memory").mkdir(parents=True)
    (tmp_path / "other/memory/a.md").write_text(note("a", "the other note\n"))
    assert run_cli("index", "--vault", f"example={EXAMPLE}", "--vault", f"other={tmp_path / 'other'}",
                   "--state-dir", str(state)).returncode == 0

    async def steps(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        bad = [await client.call_tool("recall", {"query": "deploy", "k": k}) for k in (0, 500)]
        good = await client.call_tool("recall", {"query": "how do we deploy to production", "k": 3})
        vague = await client.call_tool("remember", {"topic": "pager", "text": "The rota is on the wiki."})
        return tools, bad, good, vague
    tools, bad, good, vague = mcp_session(["--state-dir", str(state)], {"VAULTMEM_SOCKET": str(tmp_path / "none")},
                                          steps)
    k = tools["recall"].input_schema["properties"]["k"]
    assert (k["minimum"], k["maximum"]) == (1, 20) and "hits" in k["description"]
    for name, t in tools.items():
        for pname, spec in t.input_schema["properties"].items():
            assert spec.get("description"), (name, pname)
    for answer in bad:
        assert answer.is_error and "`k` must be 1 to 20" in answer.content[0].text
        assert "pydantic" not in answer.content[0].text and "http" not in answer.content[0].text
    assert vague.is_error and "`vault`" in vague.content[0].text and "--vault" not in vague.content[0].text
    text = good.content[0].text
    assert "\n" not in text and ": " not in text.split('"hits"')[0], "compact: no indentation"
    hits = good.structured_content["hits"]
    assert hits and json.loads(text)["hits"] == hits
    for h in hits:
        assert "section" in h and ("snippet" not in h or h["snippet"].replace("**", "").strip("… ") not in h["section"])


@pytest.mark.slow
def test_hooks_and_recall_prefer_the_sessions_own_project(tmp_path):
    """In a `ledger` session, "How do I run the integration tests against postgres?" got only the
    webshop project's note. The session's own project comes first; another project's note only
    when clearly better, marked as from elsewhere."""
    ledger, webshop = tmp_path / "src/ledger", tmp_path / "src/webshop"
    write(ledger, "CLAUDE.md", "# ledger\n\nA double-entry ledger service.\n")
    write(ledger, "memory/tests.md", note("integration tests", "Run the integration tests with `make itest`; they "
                                          "need the postgres container of docker-compose up first.\n"))
    write(webshop, "CLAUDE.md", "# webshop\n\nThe shop front end.\n")
    write(webshop, "memory/postgres.md", note("postgres tests", "Run the integration tests against postgres with "
                                             "`make pgtest`; they use a throwaway postgres.\n"))
    state = tmp_path / "st"
    assert run_cli("index", "--vault", f"ledger={ledger}", "--vault", f"webshop={webshop}",
                   "--state-dir", str(state)).returncode == 0
    ask = "How do I run the integration tests against postgres?"
    r = run_cli("hook", "user-prompt-submit", "--state-dir", str(state),
                input=json.dumps({"prompt": ask, "session_id": "s1", "cwd": str(ledger / "src")}))
    assert "ledger/memory/tests.md" in r.stdout and "webshop" not in r.stdout, r.stdout
    r = run_cli("hook", "user-prompt-submit", "--state-dir", str(state),
                input=json.dumps({"prompt": ask, "session_id": "s2", "cwd": str(webshop)}))
    assert "webshop/memory/postgres.md" in r.stdout and "ledger" not in r.stdout, r.stdout
    clearly = "make pgtest throwaway postgres"  # only the other project's note answers this
    r = run_cli("hook", "user-prompt-submit", "--state-dir", str(state),
                input=json.dumps({"prompt": clearly, "session_id": "s3", "cwd": str(ledger)}))
    assert "webshop/memory/postgres.md" in r.stdout and "from webshop, not this project" in r.stdout, r.stdout

    async def steps(client):
        return structured(await client.call_tool("recall", {"query": ask}))
    got = mcp_session(["--state-dir", str(state)], {"VAULTMEM_SOCKET": str(tmp_path / "none")}, steps, cwd=ledger)
    assert [h["file"].split("/src/")[1] for h in got["hits"]] == ["ledger/memory/tests.md"], got


def test_hook_install_leaves_the_users_own_entries_of_the_same_event_byte_for_byte(tmp_path):
    """The user's own one-line UserPromptSubmit entry in a file Claude Code laid out: install
    adds vaultmem's entry after it and reformats nothing; uninstall gives the file back."""
    settings = tmp_path / "settings.json"
    original = ('{\n  "hooks": {\n    "UserPromptSubmit": [\n'
                '      {"hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}\n'
                '    ],\n    "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "date"}]}]\n'
                '  },\n  "model": "opus"\n}\n')
    settings.write_text(original)
    r = run_cli("hook", "install", "--settings", str(settings))
    assert r.returncode == 0, r.stderr
    text = settings.read_text()
    assert '      {"hooks": [{"type": "command", "command": "~/bin/guard.sh"}]},\n      {\n' in text, text
    assert '"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "date"}]}, ' in text, text
    data = json.loads(text)["hooks"]
    assert len(data["UserPromptSubmit"]) == 2 and len(data["SessionStart"]) == 2
    assert run_cli("hook", "uninstall", "--settings", str(settings)).returncode == 0
    assert settings.read_text() == original
