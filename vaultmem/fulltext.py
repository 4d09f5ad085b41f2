"""The Tantivy full-text index: schema, analysis registration, writes and BM25 queries.
Tantivy is imported here and nowhere else.

One document per chunk. Fields: `words` (Tantivy's simple tokenizer, lower case, accents
folded, English stemming; irregular and British forms read as one word by
text.canonical_words; camelCase identifiers followed by their parts) for English words and
identifiers; `grams` (CJK character bigrams with real positions, tokenised in Python by text.py
and stored pre-tokenised) so that a phrase query over a string's bigrams matches exactly the
chunks that contain the string; `tri`, the character trigrams of every word (unstemmed, no
positions), where a query word that no note has (a typo, another form of a word) is looked up
instead; `entities`, the note's entity names for the entity bonus. Queries are always built in
code; user text never reaches Tantivy's query parser.

About 540 lines: the schema, the analysis and every kind of lookup (BM25, phrases, trigrams
for unknown words, coverage, feedback terms) must agree on how each field is tokenised, so
they stay together.
"""

from __future__ import annotations

import logging
import math
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import tantivy

from . import integrity
from .notes import Chunk, Note, index_text
from .errors import IndexDamagedError
from .text import (CJK_RUN, MAX_WORD_CHARS, STOP_WORDS, WORD, bigrams, canonical_words, cjk_runs, gram_tokens,
                   normalize, query_words, script_segments, split_identifiers, split_scripts, trigrams,
                   word_trigrams)

log = logging.getLogger(__name__)

WORDS_TOKENIZER = "vm_words"
# A bigram of hiragana alone is mostly grammar (particles, verb endings): it counts for less.
HIRAGANA_BOOST = 0.3
# A query's whole CJK run is not asked for as a substring (it was, boosted 2x): a Korean run is
# one word with its particle or ending (`시위를`, `이루어졌는가`), so the bonus went to the notes
# that repeat the question's subject in the same form, and text search lost to the plain BM25
# yardstick on KorQuAD (R@1 0.818, R@5 0.963 against 0.913 / 0.990). Without it (bench/eval.py
# --halves, text mode): KorQuAD 0.917 / 0.995 (halves A 0.790 -> 0.897, B 0.841 -> 0.933 R@1),
# JSQuAD 0.913 / 0.971 -> 0.917 / 0.972 (both halves up), LoCoMo unchanged (no CJK runs); kept
# for Japanese alone, at 2, 1, 0.5, 0.25 it gave JSQuAD R@1 0.913, 0.914, 0.915, 0.917. An
# unquoted run is a bag of bigrams (a note with them all, scattered, may rank first); a quoted
# one is exact. A lone character of a longer query is its unigram term alone, not also every
# bigram that holds it.
# Measured on the dev sets (bench/eval.py) at 0/0, 0.5/0.25, 1/0.5 and 2/1: 0.5/0.25 helps all
# three (R@5 turns 0.885 -> 0.889, JSQuAD 0.964 -> 0.968); larger boosts start to hurt.
SEGMENT_BOOST = 0.5  # a kanji/katakana segment of the run found whole
PAIR_BOOST = 0.25  # two adjacent query words found within PAIR_SLOP positions
PAIR_SLOP = 2
# A query word the index has never seen (a typo, or another form of a word: "educaton",
# "exposure" against "exposed") is looked up by its character trigrams instead, at this boost
# shared over its trigrams. Measured on the dev sets (bench/eval.py) at 0.5, 1, 1.5, 2, 3, 6:
# LoCoMo turns R@5 0.893 -> 0.896-0.897 from 0.5 to 2, no set lower; 3 and above start to hurt.
LOOSE_BOOST = 1.0
LOOSE_MIN_CHARS = 4
# Its trigrams found in over 1,000 chunks and over 10% of them are left out: they say little and
# cost the most to score. On a 10,000-note vault a query of eight unknown words took 26 ms of
# text search with them, 2.3 ms without. The dev sets (under 1,200 chunks) lose none.
LOOSE_COMMON_SHARE = 0.1
LOOSE_COMMON_DOCS = 1000
# At most this many unknown words of one query are looked up, the longest first. A long query
# (the session-start hook sends the project's recent commit subjects) can carry dozens, and
# among many words a typo matters little. On the 10,000-note bench vault a hook query with 25
# took 570 ms through the daemon, nearly all of it marking look-alikes in 30 snippets; with 4
# (and those checks cached) 28 ms, against 20 ms with none. No dev-set query has more than 3.
LOOSE_MAX_WORDS = 4


