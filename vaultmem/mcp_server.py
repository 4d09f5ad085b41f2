"""`vaultmem mcp`: an MCP server over stdio (the official `mcp` SDK) for agents. A thin client:
each tool call goes to the daemon over its socket; with no daemon it answers from the index in
this process, says so in the answer, and closes the index again (so it never holds the writer
lock a daemon starting later would need). Every answer is bounded (recall.py). When stdin ends,
every request read before is answered before the server exits (answers_before_eof).

Tools: recall, tags, remember, forget (retires; agents never delete files), feedback, inventory,
status. Their descriptions are written for the model that reads them.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import sys
import threading
from typing import Annotated, Any, Iterator

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from . import __version__
from .agents import unindexed_homes
from .recall import recall as bounded_recall
from .backend import Backend
from .config import Settings
from .errors import UsageError, VaultmemError

INSTRUCTIONS = """vaultmem is this user's long-term memory: decisions, corrections, conventions and
lessons kept as Markdown notes (CLAUDE.md, AGENTS.md, memory notes). Call `recall` before you decide
something the user or an earlier session may already have settled (how to deploy, test, name,
structure, which library or API version to use), and when the user refers to something from
before. Call `remember` when you learn a fact worth keeping for the next session: a decision, a
correction from the user, a gotcha. Only current versions of facts are returned unless asked."""

DRAIN_SECONDS = 60.0  # at the end of input, how long requests already read may take to answer
INVENTORY_ITEMS = 5  # findings shown per section
LIST_ITEMS = 20  # notes listed in one answer
TAG_ITEMS = 50  # tags listed in one answer, most used first


def param(description: str, **bounds: Any) -> Any:
    """A parameter's description and bounds, in the schema the model reads. The bounds are
    advertised only (json_schema_extra) and checked by the tool itself: the SDK's own check
    answered a model with a pydantic error and a link to pydantic's documentation."""
    return Field(description=description, json_schema_extra=bounds or None)


K_MAX = 20
Query = Annotated[str, param("what you need, in words likely to appear in the note; a \"quoted phrase\" "
                              "matches only notes that hold it", minLength=1)]
K = Annotated[int, param(f"how many hits, 1-{K_MAX}", minimum=1, maximum=K_MAX)]
Tags = Annotated[list[str] | None, param("only notes with all of these tags (see the tags tool for the names)")]
Kind = Annotated[str | None, param("only notes of this kind: decision, correction, knowledge, insight, ...")]
Vault = Annotated[str | None, param("a vault's name (status lists them)")]
Path_ = Annotated[str | None, param("a note's file, as recall returned it")]
Topic = Annotated[str, param("a short, stable name for the fact (\"deploy procedure\"): a note on a topic that "
                             "exists replaces the old version", minLength=1, maxLength=200)]
Importance = Annotated[float | None, param("0 to 1 (default 0.5)", minimum=0, maximum=1)]
Task = Annotated[str | None, param("an id for the task at hand, to credit notes to it")]


def for_a_model(message: str) -> str:
    """An error of vaultmem's in the words of the tools: their parameters (`vault`), not the
    command line's flags (--vault)."""
    message = message.replace("(an argument, or - to read stdin)", "(`text`)")
    return re.sub(r"--([a-z][a-z-]*)", lambda m: f"`{m.group(1).replace('-', '_')}`", message)


def compact_result(out: dict[str, Any]) -> CallToolResult:
    """The answer as compact JSON text (no indentation: a model pays for every character of it)
    and as structured content."""
    text = json.dumps(out, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=out)


