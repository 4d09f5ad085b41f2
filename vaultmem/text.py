"""Text analysis shared by indexing and querying: normalisation, CJK bigrams, word terms,
English canonical word forms, stop words. Pure Python and stdlib only, so the same rules apply
to documents and queries.

CJK text (Han, Kana, Hangul) is cut into overlapping character bigrams with real positions, so
that a phrase query over the bigrams of a query string matches exactly the notes that contain
that string. Pictographs (emoji, dingbats: ✅ ⚠ 🚀) are read the same way: they are written
without spaces too, and no word tokenizer keeps them. Other text goes to the word-level field,
analysed by Tantivy (see fulltext.py).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from typing import TypeVar

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
# Pictographs, searched like CJK characters ("a CJK run" below includes them). Emoji modifiers
# (skin tones) are in these blocks; the joiner and variation selectors are dropped by normalize.
_SYMBOL_RANGES = (
    (0x2300, 0x23FF),  # Miscellaneous Technical: ⌘ ⌛ ⏰
    (0x2600, 0x27BF),  # Miscellaneous Symbols, Dingbats: ☀ ★ ⚠ ⚡ ✅ ✔ ❌
    (0x2B00, 0x2BFF),  # Miscellaneous Symbols and Arrows: ⬆ ⭐
    (0x1F000, 0x1FAFF),  # emoji blocks: 🆗 🇯🇵 🔥 😀 🚀 🤖 🧪 🫠
)


# Invisible characters pasted along with text (from web pages, word processors, chat): soft
# hyphen, zero-width space and joiners, direction marks, word joiner, BOM. NFKC keeps them, and
# "zero\u200bwidth" would not be found as "zerowidth". Also variation selectors, which only pick
# a glyph: "⚠\ufe0f" (emoji style) is "⚠", an ideograph's variant is the ideograph.
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2060-\u2064\ufeff\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def normalize(text: str) -> str:
    """NFKC then case folding: full-width letters, half-width kana and case all compare equal;
    invisible format characters are dropped."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).casefold()


_CJK_CLASS = "".join(
    f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in _CJK_RANGES + _SYMBOL_RANGES
)
CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
# A word: letters/digits (not CJK) possibly joined by _ . - ' inside (identifiers, versions).
WORD = re.compile(f"(?:(?![{_CJK_CLASS}])\\w)+")


# A katakana word of four or more characters is read without its final long-vowel mark, as
# Japanese search engines do (Lucene's JapaneseKatakanaStemFilter): "サーバー" and "サーバ",
# "ユーザー" and "ユーザ" are spelled both ways, often in one team's notes.
_KATAKANA_LONG_END = re.compile("(?<=[\u30a1-\u30fa\u30fc]{3})\u30fc(?![\u30a1-\u30fa\u30fc])")


def _runs(normalized: str):
    """(start, run) of every CJK run, katakana words without a final long-vowel mark."""
    for m in CJK_RUN.finditer(normalized):
        run = m.group(0)
        yield m.start(), (_KATAKANA_LONG_END.sub("", run) if "\u30fc" in run else run)


def split_scripts(normalized: str) -> list[tuple[bool, str]]:
    """Already-normalised text cut into its CJK runs (True; katakana words without a final
    long-vowel mark, as _runs gives them) and the text between them (False), in order."""
    out: list[tuple[bool, str]] = []
    at = 0
    for m in CJK_RUN.finditer(normalized):
        out.append((False, normalized[at:m.start()]))
        run = m.group(0)
        out.append((True, _KATAKANA_LONG_END.sub("", run) if "\u30fc" in run else run))
        at = m.end()
    out.append((False, normalized[at:]))
    return out


def cjk_runs(normalized: str) -> list[str]:
    return [run for _, run in _runs(normalized)]


