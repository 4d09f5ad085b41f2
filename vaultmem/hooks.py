"""Installing vaultmem's hooks into each agent's own settings: Claude Code's settings.json, Codex's
hooks.json (of the same shape) and Gemini CLI's settings.json (which may hold comments: jsonc.py
edits it), and what a hook prints for each. Every edit changes nothing but vaultmem's own
entries, byte for byte elsewhere, and is written atomically (writing.replace_file).

What the hooks print is recall.py's; where each agent keeps its settings is agents.py's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from . import jsonc
from .agents import AGENTS, claude_home, codex_home, gemini_home


HOOKS = {"session-start": "SessionStart", "user-prompt-submit": "UserPromptSubmit"}  # vaultmem's name: the event's
GEMINI_EVENTS = {"session-start": "SessionStart", "user-prompt-submit": "BeforeAgent"}  # Gemini CLI's names


def event(action: str, agent: str) -> str:
    """The name of the event the `agent` runs vaultmem's `action` on."""
    return (GEMINI_EVENTS if agent == "gemini" else HOOKS)[action]


def hooks_file(agent: str) -> Path:
    """Where the `agent` reads the user's own hooks: Claude Code in settings.json under
    $CLAUDE_CONFIG_DIR or ~/.claude, Codex in hooks.json under $CODEX_HOME or ~/.codex, Gemini
    CLI in .gemini/settings.json under $GEMINI_CLI_HOME or ~. All hold {"hooks": {EVENT: [{"matcher": ..., "hooks":
    [{"type": "command", ...}]}]}}."""
    if agent == "gemini":
        return gemini_home() / "settings.json"
    return codex_home() / "hooks.json" if agent == "codex" else claude_home() / "settings.json"


def hook_output(action: str, agent: str, text: str) -> str:
    """What a hook prints: the text itself for Claude Code and Codex; for Gemini CLI, which
    reads its hooks' stdout as JSON (and their stderr in its place when stdout is empty), the
    text as the event's additionalContext, or `{}`."""
    if agent != "gemini":
        return text
    out = {"hookSpecificOutput": {"hookEventName": event(action, agent), "additionalContext": text}} if text else {}
    return json.dumps(out, ensure_ascii=False)


def hook_command(exe: str, action: str, agent: str) -> str:
    """The command line that runs a hook for the `agent` (`exe`: vaultmem, shell-quoted)."""
    return f"{exe} hook {action}{_flag(agent)}"


def _flag(agent: str) -> str:
    """The `--agent` of vaultmem's commands for the `agent` (none for Claude Code, the default)."""
    return f" --agent {agent}" if agent != "claude" else ""


def hook_entry(action: str, command: str, agent: str = "claude") -> dict:
    """The entry that runs `command` on the action's event: the same for Claude Code and Codex
    (timeout in seconds); Gemini CLI's hooks carry a name and a timeout in milliseconds, and
    its session start takes no matcher (its lifecycle matchers are exact strings)."""
    if agent == "gemini":
        return {"hooks": [{"type": "command", "command": command, "name": f"vaultmem-{action}", "timeout": 10000}]}
    hook = {"type": "command", "command": command, "timeout": 10}
    if action == "session-start":
        return {"matcher": "startup|resume|clear|compact", "hooks": [hook]}
    return {"hooks": [hook]}  # UserPromptSubmit takes no matcher


def install_hook(settings_file: Path, commands: dict[str, str], agent: str = "claude") -> dict[str, bool]:
    """Add vaultmem's hooks (`commands`: action to command) to the `agent`'s hooks file,
    changing nothing but what it adds: other keys, the user's own hook entries (one-line ones
    too), comments and layout stay (a new "hooks" goes last in the file's indentation: Claude
    Code writes two spaces, a hand-kept file may use four or tabs). Written atomically, through
    a symlink to its target, and only when a hook was added; returns for each action whether it
    was (False: there already). A file whose shape is not a hooks file's is refused, untouched."""
    text, data, lists = _read_hooks(settings_file, list(commands), agent)
    had_hooks = isinstance(data.get("hooks"), dict)
    had_events = set(data.get("hooks", {})) if had_hooks else set()
    hooks = data.setdefault("hooks", {})
    added: dict[str, bool] = {}
    edits = []
    for action, command in commands.items():
        name = event(action, agent)
        entries = hooks.setdefault(name, lists[action])
        added[action] = not _has_ours(entries, action)
        if added[action]:
            entry = hook_entry(action, command, agent)
            entries.append(entry)
            if had_hooks:  # only the new entry is written: every byte of the user's stays
                edits.append(lambda t, n=name, e=entry: jsonc.appended(t, ("hooks", n), e) if n in had_events
                             else jsonc.with_member_at(t, ("hooks",), n, [e]))
    if any(added.values()):
        new = text
        for edit in edits if had_hooks else [lambda t: jsonc.with_member(t, "hooks", data["hooks"])]:
            new = _edited(settings_file, new, edit, agent)
        _write_settings(settings_file, new, data, agent)
    return added


