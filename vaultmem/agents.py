"""Each agent vaultmem serves, as it is on disk: where it keeps its things (Claude Code's
~/.claude or $CLAUDE_CONFIG_DIR, Codex's ~/.codex or $CODEX_HOME, Gemini CLI's ~/.gemini), which
files it loads into a session itself and by what rule (instruction files, rules, `@imports`,
context file names from its own settings), what it writes as memory, and where Claude Code keeps
a project's memory (its slug of the project's path).

Pure knowledge of the agents' conventions, read from their own config files at most: nothing
here reads a note, touches the index or writes anything. What vaultmem does with it lives
elsewhere: imports.py follows `@imports`, recall.py leaves out what an agent loads itself,
hooks.py edits the agents' hook settings, config.py tells an agent's home vault by its root.
"""

from __future__ import annotations

import functools
import os
import posixpath
from pathlib import Path

from . import jsonc, logs


AGENTS = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}  # the agents whose hooks vaultmem serves


def claude_home() -> Path:
    """Claude Code's own directory: `$CLAUDE_CONFIG_DIR` when set (Claude Code reads its
    settings, rules and project memory there), else `~/.claude`."""
    return Path(os.path.expanduser(os.environ.get("CLAUDE_CONFIG_DIR") or "~/.claude"))


def codex_home() -> Path:
    """Codex's own directory: `$CODEX_HOME` when set (Codex reads its config and hooks.json
    there), else `~/.codex`."""
    return Path(os.path.expanduser(os.environ.get("CODEX_HOME") or "~/.codex"))


def gemini_home() -> Path:
    """Gemini CLI's own directory: `.gemini` in `$GEMINI_CLI_HOME` when set (Gemini CLI takes
    that for the home directory it keeps all its state under), else `~/.gemini`. Its
    settings.json (hooks, context file names) and the GEMINI.md its save_memory appends to."""
    return Path(os.path.expanduser(os.environ.get("GEMINI_CLI_HOME") or "~")) / ".gemini"


INSTRUCTION_FILES = frozenset({"claude.md", "claude.local.md", "agents.md", "memory.md"})  # not facts
CODEX_OVERRIDE = "AGENTS.override.md"  # Codex reads it in place of the AGENTS.md beside it; Claude Code never
GEMINI_MD = "GEMINI.md"  # Gemini CLI's context file; its save_memory appends facts to ~/.gemini/GEMINI.md


def is_rule(path: str) -> bool:
    """A rule file of Claude Code's (`.claude/rules/**/*.md`), read like a CLAUDE.md. Like the
    helpers below, it takes the path as the globs see it (Vault.globbed)."""
    return path.startswith(".claude/rules/") or "/.claude/rules/" in path


# Instructions other agents load themselves: Cursor's project rules and its legacy
# .cursorrules, Copilot's instructions, Windsurf's rules (.windsurf/rules/, .devin/rules/ since
# its rename to Devin Desktop, the legacy .windsurfrules, the user's global_rules.md) and
# Cline's (.clinerules, a file or a folder, and .cline/rules/).
OTHER_AGENTS_RULE_DIRS = ("/.cursor/rules/", "/.github/instructions/", "/.windsurf/rules/", "/.devin/rules/",
                          "/.clinerules/", "/.cline/rules/")
OTHER_AGENTS_RULE_FILES = ("/.github/copilot-instructions.md", "/.cursorrules", "/.windsurfrules", "/.clinerules",
                           "/.codeium/windsurf/memories/global_rules.md")


def is_other_agents_rules(path: str) -> bool:
    """A file of instructions another agent loads itself, as Claude Code does its rules
    (OTHER_AGENTS_RULE_DIRS, OTHER_AGENTS_RULE_FILES). Claude Code and Codex load none of them:
    to their sessions they are notes like any other. Their frontmatter, where they have any, is
    written for that agent's reader, not for YAML (notes.parse_note)."""
    rooted = f"/{path}"
    return any(d in rooted for d in OTHER_AGENTS_RULE_DIRS) or rooted.endswith(OTHER_AGENTS_RULE_FILES)


def reads_imports(path: str) -> bool:
    """Whether an agent follows the imports of the file at `path`: Claude Code those of a
    CLAUDE.md, a CLAUDE.local.md, an AGENTS.md (read in place of a CLAUDE.md, or through a
    `CLAUDE.md -> AGENTS.md` link) or a rule file; Gemini CLI those of a GEMINI.md (its memory
    import processor: `@./docs/style.md`, taken from the file's directory, 5 hops as well). An
    imported file's own imports are followed too."""
    return posixpath.basename(path) in ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", GEMINI_MD) or is_rule(path)


def is_codex_memory(path: str) -> bool:
    """A file of the memory Codex writes from past threads (`~/.codex/memories/`: its MEMORY.md
    handbook, memory_summary.md, rollout_summaries/): machine-written, with no frontmatter."""
    return path.startswith(".codex/memories/") or "/.codex/memories/" in path