def bigrams(run: str) -> list[str]:
    """Overlapping bigrams of one CJK run; a one-character run is its own unigram."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


_T = TypeVar("_T")


def gram_tokens(normalized: str, token: Callable[[str, int, int, int], _T]) -> list[_T]:
    """Bigram tokens of every CJK run in already-normalised text, each made by
    token(text, position, start, end) (fulltext.py makes Tantivy's own: made as named tuples
    first and then as Tantivy's, they took 70 us a note of the bench's, 39 us so). Positions
    are consecutive within a run and jump by 2 between runs, so no phrase can match across two
    runs; a one-character run is its own unigram."""
    out: list[_T] = []
    pos = 0
    for start, run in _runs(normalized):
        if len(run) < 2:
            out.append(token(run, pos, start, start + 1))
            pos += 1
        else:
            for i in range(len(run) - 1):
                out.append(token(run[i : i + 2], pos, start + i, start + i + 2))
                pos += 1
        pos += 2
    return out


FOLDS_BELOW = 0x2400  # every character whose canonical decomposition starts with ASCII is below it


@functools.cache
def _fold_table() -> dict[int, str]:
    """Each character below FOLDS_BELOW whose decomposition (NFD) starts with an ASCII
    character, to that character: 495 of them, found in ~1 ms at the first use."""
    return {c: base for c in range(0x80, FOLDS_BELOW) if (base := unicodedata.normalize("NFD", chr(c))[0]).isascii()}


def fold(text: str) -> str:
    """Accents dropped character by character ("é" -> "e"), as the word field's ascii_fold drops
    them; characters with no ASCII base (kana, Hangul) are kept, so offsets stay those of `text`.
    One str.translate: decomposing each character of a Korean or Japanese snippet took a warm
    query 1 ms."""
    return text if text.isascii() else text.translate(_fold_table())


def trigrams(word: str) -> list[str]:
    """Character trigrams of one word, padded at both ends ("^ed", "edu", ..., "on$")."""
    w = f"^{fold(word)}$"
    return [w[i : i + 3] for i in range(len(w) - 2)]


MAX_WORD_CHARS = 64  # longer "words" (hashes, base64) are left out, as the word field drops them


def word_trigrams(normalized: str) -> list[str]:
    """Trigrams of every non-CJK word of 3 to 64 characters, not all digits, in already-normalised
    text: trigrams() of each, the text folded once (fold keeps each character's place and what
    is a word character) rather than word by word, 56 -> 45 us a note of the bench's."""
    words = (f"^{w}$" for w in WORD.findall(fold(normalized)) if 3 <= len(w) <= MAX_WORD_CHARS and not w.isdigit())
    return [w[i : i + 3] for w in words for i in range(len(w) - 2)]


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


