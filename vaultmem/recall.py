"""What agents read: recall answers, the session-start digest and the notes added to a prompt,
each within a token budget. The hooks (hooks.py) print the last two; the MCP server and
`vaultmem recall` give the first.

Agents pay for every token they read, so every answer here has a bound: hits carry the
matching section of a note (clipped), never the whole file, and entries are dropped from the
end once the budget is spent. Tokens are estimated without a tokenizer (about four characters
of ASCII text per token, one per character of anything else, which over-counts English a little
and is close for Japanese and Korean). A file the agent loads into its session itself
(agents.py knows which) is left out of what the hooks add.

Everything goes through a Backend (the daemon, or the index in this process); nothing here
opens an engine itself or writes a note.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
from pathlib import Path
from collections.abc import Set
from typing import Any

from . import logs
from .agents import (CODEX_OVERRIDE, claude_home, claude_project_dir, claude_slug, codex_reads, gemini_context_names,
                     gemini_home, is_codex_memory, loaded_with_claude_md)
from .backend import Backend
from .client import STILL_INDEXING, DaemonUnavailable
from .config import Settings, Vault
from .errors import VaultmemError
from .query import phrase_absent


def estimate_tokens(text: str) -> int:
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def _file(hit: dict, roots: dict[str, str]) -> str:
    root = roots.get(hit["vault"])
    return os.path.join(root, hit["path"]) if root else hit["path"]


def compact(hit: dict, roots: dict[str, str]) -> dict[str, Any]:
    """A hit as an agent needs it: where to open the file, whether the fact is current, and the
    words that matched."""
    out: dict[str, Any] = {
        "file": _file(hit, roots), "lines": f"{hit['line_start']}-{hit['line_end']}", "heading": hit["heading"],
        "current": hit["current"],
    }
    if hit.get("superseded_by"):
        out["superseded_by"] = hit["superseded_by"]
    if hit.get("retired"):
        out["retired"] = True
    if hit.get("imported_by"):
        out["imported_by"] = hit["imported_by"]
    if hit.get("elsewhere"):
        out["elsewhere"] = hit["elsewhere"]  # another project's note (prefer_own)
    for key in ("topic", "kind", "date"):
        if hit.get(key):
            out[key] = hit[key]
    if hit.get("tags"):
        out["tags"] = hit["tags"]
    if hit.get("relevance") is not None:
        out["relevance"] = hit["relevance"]
    section = hit.get("section")
    plain = hit["snippet"].replace("**", "").strip("… \n")
    if not section or plain not in " ".join(re.sub(r"\*\*|__", "", section).split()):  # the section says it all
        out["snippet"] = hit["snippet"]
    if section:
        out["section"] = section
    return out


def relevant(hits: list[dict], settings: Settings) -> bool:
    """Whether a query's hits bear on it: one of them reaches [agent] min_relevance. A query
    about nothing the memory holds (chit-chat, another project's question) gets nothing rather
    than the least bad notes (bench/abstain.py measures the floor)."""
    return any((h.get("relevance") or 0.0) >= settings.agent.min_relevance for h in hits)


def _nothing_relevant(hits: list[dict], settings: Settings) -> str:
    if not hits:
        return "no matching notes"
    best = max((h.get("relevance") or 0.0) for h in hits)
    return (f"nothing in memory bears on this: the best hit's relevance is {best:.3f}, under the floor of "
            f"{settings.agent.min_relevance:g} ([agent] min_relevance)")


def fit(items: list[dict], budget: int) -> tuple[list[dict], bool]:
    """The longest prefix of `items` within `budget` tokens, counted as they appear in a JSON
    list (each with its ", "). An item that does not fit whole is tried without its section;
    the first item is always kept, its section clipped."""
    out: list[dict] = []
    used = 0
    for i, item in enumerate(items):
        cost = _list_cost(item)
        if used + cost > budget and "section" in item:
            item = {k: v for k, v in item.items() if k != "section"}
            cost = _list_cost(item)
        if used + cost > budget:
            if i == 0:
                out.append(_shrink(item, budget))
            return out, True
        out.append(item)
        used += cost
    return out, False


def _list_cost(item: dict) -> int:
    return estimate_tokens(json.dumps(item, ensure_ascii=False) + ", ")


def _shrink(item: dict, budget: int) -> dict:
    item = dict(item)
    while estimate_tokens(json.dumps(item, ensure_ascii=False)) > budget and len(item.get("snippet", "")) > 40:
        item["snippet"] = item["snippet"][: len(item["snippet"]) * 2 // 3] + " …"
    return item


def vault_roots(backend: Backend) -> dict[str, str]:
    return {v["name"]: v["root"] for v in backend.request({"op": "status"})["vaults"]}


def recall(backend: Backend, settings: Settings, query: str, k: int = 5, tags: list[str] | None = None,
           kind: str | None = None, history: bool = False, budget: int | None = None,
           cwd: str | None = None) -> dict[str, Any]:
    budget = budget or settings.agent.recall_tokens
    k = max(1, min(int(k or 5), 20))
    out = backend.request({"op": "query", "text": query, "k": k, "tags": tags or [], "kinds": [kind] if kind else [],
                           "history": bool(history), "section_chars": settings.agent.section_chars})
    roots = vault_roots(backend)
    indexing = out.get("incomplete") or (STILL_INDEXING if out.get("indexing") else "")

    def left_out(n: int) -> str:
        return f"{n} more hit(s) left out to stay within {budget} tokens"

    def note(*parts: str) -> str:
        return "; ".join(p for p in parts if p)

    if not relevant(out["hits"], settings):
        return {"hits": [], "note": note(phrase_absent(out["phrase_absent"]) if out.get("phrase_absent")
                                         else _nothing_relevant(out["hits"], settings), indexing)}

    # the answer's own keys come first out of the budget, with the longest note it may carry
    envelope = estimate_tokens(json.dumps({"hits": [], "note": note(left_out(len(out["hits"])), indexing)},
                                          ensure_ascii=False))
    hits, clipped = fit([compact(h, roots) for h in prefer_own(out["hits"], roots, cwd)], budget - envelope)
    answer: dict[str, Any] = {"hits": hits}
    said = note(phrase_absent(out["phrase_absent"]) if out.get("phrase_absent") else "no matching notes" if not hits
                else left_out(len(out["hits"]) - len(hits)) if clipped else "", indexing)
    if said:
        answer["note"] = said
    return answer


def project_of(cwd: str) -> Path:
    """The project a session runs in: the git work tree containing cwd, else cwd."""
    import subprocess  # here: the prompt hook, run on every prompt, never starts git

    try:
        top = subprocess.run(["git", "-C", cwd, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             timeout=2).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        top = ""
    return Path(top or cwd).resolve()


def project_words(project: Path) -> str:
    """What the project is about right now, from what is at hand offline: its name, the git
    branch and the last few commit subjects."""
    import subprocess

    words = [project.name.replace("-", " ").replace("_", " ")]
    for args in (["rev-parse", "--abbrev-ref", "HEAD"], ["log", "-5", "--format=%s"]):
        try:
            got = subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True, timeout=2)
        except (OSError, subprocess.SubprocessError):
            continue
        if got.returncode == 0:
            words.extend(line for line in got.stdout.splitlines() if line and line != "HEAD")
    return " ".join(words)


def session_start(backend: Backend, settings: Settings, cwd: str, budget: int | None = None,
                  session_id: str | None = None, source: str | None = None, agent: str = "claude") -> str:
    """The most relevant current memories for the project at `cwd`, as Markdown within
    `budget` tokens: the project's own notes first (its vault's memory notes, and Claude Code's
    memory for the project), then notes elsewhere that match what the project is doing now.
    What the `agent` loads itself is left out (`passed_over`). With a `session_id`, what is
    shown is remembered for the prompt hook; a `source` other than "resume" (a new, cleared or
    compacted context) forgets what it was shown before."""
    budget = budget or settings.agent.hook_tokens
    project = project_of(cwd)
    roots = vault_roots(backend)
    text = project_words(project)
    own_vaults = [name for name, root in roots.items()
                  if str(project) == root or str(project).startswith(root.rstrip("/") + "/")
                  or root.startswith(str(project).rstrip("/") + "/")]
    claude_dir = claude_project_dir(project)
    picked: list[dict] = []
    seen: set[str] = set()

    def take(hits: list[dict]) -> None:
        for h in hits:
            if _key(h) in seen or passed_over(agent, h, roots):
                continue
            seen.add(_key(h))
            picked.append(h)

    base: dict[str, Any] = {"op": "query", "text": text, "k": 30, "mode": "hybrid", "section_chars": 600, "record": False}
    own: list[dict[str, Any]] = [{"vaults": own_vaults}] if own_vaults else []
    own.append({"path": f"**/{claude_dir}/**"})  # in a vault that is ~/.claude, or one above it
    for scope in own:  # the project's own notes: those most like what it does, then the newest
        hits = backend.request({**base, **scope})["hits"]
        take(hits)
        if len(hits) < base["k"]:  # (k notes are more than any budget holds)
            take(backend.request({**base, **scope, "text": ""})["hits"])
    take(backend.request({**base, "k": 5, "mode": "text"})["hits"])  # elsewhere: only what shares words

    head = f"# Memories for {project.name} (vaultmem)\n"
    tail = ("\nMore: the vaultmem MCP tool `recall` (or `vaultmem query TEXT`). Older versions of a fact "
            "are hidden; open a file at the given lines for the full note.\n")
    # the digest is head + "\n" + entries + tail; estimating its parts apart never counts less
    # than estimating the whole (each part's count rounds up)
    lines, keys = _entries(picked, roots, budget - estimate_tokens(head + "\n" + tail))
    _shown(backend, settings, keys, session_id, reset=source != "resume")
    return head + "\n" + "".join(lines) + tail if lines else ""


PROMPT_CHARS = 2000  # of a longer prompt (pasted logs, code), its head and tail are searched
PROMPT_LINE_CHARS = 300  # ...and, apart, its first and last lines, where the question usually is


def prompt_queries(prompt: str) -> list[str]:
    """What of a prompt is searched: a slash command's arguments (the command's own text is
    not sent to hooks); of a long prompt, its head and tail, and apart its first and last
    lines, since a question pasted around a log or a file is drowned in it; none when nothing
    is worth a search."""
    text = prompt.strip()
    if text.startswith("/"):
        text = text.split(None, 1)[1] if len(text.split(None, 1)) == 2 else ""
    queries = [text]
    if len(text) > PROMPT_CHARS:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        queries = [text[: PROMPT_CHARS // 2] + "\n" + text[-PROMPT_CHARS // 2 :],
                   lines[0][:PROMPT_LINE_CHARS], lines[-1][-PROMPT_LINE_CHARS:]]
    return [q for q in dict.fromkeys(queries) if any(ch.isalnum() for ch in q)]


def prompt_hits(backend: Backend, settings: Settings, prompt: str, shown: Set[str] = frozenset(),
                min_relevance: float | None = None, agent: str = "claude",
                cwd: str | None = None) -> tuple[list[dict], dict[str, str]]:
    """The hits the prompt hook shows for `prompt`, and the vaults' roots. Hits whose file the
    `agent` loads itself, or in `shown` (the session has them already), are passed over; of the
    best `[agent] prompt_notes` left, a hit is kept only when its relevance (the chance it
    answers) reaches `min_relevance` (default `[agent] prompt_min_relevance`; 0: no gate). Scores are
    relative to the other hits, so they cannot tell that nothing is relevant; relevance can.
    A long prompt's several queries (`prompt_queries`) are merged by relevance. The session's
    own project (`cwd`) comes first: another project's note only when clearly better (prefer_own)."""
    cfg = settings.agent
    gate = cfg.prompt_min_relevance if min_relevance is None else min_relevance
    queries = prompt_queries(prompt)
    k = cfg.prompt_notes + min(len(shown), 50) + 5  # room for the hits passed over
    best: dict[str, dict] = {}
    for text in queries:
        for h in backend.request({"op": "query", "text": text, "k": k, "mode": "hybrid",
                                  "section_chars": 600, "explain": True, "record": False})["hits"]:
            if _key(h) not in best or _relevance(h) > _relevance(best[_key(h)]):
                best[_key(h)] = h
    hits = list(best.values())
    if len(queries) > 1:
        hits.sort(key=_relevance, reverse=True)

    def close(h: dict) -> bool:
        return not gate or _relevance(h) >= gate
    if not any(close(h) for h in hits):  # most prompts: done without another request
        return [], {}
    roots = vault_roots(backend)
    hits = [h for h in hits if _key(h) not in shown and not passed_over(agent, h, roots)]
    hits = prefer_own([h for h in hits if close(h)], roots, cwd)
    return hits[: cfg.prompt_notes], roots