def build(settings: Settings, socket: str | None = None, explicit_state_dir: bool = False) -> MCPServer:
    server = MCPServer("vaultmem", version=__version__, instructions=INSTRUCTIONS)

    def tool(title: str, read_only: bool = False, destructive: bool = False, idempotent: bool = False):
        """Register a tool with its docstring dedented (the model reads every description at
        every session start: no indentation to pay for) and the hints a client uses to decide
        what to ask the user before calling: read-only tools change no note, forget is the one
        that takes something away. Nothing reaches outside this machine's vaults."""
        hints = ToolAnnotations(title=title, read_only_hint=read_only, destructive_hint=destructive,
                                idempotent_hint=idempotent or read_only, open_world_hint=False)
        return lambda fn: server.tool(title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                                      annotations=hints)(fn)

    def call(fn):
        backend = Backend(settings, socket=socket, explicit_state_dir=explicit_state_dir, quiet=True)
        try:
            out = fn(backend)
            if not backend.via_daemon and isinstance(out, dict):
                out["answered_by"] = "in-process (no vaultmem daemon is running; answers are slower)"
            return compact_result(out)
        except VaultmemError as err:
            raise ToolError(for_a_model(str(err))) from None
        finally:
            backend.close()

    @tool("Recall from memory", read_only=True)
    def recall(query: Query, k: K = 5, tags: Tags = None, kind: Kind = None,
               history: Annotated[bool, param("also superseded versions, marked current: false")] = False
               ) -> dict[str, Any]:
        """Search the user's memory notes by words and meaning (English, Japanese, Korean).

        Use it before deciding anything an earlier session may have settled, and when the user
        mentions past work. `query`: what you need, in words likely to appear in the note.
        `k`: hits wanted (1-20, default 5). `tags`: only notes with all these tags. `kind`: only
        this kind (decision, correction, knowledge, ...). `history`: also return superseded
        versions (marked current: false, with superseded_by).

        Returns {"hits": [...]} best first; each hit has `file` and `lines` (open the file at
        those lines for the full text), `heading`, `current`, `topic`, `tags`, `kind`, `date`,
        `relevance` (0-1: the chance it answers the query), `elsewhere` (another project's
        note: shown only when clearly better than this project's own), `snippet` (matched words in
        **bold**) and `section` (the matching part of the note, clipped). When no hit is likely
        to answer (nothing in memory bears on the query), `hits` is empty and `note` says so;
        do not retry with other words. The answer stays within a token budget; `note` says if
        hits were left out. A "quoted phrase" matches only notes that hold it.
        """
        if not 1 <= k <= K_MAX:
            raise ToolError(f"`k` must be 1 to {K_MAX}, not {k}")
        return call(lambda b: bounded_recall(b, settings, query, k, tags, kind, history, cwd=os.getcwd()))

    @tool("List the tags in use", read_only=True)
    def tags(tags: Tags = None, kind: Kind = None) -> dict[str, Any]:
        """The tags of the user's current notes, each with how many notes it finds, most used first.

        Use it to learn the user's tag names before filtering `recall` by tags. `tags`: only
        notes with all these tags (the answer then shows the tags that go with them). `kind`:
        only notes of this kind.

        Returns {"tags": [{"tag", "notes"}], "notes": how many notes were counted}; at most 50
        tags (`note` says how many more there are).
        """
        def run(b: Backend) -> dict[str, Any]:
            out = b.request({"op": "tags", "tags": tags or [], "kinds": [kind] if kind else []})
            answer = {"tags": out["tags"][:TAG_ITEMS], "notes": out["notes"]}
            if len(out["tags"]) > TAG_ITEMS:
                answer["note"] = f"{len(out['tags']) - TAG_ITEMS} less used tags not listed"
            return answer
        return call(run)

    @tool("Remember a fact")
    def remember(topic: Topic, text: Annotated[str, param("the fact, a few sentences (Markdown)", minLength=1)],
                 tags: Annotated[list[str] | None, param("a few keywords")] = None, kind: Kind = None,
                 importance: Importance = None, vault: Vault = None) -> dict[str, Any]:
        """Save a fact for future sessions as a new Markdown note in the project's memory folder.

        Use it for decisions, corrections from the user, conventions and lessons that a later
        session should know. One fact per note, a few sentences. `topic`: a short stable name
        for the fact ("deploy procedure"); a note on an existing topic replaces the old version
        as the current one. `tags`: a few keywords. `kind`: decision, correction, knowledge,
        insight, ... `importance`: 0..1 (default 0.5). `vault`: where to write, by name; only
        needed when several vaults are indexed and none holds the working directory (the error
        then lists them).

        Returns the new note's `path` and `file`, and `superseded`: the older notes it replaced.
        It is searchable with `recall` immediately.
        """
        if importance is not None and not 0 <= importance <= 1:
            raise ToolError(f"`importance` must be 0 to 1, not {importance}")
        return call(lambda b: {k: v for k, v in b.request({
            "op": "remember", "topic": topic, "text": text, "tags": tags or [], "kind": kind,
            "importance": importance, "vault": vault, "cwd": os.getcwd()}).items() if k != "ok"})

    @tool("Retire a note", destructive=True, idempotent=True)
    def forget(path: Path_ = None, topic: Annotated[str | None, param("retire every note of this topic")] = None,
               vault: Vault = None) -> dict[str, Any]:
        """Retire a note that is wrong or obsolete, so that it stops being returned as current.

        Give `path` (a note's file path, as `recall` returned it) or `topic` (retires every note
        of that topic; with `vault`, only that vault's). The file is not changed or deleted; the
        user can undo this with `vaultmem forget --restore PATH`. Prefer `remember` with the same
        topic when the fact changed rather than vanished: the new note then replaces the old one.

        Returns the retired notes (at most 20 listed) and their count.
        """
        def run(b: Backend) -> dict[str, Any]:
            out = b.request({"op": "forget", "action": "retire", "path": path, "topic": topic, "vault": vault,
                             "cwd": os.getcwd()})
            answer = {"retired": out["changed"][:LIST_ITEMS], "count": len(out["changed"])}
            if len(out["changed"]) > LIST_ITEMS:
                answer["note"] = f"{len(out['changed']) - LIST_ITEMS} more retired, not listed"
            return answer
        return call(run)

    @tool("Rate a recalled note")
    def feedback(path: Annotated[str, param("a note's file, as recall returned it", minLength=1)],
                 useful: Annotated[bool, param("true if it helped, false if it was irrelevant or misleading")],
                 task: Task = None) -> dict[str, Any]:
        """Tell vaultmem whether a recalled note helped; it ranks helpful notes higher next time.

        `path`: the note's file as `recall` returned it. `useful`: true if it helped, false if it
        was irrelevant or misleading. `task`: an id for the task at hand (optional).

        Returns the note's new feedback weight (0..1, 0.5 is neutral).
        """
        return call(lambda b: {k: v for k, v in b.request({
            "op": "feedback", "path": path, "useful": bool(useful), "task": task, "cwd": os.getcwd()}).items()
            if k != "ok"})

    @tool("Check the memory", read_only=True)
    def inventory() -> dict[str, Any]:
        """Check the memory for problems: topics with several current notes, stale or never used
        notes, notes without topic or tags, broken `supersedes`, files out of sync with the index,
        unreadable files, notes read despite problems (malformed frontmatter), near-duplicates,
        likely secrets. Use it when asked to tidy up the memory.

        Returns `counts` per section, `clean`, and the first few findings of each section.
        """
        def run(b: Backend) -> dict[str, Any]:
            report = b.request({"op": "inventory"})
            shown = {s: items[:INVENTORY_ITEMS] for s, items in report["findings"].items() if items}
            return {"clean": report["clean"], "counts": report["counts"], "findings": shown,
                    "note": f"at most {INVENTORY_ITEMS} findings per section; `vaultmem inventory --all` lists all"}
        return call(run)

    @tool("Memory status", read_only=True)
    def status() -> dict[str, Any]:
        """What the memory holds: vaults, number of notes and current notes, whether the daemon
        is running and up to date. Use it when recall returns nothing you expected."""
        def run(b: Backend) -> dict[str, Any]:
            st = b.request({"op": "status"})
            keep = ("vaults", "notes", "current", "chunks", "skipped", "pending", "embedder", "ready", "generation")
            out = {k: st[k] for k in keep if k in st} | {"daemon": b.via_daemon}
            hints = unindexed_homes([v["root"] for v in st["vaults"]])
            return out | ({"note": "; ".join(hints)} if hints else {})
        return call(run)

    return server