# English word forms the word field's stemmer cannot see, read as one canonical word by the
# index and the query alike (text.canonical_words):
#
# 1. Irregular verbs and plurals, read as their base form ("went" is "go", "bought" is "buy",
#    "children" is "child"), so "What did Melanie buy?" finds "I bought". Each line is a base
#    form and its other forms. Left out: the light verbs (get, give, go, make, take), whose forms
#    are in nearly every note and say little, and forms that are also common other words (left,
#    found, ground, rose, wound, bound, bore, lay; bit, sat, led: "32-bit", "Sat 12 May", "LED").
#    Measured on the dev sets (bench/eval.py): R@1 and MRR rise on both LoCoMo sets in text-only
#    and hybrid modes, and no set's R@5 falls; with the light verbs in, "got" matched every "get"
#    and R@5 on LoCoMo session fell.
_INFLECTIONS = """
arise arose arisen; awake awoke awoken; bear borne; beat beaten; become became; begin began begun;
bend bent; bite bitten; bleed bled; blow blew blown; break broke broken; breed bred;
bring brought; build built; burn burnt; buy bought; catch caught; choose chose chosen;
cling clung; come came; creep crept; deal dealt; dig dug; draw drew drawn; dream dreamt;
drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; feed fed; feel felt;
fight fought; flee fled; fly flew flown; forbid forbade forbidden; forget forgot forgotten;
forgive forgave forgiven; freeze froze frozen; grow grew grown; hang hung; hear heard;
hide hid hidden; hold held; keep kept; kneel knelt; know knew known; leap leapt;
learn learnt; lend lent; light lit; lose lost; mean meant; meet met; overcome overcame;
pay paid; prove proven; ride rode ridden; ring rang rung; rise risen; run ran; say said;
see saw seen; seek sought; sell sold; send sent; sew sewn; shake shook shaken; shine shone;
shoot shot; show shown; shrink shrank shrunk; sing sang sung; sink sank sunk;
sleep slept; slide slid; speak spoke spoken; speed sped; spend spent; spin spun;
spring sprang sprung; stand stood; steal stole stolen; stick stuck; sting stung; stink stank stunk;
strike struck; strive strove striven; swear swore sworn; sweep swept; swim swam swum;
swing swung; teach taught; tear tore torn; tell told; think thought; throw threw thrown;
understand understood; undertake undertook undertaken; wake woke woken; wear wore worn;
weave wove woven; win won; withdraw withdrew withdrawn; write wrote written;
child children; man men; woman women; foot feet; tooth teeth; mouse mice; goose geese
"""
# 2. British spellings, read as the American ones: "initialise" is "initialize", "colour" is
#    "color", "travelled" is "traveled" (a person's notes and an agent's often spell apart).
#    Each rule: stems, then (British ending, American ending) pairs appended to them.
_SPELLINGS = [
    ("""apolog author capital categor central character critic custom deserial digit emphas final
     general harmon initial international local maxim memor minim modern monet normal optim organ
     parallel parameter personal priorit random real recogn reinitial reorgan sanit serial special
     stabil standard summar symbol synchron token unauthor uninitial unrecogn util vector virtual
     visual""",
     [(f"is{e}", f"iz{e}") for e in ("e", "es", "ed", "ing", "er", "ers", "ation", "ations", "able")]),
    ("anal", [(f"ys{e}", f"yz{e}") for e in ("e", "ed", "ing", "er", "ers")]),  # not "analyses"
    ("""arm behavi cand col endeav fav flav harb hon hum lab neighb od parl rum sav vap vig""",
     [(f"our{e}", f"or{e}") for e in ("", "s", "ed", "ing", "ful", "less", "ite", "ites", "able", "al",
                                       "er", "ers", "hood", "hoods")]),
    ("calib cent centimet fib kilomet lit lust meag met millimet somb spect theat",
     [("re", "er"), ("res", "ers"), ("red", "ered")]),
    ("catalog dialog analog", [("ue", ""), ("ues", "s"), ("ued", "ed")]),
    ("lic def off pret", [("ence", "ense"), ("ences", "enses")]),
    ("cancel counsel fuel label level marshal model signal total travel",
     [("led", "ed"), ("ling", "ing"), ("ler", "er"), ("lers", "ers"), ("lor", "or"), ("lors", "ors")]),
    ("", [("grey", "gray"), ("greys", "grays"), ("programme", "program"), ("programmes", "programs"),
          ("aluminium", "aluminum"), ("mould", "mold"), ("moulds", "molds"), ("ageing", "aging"),
          ("judgement", "judgment"), ("judgements", "judgments"), ("acknowledgement", "acknowledgment"),
          ("practise", "practice"), ("practised", "practiced"), ("practising", "practicing"),
          ("jewellery", "jewelry"), ("marvellous", "marvelous"), ("enrolment", "enrollment"),
          ("instalment", "installment"), ("skilful", "skillful"), ("fulfilment", "fulfillment"),
          ("artefact", "artifact"), ("artefacts", "artifacts"), ("sceptical", "skeptical")]),
]


