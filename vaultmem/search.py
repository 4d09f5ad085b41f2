"""Answering a query: filters -> full-text and vector candidates -> fusion -> ranking factors ->
hits with snippets. The ranking formula lives here and its weights in config.SearchSettings:

    score = fused * importance_factor * feedback_factor * decay + entity_bonus + date_bonus
    fused             = weighted text and vector scores (default; BM25 over its list's best,
                        cosine min-max over its list), or RRF
    importance_factor = 1 + importance_weight * (2 * importance - 1)       importance in 0..1
    feedback_factor   = 1 + feedback_weight * (2 * feedback - 1)          feedback: EMA in 0..1, 0.5 unjudged
    decay             = 0.5 ** (age_days / half_life_days)                (1 when no half-life is set)
    entity_bonus      = min(entity_cap, entity_weight * sum of shared entities' specificity)
    date_bonus        = date_weight * how well the note's date fits a date the query names
                        ("on 25 May, 2022": 1 that day, less within a week; "in November 2022": 0.5)

A hybrid query looks twice: the words that most set apart its best notes (expand_notes of them,
up to expand_terms words) join its full-text query at a lower weight, and the notes are ranked
again with the same vector and entity candidates (pseudo-relevance feedback; `explain` lists
the words). A note that shares an entity with the query is a candidate even with no word in
common (its score is then the bonus alone); one found by its vector alone must reach
`min_cosine`. Results are one hit per note (its best chunk). Current notes only unless history
is asked for; retired notes (usage.py) count as not current. `as_of` answers with the notes that
existed, and were current, at that moment.

The engines are reached only through VaultIndex and never written; the one write is to the
usage records (which notes were returned, for which task).

About 880 lines, one pipeline: each stage (scope, candidates, second look, ranking, chain
order, hits) reads the one before it (`Candidates`, the catalog's records), and the formula
above is checked most easily beside the code that computes it.
"""

from __future__ import annotations

import functools
import math
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from collections.abc import Sequence, Set
from pathlib import Path
from typing import Any, Callable

from . import dates
from .catalog import ChunkRecord, NoteRecord, chunk_id, first_chunks, preview, written_at, written_how
from .fulltext import TextQuery
from .index import VaultIndex
from .notes import extra_keys, extract_entities
from .query import Query
from .scan import matches
from .supersession import topic_key
from .text import STOP_WORDS, WORD, fold, highlight_terms, normalize, trigrams
from .usage import NEUTRAL, Usage


@dataclass
class Hit:
    path: str
    vault: str
    line_start: int
    line_end: int
    heading: str
    score: float
    current: bool
    superseded_by: str | None
    retired: bool
    topic: str | None
    tags: list[str]
    kind: str
    date: str | None
    importance: float
    snippet: str
    preview: str
    changed: bool
    imported_by: str | None = None  # the CLAUDE.md (or imported file) whose `@path` import loads this file
    extra: dict[str, Any] = field(default_factory=dict)  # frontmatter keys vaultmem does not interpret
    explain: dict[str, Any] | None = field(default=None)
    section: str | None = field(default=None)  # the matching chunk's text, when asked for
    relevance: float | None = field(default=None)  # the chance it answers the query (relevance()); None: a listing
    vault_missing: bool | None = field(default=None)  # True: its vault's directory is not there (as last indexed)
    no_vector: bool | None = field(default=None)  # True: not embedded yet (found by its words alone)

    def to_json(self) -> dict[str, Any]:
        """Every field (the optional ones when set); its lists and dicts copied one level down,
        not through dataclasses.asdict's deep copy (1 ms of a warm query at k=10)."""
        d = {name: getattr(self, name) for name in _HIT_FIELDS}
        d["tags"], d["extra"] = list(self.tags), dict(self.extra)
        for optional in ("explain", "section", "relevance", "vault_missing", "no_vector"):
            if d[optional] is None:
                del d[optional]
        return d


_HIT_FIELDS = tuple(f.name for f in fields(Hit))
Scored = tuple[float, str, dict[str, Any]]  # (score, note key, explain parts)
Best = dict[str, tuple[str, float]]  # note key -> (its best chunk's id, that chunk's score)


@dataclass(frozen=True)
class Candidates:
    """What a query found before ranking: the query as read, the notes in scope, and each
    engine's best chunk per note. The ranking and the second look read it; the second look
    makes a copy with its own text hits."""

    q: Query
    tq: TextQuery
    n: int  # candidates asked of each engine
    allow: Set[str] | None  # the notes in scope (None: every current note)
    deny: Set[str] | None
    state: dict[str, str | None] | None  # superseded_by of each note as of q.as_of, if asked
    unknown: list[str]  # query words no note has (matched by spelling)
    text: Best
    vector: Best
    entity: Best

    def chunk_of(self, key: str) -> str:
        """The chunk a note is shown (and read) by: its best by words, else by meaning, else by
        entity, else (a newer version brought in above a match) its first."""
        best = self.text.get(key) or self.vector.get(key) or self.entity.get(key)
        return best[0] if best else chunk_id(key, 0)


@dataclass
class _Shown:
    """What the hits show, worked out once a chunk: the chunks read (the hits' and their notes'
    first), each chunk's relevance and snippet, and whether each note's file changed since it
    was indexed. A hybrid query works it out for its first look's best notes while its second
    look's words are looked up on the thread beside (most of them stay hits), and its hits take
    what is there."""

    chunks: dict[str, ChunkRecord] = field(default_factory=dict)
    relevance: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    snippets: dict[str, str] = field(default_factory=dict)
    changed: dict[str, bool] = field(default_factory=dict)