def _relevance(hit: dict) -> float:
    return hit.get("relevance") or 0.0


# Another project's note is shown beside the session's own only when this many times as likely
# to answer as the best of its own, and marked as from elsewhere: a literal match in another
# project (webshop's `make pgtest`, 0.84) is no better advice than this one's (ledger's `make
# itest`, 0.18), but one that answers where this project's notes barely touch the question is.
ELSEWHERE_FACTOR = 5.0


def project_of_hit(hit: dict, roots: dict[str, str], cwd: str) -> str | None:
    """None when the hit is the session's own (its vault holds `cwd`, or it is in the user-wide
    memory, ~/.claude, but for another project's folder under projects/); else the vault or the
    project it belongs to."""
    root = roots.get(hit["vault"], "")
    if cwd == root or cwd.startswith(root.rstrip(os.sep) + os.sep):
        return None
    if root and Path(root) == claude_home().resolve():
        parts = hit["path"].split("/")
        if len(parts) > 1 and parts[0] == "projects":
            mine = claude_slug(str(project_of(cwd))) if cwd else ""
            return None if parts[1] == mine else parts[1]
        return None
    return hit["vault"]


def prefer_own(hits: list[dict], roots: dict[str, str], cwd: str | None) -> list[dict]:
    """The session's own project's hits first, in their order; another project's hit (marked
    `elsewhere`: the vault or project) only when it is ELSEWHERE_FACTOR times as likely to
    answer as the best own one. Without a working directory in a vault, `hits` as they are."""
    if not cwd or not any(cwd == r or cwd.startswith(r.rstrip(os.sep) + os.sep) for r in roots.values()):
        return hits  # the session's project is in no vault: nothing to prefer
    own: list[dict] = []
    other: list[dict] = []
    for h in hits:
        where = project_of_hit(h, roots, cwd)
        (own if where is None else other).append(h if where is None else {**h, "elsewhere": where})
    best = max((_relevance(h) for h in own), default=0.0)
    return own + [h for h in other if _relevance(h) >= ELSEWHERE_FACTOR * best]


