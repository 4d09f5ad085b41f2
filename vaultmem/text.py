"""Text analysis shared by indexing and querying: normalisation, CJK bigrams, word terms,
stop words. Pure Python and stdlib only, so the same rules apply to documents and queries.

CJK text (Han, Kana, Hangul) is cut into overlapping character bigrams with real positions, so
that a phrase query over the bigrams of a query string matches exactly the notes that contain
that string. Other text goes to the word-level field, analysed by Tantivy (see fulltext.py).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3040, 0x30FF),  # Hiragana, Katakana (incl. the prolonged sound mark)
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B..H
)


def normalize(text: str) -> str:
    """NFKC then case folding: full-width letters, half-width kana and case all compare equal."""
    return unicodedata.normalize("NFKC", text).casefold()


_CJK_CLASS = "".join(
    f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in _CJK_RANGES
)
CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
# A word: letters/digits (not CJK) possibly joined by _ . - ' inside (identifiers, versions).
WORD = re.compile(f"(?:(?![{_CJK_CLASS}])\\w)+")


def cjk_runs(normalized: str) -> list[str]:
    return CJK_RUN.findall(normalized)


def bigrams(run: str) -> list[str]:
    """Overlapping bigrams of one CJK run; a one-character run is its own unigram."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


@dataclass(frozen=True)
class GramToken:
    text: str
    position: int
    start: int
    end: int


def gram_tokens(normalized: str) -> list[GramToken]:
    """Bigram tokens of every CJK run in already-normalised text. Positions are consecutive within
    a run and jump by 2 between runs, so no phrase can match across two runs."""
    out: list[GramToken] = []
    pos = 0
    for m in CJK_RUN.finditer(normalized):
        run = m.group(0)
        for i, gram in enumerate(bigrams(run)):
            out.append(GramToken(gram, pos, m.start() + i, m.start() + i + len(gram)))
            pos += 1
        pos += 2
    return out


def fold(text: str) -> str:
    """Accents dropped character by character ("é" -> "e"), as the word field's ascii_fold drops
    them; characters with no ASCII base (kana, Hangul) are kept, so offsets stay those of `text`."""
    if text.isascii():
        return text
    out = []
    for ch in text:
        base = unicodedata.normalize("NFD", ch)[0] if not ch.isascii() else ch
        out.append(base if base.isascii() else ch)
    return "".join(out)


def trigrams(word: str) -> list[str]:
    """Character trigrams of one word, padded at both ends ("^ed", "edu", ..., "on$")."""
    w = f"^{fold(word)}$"
    return [w[i : i + 3] for i in range(len(w) - 2)]


MAX_WORD_CHARS = 64  # longer "words" (hashes, base64) are left out, as the word field drops them


def word_trigrams(normalized: str) -> list[str]:
    """Trigrams of every non-CJK word of 3 to 64 characters, not all digits, in already-normalised
    text."""
    return [t for w in WORD.findall(normalized) if 3 <= len(w) <= MAX_WORD_CHARS and not w.isdigit()
            for t in trigrams(w)]


# Function words that carry no meaning in a question. They still count in BM25 (their IDF is
# low), but the query drops them so that a question's wording does not outvote its content.
STOP_WORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto about as is are
    was were be been being am do does did doing have has had having i me my mine we us our ours
    you your yours he him his she her hers it its they them their theirs this that these those
    what which who whom whose when where why how there here not no nor so than too very can could
    should would will shall may might must just also any some all each both either neither
    such only own same other s t don doesn didn isn aren wasn weren""".split()
)


def query_words(normalized: str) -> list[str]:
    """Content words of a query in order (stop words dropped unless nothing else is left)."""
    words = WORD.findall(normalized)
    content = [w for w in words if w not in STOP_WORDS]
    return content or words


def highlight_terms(query: str) -> list[str]:
    """Normalised strings to highlight in a snippet: content words and CJK runs' bigrams."""
    norm = normalize(query)
    terms = [w for w in query_words(norm) if len(w) > 1 or w.isdigit()]
    for run in cjk_runs(norm):
        terms.extend(bigrams(run))
    return terms


def _script(ch: str) -> str:
    cp = ord(ch)
    if 0x3040 <= cp <= 0x309F:
        return "hiragana"
    if 0x30A0 <= cp <= 0x30FF or 0x31F0 <= cp <= 0x31FF:
        return "katakana"
    if 0xAC00 <= cp <= 0xD7AF or 0x1100 <= cp <= 0x11FF or 0x3130 <= cp <= 0x318F:
        return "hangul"
    return "han"


def script_segments(run: str) -> list[str]:
    """A CJK run cut where the script changes (kanji | kana | hangul): in Japanese this splits
    content words (kanji, katakana) from particles and endings (hiragana), a cheap stand-in
    for word segmentation. Hiragana segments are dropped; segments shorter than 2 too."""
    segs: list[str] = []
    cur, kind = "", ""
    for ch in run:
        k = _script(ch)
        if cur and k != kind:
            segs.append((kind, cur))
            cur = ""
        cur, kind = cur + ch, k
    if cur:
        segs.append((kind, cur))
    return [s for k, s in segs if k != "hiragana" and len(s) >= 2]