ALLOW_CACHE_SIZE = 8  # filters whose note sets are kept (a set of 10,000 keys is ~0.5 MB)


def _beside() -> ThreadPoolExecutor:
    """The thread a hybrid query's full-text search (and the reading of its hits' rows) runs on
    while the query thread embeds the query and scans the vectors: Tantivy, SQLite and the
    model's matrix work let go of the GIL, so on two free cores that half costs little time of
    its own. One thread: the daemon answers one query at a time anyway (its read lock). One
    per process: a child forked after a query has no such thread, and would wait for ever."""
    return _beside_of(os.getpid())


@functools.lru_cache(maxsize=1)
def _beside_of(pid: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="text-search")


class Searcher:
    def __init__(self, index: VaultIndex, usage: Usage | None = None):
        """`usage`: where retirements and feedback are read and retrievals recorded (None: not)."""
        self.index = index
        self.usage = usage
        self.cfg = index.settings.search
        self._deny: tuple[frozenset, dict, frozenset] | None = None
        self._allowed: dict[tuple, tuple[tuple, frozenset[str]]] = {}  # filter -> (versions, its notes)
        self._allowed_lock = threading.Lock()

    # -------------------------------------------------------------- filters

    def _retired(self) -> dict[str, float]:
        """Retired notes (key -> when), from usage; none without it."""
        return self.usage.retired() if self.usage is not None else {}

    def _not_current(self) -> frozenset[str]:
        """Superseded and retired notes; the same object until either changes (the engines
        cache their filters by identity)."""
        sup = self.index.catalog.superseded()
        retired = self._retired()
        if self._deny is None or self._deny[0] is not sup or self._deny[1] is not retired:
            self._deny = (sup, retired, sup | frozenset(retired) if retired else sup)
        return self._deny[2]

    def _scope(self, q: Query) -> tuple[Set[str] | None, Set[str] | None, dict[str, str | None] | None]:
        """(allow, deny, state) for the engines: allow None means every note; `state` maps each
        note to what superseded it at `q.as_of` (None when the query is about now)."""
        cat = self.index.catalog
        if q.vaults and cat.vault_names() <= set(q.vaults):
            # every vault there is (one, mostly: the session-start digest names the project's):
            # no filter, and no read of every note in them (80 ms at 50,000 notes, after each change)
            q = q._replace(vaults=())
        filtered = bool(q.tags or q.kinds or q.topic or q.vaults or q.path_glob or q.since is not None
                        or q.until is not None or q.where)
        state = None
        if q.as_of is not None:
            state = cat.supersession_at(q.as_of)
            retired = self._retired()
            live = {k for k, by in state.items() if q.history or (by is None and not retired.get(k, q.as_of) < q.as_of)}
        if not filtered:
            if state is not None:
                return live, None, state
            return None, (set() if q.history else self._not_current()), None
        if state is not None:
            return self._allow(q) & live, None, state
        # the same filter gets the same set until the catalog or the retirements change, so the
        # engines' filters (cached by identity) are built once: a hybrid query with a tag or kind
        # filter on the 10,000-note bench vault took 25 ms, most of it here and in those filters
        # (now 9 ms, as without a filter)
        key = (q.tags, q.any_tags, q.kinds, q.topic, q.vaults, q.path_glob, q.since, q.until, q.where, q.history)
        versions = (cat.version(), self.usage.retired() if self.usage is not None else None)
        with self._allowed_lock:
            got = self._allowed.get(key)
            if got is not None and got[0][0] == versions[0] and got[0][1] is versions[1]:
                return got[1], None, None
        allow = frozenset(self._allow(q) - (set(versions[1]) if versions[1] and not q.history else set()))
        with self._allowed_lock:
            if len(self._allowed) >= ALLOW_CACHE_SIZE:
                self._allowed.pop(next(iter(self._allowed)))
            self._allowed[key] = (versions, allow)
        return allow, None, None

    def _allow(self, q: Query) -> set[str]:
        """The notes that pass the query's filters (current ones unless history or as_of)."""
        cat = self.index.catalog
        rows = cat.select(vaults=list(q.vaults) or None, kinds=[k.lower() for k in q.kinds] or None,
                          since=q.since, until=q.until, current_only=not q.history and q.as_of is None)
        want_tags = {normalize(t.lstrip("#").strip("/")) for t in q.tags}
        want_topic = topic_key(q.topic) if q.topic else None
        allow = set()
        for r in rows:
            if want_tags:
                have = _tag_set(r.tags)
                if (q.any_tags and not (want_tags & have)) or (not q.any_tags and not want_tags <= have):
                    continue
            if want_topic is not None and topic_key(r.topic) != want_topic:
                continue
            if q.path_glob and not matches(r.key.split(":", 1)[1], (q.path_glob,)):
                continue
            if q.where and not _meta_matches(r.meta, q.where):
                continue
            allow.add(r.key)
        return allow

    # -------------------------------------------------------------- the query

    def search(self, q: Query) -> tuple[list[Hit], dict[str, Any]]:
        """The notes that answer `q`, best first. With no query text, the notes that pass its
        filters, newest first (a listing: `vaultmem query --tag ops`)."""
        t0 = time.perf_counter()
        cfg = self.cfg
        allow, deny, state = self._scope(q)
        if not q.text.strip():
            return self._listing(q, allow, deny, state, t0)
        n = max(cfg.candidates, q.k * 3)
        text_hits: list[tuple[str, str, float]] = []
        vec_hits: list[tuple[str, str, float]] = []
        tq = self.index.fulltext.analyze(q.text)
        if not (tq.words or tq.grams or tq.phrases or WORD.search(normalize(q.text))):
            # "???", "...": nothing to look up, and the vectors nearest to punctuation are noise
            # (three unrelated notes came back, scored as if they matched)
            return self._hits(q, [], {}, {}, [], t0)
        if tq.phrases:  # a quoted phrase is exact in every mode: only notes that hold it are hits
            allow = self._holding(tq.phrases, allow, deny)
            if not allow:
                hits, info = self._hits(q, [], {}, {}, [], t0)
                return hits, {**info, "phrase_absent": list(tq.phrases)}
        unknown = self.index.fulltext.unknown_words(tq) if q.mode != "vector" else []
        words, known = None, None
        if q.mode == "text":
            text_hits, known = self._words(tq, n, allow, deny, unknown, state)
        elif q.mode == "hybrid":  # the words are looked up on another core while the query is embedded
            words = _beside().submit(self._words, tq, n, allow, deny, unknown, state)
        qvec = None
        if q.mode in ("hybrid", "vector"):
            qvec = self.index.embedder.embed_query([q.text])[0]
            vec_hits = self.index.vectors.search(qvec, n, allow, deny)
        if words is not None:
            text_hits, known = words.result()
        ent_names = self._query_entities(q.text)
        ent_hits = self.index.fulltext.entity_search(ent_names, n, allow, deny) if ent_names else []

        found = Candidates(q, tq, n, allow, deny, state, unknown, text=_best_per_note(text_hits),
                           vector=_best_per_note(vec_hits), entity=_best_per_note(ent_hits))
        factors: dict[str, tuple[float, ...]] = {}
        scored, notes = self._rank(found, known, factors)
        shown = _Shown()
        if q.mode == "hybrid" and cfg.expand_terms and cfg.expand_notes and found.text and scored:
            scored, notes, found = self._look_again(found, scored, notes, qvec, shown, factors)
        if q.history:
            scored = _newest_first_within_chains(scored, notes, self._rows_as_of(state))
        top = scored[: q.k]
        chunk_for = {key: found.chunk_of(key) for _, key, _ in top}
        return self._hits(q, top, notes, chunk_for, unknown, t0, tq, qvec, shown)

    def _words(self, tq: TextQuery, n: int, allow: Set[str] | None, deny: Set[str] | None, unknown: list[str],
               state: dict[str, str | None] | None,
               known: Set[str] = frozenset()) -> tuple[list[tuple[str, str, float]], dict[str, NoteRecord]]:
        """The full-text hits of the query's words, and their notes' catalog rows (which ranking
        reads; not those `known`). A hybrid query looks its words up on the thread beside it
        (_beside), both times: the query thread meanwhile embeds and scans the vectors, then works
        out what its first look's best notes show (_look_again), and touches the catalog in
        neither case (its connection is used by one thread at a time)."""
        hits = self.index.fulltext.search(tq, n, allow, deny)
        if unknown:
            hits = self._spelled_like(tq, hits, unknown)
        return hits, self._rows_as_of(state)({key for _, key, _ in hits} - known)

    def _relevance(self, q: Query, tq: TextQuery, qvec, chunks: dict, notes: dict) -> dict[str, tuple[float, dict]]:
        """chunk id -> (relevance, its features) for the hits' chunks: the chance that a hit
        answers the query, from two absolute measures of it (a fused score is relative to the
        query's best), by a logistic model fitted on the judged dev sets and off-topic prompts
        (bench/abstain.py prints how, and the figures): `coverage`, the IDF-weighted share of the
        query's terms the chunk holds, and `cosine`, the chunk's to the query (hybrid and vector
        mode; text mode, which loads no model, has a model of coverage alone)."""
        texts = {}
        for cid, ch in chunks.items():
            row = notes.get(cid.rsplit("#", 1)[0])
            about = f"{row.topic or ''}\n{row.summary or ''}\n" if row is not None and cid.endswith("#0") else ""
            texts[cid] = f"{ch.heading}\n{about}{ch.text}"
        cover = self.index.fulltext.coverage(tq, texts)
        cos = self.index.vectors.cosines(qvec, list(texts)) if qvec is not None else {}
        out = {}
        for cid in texts:
            share, held = cover.get(cid, (0.0, 0.0))
            feats = {"coverage": round(share, 4), "evidence": round(held, 4)}
            if qvec is not None:
                feats["cosine"] = round(cos.get(cid, 0.0), 4)
            out[cid] = (round(relevance(feats, self.cfg), 4), feats)
        return out

    def _rows_as_of(self, state: dict[str, str | None] | None) -> Callable[[set[str]], dict]:
        """Read catalog rows of notes, as the vault stood at `state` (an --as-of query) if given."""
        def fetch(keys: set[str]) -> dict:
            rows = self.index.catalog.notes(keys)
            return {k: replace(r, superseded_by=state.get(k)) for k, r in rows.items()} if state is not None else rows
        return fetch

    def _holding(self, phrases: tuple[str, ...], allow: Set[str] | None, deny: Set[str] | None) -> set[str]:
        """The notes (among `allow`, not in `deny`) with a chunk that holds every quoted phrase,
        token by token (FullText.phrase_tokens), in what the index reads of it: its heading path,
        text, and for a note's first chunk its topic and summary (notes.index_text)."""
        ft = self.index.fulltext
        candidates = ft.phrase_candidates(phrases, allow, deny)
        if not candidates:
            return set()
        chunks = self.index.catalog.chunks(cid for cid, _ in candidates)
        firsts = self.index.catalog.notes({key for cid, key in candidates if cid.endswith("#0")})
        wanted = ["\x00".join(ft.phrase_tokens(p)) for p in phrases]
        out = set()
        for cid, key in candidates:
            ch, row = chunks.get(cid), firsts.get(key)
            if ch is None or key in out:
                continue
            about = f"{row.topic or ''}\n{row.summary or ''}" if row is not None and cid.endswith("#0") else ""
            have = "\x00" + "\x00".join(ft.phrase_tokens(f"{ch.heading}\n{about}\n{ch.text}")) + "\x00"
            if all(f"\x00{w}\x00" in have for w in wanted if w):
                out.add(key)
        return out

    def _rank(self, found: Candidates, known: dict[str, NoteRecord] | None = None,
              factors: dict[str, tuple[float, ...]] | None = None) -> tuple[list[Scored], dict[str, NoteRecord]]:
        """(score, note key, explain parts) best first, and the catalog rows of the candidates
        (those in `known` not read again): the fused engines' scores times the ranking factors,
        plus the bonuses. A note's factors and bonuses do not change with the engines' scores:
        those worked out before are taken from `factors`, and those worked out now are added to
        it (the second look ranks mostly the same notes again)."""
        cfg, q, ent_best = self.cfg, found.q, found.entity
        fused = self._fuse(found.text, found.vector, q.mode, q.explain)
        wanted = set(fused) | set(ent_best)
        notes = {k: known[k] for k in wanted & known.keys()} if known else {}
        notes.update(self._rows_as_of(found.state)(wanted - notes.keys()))
        factors = {} if factors is None else factors
        new = [key for key in notes if key not in factors]
        feedback = self.usage.weights(new) if self.usage is not None and cfg.feedback_weight and new else {}
        now = q.as_of if q.as_of is not None else time.time()
        named = dates.spans(q.text) if cfg.date_weight and new else []
        half_life = q.half_life_days if q.half_life_days is not None else cfg.half_life_days
        for key in new:
            row = notes[key]
            imp = 1.0 + cfg.importance_weight * (2.0 * (row.importance if row.importance is not None else 0.5) - 1.0)
            fb = 1.0 + cfg.feedback_weight * (2.0 * feedback.get(key, NEUTRAL) - 1.0)
            decay = 1.0
            if half_life and half_life > 0:
                decay = 0.5 ** (max(0.0, now - written_at(row)) / 86400.0 / half_life)
            shared = ent_best[key][1] if key in ent_best else 0.0
            bonus = min(cfg.entity_cap, cfg.entity_weight * shared)
            fit = dates.closeness(named, row.date_ts) if named else 0.0
            factors[key] = (imp, fb, decay, shared, bonus, fit, cfg.date_weight * fit)
        scored: list[tuple[float, str, dict[str, Any]]] = []
        for key in notes:
            base, parts = fused.get(key, (0.0, {}))
            imp, fb, decay, shared, bonus, fit, dated = factors[key]
            if base <= 0 and bonus <= 0:
                continue
            score = base * imp * fb * decay + bonus + dated
            if q.explain:  # built only when asked: rounding every candidate's factors cost ~0.5 ms a query
                parts.update({"fused": round(base, 6), "importance_factor": round(imp, 4),
                              "feedback_factor": round(fb, 4), "decay": round(decay, 4),
                              "entity_match": round(shared, 4), "entity_bonus": round(bonus, 4),
                              "date_match": round(fit, 4), "date_bonus": round(dated, 4)})
            scored.append((score, key, parts))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return scored, notes

    def _look_again(self, found: Candidates, scored: list[Scored], notes: dict[str, NoteRecord], qvec,
                    shown: _Shown, factors: dict[str, tuple[float, ...]]) -> tuple[list[Scored], dict[str, NoteRecord], Candidates]:
        """The second look of a hybrid query: the words that most set apart the first look's
        best notes join the full-text query (pseudo-relevance feedback) and the candidates are
        ranked again. The notes the words came from keep their first scores: scored again by
        their own words they could only rise, and when they did, R@1 fell (LoCoMo turns 0.658
        -> 0.611, bench/eval.py) while R@5 gained nothing more. They keep the chunk they were
        found by, too. Returns the ranking, the candidates' rows and the candidates with the
        text hits of the second look.

        While the second look's words are looked up (on the thread beside), the query thread
        works out into `shown` what the first look's best notes would show as hits: most stay
        hits (85% on the 10,000-note bench), and the query's time is the longer of the two halves,
        no longer their sum."""
        cfg, q, tq = self.cfg, found.q, found.tq
        sources = scored[: cfg.expand_notes]
        likely = {key: found.chunk_of(key) for _, key, _ in scored[: q.k]}
        wanted = {found.chunk_of(key) for _, key, _ in sources}
        shown.chunks.update(self.index.catalog.chunks(
            wanted | set(likely.values()) | first_chunks(notes[key] for key in likely)))
        extra = self.index.fulltext.feedback_terms(
            tq, [c.text for cid, c in shown.chunks.items() if cid in wanted], cfg.expand_terms, cfg.expand_weight)
        if not extra:
            return scored, notes, found
        roots = self._roots()  # the catalog's, read before the thread beside reads it
        looked_up = _beside().submit(self._words, replace(tq, expansion=extra), found.n, found.allow, found.deny,
                                     found.unknown, found.state, notes.keys())
        try:
            self._show(q, tq, qvec, found.unknown, likely, notes, shown, roots)
        finally:  # the thread beside is done with the catalog (and Tantivy) before this returns
            text_hits, new_rows = looked_up.result()
        widened = _best_per_note(text_hits)
        again, more = self._rank(replace(found, text=widened), known={**notes, **new_rows}, factors=factors)
        kept = {key for _, key, _ in sources}
        for key in kept:  # shown by the chunk the first look found them by
            if key in found.text:
                widened[key] = found.text[key]
            else:
                widened.pop(key, None)
        if q.explain:
            words = [term for term, _ in extra]
            for _, key, parts in sources + again:
                parts["expanded_with"] = words
                if key in kept:
                    parts["expansion_source"] = True
        merged = sorted(sources + [item for item in again if item[1] not in kept], key=lambda x: (-x[0], x[1]))
        return merged, {**more, **{key: notes[key] for key in kept}}, replace(found, text=widened)

    def _spelled_like(self, tq: TextQuery, hits: list[tuple[str, str, float]], unknown: list[str]) -> list[tuple[str, str, float]]:
        """The text hits of a query with unknown words that match one of its other terms or
        show a word spelled like an unknown one. The trigram lookup alone also matches a chunk
        through trigrams of different words: "xylophone" found "Python" and "money", and
        "zzqqxx" something in any vault."""
        exact = self.index.fulltext.matched_exactly(tq, {cid for cid, _, _ in hits})
        rest = [h for h in hits if h[0] not in exact]
        if not rest:
            return hits
        chunks = self.index.catalog.chunks({cid for cid, _, _ in rest})
        topics = {k: r.topic or "" for k, r in self.index.catalog.notes({key for _, key, _ in rest}).items()}
        wanted = [fold(u) for u in unknown]

        def shows(cid: str, key: str) -> bool:  # what the index read: topic, heading path, text
            ch = chunks.get(cid)
            return ch is not None and _has_look_alike(f"{topics.get(key, '')} {ch.heading} {ch.text}", wanted)

        return [h for h in hits if h[0] in exact or shows(h[0], h[1])]

    def tag_counts(self, q: Query) -> tuple[list[dict[str, Any]], int]:
        """The tags of the notes that pass `q`'s filters, each with the number of those notes
        that `--tag T` would list (so a parent counts its nested tags' notes), most first; and
        the number of notes that passed. A tag is written as most of its notes write it (on a tie,
        in lower case)."""
        allow, deny, _ = self._scope(q)
        counts: dict[str, int] = {}
        spellings: dict[str, dict[str, int]] = {}
        passed = 0
        for r in self.index.catalog.select(current_only=False):
            if (allow is not None and r.key not in allow) or (deny and r.key in deny):
                continue
            passed += 1
            seen: dict[str, str] = {}
            for tag in r.tags:
                for written in _tag_and_parents(tag):
                    seen.setdefault(normalize(written), written)
            for key, written in seen.items():
                counts[key] = counts.get(key, 0) + 1
                spelled = spellings.setdefault(key, {})
                spelled[written] = spelled.get(written, 0) + 1
        found = [{"tag": min(spellings[k].items(), key=lambda s: (-s[1], s[0] != s[0].lower(), s[0]))[0], "notes": n}
                 for k, n in sorted(counts.items(), key=lambda kn: (-kn[1], kn[0]))]
        return found, passed

    def _listing(self, q: Query, allow: Set[str] | None, deny: Set[str] | None,
                 state: dict[str, str | None] | None, t0: float) -> tuple[list[Hit], dict[str, Any]]:
        """Every note in scope, newest first (by date, else mtime; ties by key), each shown from
        its first section; the score is 0: nothing was matched."""
        cat = self.index.catalog
        newest = cat.newest(q.k, allow, deny)
        notes: dict[str, Any] = cat.notes(newest)
        if state is not None:
            notes = {k: replace(r, superseded_by=state.get(k)) for k, r in notes.items()}
        top = [(0.0, key, {"listed": "newest first"} if q.explain else {}) for key in newest]
        return self._hits(q, top, notes, {key: chunk_id(key, 0) for key in newest}, [], t0)

    def _roots(self) -> dict[str, Path]:
        return {v.name: v.root for v in self.index.vaults()}

    def _show(self, q: Query, tq: TextQuery | None, qvec, unknown: list[str], chunk_for: dict[str, str],
              notes: dict[str, NoteRecord], shown: _Shown, roots: dict[str, Path]) -> None:
        """Work out into `shown` what these hits (note key -> the chunk shown) show that it does
        not hold yet: from the chunks it holds, and reading nothing of the catalog (_look_again
        calls it while the thread beside reads the catalog). Relevance only for a query with
        words (`tq`; a listing has none)."""
        new = {cid for cid in chunk_for.values() if cid in shown.chunks and cid not in shown.snippets}
        if tq is not None and new:
            shown.relevance.update(self._relevance(q, tq, qvec, {cid: shown.chunks[cid] for cid in new}, notes))
        terms = highlight_terms(q.text)
        for cid in new:
            shown.snippets[cid] = make_snippet(shown.chunks[cid].text, terms, self.cfg.snippet_chars, unknown)
        for key in chunk_for.keys() - shown.changed.keys():
            row = notes[key]
            shown.changed[key] = _changed(roots.get(row.vault), row)

    def _hits(self, q: Query, top: list, notes: dict, chunk_for: dict[str, str], unknown: list[str], t0: float,
              tq: TextQuery | None = None, qvec=None, shown: _Shown | None = None) -> tuple[list[Hit], dict[str, Any]]:
        cfg = self.cfg
        shown = shown if shown is not None else _Shown()
        retired = self._retired()
        chunks = shown.chunks
        chunks.update(self.index.catalog.chunks(
            {*chunk_for.values(), *first_chunks(notes[key] for _, key, _ in top)} - chunks.keys()))
        vault_roots = self._roots()
        self._show(q, tq, qvec, unknown, chunk_for, notes, shown, vault_roots)
        rel = shown.relevance
        sup_keys = [notes[key].superseded_by for _, key, _ in top if notes[key].superseded_by]
        sup_paths = {k: k.split(":", 1)[1] for k in sup_keys}
        terms = highlight_terms(q.text)
        hits = []
        gone = {name for name, root in vault_roots.items() if not os.path.isdir(root)} if top else set()
        imported = self.index.imported_all() if top else {}  # vault -> imported file -> importer
        for score, key, parts in top:
            row = notes[key]
            if unknown:
                parts["unknown_words"] = unknown  # no note has them: matched by spelling (trigrams)
            if q.explain:  # why it is current, or not, in its topic chain
                how = written_how(row)
                parts["written"] = f"{how['at']} from {how['from']}" + (
                    f", {how['ahead_days']:g} days ahead of now" if "ahead_days" in how else "")
                scope = self.index.catalog.scope
                if row.topic and (joined := scope.describe(scope(row.vault, row.path))):
                    parts["chain"] = f"one chain of this topic across {joined}"
            ch = chunks.get(chunk_for[key])
            first = preview(row, chunks)
            text = ch.text if ch else first
            hits.append(Hit(
                path=row.path, vault=row.vault,
                line_start=ch.line_start if ch else 1, line_end=ch.line_end if ch else 1,
                heading=ch.heading if ch else row.path,
                score=round(score, 6),
                current=row.superseded_by is None and not _retired_by(retired, key, q.as_of),
                superseded_by=sup_paths.get(row.superseded_by),
                retired=_retired_by(retired, key, q.as_of),
                topic=row.topic, tags=list(row.tags), kind=row.kind, date=row.date,
                importance=row.importance,
                snippet=(shown.snippets[chunk_for[key]] if chunk_for[key] in shown.snippets
                         else make_snippet(text, terms, cfg.snippet_chars, unknown)),
                preview=first,
                changed=row.vault not in gone and shown.changed[key],
                vault_missing=True if row.vault in gone else None,
                imported_by=imported.get(row.vault, {}).get(row.path),
                extra=extra_keys(row.meta),
                explain=parts if q.explain else None,
                section=_clip(text, q.section_chars) if q.section_chars else None,
                relevance=rel[chunk_for[key]][0] if chunk_for[key] in rel else None,
            ))
            if q.explain and chunk_for[key] in rel:
                parts.update(rel[chunk_for[key]][1])
        if q.min_relevance:  # asked for: the hits less likely than that to answer go (a listing has none)
            hits = [h for h in hits if h.relevance is not None and h.relevance >= q.min_relevance]
        if self.usage is not None and q.record:
            self.usage.record([(f"{h.vault}:{h.path}", h.score) for h in hits], q.task)
        info: dict[str, Any] = {"took_ms": round((time.perf_counter() - t0) * 1000, 2)}
        if unknown:
            info["unknown_words"] = unknown
        if q.mode != "text" and q.text.strip() and (unembedded := self.index.catalog.unembedded_set()):
            info["without_vectors"] = len(unembedded)  # notes a meaning-only match cannot find yet
            for h in hits:
                if f"{h.vault}:{h.path}" in unembedded:
                    h.no_vector = True
        return hits, info

    def _fuse(self, text_best: dict, vec_best: dict, mode: str, explain: bool = False) -> dict[str, tuple[float, dict]]:
        cfg = self.cfg
        wt = cfg.text_weight if mode != "vector" else 0.0
        wv = cfg.vector_weight if mode != "text" else 0.0
        if mode == "text":
            wt = 1.0
        if mode == "vector":
            wv = 1.0
        out: dict[str, tuple[float, dict]] = {}
        rrf = cfg.fusion == "rrf" and mode == "hybrid"
        t_rank: dict[str, int] = {}
        v_rank: dict[str, int] = {}
        if explain or rrf:  # the ranks: only RRF and `explain` read them
            t_rank = {k: i + 1 for i, k in enumerate(sorted(text_best, key=lambda k: -text_best[k][1]))}
            v_rank = {k: i + 1 for i, k in enumerate(sorted(vec_best, key=lambda k: -vec_best[k][1]))}
        t_max = max((s for _, s in text_best.values()), default=0.0) or 1.0
        v_scores = [s for _, s in vec_best.values()]
        v_max, v_min = (max(v_scores), min(v_scores)) if v_scores else (1.0, 0.0)
        floor = cfg.min_cosine or -1.0  # 0: none
        for key in set(text_best) | set(vec_best):
            if key not in text_best and vec_best[key][1] < floor:
                continue  # meaning alone, and not even that: no word of the query, a cosine of noise
            parts: dict[str, Any] = {}
            if explain and key in text_best:
                parts["text_rank"], parts["bm25"] = t_rank[key], round(text_best[key][1], 4)
            if explain and key in vec_best:
                parts["vector_rank"], parts["cosine"] = v_rank[key], round(vec_best[key][1], 4)
            if rrf:
                k = cfg.rrf_k
                s = (wt / (k + t_rank[key]) if key in t_rank else 0.0) + (wv / (k + v_rank[key]) if key in v_rank else 0.0)
                s /= (wt + wv) / (k + 1)
            else:
                ts = text_best[key][1] / t_max if key in text_best else 0.0
                vs = _scaled(vec_best[key][1], v_min, v_max) if key in vec_best else 0.0
                s = (wt * ts + wv * vs) / (wt + wv)
            out[key] = (s, parts)
        return out

    def _query_entities(self, text: str) -> list[str]:
        """Entity names the query may mention: its own extracted entities plus every word and
        run of up to three words, normalised (looked up as exact terms, so most miss cheaply)."""
        names = {normalize(e) for e in extract_entities(text)}
        words = WORD.findall(normalize(text))
        for size in (1, 2, 3):
            for i in range(len(words) - size + 1):
                gram = " ".join(words[i : i + size])
                if size > 1 or gram not in STOP_WORDS:
                    names.add(gram)
        return sorted(n for n in names if len(n) >= 2)