# A large exclusion set (the superseded and retired notes every default query leaves out: 7,113
# of 10,000 in the bench vault) costs Tantivy a term lookup per key on every query: 5.1 ms
# there. Fetching enough hits unfiltered to expect POST_FILTER_MARGIN times the wanted number
# left after dropping the excluded ones here takes about 1.2 ms. The result is the same: when
# too few remain and more hits exist, the query runs again with the filter. Past
# POST_FILTER_MAX_SHARE of the chunks excluded, the wide run would cost more than the filter.
POST_FILTER_MIN_KEYS = 500
POST_FILTER_MARGIN = 1.5
POST_FILTER_MAX_SHARE = 0.85
FILTER_CACHE_SIZE = 8  # filter clauses kept, for the last few allow/deny sets


def _has_digit(word: str) -> bool:
    return any(c.isdigit() for c in word)


FIELDS = ("chunk", "note", "words", "grams", "entities", "tri")


def _schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    b.add_text_field("chunk", stored=True, tokenizer_name="raw")
    b.add_text_field("note", stored=True, tokenizer_name="raw")
    b.add_text_field("words", stored=False, tokenizer_name=WORDS_TOKENIZER)
    b.add_text_field("grams", stored=False, tokenizer_name="whitespace")
    b.add_text_field("entities", stored=False, tokenizer_name="raw")
    b.add_text_field("tri", stored=False, tokenizer_name="whitespace", index_option="freq")
    return b.build()


def _words_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_WORD_CHARS))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())  # "cafe" finds "café", "resume" finds "résumé"
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


# a read of a damaged segment file fails with an error, or a Rust panic (a BaseException)
_reads = integrity.guard_reads("fulltext", (BaseException,))


@dataclass(frozen=True)
class TextQuery:
    """A query's text part, analysed once: scored terms and required phrases."""

    words: tuple[str, ...]  # analysed word terms (stemmed), in order
    grams: tuple[str, ...]  # CJK bigrams of every unquoted run
    runs: tuple[str, ...]  # whole CJK runs (exact-substring bonus)
    phrases: tuple[str, ...]  # quoted phrases: required
    loose: tuple[tuple[str, str], ...] = ()  # (word, its term): trigram fallback if the term is unknown
    expansion: tuple[tuple[str, float], ...] = ()  # (word term, boost): feedback_terms, not the user's


