"""The documentation runs as printed: every `vaultmem` command in a shell block of the README or
docs/, and every `.venv/bin/vaultmem ...` the README shows inline (the agents' hook lines), in a
fresh home with Claude Code's memory and one project. A command whose option was renamed, or
whose example no longer works, fails here instead of on a newcomer's first day."""

import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT, note, write

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# started, not run to the end: they serve until stopped, or change this user's systemd
NOT_RUN = {"daemon", "mcp"}


def documented_commands() -> list[tuple[str, list[str]]]:
    """(file, argv after the program) for each vaultmem command the documentation shows."""
    out = []
    for path in DOCS:
        text = path.read_text()
        lines = [ln for block in re.findall(r"```sh\n(.*?)```", text, re.S) for ln in block.splitlines()]
        lines += re.findall(r"`(\.venv/bin/vaultmem [^`]*)`", text)
        lines += re.findall(r'`[^`]* "\$\(pwd\)/(\.venv/bin/vaultmem" [^`]*)`', text)  # `claude mcp add ... mcp`
        for line in lines:
            line = line.split("  #")[0].strip().replace('vaultmem" ', "vaultmem ")
            if line.startswith(("vaultmem ", ".venv/bin/vaultmem ")):
                out.append((path.name, shlex.split(line)[1:]))
    return out


def test_the_docs_show_the_commands_a_newcomer_needs():
    """The collector finds what it must (else the test below would pass on nothing)."""
    shown = {(f, " ".join(argv[:2])) for f, argv in documented_commands()}
    for need in [("README.md", "index --vault"), ("README.md", "remember --topic"), ("README.md", "hook install"),
                 ("README.md", "service install"), ("agents.md", "hook install"), ("daemon.md", "daemon --vault"),
                 ("cli.md", "inventory")]:
        assert need in shown, need
    assert len(documented_commands()) >= 25


@pytest.mark.slow
def test_every_documented_command_runs_as_printed(tmp_path):
    """Each command in order, as printed (`~` is the temp home; the working directory is the
    project, as for someone trying them there): each exits 0, or 1 where 1 means "nothing found"
    or "findings". `daemon` and `mcp` are parsed, not started; `service install --enable` runs
    without --enable (it would restart this user's own vaultmem service)."""
    home = tmp_path / "home"
    project = home / "src/myproject"
    write(home, ".claude/CLAUDE.md", "# Me\n\nAnswer tersely.\n")
    write(home, ".claude/memory/deploy.md", note("deploy procedure", "# デプロイ手順\n\nDeploy with make release; rollback with make undo.\n",
                                                  tags="[ops]", kind="procedure", date="2026-01-05"))
    write(project, "CLAUDE.md", "# myproject\n\nRun the tests with make test.\n")
    write(project, "memory/old-idea.md", note("old idea", "Cache everything in Redis.\n"))
    write(project, "memory/deploy.md", note("deploy checks", "Check the canary before you ship.\n", tags="[ops]"))
    env = {k: v for k, v in os.environ.items() if k not in ("VAULTMEM_CONFIG", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
                                                           "GEMINI_CLI_HOME", "VAULTMEM_STATE_DIR")}
    env.update({"HOME": str(home), "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(home / ".config"),
                "VAULTMEM_SOCKET": str(tmp_path / "no-daemon.sock"), "COLUMNS": "100"})
    from vaultmem.parser import build_parser
    ran = 0
    for where, argv in documented_commands():
        argv = [a.replace("~", str(home)) if a.startswith("~") or "=~" in a else a for a in argv]
        if argv[0] in NOT_RUN:
            build_parser(argv[0]).parse_args(argv)  # exits 2 on an option that does not exist
            continue
        if argv[:2] == ["service", "install"]:
            argv = [a for a in argv if a != "--enable"]
        r = subprocess.run([sys.executable, "-m", "vaultmem.cli", *argv], capture_output=True, text=True,
                           env=env, cwd=project, timeout=300)
        findings = argv[0] in ("query", "inventory", "tags") and r.returncode == 1
        assert r.returncode == 0 or findings, (where, argv, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr, (where, argv, r.stderr)
        ran += 1
    assert ran >= 20
    unit = home / ".config/systemd/user/vaultmem.service"
    assert unit.is_file() and f"work={project}" in unit.read_text()
    assert "vaultmem" in (home / ".claude/settings.json").read_text()  # the hooks went in
    assert list(project.glob("memory/deploy-procedure-*.md"))  # remember wrote into the cwd's vault