def run(settings: Settings, socket: str | None = None, explicit_state_dir: bool = False) -> int:
    server = build(settings, socket, explicit_state_dir)
    with answers_before_eof():
        server.run("stdio")
    return 0


def _messages(line: bytes) -> list[dict]:
    """The JSON-RPC messages on one line (an object, or a batch); none if it is not JSON."""
    try:
        got = json.loads(line)
    except ValueError:
        return []
    return [m for m in (got if isinstance(got, list) else [got]) if isinstance(m, dict)]


@contextlib.contextmanager
def answers_before_eof(drain_seconds: float = DRAIN_SECONDS) -> Iterator[None]:
    """Answer every request already read before the server sees the end of its input.

    The SDK cancels the requests in flight when stdin closes, so `printf '...' | vaultmem mcp`
    got the answer to `initialize` and nothing else: a recall without a daemon takes a second.
    Here the server reads stdin and writes stdout through two pipes that threads relay; the
    relays note each request's id as it goes in and its answer as it comes out, and the end of
    input is passed on only when nothing is left unanswered (or after `drain_seconds`). A
    client's `notifications/cancelled` takes its request off the list. The relays see only
    newline-delimited JSON-RPC, the stdio framing the protocol fixes, not the SDK's internals."""
    for fd, name in ((0, "stdin"), (1, "stdout")):
        try:
            os.fstat(fd)
        except OSError:
            raise UsageError(f"vaultmem mcp speaks MCP over stdin and stdout, and its {name} is closed; "
                             "start it from an MCP client") from None
    sys.stdout.flush()
    real_in, real_out = os.dup(0), os.dup(1)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.close(in_r)
    # the SDK keeps its copy of fd 1 open for good, so the stdout relay never sees the end of
    # its pipe: it stops at a line no JSON can be, written after the server has returned
    end = b"\0vaultmem-end-" + os.urandom(8).hex().encode() + b"\n"
    pending: set = set()
    settled = threading.Condition()

    def relay_in() -> None:
        try:
            with open(real_in, "rb", closefd=False) as src:
                for line in src:
                    with settled:
                        for m in _messages(line):
                            if "method" in m and m.get("id") is not None:
                                pending.add(_key(m["id"]))
                            elif m.get("method") == "notifications/cancelled":
                                pending.discard(_key((m.get("params") or {}).get("requestId")))
                    _write_all(in_w, line)
            with settled:
                settled.wait_for(lambda: not pending, timeout=drain_seconds)
        except OSError:
            pass  # the server is gone (a broken pipe): nothing left to pass on
        finally:
            os.close(in_w)

    def relay_out() -> None:
        client_gone = False
        with open(out_r, "rb") as src:
            for line in src:
                if line == end:
                    break
                if not client_gone:
                    try:
                        _write_all(real_out, line)
                    except OSError:
                        client_gone = True  # keep reading, so the server never blocks on a full pipe
                with settled:
                    for m in _messages(line):
                        if "method" not in m and ("result" in m or "error" in m):
                            pending.discard(_key(m.get("id")))
                    settled.notify_all()

    reader = threading.Thread(target=relay_in, name="mcp-stdin", daemon=True)
    writer = threading.Thread(target=relay_out, name="mcp-stdout", daemon=True)
    reader.start()
    writer.start()
    try:
        yield
    finally:
        sys.stdout.flush()
        _write_all(out_w, end)  # after all the server wrote: a pipe keeps the order of writes
        writer.join(timeout=10)
        os.close(out_w)
        os.dup2(real_out, 1)
        os.dup2(real_in, 0)
        os.close(real_out)


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