def prompt_context(backend: Backend, settings: Settings, prompt: str, session_id: str | None = None,
                   budget: int | None = None, agent: str = "claude", cwd: str | None = None) -> str:
    """The notes that bear on a prompt the user just sent (`prompt_hits`), as Markdown within
    `budget` tokens, or "" when none does, as for most prompts."""
    shown = SessionNotes(settings.state_dir, session_id).load() if session_id else set()
    hits, roots = prompt_hits(backend, settings, prompt, shown, agent=agent, cwd=cwd)
    head = "Notes from the user's memory (vaultmem) that may bear on this prompt; open a file for the whole note:\n"
    lines, keys = _entries(hits, roots, (budget or settings.agent.prompt_tokens) - estimate_tokens(head), body_chars=300)
    if not lines:
        return ""
    _shown(backend, settings, keys, session_id)
    return head + "".join(lines)


def _sha256(data: bytes):
    """hashlib.sha256 without hashlib's import, which loads OpenSSL (~2 ms of every prompt's
    hook): Python's own SHA-256, named _sha2 since 3.12, _sha256 before."""
    try:
        from _sha2 import sha256
    except ImportError:
        try:
            from _sha256 import sha256
        except ImportError:  # a Python built without it
            from hashlib import sha256
    return sha256(data)