def _canonical() -> dict[str, str]:
    out = {form: line.split()[0] for line in _INFLECTIONS.split(";") for form in line.split()[1:]}
    for stems, endings in _SPELLINGS:
        for stem in stems.split() or [""]:
            out.update({stem + brit: stem + amer for brit, amer in endings})
    return out


CANONICAL = _canonical()
_FORMS_OF: dict[str, list[str]] = {}  # canonical word -> the forms read as it
for form, canon in CANONICAL.items():
    _FORMS_OF.setdefault(canon, []).append(form)
del form, canon


def _alternation(words) -> str:
    """A regex alternation grouped by first letter (three times faster than a flat one)."""
    by_first: dict[str, list[str]] = {}
    for w in sorted(words, key=len, reverse=True):
        by_first.setdefault(w[0], []).append(re.escape(w[1:]))
    return "|".join(f"{c}(?:{'|'.join(rest)})" for c, rest in sorted(by_first.items()))


# A contraction is left alone: "won't" is not "win" (a possessive is read: "colour's").
_FORMS = re.compile(r"(?<![\w'’])(" + _alternation(CANONICAL) + r")(?!\w|['’]t\b)")


def canonical_words(normalized: str) -> str:
    """Already-normalised text with each word form above replaced by its canonical word."""
    return _FORMS.sub(lambda m: CANONICAL[m.group(1)], normalized)


def other_forms(word: str) -> list[str]:
    """The other forms of a word ("buy" -> "bought", "color" -> "colour"), for highlighting."""
    canon = CANONICAL.get(word, word)
    return [f for f in _FORMS_OF.get(canon, ()) if f != word] + ([canon] if canon != word else [])


# An identifier in camelCase or PascalCase ("RetryPolicy", "parseJSON", "HTTPServer") is one
# token to the word field; followed by its parts, it is also found by them ("retry policy").
_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9])[A-Za-z][A-Za-z0-9]*(?:[a-z0-9][A-Z]|[A-Z][A-Z][a-z])[A-Za-z0-9]*")
_IDENTIFIER_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def split_identifiers(text: str) -> str:
    """Raw (not yet case-folded) text with each camelCase identifier followed by its parts:
    "use RetryPolicy" -> "use RetryPolicy Retry Policy"."""
    return _IDENTIFIER.sub(lambda m: m.group(0) + " " + " ".join(_IDENTIFIER_PART.findall(m.group(0))), text)


def query_words(normalized: str) -> list[str]:
    """Content words of a query in order (stop words dropped unless nothing else is left)."""
    words = WORD.findall(normalized)
    content = [w for w in words if w not in STOP_WORDS]
    return content or words


def highlight_terms(query: str) -> list[str]:
    """Normalised strings to highlight in a snippet: content words and CJK runs' bigrams."""
    norm = normalize(query)
    terms = [w for w in query_words(norm) if len(w) > 1 or w.isdigit()]
    terms += [f for w in terms for f in other_forms(w)]
    for run in cjk_runs(norm):
        terms.extend(bigrams(run))
    return terms


def _script(ch: str) -> str:
    cp = ord(ch)
    if any(lo <= cp <= hi for lo, hi in _SYMBOL_RANGES):
        return "symbol"
    if 0x3040 <= cp <= 0x309F:
        return "hiragana"
    if 0x30A0 <= cp <= 0x30FF or 0x31F0 <= cp <= 0x31FF:
        return "katakana"
    if 0xAC00 <= cp <= 0xD7AF or 0x1100 <= cp <= 0x11FF or 0x3130 <= cp <= 0x318F:
        return "hangul"
    return "han"


def script_segments(run: str) -> list[str]:
    """A CJK run cut where the script changes (kanji | kana | hangul | pictograph): in Japanese this splits
    content words (kanji, katakana) from particles and endings (hiragana), a cheap stand-in
    for word segmentation. Hiragana segments are dropped; segments shorter than 2 too."""
    segs: list[tuple[str, str]] = []  # (script, text)
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