def relevance_inputs(feats: dict[str, float]) -> list[float]:
    """The inputs of the relevance model, in the order of its coefficients after the first:
    coverage, evidence, and with a cosine (hybrid and vector mode) cosine and coverage x cosine."""
    out = [feats["coverage"], feats["evidence"]]
    if "cosine" in feats:
        out += [feats["cosine"], feats["coverage"] * feats["cosine"]]
    return out


def relevance(feats: dict[str, float], cfg) -> float:
    """sigmoid(b + w . relevance_inputs): the coefficients are [search] relevance (with a
    cosine) and relevance_text (without), fitted by bench/abstain.py."""
    b, *w = cfg.relevance if "cosine" in feats else cfg.relevance_text
    z = b + sum(wi * x for wi, x in zip(w, relevance_inputs(feats)))
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def _newest_first_within_chains(scored: list, notes: dict, fetch: Callable[[set[str]], dict]) -> list:
    """With history shown, the current version of a fact must rank above every version it
    superseded, and each version above the older ones. A version keeps its own score; a newer
    version of its chain that scores no higher is brought in just above it (the current one
    fetched when the query did not find it at all: `fetch` reads catalog rows into `notes`),
    and `explain` says so (newer_version_of_a_match). Capping the older version under its
    newer one instead, when that one matched nothing, lost the match: a rare word found only in
    an old version ranked under five unrelated notes in hybrid mode."""
    def row(key: str):
        if key not in notes:
            notes.update(fetch({key}))
        return notes.get(key)

    def root(key: str) -> str:
        seen = {key}
        while (r := row(key)) is not None and r.superseded_by and r.superseded_by not in seen:
            key = r.superseded_by
            seen.add(key)
        return key

    def recency(key: str) -> tuple:
        r = notes[key]
        return (r.superseded_by is not None, -written_at(r), r.path)

    score = {key: s for s, key, _ in scored}
    parts = {key: p for _, key, p in scored}
    groups: dict[str, set[str]] = {}
    for _, key, _ in scored:
        if notes.get(key) is not None and notes[key].superseded_by:
            top = root(key)
            if row(top) is not None:
                groups.setdefault(top, {top}).add(key)
    for members in groups.values():
        for key in members - score.keys():
            score[key], parts[key] = float("-inf"), {}
        chain = sorted(members, key=recency)  # newest first
        for newer, older in reversed(list(zip(chain, chain[1:]))):
            if score[newer] <= score[older]:
                score[newer] = score[older] * 1.001 + 1e-6
                parts[newer]["newer_version_of_a_match"] = notes[older].path
    out = [(score[k], k, parts[k]) for k in score]
    out.sort(key=lambda x: (-x[0], x[1]))
    return out


