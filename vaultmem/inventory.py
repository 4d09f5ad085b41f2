"""The stock-take (DESIGN §7): one report of what keeps a pile of notes honest, on demand
(`vaultmem inventory`) and on a schedule (the daemon writes it to the state directory).

Sections, each a list of findings:
- multiple_current: a topic with more than one current note (across vaults; within a vault the
  chain rule makes it impossible)
- stale: current notes not written (date or file mtime) for `stale_days`
- never_retrieved: current notes no query has returned, known for `unretrieved_days`
- missing_topic / missing_tags: memory notes without them (CLAUDE.md, AGENTS.md,
  AGENTS.override.md, GEMINI.md and MEMORY.md files, and the files a CLAUDE.md imports, are instructions
  and indexes, not facts, and are left out; so is what Codex writes in ~/.codex/memories/,
  which nobody adds frontmatter to; Claude Code's own notes classify by `type` instead of tags
  and are not asked for tags)
- broken_supersedes: `supersedes:` entries that name no topic and no note
- dated_ahead: notes written more than a day from now, by their date or, undated, by their
  file's mtime (a typo'd year or a clock set wrong keeps a note current over every newer note on
  its topic, and `remember` on that topic writes notes that start superseded)
- out_of_sync: files the index disagrees with (not indexed, changed since, gone, interrupted), and
  vaults in the index that the config no longer names
- unreadable: files skipped with their reason
- read_with_problems: notes indexed despite problems in the file (malformed frontmatter, a date
  or importance that is no such thing, a legacy encoding), with what was lost or guessed
- duplicates: pairs of current notes whose vectors are nearly identical
- secrets: likely secrets (masked everywhere vaultmem shows the note; the file still holds them)

Reads the catalog, the vectors, the usage records and the vault directories; writes only its own
report files under the state directory.
"""

from __future__ import annotations

import json
import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .catalog import AHEAD_SECONDS, written_at, written_how
from .config import Settings
from .agents import CODEX_OVERRIDE, GEMINI_MD, is_codex_memory, is_other_agents_rules, loaded_with_claude_md
from .query import number_field
from .supersession import path_candidates, topic_key

if TYPE_CHECKING:  # the report's formatting is used by the thin CLI client: no engine at import
    from .index import VaultIndex
    from .usage import Usage

SECTIONS = ("multiple_current", "stale", "never_retrieved", "missing_topic", "missing_tags", "broken_supersedes",
            "dated_ahead", "out_of_sync", "unreadable", "read_with_problems", "duplicates", "secrets")
DAY = 86400.0