class FullText:
    def __init__(self, directory: Path, writable: bool = True):
        """Open (or create) the index in `directory`. One made by an older vaultmem with other
        fields, or one that cannot be opened (a damaged meta.json), is emptied when `writable`
        (`was_reset` tells the caller to re-add every note; it is derived data), and refused
        otherwise."""
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.damaged: str | None = None  # why its answers cannot be trusted (integrity.py), once found
        self.retired = False  # made anew by VaultIndex.repair: its files are gone (integrity.guard_reads)
        self.schema = _schema()
        self.was_reset = ""  # why it was emptied when opened, if it was
        try:
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # ValueError, or a Rust panic on a damaged file
            first = (str(err).splitlines() or [type(err).__name__])[0][:200]
            why = "has an older layout" if "schema does not match" in first else f"cannot be opened ({first})"
            if not writable:
                raise IndexDamagedError(f"the full-text index in {directory.parent} {why}; "
                                        "`vaultmem index` (or a restart of the daemon) makes it again") from None
            log.warning("the full-text index in %s %s; it is made again from the notes", directory.parent, why)
            shutil.rmtree(directory)
            directory.mkdir()
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
            self.was_reset = why
        self.analyzer = _words_analyzer()
        self.index.register_tokenizer(WORDS_TOKENIZER, self.analyzer)
        self._writer: tantivy.IndexWriter | None = None
        self._filter_cache: list[tuple] = []  # (allow, deny, clauses), newest last

    # -------------------------------------------------------------- writes

    @property
    def writer(self) -> tantivy.IndexWriter:
        if self._writer is None:
            # 16 MB: the per-commit batches are small; a bigger arena only raises the daemon's RSS
            self._writer = self.index.writer(heap_size=16_000_000, num_threads=1)
            # Files a killed process wrote for a commit it never finished (Tantivy lists each in
            # .managed.json before writing it) are deleted first: one named as this writer's first
            # commit would name its own ("<segment>.<opstamp>.del") failed that commit with
            # FileAlreadyExists after a SIGKILL, and every retry of the same writer with it.
            self._writer.garbage_collect_files()
        return self._writer

    def delete_notes(self, keys: list[str]) -> None:
        for key in keys:
            self.writer.delete_documents_by_term("note", key)

    def add_note(self, note: Note, chunk_ids: list[str]) -> None:
        ents = sorted({normalize(e) for e in note.entities})
        for chunk, cid in zip(note.chunks, chunk_ids):
            self.writer.add_document(self._doc(note, chunk, cid, ents))

    def _doc(self, note: Note, chunk: Chunk, cid: str, ents: list[str]) -> tantivy.Document:
        raw = index_text(note, chunk)
        text = normalize(raw)
        doc = tantivy.Document()
        doc.add_text("chunk", cid)
        doc.add_text("note", note.key)
        tokens = gram_tokens(text, tantivy.Token)
        if tokens:
            doc.add_pre_tokenized_text("grams", tantivy.PreTokenizedString(text, tokens))
        for e in ents:
            doc.add_text("entities", e)
        # CJK runs go to `grams` only: left in `words`, the simple tokenizer would glue the Latin
        # words and numbers next to them into one token ("のGDPは", "2013年"), never matched
        split = split_identifiers(raw)
        latin = CJK_RUN.sub(" ", text if split == raw else normalize(split))
        doc.add_text("words", canonical_words(latin))
        tri = word_trigrams(latin)
        if tri:
            doc.add_text("tri", " ".join(tri))
        return doc

    def commit(self) -> None:
        """Make the writes durable and visible to this process's searchers. The writer stays
        open (segment merges go on in the background) until close()."""
        if self._writer is not None:
            self._writer.commit()
        self.index.reload()

    def discard_writes(self) -> None:
        """After a failed write: drop what was not committed, and the writer with it. Tantivy
        kills a writer whose thread hit an I/O error (a full disk), and every later commit
        failed with "An index writer was killed"; the next write opens a new one."""
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.rollback()
            except Exception:  # a killed writer cannot roll back; dropping it releases its lock
                pass

    def close(self) -> None:
        """Drop uncommitted writes, let running merges finish, release the writer lock."""
        if self._writer is not None:
            self._writer.rollback()
            self._writer.wait_merging_threads()
            self._writer = None

    def garbage_collect(self) -> None:
        if self._writer is not None:
            self._writer.garbage_collect_files()

    # -------------------------------------------------------------- queries

    def analyze(self, query: str) -> TextQuery:
        phrases = tuple(p.strip() for p in re.findall(r'"([^"]+)"', query) if p.strip())
        rest = normalize(split_identifiers(re.sub(r'"[^"]*"', " ", query)))
        # word forms are read on the whole text, as notes are: split first, "won't" would lose
        # its "t" and read as "win", a term no note has for it
        content = query_words(canonical_words(rest))
        words = tuple(self.analyzer.analyze(" ".join(content)))
        runs = tuple(cjk_runs(rest))
        grams = tuple(dict.fromkeys(g for r in runs for g in bigrams(r)))
        loose = []
        for w in dict.fromkeys(content):
            # words with digits are ids, versions, hashes: a near miss there is another thing
            term = self.analyzer.analyze(w) if len(w) >= LOOSE_MIN_CHARS and not _has_digit(w) else []
            if len(term) == 1:
                loose.append((w, term[0]))
        return TextQuery(words, grams, runs, phrases, tuple(loose))

    def _terms(self, normalized: str) -> list[str]:
        """Word-field terms of normalised query text, analysed as the index analyses notes."""
        return self.analyzer.analyze(canonical_words(normalized))

    def _phrase(self, phrase: str) -> list[tantivy.Query]:
        """Required clauses for one quoted phrase, which every chunk that holds it meets: each of
        its word terms and CJK bigrams (a lone character: found inside a bigram). Whether they
        stand side by side, in order, phrase_tokens tells (search.py asks it)."""
        norm = normalize(phrase)
        out: list[tantivy.Query] = []
        for run in cjk_runs(norm):
            if len(run) == 1:
                out.append(self._run_query(run))
            else:
                out.extend(tantivy.Query.term_query(self.schema, "grams", g) for g in dict.fromkeys(bigrams(run)))
        out.extend(tantivy.Query.term_query(self.schema, "words", w)
                   for w in dict.fromkeys(self._terms(CJK_RUN.sub(" ", norm))))
        return out

    def phrase_tokens(self, text: str) -> tuple[str, ...]:
        """`text` as a quoted phrase is matched against it, token by token: the word terms of
        the index (case and accents folded, English word forms alike: "deployed" and "deploys"
        are "deploy", "bought" is "buy") and each CJK character (katakana words without a final
        long-vowel mark), in order; spaces and punctuation do not count. A phrase is in a text
        when its tokens are there side by side: `"rollback gunicorn"` finds "Rollback,
        Gunicorn" but not "gunicorn rollback"; `"999秒"` finds "999秒" and "999 秒", not 999 and
        秒 apart."""
        out: list[str] = []
        for is_cjk, part in split_scripts(normalize(text)):
            out.extend(part if is_cjk else self._terms(part))
        return tuple(out)

    def _run_query(self, run: str) -> tantivy.Query:
        if len(run) == 1:
            c = re.escape(run)
            return tantivy.Query.regex_query(self.schema, "grams", f"{c}.?|.{c}")
        grams = bigrams(run)
        if len(grams) == 1:
            return tantivy.Query.term_query(self.schema, "grams", grams[0])
        words: list[str | tuple[int, str]] = [*grams]
        return tantivy.Query.phrase_query(self.schema, "grams", words)

    def build(self, tq: TextQuery, allow: set[str] | None, deny: set[str] | None,
              strict: bool = True) -> tantivy.Query | None:
        """The BM25 query. Quoted phrases are required when `strict`, else strong boosts."""
        should: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for w in dict.fromkeys(tq.words):
            should.append((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "words", w)))
        should.extend((tantivy.Occur.Should, q) for q in self._loose(tq))
        for term, boost in tq.expansion:
            should.append((tantivy.Occur.Should, tantivy.Query.boost_query(
                tantivy.Query.term_query(self.schema, "words", term), boost)))
        for g in tq.grams:
            q = tantivy.Query.term_query(self.schema, "grams", g)
            if all("\u3040" <= c <= "\u309f" for c in g):
                q = tantivy.Query.boost_query(q, HIRAGANA_BOOST)  # particles and endings, mostly
            should.append((tantivy.Occur.Should, q))
        for run in tq.runs:
            if len(run) == 1 and len(tq.runs) == 1 and not tq.words:  # one character is the whole query:
                should.append((tantivy.Occur.Should, self._run_query(run)))  # found inside words too
            for seg in script_segments(run):
                if len(seg) > 2 and seg != run:  # content words inside a sentence, found whole
                    should.append((tantivy.Occur.Should, tantivy.Query.boost_query(self._run_query(seg), SEGMENT_BOOST)))
        for a, b in zip(tq.words, tq.words[1:]):  # adjacent query words found near each other
            if a != b:
                should.append((tantivy.Occur.Should, tantivy.Query.boost_query(
                    tantivy.Query.phrase_query(self.schema, "words", [a, b], slop=PAIR_SLOP), PAIR_BOOST)))
        must: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for p in tq.phrases:
            if strict:
                must.extend((tantivy.Occur.Must, q) for q in self._phrase(p))
            else:
                should.extend((tantivy.Occur.Should, tantivy.Query.boost_query(q, 3.0)) for q in self._phrase(p))
                should.extend((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "words", w))
                              for w in self._terms(CJK_RUN.sub(" ", normalize(p))))
                should.extend((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "grams", g))
                              for r in cjk_runs(normalize(p)) for g in bigrams(r))
        if not should and not must:
            return None
        clauses = list(must)
        if should:
            clauses.append((tantivy.Occur.Must if not must else tantivy.Occur.Should,
                            tantivy.Query.boolean_query(should)))
        clauses.extend(self._filters(allow, deny))
        return tantivy.Query.boolean_query(clauses)

    @_reads
    def feedback_terms(self, tq: TextQuery, texts: list[str], limit: int, weight: float) -> tuple[tuple[str, float], ...]:
        """Pseudo-relevance feedback: the `limit` word terms that most set `texts` (the best notes
        of a first look) apart, as (term, boost) for TextQuery.expansion. A term scores its share
        of each text's words, summed, times its IDF; the best gets `weight`, the others in
        proportion. Left out: the query's own terms, stop words, numbers and words under three
        letters.
        Words only: CJK bigrams are pieces of words, and adding them cost JSQuAD R@5 0.970 ->
        0.968 (bench/eval.py)."""
        if limit <= 0 or weight <= 0 or not texts:
            return ()
        searcher = self.index.searcher()
        total = max(1, searcher.num_docs)
        own = set(tq.words)
        share: dict[str, float] = {}
        for text in texts:
            latin = CJK_RUN.sub(" ", normalize(split_identifiers(text)))
            words = [w for w in WORD.findall(canonical_words(latin)) if w not in STOP_WORDS]
            terms = [w for w in self.analyzer.analyze(" ".join(words)) if len(w) >= 3 and not _has_digit(w)]
            for t in terms:
                if t not in own:
                    share[t] = share.get(t, 0.0) + 1.0 / len(terms)
        scored = []
        for term, s in share.items():
            df = searcher.doc_freq("words", term)
            scored.append((s * math.log(1.0 + (total - df + 0.5) / (df + 0.5)), term))
        best = sorted(scored, key=lambda x: (-x[0], x[1]))[:limit]
        if not best or best[0][0] <= 0:
            return ()
        return tuple((term, weight * s / best[0][0]) for s, term in best)

    @_reads
    def unknown_words(self, tq: TextQuery) -> list[str]:
        """The query words (four letters or more, no digit) whose term no note has, looked up by
        trigrams: the LOOSE_MAX_WORDS longest, in query order."""
        if not tq.loose:
            return []
        searcher = self.index.searcher()
        unknown = [word for word, term in tq.loose if searcher.doc_freq("words", term) == 0]
        if len(unknown) > LOOSE_MAX_WORDS:
            longest = set(sorted(unknown, key=len, reverse=True)[:LOOSE_MAX_WORDS])
            unknown = [w for w in unknown if w in longest][:LOOSE_MAX_WORDS]
        return unknown

    @_reads
    def matched_exactly(self, tq: TextQuery, chunks: set[str]) -> set[str]:
        """Those of `chunks` that the query's own terms match (its words, CJK text, phrases),
        leaving out the trigram lookup of unknown words."""
        query = self.build(replace(tq, loose=(), expansion=()), None, None, strict=False)
        if query is None or not chunks:
            return set()
        among = tantivy.Query.term_set_query(self.schema, "chunk", sorted(chunks))
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, among)])
        return {cid for cid, _, _ in self._run(query, len(chunks))}

    def _loose(self, tq: TextQuery) -> list[tantivy.Query]:
        """Trigram clauses for the query words whose term no note has."""
        searcher = self.index.searcher()
        common = max(LOOSE_COMMON_DOCS, LOOSE_COMMON_SHARE * searcher.num_docs)
        out = []
        for word in self.unknown_words(tq):
            tri = list(dict.fromkeys(trigrams(word)))
            keep = [t for t in tri if searcher.doc_freq("tri", t) <= common]
            if keep:
                any_of = tantivy.Query.boolean_query(
                    [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "tri", t)) for t in keep])
                out.append(tantivy.Query.boost_query(any_of, LOOSE_BOOST / len(tri)))
        return out

    def _filters(self, allow: set[str] | None, deny: set[str] | None) -> list:
        # the searcher hands out the same set for a filter until the notes change: the clauses
        # of the last few are kept, so that queries alternating between filters reuse them too
        for a, d, out in self._filter_cache:
            if a is allow and d is deny:
                return out
        out = self._build_filters(allow, deny)
        self._filter_cache = self._filter_cache[-(FILTER_CACHE_SIZE - 1):] + [(allow, deny, out)]
        return out

    def _build_filters(self, allow: set[str] | None, deny: set[str] | None) -> list:
        out = []
        if allow is not None:
            out.append((tantivy.Occur.Must, tantivy.Query.const_score_query(
                tantivy.Query.term_set_query(self.schema, "note", sorted(allow)), 0.0)))
        if deny:
            out.append((tantivy.Occur.MustNot, tantivy.Query.term_set_query(self.schema, "note", sorted(deny))))
        return out

    @_reads
    def search(self, tq: TextQuery, limit: int, allow: set[str] | None = None,
               deny: set[str] | None = None) -> list[tuple[str, str, float]]:
        """(chunk id, note key, BM25 score), best first. Quoted phrases are required."""
        if allow is not None and not allow:
            return []
        return self._run_excluding(lambda a, d: self.build(tq, a, d), limit, allow, deny)

    @_reads
    def phrase_candidates(self, phrases: tuple[str, ...], allow: set[str] | None = None,
                          deny: set[str] | None = None) -> list[tuple[str, str]]:
        """(chunk id, note key) of every chunk that may hold all of the quoted `phrases`: it has
        their terms (_phrase); whether side by side, phrase_tokens tells (search.py)."""
        clauses = [(tantivy.Occur.Must, q) for p in phrases for q in self._phrase(p)]
        if not clauses or (allow is not None and not allow):
            return []
        query = tantivy.Query.boolean_query(clauses + self._filters(allow, deny))
        return [(cid, key) for cid, key, _ in self._run(query, max(1, self.index.searcher().num_docs))]

    def _run_excluding(self, build, limit: int, allow: set[str] | None,
                       deny: set[str] | None) -> list[tuple[str, str, float]]:
        """Run build(allow, deny); a large `deny` alone is applied to a wider unfiltered run."""
        if allow is None and deny and len(deny) > POST_FILTER_MIN_KEYS:
            share = len(deny) / max(1, self.count())  # of chunks: a low estimate of the notes' share
            if share <= POST_FILTER_MAX_SHARE:
                wide = int(limit * POST_FILTER_MARGIN / (1.0 - share)) + 1
                kept, found = self._read_hits(build(None, None), wide, deny, limit)
                if len(kept) >= limit or found < wide:
                    return kept
        return self._run(build(allow, deny), limit)

    def _run(self, query: tantivy.Query | None, limit: int) -> list[tuple[str, str, float]]:
        return self._read_hits(query, limit)[0]

    def _read_hits(self, query: tantivy.Query | None, limit: int, deny: set[str] | None = None,
                   keep: int | None = None) -> tuple[list[tuple[str, str, float]], int]:
        """The best `limit` hits of `query` as (chunk id, note key, score), those of `deny` left
        out, read from the stored documents in score order until `keep` are kept; and how many
        hits the query had (up to `limit`). Reading stops there: of the ~520 hits a default query
        runs for at 50,000 notes (to keep 100 of notes not superseded), reading all took 2.5 ms."""
        if query is None:
            return [], 0
        searcher = self.index.searcher()
        hits = searcher.search(query, limit, count=False).hits
        out = []
        for score, addr in hits:
            doc = searcher.doc(addr)
            note = str(doc.get_first("note"))
            if deny is not None and note in deny:
                continue
            out.append((str(doc.get_first("chunk")), note, float(score)))
            if keep is not None and len(out) >= keep:
                break
        return out, len(hits)

    @_reads
    def entity_search(self, names: list[str], limit: int, allow: set[str] | None = None,
                      deny: set[str] | None = None) -> list[tuple[str, str, float]]:
        """Chunks of notes that name any of the entities. Score: the sum over matched entities
        of their specificity, log(N/df)/log(N) in [0, 1], so a name found in every note counts
        for almost nothing and a rare one for almost 1."""
        if not names or (allow is not None and not allow):
            return []
        searcher = self.index.searcher()
        total = max(2, searcher.num_docs)
        clauses = []
        for n in names:
            df = searcher.doc_freq("entities", n)
            if df:
                weight = max(0.0, math.log(total / df) / math.log(total))
                if weight > 0:
                    clauses.append((tantivy.Occur.Should, tantivy.Query.const_score_query(
                        tantivy.Query.term_query(self.schema, "entities", n), weight)))
        if not clauses:
            return []
        any_of = tantivy.Query.boolean_query(clauses)
        return self._run_excluding(
            lambda a, d: tantivy.Query.boolean_query([(tantivy.Occur.Must, any_of)] + self._filters(a, d)),
            limit, allow, deny)

    @_reads
    def coverage(self, tq: TextQuery, texts: dict[str, str]) -> dict[str, tuple[float, float]]:
        """For each text (a hit's chunk as the index reads it): the share of the query's terms
        it holds, each weighted by its IDF (its words, stemmed, and CJK bigrams, quoted phrases
        included; 1.0 when every term is there, 0 when none), and the IDF those terms carry, in
        units of the IDF of a term only one chunk has (how much the match says: common words
        say little; about the number of rare terms matched, whatever the index's size).
        Absolute measures, unlike BM25, whose scale moves with the query and the index;
        relevance features (search.py)."""
        words = set(tq.words) | {w for p in tq.phrases for w in self._terms(CJK_RUN.sub(" ", normalize(p)))}
        grams = set(tq.grams) | {g for p in tq.phrases for r in cjk_runs(normalize(p)) for g in bigrams(r)}
        if not words and not grams:
            return {k: (0.0, 0.0) for k in texts}
        searcher = self.index.searcher()
        total = max(1, searcher.num_docs)

        def idf(field: str, term: str) -> float:
            df = searcher.doc_freq(field, term)
            return math.log(1.0 + (total - df + 0.5) / (df + 0.5))
        weights = [("words", w, idf("words", w)) for w in words] + [("grams", g, idf("grams", g)) for g in grams]
        rarest = math.log(1.0 + (total - 0.5) / 1.5)  # the IDF of a term one chunk has
        whole = sum(w for _, _, w in weights) or 1.0
        out = {}
        for key, text in texts.items():
            norm = normalize(split_identifiers(text))
            have_words = set(self._terms(CJK_RUN.sub(" ", norm))) if words else set()
            # a bigram of two CJK characters side by side is one of the text's (substring: no set of
            # every bigram of a long Japanese chunk, 1 ms a query)
            held = sum(w for field, t, w in weights if (t in have_words if field == "words" else t in norm))
            out[key] = (held / whole, held / rarest)
        return out

    @_reads
    def count(self) -> int:
        return self.index.searcher().num_docs

    @_reads
    def find_chunks(self, ids: list[str]) -> set[str]:
        """Those of the chunk ids the index holds, each read back from the document store (a
        check that the index holds what the catalog says: integrity.py)."""
        searcher = self.index.searcher()
        for field in FIELDS:  # opens each field's term dictionary in every segment
            searcher.doc_freq(field, "\x00")
        if not ids:
            return set()
        return {cid for cid, _, _ in self._run(tantivy.Query.term_set_query(self.schema, "chunk", sorted(ids)),
                                               2 * len(ids))}
