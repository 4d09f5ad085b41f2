"""The command line's grammar: every command and option of `vaultmem`, with the help that
teaches them (`build_parser`), and the usage error that names the option meant.

Only argparse and the standard library: a fresh `vaultmem query` builds its one command's parser
before it imports anything else. What a command does with its options is in cli.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import cast

from . import __version__

EPILOG = """exit codes: 0 ok, 1 query found nothing / inventory has findings / forget declined,
2 usage or config error, 3 no index yet, 4 embedder changed (run `vaultmem index --rebuild`),
5 embedder failed, 6 no space left on the disk of the index, 7 systemctl failed (service)"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", metavar="DIR",
                   help="where the index lives (default $VAULTMEM_STATE_DIR or ~/.local/state/vaultmem)")
    p.add_argument("--config", metavar="FILE", help="config file (default ~/.config/vaultmem/vaultmem.toml)")
    p.add_argument("--debug", action="store_true", help="log everything and show tracebacks")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only results and errors: no progress bar, warnings, skipped files, summary "
                        "lines or 'answering in-process' note (for cron and scripts: the exit code tells)")


def _client(p: argparse.ArgumentParser) -> None:
    p.add_argument("--socket", metavar="PATH", help="the daemon's socket (default $VAULTMEM_SOCKET or "
                                                    "$XDG_RUNTIME_DIR/vaultmem/vaultmem.sock)")
    p.add_argument("--no-daemon", action="store_true", help="answer in this process even if a daemon runs")


class _Tags(argparse.Action):
    """--tag T, repeatable, and --tags a,b (the frontmatter key's name, with a comma list)."""

    def __call__(self, parser, namespace, values, option_string=None):
        got = list(getattr(namespace, self.dest) or [])
        got += [t for t in (v.strip().lstrip("#").strip() for v in str(values).split(",")) if t and t not in got]
        setattr(namespace, self.dest, got)


def _query_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", type=int, metavar="N", help="number of hits (default 10)")
    filter_options(p)
    p.add_argument("--mode", choices=["hybrid", "text", "vector"], help="ranking: hybrid (default), text or vector")
    p.add_argument("--half-life", metavar="DAYS", help="time decay: a note this old counts half (e.g. 90 or 90d)")
    p.add_argument("--as-of", metavar="DATE", help="answer as the vault stood then: the notes current at DATE")
    p.add_argument("--task", metavar="ID", help="attribute these hits to a task (see `vaultmem stats --task`)")
    p.add_argument("--no-record", action="store_true",
                   help="do not count these hits as retrieved (for scripts and evaluations)")
    p.add_argument("--explain", action="store_true", help="show every factor of each hit's score")
    p.add_argument("--min-relevance", type=float, metavar="P",
                   help="drop hits less likely than P (0..1) to answer the query (default 0: keep all; "
                        "MCP recall answers nothing when no hit reaches [agent] min_relevance)")