def loaded_with_claude_md(path: str, imported_by: str | None) -> bool:
    """Whether Claude Code puts a note into the session itself: an instruction file
    (CLAUDE.md, CLAUDE.local.md, AGENTS.md, a MEMORY.md index, a rule), or a file one imports
    (not one only a GEMINI.md's imports reach: `imported` names that GEMINI.md as its importer).
    Codex's handbook is named MEMORY.md too, and Claude Code never loads it."""
    if imported_by is not None:
        return posixpath.basename(imported_by) != GEMINI_MD
    return not is_codex_memory(path) and (posixpath.basename(path).lower() in INSTRUCTION_FILES or is_rule(path))


def codex_reads(path: Path) -> bool:
    """Whether Codex puts the file at `path` into its threads as instructions: in each directory
    it reads the first non-empty one of AGENTS.override.md, AGENTS.md and the names its config's
    `project_doc_fallback_filenames` lists (not in its own home, where only the first two count)."""
    home = os.path.realpath(codex_home())
    names = (CODEX_OVERRIDE, "AGENTS.md") if os.path.realpath(path.parent) == home else \
        (CODEX_OVERRIDE, "AGENTS.md", *_codex_fallbacks(os.path.join(home, "config.toml")))
    if path.name not in names:
        return False
    for name in names:
        try:
            if (path.parent / name).stat().st_size > 0:
                return name == path.name
        except OSError:  # not there
            continue
    return False


@functools.lru_cache(maxsize=4)
def gemini_context_names(settings: str) -> tuple[str, ...]:
    """The names of Gemini CLI's context files: `context.fileName` of its settings.json (a name
    or a list), else GEMINI.md. Read once."""
    try:
        with open(settings, encoding="utf-8") as f:
            context = jsonc.loads(f.read()).get("context") or {}
        names = context.get("fileName") if isinstance(context, dict) else None
    except FileNotFoundError:
        names = None
    except (OSError, ValueError, AttributeError) as err:
        logs.logger(__name__).debug("Gemini CLI's %s not read: %s", settings, err)
        names = None
    names = [names] if isinstance(names, str) else names if isinstance(names, list) else []
    return tuple(n for n in names if isinstance(n, str) and n and "/" not in n) or (GEMINI_MD,)


@functools.lru_cache(maxsize=4)
def _codex_fallbacks(config: str) -> tuple[str, ...]:
    """`project_doc_fallback_filenames` of Codex's config.toml (file names only), read once."""
    import tomllib  # here: few processes read Codex's config, and every hook process imports this module

    try:
        with open(config, "rb") as f:
            names = tomllib.load(f).get("project_doc_fallback_filenames", [])
    except FileNotFoundError:
        return ()
    except (OSError, tomllib.TOMLDecodeError) as err:
        logs.logger(__name__).debug("Codex's %s not read: %s", config, err)
        return ()
    return tuple(n for n in names if isinstance(n, str) and n and "/" not in n) if isinstance(names, list) else ()


CLAUDE_SLUG_MAX = 200  # Claude Code cuts a longer project name here and adds a hash of the path


def claude_slug(path: str) -> str:
    """Claude Code's name for a project, its folder under projects/: the project's path with
    every character but an ASCII letter or digit as -, and a character beyond the BMP as --
    (two UTF-16 units). Not cut: see claude_project_dir."""
    return "".join(c if c.isascii() and c.isalnum() else "--" if ord(c) > 0xFFFF else "-" for c in path)


def claude_project_dir(project: Path) -> str:
    """Where Claude Code keeps a project's own memory, as a glob under its directory:
    projects/<claude_slug of the project's path>. A name over CLAUDE_SLUG_MAX characters is cut
    and given a hash whose recipe has changed between Claude Code versions, so it is matched by
    a wildcard."""
    slug = claude_slug(str(project))
    return f"projects/{slug[:CLAUDE_SLUG_MAX]}-*" if len(slug) > CLAUDE_SLUG_MAX else f"projects/{slug}"


def unindexed_homes(roots: list[str]) -> list[str]:
    """What to tell the user about the agents' own directories that hold memory no vault root in
    `roots` covers: Claude Code's (~/.claude, or $CLAUDE_CONFIG_DIR: its CLAUDE.md, a project's
    auto memory, a subagent's memory), Codex's (~/.codex, or $CODEX_HOME: what it writes in
    memories/ when its memories are on) and Gemini CLI's (~/.gemini: the GEMINI.md its
    save_memory appends to). Said by `vaultmem status` and the MCP status tool."""
    said = []
    for home, patterns, what in (
            (claude_home(), ("CLAUDE.md", "projects/*/memory/*.md", "agent-memory/*/*.md"),
             "Claude Code's own memory in {} (CLAUDE.md, projects/*/memory/, agent-memory/)"),
            (codex_home(), ("memories/MEMORY.md", "memories/memory_summary.md", "memories/rollout_summaries/*.md"),
             "Codex's own memory in {} (memories/)"),
            (gemini_home(), ("GEMINI.md",), "Gemini CLI's own memory in {} (GEMINI.md, where save_memory keeps facts)")):
        try:
            real = home.resolve()
            if not any(next(real.glob(pattern), None) for pattern in patterns):
                continue
        except OSError:
            continue
        if not any(real.is_relative_to(root) for root in roots):
            said.append(f"{what.format(home)} is in no vault, so it is not searched: add `--vault {home}`")
    return said