class SessionNotes:
    """The notes the hooks have shown one agent session (by its session_id), so that a
    prompt is not answered with a note the session holds already. A small file per session under
    the state dir's `sessions/`; one untouched for SESSION_DAYS is removed when another is
    written. Losing one costs a repeated note, nothing more."""

    SESSION_DAYS = 2.0

    def __init__(self, state_dir: Path, session_id: str):
        self.dir = Path(state_dir) / "sessions"
        name = _sha256(str(session_id).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        self.path = self.dir / f"{name}.json"

    def load(self) -> set[str]:
        try:
            return {k for k in json.loads(self.path.read_text(encoding="utf-8"))["shown"] if isinstance(k, str)}
        except (OSError, ValueError, KeyError, TypeError):
            return set()

    def add(self, keys: list[str], reset: bool = False) -> None:
        shown = sorted((set() if reset else self.load()) | set(keys))
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"shown": shown}, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.path)
        stale = time.time() - self.SESSION_DAYS * 86400
        for f in self.dir.iterdir():
            try:
                if f.stat().st_mtime < stale:
                    f.unlink()
            except OSError:
                pass


def _key(hit: dict) -> str:
    return f"{hit['vault']}:{hit['path']}"


def passed_over(agent: str, hit: dict, roots: dict[str, str]) -> bool:
    """Whether the hooks leave the hit's file out for the `agent`: a file the agent puts into
    its context itself, or a MEMORY.md (an index of notes that are shown on their own). Claude
    Code loads CLAUDE.md, CLAUDE.local.md, AGENTS.md, MEMORY.md, rules and the files they
    import; Gemini CLI its context files (GEMINI.md, or `context.fileName` of its settings) and
    what they import; Codex loads one file a directory (codex_reads: AGENTS.override.md, AGENTS.md, or a
    name of its `project_doc_fallback_filenames`, such as CLAUDE.md) and its memory_summary.md
    (it follows no imports, so to a Codex session those are notes like any other, and its own
    MEMORY.md is a handbook it searches, not an index)."""
    root = roots.get(hit["vault"])
    seen_as = Vault(hit["vault"], Path(root)).globbed(hit["path"]) if root else hit["path"]
    if agent == "gemini":  # its context files (GEMINI.md, or the names its settings give) and their imports
        names = gemini_context_names(str(gemini_home() / "settings.json"))
        importer = hit.get("imported_by")
        return posixpath.basename(seen_as) in names or posixpath.basename(seen_as).lower() == "memory.md" or (
            importer is not None and posixpath.basename(importer) in names)
    if agent == "codex":
        name = posixpath.basename(seen_as)
        if is_codex_memory(seen_as):
            return name == "memory_summary.md"
        if name.lower() == "memory.md":
            return True
        if root is None:
            return name in (CODEX_OVERRIDE, "AGENTS.md")
        return codex_reads(Path(root) / hit["path"])
    return loaded_with_claude_md(seen_as, hit.get("imported_by"))