def _word_char(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _has_look_alike(text: str, words: list[str]) -> bool:
    """Some word of `text` is spelled like one of `words` (folded, lower case). Only the words
    within three letters of their lengths are read and folded: a one-word typo query in text
    mode on LoCoMo session logs took 2.4 ms unchecked, 19.6 ms checking every word, 5-6 ms so."""
    lengths = [len(w) for w in words]
    pattern = _words_of_length(max(3, min(lengths) - 3), max(lengths) + 3)
    return any(_spelled_alike(w, fold(b)) for b in set(pattern.findall(text.lower())) for w in words)


@functools.lru_cache(maxsize=64)
def _words_of_length(lo: int, hi: int) -> re.Pattern:
    return re.compile(rf"(?<!\w)\w{{{lo},{hi}}}(?!\w)")


def _retired_by(retired: dict[str, float], key: str, as_of: float | None) -> bool:
    return key in retired and (as_of is None or retired[key] < as_of)


def _meta_matches(meta: dict[str, Any], where: tuple[tuple[str, str], ...]) -> bool:
    """Every (key, value) holds: the frontmatter value equals it (case-insensitively), or, for a
    list, contains it."""
    for key, want in where:
        have = meta.get(key)
        values = have if isinstance(have, list) else [have]
        if not any(v is not None and normalize(str(v)) == normalize(want) for v in values):
            return False
    return True


def _clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a line or word boundary when one is near."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    for sep in ("\n", " "):
        at = cut.rfind(sep)
        if at > limit * 0.7:
            cut = cut[:at]
            break
    return cut.rstrip() + " …"


def _scaled(cos: float, lo: float, hi: float) -> float:
    """Cosine scaled to 0..1 over the candidate list (min-max), with the floor taken a little
    under the worst candidate so that a lone or last candidate still counts for something."""
    lo = min(lo, hi) - 0.1 * max(hi - lo, 0.05)
    return max(0.0, (cos - lo) / ((hi - lo) or 1.0))


def _best_per_note(hits: list[tuple[str, str, float]]) -> Best:
    best: Best = {}
    for cid, key, score in hits:
        if key not in best or score > best[key][1]:
            best[key] = (cid, score)
    return best


@functools.lru_cache(maxsize=4096)  # notes share their tag lists: "tags: [ops, deploy]" many times over
def _tag_set(tags: tuple[str, ...]) -> frozenset[str]:
    """A note's tags as the filter matches them: case folded, and a nested tag under each of its
    parents too (`--tag project` finds #project/alpha, as Obsidian's tag search does)."""
    return frozenset(normalize(t) for tag in tags for t in _tag_and_parents(tag))


def _tag_and_parents(tag: str) -> list[str]:
    """project/alpha/x -> project, project/alpha, project/alpha/x."""
    parts = tag.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _changed(root: Path | None, row: NoteRecord) -> bool:
    if root is None:
        return True
    try:
        st = os.stat(os.path.join(str(root), row.path))
    except OSError:
        return True
    return (st.st_size, st.st_mtime_ns) != (row.size, row.mtime_ns)


@functools.lru_cache(maxsize=8192)  # a query's hits share their words: each pair is worked out once
def _spelled_alike(a: str, b: str) -> bool:
    """Two words one typo apart (two for words over six letters; a swap of neighbours counts as
    one: "pytset" and "pytest"), or with 40% or more of their trigrams in common ("educaton" and
    "education"); not "deployment" and "department" (three edits, 33%)."""
    if len(b) < 3 or abs(len(a) - len(b)) > 3:
        return False
    if _edits(a, b) <= (1 if len(a) <= 6 else 2):
        return True
    ta, tb = set(trigrams(a)), set(trigrams(b))
    return len(ta & tb) >= 0.4 * len(ta | tb)


def _edits(a: str, b: str) -> int:
    """Edit distance with adjacent swaps (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def make_snippet(text: str, terms: list[str], width: int, unknown: Sequence[str] = ()) -> str:
    """The window of `text` with the most query-term matches, matches wrapped in **...**.
    `unknown`: query words no note has (typos); the words spelled much like them are marked."""
    flat = re.sub(r"\s+", " ", re.sub(r"\*\*|__", "", text)).strip()
    alike = {fold(u) for u in unknown}
    low = fold(flat.lower())
    spans: list[tuple[int, int]] = []
    if len(low) == len(flat):
        for term in set(terms):
            t = fold(term.lower())
            if not t:
                continue
            if WORD.fullmatch(t):
                if len(t) <= 4:
                    pat = re.compile(r"(?<!\w)" + re.escape(t) + r"(?!\w)")
                else:  # a crude stem: "deployment" is found by "deploying"
                    pat = re.compile(r"(?<!\w)" + re.escape(t[: max(4, len(t) - 3)]) + r"\w*")
            else:
                pat = re.compile(re.escape(t))
            found = [(m.start(), m.end()) for m in pat.finditer(low)]
            if not found and t in alike:  # a typo: the words spelled much like it
                found = [(m.start(), m.end()) for m in WORD.finditer(low) if _spelled_alike(t, m.group(0))]
            spans.extend(found)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        while e < len(flat) and "\ufe00" <= flat[e] <= "\ufe0f":  # "⚠️": the selector stays with its sign
            e += 1
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    start = 0
    if merged and len(flat) > width:
        best, best_n = 0, -1
        for i, (s, _) in enumerate(merged):
            n = sum(1 for s2, e2 in merged[i:] if e2 <= s + width)
            if n > best_n:
                best, best_n = s, n
        start = max(0, min(best - width // 4, len(flat) - width))
        while start > 0 and start < len(flat) and flat[start - 1].isalnum() and flat[start].isalnum():
            start -= 1
            if best - start > width // 2:
                break
    end = min(len(flat), start + width)
    # moving the start back to a word's beginning must not cut the last word (a match at the
    # very end of the text came out as "**needlewor**…"); spaceless scripts have no words to keep
    while 0 < end < len(flat) and end - start < width + width // 4 and _word_char(flat[end - 1]) and _word_char(flat[end]):
        end += 1
    out, pos = [], start
    for s, e in merged:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out.append(flat[pos:s])
        out.append(f"**{flat[s:e]}**")
        pos = e
    out.append(flat[pos:end])
    return ("…" if start > 0 else "") + "".join(out) + ("…" if end < len(flat) else "")