def uninstall_hook(settings_file: Path, actions: list[str], agent: str = "claude") -> dict[str, bool]:
    """Take vaultmem's hooks for `actions` out of the `agent`'s hooks file, and nothing else:
    another command in the same entry stays, an entry or event list left empty goes, and so
    does a "hooks" left empty (so install then uninstall gives the file back as it was).
    Returns for each action whether it was there."""
    text, data, lists = _read_hooks(settings_file, actions, agent)
    removed: dict[str, bool] = {}
    new = text
    for action in actions:
        name = event(action, agent)
        entries = lists[action]
        removed[action] = _has_ours(entries, action)
        if not removed[action]:
            continue
        for i in reversed(range(len(entries))):  # from the end: the indexes of the rest hold
            inner = entries[i].get("hooks", [])
            ours = [j for j, h in enumerate(inner) if _is_ours(h, action)]
            if not ours:
                continue
            if len(ours) == len(inner):
                new = _edited(settings_file, new, lambda t, i=i, name=name: jsonc.without_element(t, ("hooks", name), i), agent)
                del entries[i]
            else:
                for j in reversed(ours):
                    new = _edited(settings_file, new,
                                  lambda t, i=i, j=j, name=name: jsonc.without_element(t, ("hooks", name, i, "hooks"), j), agent)
                entries[i]["hooks"] = [h for h in inner if not _is_ours(h, action)]
        if not entries:
            del data["hooks"][name]
            new = _edited(settings_file, new, lambda t, name=name: jsonc.with_member_at(t, ("hooks",), name), agent)
    if any(removed.values()):
        if not data["hooks"]:
            del data["hooks"]
            new = _edited(settings_file, new, lambda t: jsonc.with_member(t, "hooks"), agent)
        _write_settings(settings_file, new, data, agent)
    return removed


def missing_hook(agent: str = "claude") -> str | None:
    """What to tell the user when the `agent`'s user hooks file runs some of vaultmem's hooks
    but not all (one installed before the other existed); else None. Said by `vaultmem status`."""
    from .errors import UsageError

    settings_file = hooks_file(agent)
    try:
        _, _, lists = _read_hooks(settings_file, list(HOOKS), agent)
    except (UsageError, OSError):  # not for status to judge: install says what is wrong
        return None
    there = [a for a in HOOKS if _has_ours(lists[a], a)]
    missing = [a for a in HOOKS if a not in there]
    if not there or not missing:
        return None
    return (f"{AGENTS[agent]} runs vaultmem's {', '.join(there)} hook but not its {', '.join(missing)} hook "
            f"({settings_file}): `vaultmem hook install{_flag(agent)}` adds it")


def _is_ours(hook: dict, action: str) -> bool:
    """Whether a hook runs vaultmem's `action` (`hook_command`, as any release wrote it)."""
    return re.search(rf"\bhook {action}( --agent \w+)?$", str(hook.get("command", ""))) is not None


def _has_ours(entries: list[dict], action: str) -> bool:
    return any(_is_ours(h, action) for e in entries for h in e.get("hooks", []))


def _read_hooks(settings_file: Path, actions: list[str], agent: str = "claude") -> tuple[str, dict, dict[str, list]]:
    """A settings file's text, its data, and for each action the list of entries of its event
    (a new empty list when there is none). A file that is no JSON object of hook lists is
    refused, untouched."""
    from .errors import UsageError

    data: Any = {}
    text = ""
    if settings_file.exists():
        try:
            text = settings_file.read_text(encoding="utf-8")
            data = jsonc.loads(text) if text.strip() else {}
        except (ValueError, UnicodeDecodeError) as err:
            raise UsageError(f"{settings_file} is not valid JSON ({err}); fix it or edit the hooks by hand") from None
    hooks = data.get("hooks", {}) if isinstance(data, dict) else None
    lists: dict[str, list] = {}
    for action in actions:
        name = event(action, agent)
        entries = hooks.get(name, []) if isinstance(hooks, dict) else None
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and isinstance(e.get("hooks", []), list) and all(isinstance(h, dict) for h in e.get("hooks", []))
                for e in entries):
            where = "the file" if hooks is None else "\"hooks\"" if entries is None else f"\"hooks\".\"{name}\""
            raise UsageError(f"{settings_file}: {where} is not shaped as {AGENTS[agent]}'s settings are (an object "
                             f"of hook lists); fix it or edit the hooks by hand (`vaultmem hook print{_flag(agent)}` "
                             "shows them)")
        lists[action] = entries
    return text, data, lists


def _edited(settings_file: Path, text: str, edit, agent: str) -> str:
    """`edit(text)`, or a UsageError when it would lose a comment of the user's."""
    from .errors import UsageError

    try:
        return edit(text)
    except jsonc.Unsafe as err:
        raise UsageError(f"{settings_file}: {err}, which vaultmem will not drop; edit the hooks by hand "
                         f"(`vaultmem hook print{_flag(agent)}` shows them)") from None


def _write_settings(settings_file: Path, new: str, data: dict, agent: str) -> None:
    """Write the edited text `new` over the settings file, atomically, when it reads back as
    `data` (what the edit meant): never a file that does not."""
    from .errors import UsageError
    from .writing import replace_file

    if jsonc.loads(new) != data:
        raise UsageError(f"{settings_file}: vaultmem could not change its hooks alone; edit them by hand "
                         f"(`vaultmem hook print{_flag(agent)}` shows them)")
    replace_file(settings_file, new)