def _entries(hits: list[dict], roots: dict[str, str], budget: int, body_chars: int = 400) -> tuple[list[str], list[str]]:
    """Entries for `hits` in order within `budget` tokens (one that does not fit is tried with a
    shorter body, then left out), and the keys of the notes they show."""
    lines: list[str] = []
    keys: list[str] = []
    used = 0
    for h in hits:
        entry = _entry(h, roots, body_chars)
        cost = estimate_tokens(entry)
        if used + cost > budget:
            entry = _entry(h, roots, body_chars=min(160, body_chars))
            cost = estimate_tokens(entry)
            if used + cost > budget:
                continue
        lines.append(entry)
        keys.append(_key(h))
        used += cost
    return lines, keys


def _shown(backend: Backend, settings: Settings, keys: list[str], session_id: str | None, reset: bool = False) -> None:
    """Count the notes a hook showed as retrieved (for stats and the inventory, though no query
    asked), and remember them for the session."""
    try:
        if keys:
            backend.request({"op": "shown", "notes": keys})
    except (VaultmemError, DaemonUnavailable, OSError) as err:
        logs.logger(__name__).warning("hook: could not record the notes shown: %s", err)
    try:
        if session_id:
            SessionNotes(settings.state_dir, session_id).add(keys, reset=reset)
    except OSError as err:
        logs.logger(__name__).warning("hook: could not remember what this session was shown: %s", err)


def _entry(hit: dict, roots: dict[str, str], body_chars: int = 400) -> str:
    title = hit.get("topic") or hit["heading"]
    meta = ", ".join(x for x in (hit.get("kind") if hit.get("kind") != "knowledge" else "",
                                 (hit.get("date") or "")[:10]) if x)
    text = (hit.get("section") or hit["snippet"]).replace("**", "")
    body = " ".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    body = " ".join(body.split())
    if len(body) > body_chars:
        body = body[:body_chars].rsplit(" ", 1)[0] + " …"
    where = f"{_file(hit, roots)}:{hit['line_start']}"
    if hit.get("elsewhere"):
        meta = ", ".join(x for x in (meta, f"from {hit['elsewhere']}, not this project") if x)
    return f"- **{title}**" + (f" ({meta})" if meta else "") + f" — `{where}`\n  {body}\n"