def filter_options(p: argparse.ArgumentParser) -> None:
    """Which notes a query (or a tag count) looks at; `cli._filters_of` reads them back."""
    p.add_argument("--tag", "--tags", dest="tag", action=_Tags, default=[], metavar="T",
                   help="only notes with this tag, in the frontmatter or as an inline #tag; a parent tag finds its "
                        "nested ones (project: project/alpha); repeat, or a,b: all of them")
    p.add_argument("--any-tag", action="store_true", help="with several --tag, any one of them is enough")
    p.add_argument("--kind", action="append", default=[], metavar="K", help="only notes of this kind (repeatable)")
    p.add_argument("--topic", metavar="X", help="only notes on this topic")
    p.add_argument("--path", metavar="GLOB", help="only notes whose vault-relative path matches, e.g. 'memory/**'")
    p.add_argument("--since", metavar="DATE", help="only notes written on or after DATE (their date, else mtime); "
                                                    "DATE is an ISO date or datetime, or today, yesterday, 3d, 2w, "
                                                    "'2 weeks ago'")
    p.add_argument("--until", metavar="DATE", help="only notes written on or before DATE")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="only notes whose frontmatter KEY has VALUE (any key, e.g. status=draft; repeatable)")
    p.add_argument("--history", action="store_true", help="include superseded notes (marked as such)")


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size tells it ($COLUMNS, else stdout's
    terminal, else 80), without importing shutil (and bz2, lzma) into every process for it."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Sized(argparse.HelpFormatter):
    """argparse's formatter, told the width as argparse reckons it (the terminal's, less 2):
    argparse makes a formatter for every option it adds, and each imported shutil to ask."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width if width is not None else _columns() - 2)


class _Raw(_Sized, argparse.RawDescriptionHelpFormatter):
    """Descriptions kept as written (the top's command list and exit codes)."""


class _Help(_Raw):
    """Descriptions wrapped to the terminal, examples (indented lines) kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap  # only help is wrapped

        return "\n".join(indent + line if not line or line[0].isspace() else
                         textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
                         for line in text.splitlines())


class _Unbuilt:
    """Stands for the parser of a command that was not asked for: whatever is added to it is
    dropped (a process parses one command, and building all thirteen costs ~8 ms of its start)."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: with `command`, that command's parser alone is built; with
    none, every command's (for `vaultmem --help`, and the error that lists them on a wrong name)."""
    parser = argparse.ArgumentParser(
        prog="vaultmem",
        description="Local memory for AI coding agents: search your CLAUDE.md, AGENTS.md, GEMINI.md and memory notes "
                    "by words and meaning, newest version of each fact first.",
        epilog=EPILOG, formatter_class=_Raw)
    parser.add_argument("--version", action="version", version=f"vaultmem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, **kwargs) -> argparse.ArgumentParser:
        kwargs.setdefault("formatter_class", _Sized)
        return sub.add_parser(name, **kwargs) if command in (None, name) else cast(argparse.ArgumentParser, _Unbuilt())

    p = add("index", help="index vaults in this process (incremental: only changed files are read)",
            description="Build or update the index of one or more vaults. Unchanged files cost "
                        "one stat; changed text is re-embedded, unchanged text never. A big load "
                        "([index] batch_files notes or more) is followed by the upkeep the daemon "
                        "runs: compaction, and past 100,000 chunks the vector index (minutes, once). "
                        "While a daemon keeps the index, it does the work (a vault it does not watch "
                        "goes in its config first: the error says how).",
            epilog="example: vaultmem index --vault ~/.claude --vault work=~/src/app --state-dir ~/.local/state/vaultmem")
    p.add_argument("--vault", action="append", default=[], metavar="[NAME=]DIR",
                   help="a vault directory (repeatable; default: the vaults indexed before)")
    p.add_argument("--rebuild", action="store_true", help="drop the index and re-read every file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _common(p)

    p = add("query", help="search the index",
            description="Search current notes by words and meaning. A word no note has (a typo) "
                        "is looked up by similar spelling; put a word or phrase in double quotes "
                        "to require it exactly (also inside Japanese/Korean text). With filters and "
                        "no text, it lists the notes that pass them, newest first.",
            epilog='examples:\n  vaultmem query "how do we deploy"\n  vaultmem query \'"デプロイ手順"\' --mode text\n'
                   '  vaultmem query deploy --tag ops --history --json\n'
                   '  vaultmem query --tag ops --since 2w            # list: newest first\n'
                   '  vaultmem query --batch questions.txt --json',
            formatter_class=_Help)
    p.add_argument("text", nargs="*", help="what to look for (none, with a filter: list the notes that pass it)")
    p.add_argument("--batch", metavar="FILE", help="one query per line (text, or JSON with 'text' and options); '-' is stdin")
    p.add_argument("--vault", action="append", default=[], metavar="NAME|DIR", help="only this vault (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON: {hits: [...], took_ms}")
    _query_options(p)
    _common(p)
    _client(p)

    p = add("status", help="what is indexed, and what was skipped and why")
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    _client(p)

    p = add("reindex", help="reconcile the index with the files now (through the daemon if it runs)",
            description="Bring the index in line with the vaults' files now, through the daemon if it\n"
                        "runs (it does this by itself on every change it sees, and every [daemon]\n"
                        "reconcile_minutes). --rebuild starts from an empty index. --drop-vault takes a\n"
                        "vault you removed from the config out of the index (`vaultmem status` lists it\n"
                        "as not in the config); its files are not touched.",
            epilog="examples:\n  vaultmem reindex\n  vaultmem reindex --drop-vault old-project",
            formatter_class=_Help)
    p.add_argument("--rebuild", action="store_true", help="drop the index and re-read every file")
    p.add_argument("--drop-vault", action="append", default=[], metavar="NAME",
                   help="remove this vault's notes from the index, not its files (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    _client(p)

    p = add("remember", help="write a new note (one line is enough) and index it at once",
            description="Write a new note into the vault's memory/ folder, with frontmatter (topic, "
                        "date with time zone, kind, tags, importance) and a file name made from the "
                        "topic. A note on an existing topic supersedes the current one; the command "
                        "says which. The note is searchable when the command returns.",
            epilog='examples:\n  vaultmem remember --topic "deploy procedure" --tag ops "Deploy with make ship; '
                   'staging first."\n  git log -1 --format=%B | vaultmem remember --topic release-notes -\n'
                   '  vaultmem remember --topic 배포 --kind decision "배포는 금요일에 하지 않는다"',
            formatter_class=_Help)
    p.add_argument("text", nargs="*", help="the note's text; '-' (or nothing, with input piped) reads stdin")
    p.add_argument("--topic", required=True, help="what the note is about; notes on one topic form a chain")
    p.add_argument("--tag", "--tags", dest="tag", action=_Tags, default=[], metavar="T", help="a tag (repeat, or a,b)")
    p.add_argument("--kind", metavar="K", help="decision, correction, review, insight, ... (default knowledge)")
    p.add_argument("--importance", type=float, metavar="F", help="0..1 (default 0.5)")
    p.add_argument("--vault", metavar="NAME|DIR", help="which vault (default: the one you are in, or the only one)")
    p.add_argument("--json", action="store_true", help="print JSON: {path, vault, file, superseded, ...}")
    _common(p)
    _client(p)

    p = add("forget", help="retire a note (the file stays) or delete it",
            description="Retire notes: they stop being current and leave default results, with no "
                        "newer note needed; the file is not touched and `--restore` undoes it. Or "
                        "delete the files (asks first on a terminal; --yes for scripts).",
            epilog="examples:\n  vaultmem forget memory/old-idea.md\n  vaultmem forget --topic "
                   "'deploy procedure' --restore\n  vaultmem forget --delete --yes memory/scratch.md",
            formatter_class=_Help)
    p.add_argument("paths", nargs="*", metavar="PATH", help="notes, as paths (absolute, relative, or VAULT:PATH)")
    p.add_argument("--topic", metavar="X", help="every note of this topic instead")
    p.add_argument("--vault", metavar="NAME|DIR", help="with --topic: only this vault")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--retire", action="store_true", help="retire (the default)")
    g.add_argument("--restore", action="store_true", help="undo a retirement")
    g.add_argument("--delete", action="store_true", help="delete the files")
    p.add_argument("--yes", "-y", action="store_true", help="delete without asking")
    p.add_argument("--dry-run", action="store_true", help="list the notes; change nothing")
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    _client(p)

    p = add("feedback", help="say a note was useful or not (it moves the note's ranking weight)",
            description="Record that a note helped (or did not). The note's feedback weight moves "
                        "by an exponential moving average and enters every later ranking as "
                        "feedback_factor (see --explain). Kept in the state dir, never in the note.",
            epilog="example: vaultmem feedback memory/deploy.md --useful --task PROJ-12")
    p.add_argument("path", metavar="PATH", help="the note (absolute, relative, or VAULT:PATH)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--useful", action="store_true")
    g.add_argument("--useless", action="store_true")
    p.add_argument("--task", metavar="ID", help="the task the note was used for")
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    _client(p)

    p = add("stats", help="how often notes were retrieved, their feedback, per-task attribution",
            description="Retrieval statistics from vaultmem's own records: per note, times returned "
                        "by queries and when last, feedback, retirement; with --task, that task's "
                        "attribution table (note, best score and rank, credit from feedback).")
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these notes")
    p.add_argument("--task", metavar="ID", help="show the attribution table of this task ('' for every task)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="notes to list (default 20; 0 all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    _client(p)

    p = add("tags", help="the tags in use, with how many notes each finds",
            description="The tags of the current notes (frontmatter tags and inline #tags), each with "
                        "the number of notes `query --tag T` would list: a parent tag counts the notes "
                        "of its nested ones (project: project/alpha). The filters narrow the notes "
                        "counted; with --tag, the tags that go with it.",
            epilog="examples:\n  vaultmem tags\n  vaultmem tags --vault work --since 30d\n"
                   "  vaultmem tags --tag ops --json      # what else notes tagged ops are tagged",
            formatter_class=_Help)
    p.add_argument("--vault", action="append", default=[], metavar="NAME|DIR", help="only this vault (repeatable)")
    filter_options(p)
    p.add_argument("--top", type=int, default=0, metavar="N", help="list only the N most used tags (default all)")
    p.add_argument("--json", action="store_true", help='print JSON: {"tags": [{"tag", "notes"}], "notes"}')
    _common(p)
    _client(p)

    p = add("inventory", help="the stock-take: duplicated, stale, unused, broken, out-of-sync, secrets",
            description="Check the pile: topics with several current notes, stale and never "
                        "retrieved notes, notes missing topic or tags, broken supersedes, notes "
                        "dated in the future, files the index disagrees with, near-duplicates, "
                        "likely secrets. Exit 0 when clean, "
                        "1 when anything is found. The daemon also saves one regularly under the "
                        "state dir (inventory/latest.txt).")
    p.add_argument("--stale-days", type=float, metavar="N", help="stale after N days (default 180)")
    p.add_argument("--unretrieved-days", type=float, metavar="N", help="never retrieved in N days (default 90)")
    p.add_argument("--all", action="store_true", help="list every finding (default: 20 per section)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _common(p)
    _client(p)

    p = add("mcp", help="serve the memory to agents over MCP (stdio)",
            description="An MCP server on stdin/stdout with the tools recall, remember, forget, "
                        "feedback, inventory and status. It asks the daemon (start that first, or "
                        "it answers in-process, more slowly) and holds no index itself.",
            epilog="install for Claude Code: claude mcp add --scope user vaultmem -- "
                   "$(command -v vaultmem) mcp\n"
                   "install for Codex:       codex mcp add vaultmem -- $(command -v vaultmem) mcp",
            formatter_class=_Help)
    p.add_argument("--socket", metavar="PATH", help="the daemon's socket")
    _common(p)

    p = add("hook", help="Claude Code, Codex and Gemini CLI hooks: memories at session start and with each prompt",
            description="Hooks Claude Code (or Codex, or Gemini CLI, with --agent) runs, reading its JSON on "
                        "stdin; what they print is added to the session's context. They never fail a "
                        "session: on any error they print nothing (for Gemini CLI: {}) and exit 0.\n\n"
                        "session-start: the most relevant current memories for the project in the "
                        "working directory, within a token budget ([agent] hook_tokens).\n"
                        "user-prompt-submit: the few notes that bear on the prompt just sent, or nothing "
                        "(as for most prompts): a note is shown only when its relevance (the chance it "
                        "answers) reaches [agent] prompt_min_relevance, and not again in the same session.\n"
                        "install: add both hooks (or --only one) to the agent's hooks file; "
                        "uninstall: take them out again (nothing else); "
                        "print: show the entries to add by hand.\n\n"
                        "--agent codex: Codex reads the same entries from hooks.json in $CODEX_HOME "
                        "(~/.codex), and runs a new or changed hook only once you trust it in /hooks. "
                        "Its hooks pass over the one file a directory Codex loads itself (AGENTS.override.md, "
                        "AGENTS.md, or a name of its project_doc_fallback_filenames): it follows no import, "
                        "and reads no rule, so those are shown to it like notes.\n\n"
                        "--agent gemini: Gemini CLI reads them from ~/.gemini/settings.json (in "
                        "$GEMINI_CLI_HOME when set, or a project's "
                        ".gemini/settings.json, --settings), runs session-start on SessionStart and "
                        "user-prompt-submit on BeforeAgent, and gets what they add as JSON "
                        "(hookSpecificOutput.additionalContext). Its hooks pass over its context files "
                        "(GEMINI.md, or the names its context.fileName setting gives) and what they import.",
            epilog="examples:\n  vaultmem hook install              # ~/.claude/settings.json, or in $CLAUDE_CONFIG_DIR\n"
                   "  vaultmem hook install --agent codex   # ~/.codex/hooks.json, or in $CODEX_HOME\n"
                   "  vaultmem hook install --agent gemini  # ~/.gemini/settings.json\n"
                   "  vaultmem hook install --settings .claude/settings.json --only session-start\n"
                   "  vaultmem hook uninstall --only user-prompt-submit\n"
                   "  vaultmem hook session-start --budget 800\n"
                   "  vaultmem hook user-prompt-submit --prompt 'why does the deploy need a smoke test?'",
            formatter_class=_Help)
    p.add_argument("action", choices=["session-start", "user-prompt-submit", "install", "uninstall", "print"],
                   help="session-start or user-prompt-submit: run that hook; install or uninstall: add or "
                        "remove the hooks; print: show the settings entries")
    p.add_argument("--budget", type=int, metavar="TOKENS",
                   help="size of what a hook prints (default: [agent] hook_tokens 1500, prompt_tokens 500)")
    p.add_argument("--cwd", metavar="DIR", help="session-start: the project directory (default: from stdin JSON, else here)")
    p.add_argument("--prompt", metavar="TEXT", help="user-prompt-submit: the prompt (default: from stdin JSON)")
    p.add_argument("--only", choices=["session-start", "user-prompt-submit"], help="install, uninstall, print: this hook alone")
    p.add_argument("--agent", choices=["claude", "codex", "gemini"], default="claude",
                   help="the agent that runs the hooks: claude (Claude Code), codex or gemini (Gemini CLI) "
                        "(default claude)")
    p.add_argument("--settings", metavar="FILE", help="install, uninstall: the hooks file (default settings.json in "
                                                      "$CLAUDE_CONFIG_DIR, else in ~/.claude; with --agent codex "
                                                      "hooks.json in $CODEX_HOME, else in ~/.codex; with --agent "
                                                      "gemini .gemini/settings.json in $GEMINI_CLI_HOME, "
                                                      "else in ~)")
    _common(p)
    _client(p)

    p = add("daemon", help="watch the vaults and serve queries on a Unix socket (foreground)",
            description="Run in the foreground (what systemd starts): index the vaults, keep the "
                        "index equal to the files as they change, answer on a Unix socket. "
                        "SIGTERM finishes the batch in hand, commits and exits; SIGHUP (systemctl --user "
                        "reload vaultmem) reads the config again and starts over, or, when the "
                        "config does not read, says why in the log and goes on as it was.",
            epilog="example: vaultmem daemon --vault ~/.claude --vault work=~/src/app")
    p.add_argument("--vault", action="append", default=[], metavar="[NAME=]DIR",
                   help="a vault directory (repeatable; default: the configured or previously indexed vaults)")
    p.add_argument("--socket", metavar="PATH",
                   help="socket path (default $VAULTMEM_SOCKET or $XDG_RUNTIME_DIR/vaultmem/vaultmem.sock)")
    _common(p)

    p = add("service", help="install the systemd user service",
            description="Write ~/.config/systemd/user/vaultmem.service for this user, running "
                        "`vaultmem daemon` with the given options and with the state dir, config "
                        "file, socket and embedder settings this shell resolves (systemd does not "
                        "see your shell's environment); with --enable, start it now and at every "
                        "login. A config or usage error (exit 2) or a changed embedder (exit 4) "
                        "stops the service instead of restarting it.",
            epilog="examples:\n"
                   "  vaultmem service install --vault ~/.claude --vault work=~/src/app --enable\n"
                   "  vaultmem service print               # the unit, written nowhere\n"
                   "  vaultmem service uninstall           # stop, disable, remove the unit",
            formatter_class=_Help)
    p.add_argument("action", choices=["install", "uninstall", "print"],
                   help="install: write the unit; uninstall: stop and disable it and remove the unit "
                        "(the index stays); print: show the unit")
    p.add_argument("--vault", action="append", default=[], metavar="[NAME=]DIR",
                   help="vaults for the daemon (default: the configured, else the indexed ones)")
    p.add_argument("--socket", metavar="PATH", help="socket path for the daemon")
    p.add_argument("--enable", action="store_true",
                   help="with install: `systemctl --user daemon-reload`, enable it at login, and (re)start it")
    _common(p)
    return parser


def unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 2 with the command's usage and, for a mistyped option, the one meant
    (`query deploy --hisotry`: did you mean --history?)."""
    import difflib  # only on this error: a fresh process does not pay for its import

    commands = [a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    target = (commands[0].get(args.command) if commands and args.command else None) or parser
    options = [o for action in target._actions for o in action.option_strings]
    hints = []
    for word in extra:
        if word.startswith("-") and word.split("=")[0] in options:  # `vaultmem --debug daemon`
            hints.append(f"{word} (an option of the command: `vaultmem {args.command} {word}`)")
        elif word.startswith("-"):
            close = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6)
            hints.append(f"{word} (did you mean {close[0]}?)" if close else word)
        else:
            hints.append(word)
    target.error(f"unrecognized arguments: {' '.join(hints)}")