def take(idx: VaultIndex, usage: Usage, settings: Settings, opts: dict | None = None) -> dict[str, Any]:
    opts = opts or {}
    cfg = settings.inventory
    stale_days = number_field(opts, "stale_days", 0.0, 1e6) or cfg.stale_days
    unretrieved_days = number_field(opts, "unretrieved_days", 0.0, 1e6) or cfg.unretrieved_days
    now = time.time()
    cat = idx.catalog
    rows = cat.all_notes()
    retired = usage.retired()
    current = [r for r in rows if r.superseded_by is None and r.key not in retired]
    found: dict[str, list[dict]] = {s: [] for s in SECTIONS}

    by_topic: dict[str, list[str]] = {}
    for r in current:
        if r.topic_key:
            by_topic.setdefault(r.topic_key, []).append(r.key)
    found["multiple_current"] = [{"topic": t, "notes": keys} for t, keys in sorted(by_topic.items()) if len(keys) > 1]

    for r in current:
        written = max(r.date_ts or 0.0, (r.mtime_ns or 0) / 1e9)
        if now - written > stale_days * DAY:
            found["stale"].append({"note": r.key, "days": int((now - written) // DAY)})

    got = usage.retrievals()
    started = usage.started
    for r in current:
        if r.key in got:
            continue
        known = max(started, min(r.date_ts or now, (r.mtime_ns or 0) / 1e9 or now))
        if now - known > unretrieved_days * DAY:
            found["never_retrieved"].append({"note": r.key, "days": int((now - known) // DAY)})

    vaults = {v.name: v for v in idx.vaults()}
    imported = idx.imported_all()
    for r in current:
        seen_as = vaults[r.vault].globbed(r.path) if r.vault in vaults else r.path
        if (r.path in imported.get(r.vault, {}) or loaded_with_claude_md(seen_as, None)
                or is_codex_memory(seen_as) or is_other_agents_rules(seen_as)
                or posixpath.basename(seen_as) in (CODEX_OVERRIDE, GEMINI_MD)):
            continue
        if not r.topic:
            found["missing_topic"].append({"note": r.key})
        if not r.tags and not _claude_typed(r.meta):
            found["missing_tags"].append({"note": r.key})

    topics = {(r.vault, r.topic_key) for r in rows if r.topic_key}
    paths = {(r.vault, r.path) for r in rows}
    for r in rows:
        for ref in r.supersedes:
            if (r.vault, topic_key(ref)) in topics:
                continue
            if any((r.vault, c) in paths for c in path_candidates(ref, r.path)):
                continue
            found["broken_supersedes"].append({"note": r.key, "ref": ref})

    found["dated_ahead"] = [{"note": r.key, "date": r.date or how["at"], "from": how["from"]} for r in rows
                            if written_at(r) - now > AHEAD_SECONDS and (how := written_how(r, now))]

    found["out_of_sync"] = _out_of_sync(idx)
    found["unreadable"] = [{"note": r.key, "reason": r.reason} for r in cat.skipped()]
    found["read_with_problems"] = [{"note": r.key, "problem": "; ".join(errors)}
                                   for r in rows if (errors := r.errors)]
    found["duplicates"] = _duplicates(idx, [r.key for r in current], cfg.duplicate_cosine)
    for r in rows:
        for line, kind in r.secrets:
            found["secrets"].append({"note": r.key, "line": line, "kind": kind})

    counts = {s: len(found[s]) for s in SECTIONS}
    return {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "notes": len(rows), "current": len(current), "retired": len(retired),
        "thresholds": {"stale_days": stale_days, "unretrieved_days": unretrieved_days,
                       "duplicate_cosine": cfg.duplicate_cosine},
        "clean": not any(counts.values()), "counts": counts, "findings": found,
    }


def _claude_typed(meta: dict) -> bool:
    """Claude Code's own memory notes classify by `type` and never carry tags."""
    nested: dict = meta["metadata"] if isinstance(meta.get("metadata"), dict) else {}
    return bool(meta.get("type") or nested.get("type"))


def _out_of_sync(idx: VaultIndex) -> list[dict]:
    out = []
    pending = idx.catalog.pending()
    served = {v.name for v in idx.served()}
    for vault in idx.vaults():
        if vault.name not in served:
            out.append({"note": f"{vault.name}:", "problem": "vault not in the config: its notes are not updated "
                        f"(`vaultmem reindex --drop-vault {vault.name}` takes them out)"})
            continue
        if not vault.root.is_dir():
            out.append({"note": f"{vault.name}:", "problem": f"vault directory {vault.root} is missing"})
            continue
        disk = idx.note_files(vault)
        known = idx.catalog.files(vault.name)
        for key in sorted(set(disk) | set(known)):
            if key in pending:
                out.append({"note": key, "problem": "indexing was interrupted (the next reconcile redoes it)"})
            elif key not in known:
                out.append({"note": key, "problem": "on disk, not indexed"})
            elif key not in disk:
                out.append({"note": key, "problem": "indexed, gone from disk"})
            elif (known[key].size, known[key].mtime_ns) != (disk[key].size, disk[key].mtime_ns):
                out.append({"note": key, "problem": "changed since indexed"})
    return out


def _duplicates(idx: VaultIndex, keys: list[str], threshold: float) -> list[dict]:
    """Pairs of notes whose note vectors have cosine >= threshold, most similar first."""
    import numpy as np

    if len(keys) < 2 or idx.vectors.count() == 0:
        return []
    have, mat = idx.vectors.note_vectors(keys)
    pairs = []
    for start in range(0, len(have), 1024):
        sims = mat[start : start + 1024] @ mat.T
        for i, j in zip(*np.nonzero(sims >= threshold)):
            a = start + int(i)
            if int(j) > a:
                pairs.append((float(sims[i, j]), have[a], have[int(j)]))
    pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
    return [{"notes": [a, b], "cosine": round(c, 4)} for c, a, b in pairs]


# ------------------------------------------------------------------ reports

TITLES = {
    "multiple_current": "topics with more than one current note",
    "stale": "current notes not touched for {stale_days:g} days",
    "never_retrieved": "notes never retrieved in {unretrieved_days:g} days",
    "missing_topic": "notes without a topic",
    "missing_tags": "notes without tags",
    "broken_supersedes": "supersedes entries that name nothing",
    "dated_ahead": "notes dated, or modified, in the future (current over every newer note on their topic)",
    "out_of_sync": "files the index disagrees with",
    "unreadable": "files that could not be indexed",
    "read_with_problems": "notes indexed despite problems in the file (the rest of each is searchable)",
    "duplicates": "near-duplicate notes (cosine >= {duplicate_cosine:g})",
    "secrets": "likely secrets (masked in results; still in the files)",
}


def describe(item: dict) -> str:
    if "topic" in item:
        return f"{item['topic']}: {', '.join(item['notes'])}"
    if "cosine" in item:
        return f"{item['notes'][0]} ~ {item['notes'][1]} ({item['cosine']})"
    extra = [f"{item['days']} days" if "days" in item else "", f"dated {item['date']}" if "date" in item else "",
             f"supersedes {item['ref']!r}" if "ref" in item else "", item.get("problem", ""), item.get("reason", ""),
             f"line {item['line']}: {item['kind']}" if "line" in item else ""]
    return item["note"] + "".join(f"  ({e})" for e in extra if e)


def format_report(report: dict, limit: int = 20) -> str:
    """The report for people: a line of totals, then each section with findings (at most
    `limit` lines each; 0 shows all)."""
    c = report["counts"]
    lines = [f"inventory {report['generated']}: {report['notes']} notes, {report['current']} current, "
             f"{report['retired']} retired; " + ("clean" if report["clean"] else _count(sum(c.values()), "finding"))]
    for section in SECTIONS:
        items = report["findings"][section]
        if not items:
            continue
        lines.append("")
        lines.append(f"{TITLES[section].format(**report['thresholds'])}: {len(items)}")
        shown = items if not limit else items[:limit]
        lines.extend("  " + describe(i) for i in shown)
        if len(items) > len(shown):
            lines.append(f"  ... and {len(items) - len(shown)} more (--all or --json shows every one)")
    return "\n".join(lines) + "\n"


def save(report: dict, state_dir: Path, keep: int = 12) -> Path:
    """Write the report as JSON and text under state_dir/inventory/ (atomically; the newest
    `keep` are kept) and point `latest.json`/`latest.txt` at it."""
    from .writing import replace_file

    folder = state_dir / "inventory"
    target = folder / f"inventory-{time.strftime('%Y%m%d-%H%M%S')}.json"
    as_json = json.dumps(report, ensure_ascii=False, indent=1)
    # latest.json last: its time is when the report was saved (last_saved), so whoever sees it
    # also finds latest.txt of the same report
    for path, text in ((target, as_json), (folder / "latest.txt", format_report(report, limit=0)),
                       (folder / "latest.json", as_json)):
        replace_file(path, text)
    old = sorted(folder.glob("inventory-*.json"))[:-keep]
    for p in old:
        p.unlink(missing_ok=True)
    return target


def last_saved(state_dir: Path) -> float | None:
    """When the newest saved report was written, if any."""
    try:
        return (state_dir / "inventory" / "latest.json").stat().st_mtime
    except OSError:
        return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
