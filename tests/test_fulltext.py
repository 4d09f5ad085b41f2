"""Full text on the real Tantivy index: CJK substring semantics through bigrams with real
positions, NFKC and case folding, word-level English, query text that looks like syntax."""

import pytest

from vaultmem.index import VaultIndex

from conftest import note

JA_TARGET = "東京都庁の展望室から富士山がよく見えると聞いた。"


@pytest.fixture
def cjk(env):
    env.write("memory/ja.md", note("ja", "今日は" + JA_TARGET + "明日も行く。\n"))
    # the decoy has every bigram of the phrase, but never the phrase itself
    env.write("memory/decoy.md", note("decoy", "富士山が見える。展望室から海。室から、望室、山が好き、士山、から富。\n"))
    env.write("memory/ko.md", note("ko", "배포하기전에스모크테스트를실행한다\n"))
    env.write("memory/en.md", note("en", "Run `make_test` before the Deployment of ＡＢＣ widgets.\n"))
    env.sync()
    return env


def paths(hits):
    return [h.path for h in hits]


def test_two_character_words_match_inside_unspaced_text(cjk):
    assert paths(cjk.query("都庁", mode="text")) == ["memory/ja.md"]
    assert paths(cjk.query("스모크", mode="text")) == ["memory/ko.md"]
    assert paths(cjk.query("배포", mode="text")) == ["memory/ko.md"]


def test_a_quoted_ten_character_phrase_matches_only_notes_that_contain_it(cjk):
    phrase = "展望室から富士山がよく"
    assert len(phrase) == 11
    hits = cjk.query(f'"{phrase}"', mode="text")
    assert paths(hits) == ["memory/ja.md"]
    hits = cjk.query(f'"{phrase[:10]}"', mode="text")
    assert paths(hits) == ["memory/ja.md"]


def test_an_unquoted_run_is_a_bag_of_bigrams_and_a_quoted_one_is_exact(cjk):
    """Unquoted, the decoy (every bigram of the run, scattered) is found beside the note that has
    the run itself; quoted, only that note."""
    assert set(paths(cjk.query("展望室から富士山が", mode="text"))[:2]) == {"memory/ja.md", "memory/decoy.md"}
    assert paths(cjk.query('"展望室から富士山が"', mode="text")) == ["memory/ja.md"]


def test_single_cjk_character_matches(cjk):
    assert "memory/ja.md" in paths(cjk.query("庁", mode="text"))


def test_nfkc_and_case_folding(cjk):
    assert paths(cjk.query("abc widgets", mode="text")) == ["memory/en.md"]
    assert paths(cjk.query("ＭＡＫＥ_ＴＥＳＴ", mode="text")) == ["memory/en.md"]


def test_latin_words_and_numbers_inside_cjk_text_match(env):
    # Tantivy's word tokenizer alone keeps "のGDPは" and "2013年" as single tokens
    env.write("memory/ja.md", note("ja", "2013年のラオスのGDPは100億ドルだった。\n"))
    env.write("memory/ko.md", note("ko", "운영서버는Nginx로배포한다\n"))
    env.write("memory/en.md", note("en", "GDP figures for 2013 were revised twice.\n"))
    env.sync()
    assert set(paths(env.query("GDP", mode="text"))) == {"memory/ja.md", "memory/en.md"}
    assert set(paths(env.query("2013", mode="text"))) == {"memory/ja.md", "memory/en.md"}
    assert paths(env.query("nginx", mode="text")) == ["memory/ko.md"]


def test_accents_are_folded(env):
    env.write("memory/fr.md", note("fr", "Met at the café to go over her résumé.\n"))
    env.write("memory/other.md", note("other", "Coffee at home, then the CV.\n"))
    env.sync()
    hits = env.query("cafe resume", mode="text")
    assert paths(hits) == ["memory/fr.md"]
    assert "**café**" in hits[0].snippet and "**résumé**" in hits[0].snippet
    assert paths(env.query("CAFÉ", mode="text")) == ["memory/fr.md"]


def test_invisible_characters_pasted_into_words_do_not_hide_them(env):
    """A zero-width space or soft hyphen from a web page sits inside a word unseen; NFKC keeps
    it, and the word was not found."""
    env.write("memory/zw.md", note("zw", "Run the kube\u200bctl rollout, then the re\u00adindex job.\n"))
    env.write("memory/ja.md", note("ja", "デプ\u200bロイ手順を確認する\n"))
    env.write("memory/other.md", note("other", "Nothing to see here.\n"))
    env.sync()
    assert paths(env.query("kubectl", mode="text")) == ["memory/zw.md"]
    assert paths(env.query("reindex", mode="text")) == ["memory/zw.md"]
    assert paths(env.query("デプロイ", mode="text")) == ["memory/ja.md"]
    assert paths(env.query("kube\u200bctl", mode="text")) == ["memory/zw.md"]  # pasted into the query too


def test_emoji_and_symbols_are_searched_like_cjk_characters(env):
    """No word tokenizer keeps a pictograph: "⚠️" and "✅" found nothing, though notes use them
    as markers. The emoji-style variation selector is a glyph choice: "⚠️" and "⚠" are one."""
    env.write("memory/warn.md", note("warn", "⚠️ Never run migrations on a Friday.\n"))
    env.write("memory/done.md", note("done", "リリース完了✅ and the 🚀 launch went fine.\n"))
    env.write("memory/team.md", note("team", "The 👩\u200d💻 team ships on Tuesdays 🚀🔥.\n"))
    env.write("memory/plain.md", note("plain", "Migrations run on Tuesdays, and launches are fine.\n"))
    env.sync()
    assert paths(env.query("⚠️", mode="text")) == ["memory/warn.md"]
    assert paths(env.query("⚠", mode="text")) == ["memory/warn.md"]
    assert paths(env.query("✅", mode="text")) == ["memory/done.md"]
    assert paths(env.query("完了", mode="text")) == ["memory/done.md"]  # the kanji beside it still a word
    assert set(paths(env.query("🚀", mode="text"))) == {"memory/done.md", "memory/team.md"}
    assert paths(env.query('"🚀🔥"', mode="text")) == ["memory/team.md"]
    assert paths(env.query("👩\u200d💻", mode="text")) == ["memory/team.md"]
    hits = env.query("⚠ migrations", mode="text")
    assert hits[0].path == "memory/warn.md" and hits[0].snippet.startswith("**⚠\ufe0f** Never run **migrations**")


def test_english_words_are_stemmed(cjk):
    assert paths(cjk.query("deployments", mode="text")) == ["memory/en.md"]


def test_irregular_forms_match_their_base_form(env):
    env.write("memory/shop.md", note("shop", "Melanie bought a kite, and the children flew it.\n"))
    env.write("memory/plan.md", note("plan", "Next week I will buy a bike and fly to Oslo.\n"))
    env.write("memory/turn.md", note("turn", "Turn left at the bridge; I found the key there. We won't stop.\n"))
    env.sync()
    assert set(paths(env.query("buy", mode="text"))) == {"memory/shop.md", "memory/plan.md"}
    assert set(paths(env.query("bought", mode="text"))) == {"memory/shop.md", "memory/plan.md"}
    assert paths(env.query("child", mode="text")) == ["memory/shop.md"]
    assert paths(env.query('"buy a kite"', mode="text")) == ["memory/shop.md"]  # quoted phrases too
    hit = env.query("What did Melanie buy?", mode="text", explain=True)[0]
    assert hit.path == "memory/shop.md" and "**bought**" in hit.snippet
    assert "unknown_words" not in hit.explain  # "bought" is a term of the index, as "buy"
    # forms that are also other words are left as they are: "left" is not "leave", "found" not
    # "find" (no note has either term: at most a spelling look-alike), and "won't" is not "win"
    for word in ("leave", "find"):
        assert all(h.explain.get("unknown_words") == [word] for h in env.query(word, mode="text", explain=True))
    assert env.query("win", mode="text") == []
    # and a contraction in the query is read as the note's is: "won't" finds "won't"
    assert paths(env.query("they won't", mode="text")) == ["memory/turn.md"]


def test_canonical_words_replace_whole_words_only():
    from vaultmem.text import canonical_words, other_forms
    assert canonical_words("we bought it; the children ran. rebought boughts won't") == \
        "we buy it; the child run. rebought boughts won't"
    assert canonical_words("got it, went there, made it") == "got it, went there, made it"  # light verbs
    assert canonical_words("a 32-bit led, sat 12 may") == "a 32-bit led, sat 12 may"  # other words too
    assert canonical_words("the catalogue's colours, centred; we initialised and travelled") == \
        "the catalog's colors, centered; we initialized and traveled"
    assert canonical_words("analyses of the colourway") == "analyses of the colourway"  # not "analyzes"
    assert sorted(other_forms("buy")) == ["bought"] and other_forms("bought") == ["buy"]
    assert other_forms("color") == ["colour"] and other_forms("colour") == ["color"]


def test_katakana_words_match_with_or_without_a_final_long_vowel_mark(env):
    env.write("memory/marked.md", note("marked", "本番サーバーのユーザー登録を止めた。\n"))
    env.write("memory/plain.md", note("plain", "サーバのユーザ登録画面を直した。\n"))
    env.write("memory/shop.md", note("shop", "ノートとスーパーマーケットの話。\n"))
    env.sync()
    both = {"memory/marked.md", "memory/plain.md"}
    assert set(paths(env.query('"ユーザ登録"', mode="text"))) == both  # quoted: both spellings
    assert set(paths(env.query('"サーバーのユーザー"', mode="text"))) == both
    assert paths(env.query('"スーパーマーケット"', mode="text")) == ["memory/shop.md"]
    from vaultmem.text import cjk_runs
    # only a final mark of a katakana word of four or more goes
    assert cjk_runs("サーバーとコーヒー、ノート、スーパーマーケット") == ["サーバとコーヒ", "ノート", "スーパーマーケット"]


def test_camel_case_identifiers_are_found_by_their_parts(env):
    env.write("memory/retry.md", note("retry", "Wrap calls in `RetryPolicy.forAttempts(3)`; the HTTPServer "
                                      "restarts.\n東京のVaultIndexは速い。\n"))
    env.write("memory/other.md", note("other", "Our policy: retry by hand, never on the server.\n"))
    env.sync()
    for words in ("retry policy", "for attempts", "http server", "vault index"):
        assert env.query(words, mode="text")[0].path == "memory/retry.md", words
    # the whole identifier ranks its own note first, and finds notes that spell its words apart
    assert paths(env.query("RetryPolicy", mode="text")) == ["memory/retry.md", "memory/other.md"]
    assert paths(env.query('"RetryPolicy"', mode="text")) == ["memory/retry.md"]  # quoted: exact
    from vaultmem.text import split_identifiers
    assert split_identifiers("parseJSON on HTTPServer; iOS, snake_case, ALLCAPS, Title Case") == \
        "parseJSON parse JSON on HTTPServer HTTP Server; iOS, snake_case, ALLCAPS, Title Case"


def test_british_and_american_spellings_find_each_other(env):
    env.write("memory/uk.md", note("uk", "Initialise the colour palette before the catalogue loads.\n"))
    env.write("memory/us.md", note("us", "The tokenizer's behavior changed; we canceled the release.\n"))
    env.sync()
    assert paths(env.query("initialize color catalog", mode="text")) == ["memory/uk.md"]
    assert paths(env.query("tokeniser behaviour cancelled", mode="text")) == ["memory/us.md"]
    hit = env.query("colors", mode="text")[0]
    assert hit.path == "memory/uk.md" and "**colour**" in hit.snippet


@pytest.mark.parametrize("text", ["foo:bar", "(テスト", "AND", "OR NOT", '"unclosed', "a^2 ~ * ? \\", "", "   ", "[[", "title:展望"])
def test_query_syntax_characters_are_ordinary_text(cjk, text):
    cjk.query(text, mode="text")  # must not raise
    cjk.query(text)  # hybrid too


def test_filters_do_not_change_text_scores(cjk):
    base = {h.path: h.explain["bm25"] for h in cjk.query("展望室", mode="text", explain=True)}
    assert len(base) == 2
    filtered = {h.path: h.explain["bm25"] for h in cjk.query("展望室", mode="text", topic="ja", explain=True)}
    assert list(filtered) == ["memory/ja.md"] and filtered["memory/ja.md"] == base["memory/ja.md"]


def test_snippet_highlights_matched_terms(cjk):
    hit = cjk.query("展望室", mode="text")[0]
    assert "**展望**" in hit.snippet or "**展望室**" in hit.snippet
    hit = cjk.query("deployment", mode="text")[0]
    assert "**Deployment**" in hit.snippet


@pytest.mark.parametrize("text", ["alpha beta " * 200 + "needleword", "needleword " + "alpha beta " * 200,
                                  "alpha beta " * 100 + "needleword " + "gamma delta " * 100])
def test_a_snippet_cuts_no_word_in_half(text):
    """A match at the very end of a long section came out as "**needlewor**…": moving the
    window's start back to a word boundary moved its end into the last word."""
    from vaultmem.search import make_snippet
    from vaultmem.text import highlight_terms
    snippet = make_snippet(text, highlight_terms("needleword"), 240)
    assert "**needleword**" in snippet
    words = set(text.split())
    assert all(w.strip("…*") in words for w in snippet.split()), snippet


def test_script_segments_split_kanji_and_katakana_from_particles():
    from vaultmem.text import script_segments
    assert script_segments("日本で梅雨がないのは北海道とどこか") == ["日本", "梅雨", "北海道"]
    assert script_segments("データベースの接続") == ["データベース", "接続"]


def test_adjacent_words_near_each_other_rank_first(env):
    env.write("memory/a.md", note("a", "The support group met on Tuesday.\n"))
    env.write("memory/b.md", note("b", "A group of friends offered support later.\n"))
    env.sync()
    assert env.query("support group", mode="text")[0].path == "memory/a.md"


def test_a_word_no_note_has_is_looked_up_by_its_trigrams(env):
    env.write("memory/edu.md", note("edu", "Caroline wants to go back into education and counseling.\n"))
    env.write("memory/run.md", note("run", "Melanie bought new running shoes for the charity race.\n"))
    env.sync()
    # typos and other forms of a word: no note has their term, their trigrams find the note
    assert paths(env.query("educaton", mode="text")) == ["memory/edu.md"]
    assert paths(env.query("counselling", mode="text")) == ["memory/edu.md"]
    assert env.query("charty racing", mode="text")[0].path == "memory/run.md"
    hit = env.query("counceling educaton", explain=True)[0]
    assert hit.path == "memory/edu.md"
    assert hit.explain["unknown_words"] == ["counceling", "educaton"]  # --explain says why
    assert "**education**" in hit.snippet and "**counseling**" in hit.snippet
    assert "unknown_words" not in env.query("education", explain=True)[0].explain
    assert env.query('"educaton"', mode="text") == []  # a quoted word is matched exactly


def test_a_hit_found_by_trigrams_has_a_query_word_or_one_spelled_like_it(env):
    """Trigrams say which chunks to look at, not which words match: "xylophone" shares
    "pho", "hon", "one" with "phone" and "Python", and was answered with that note."""
    env.write("memory/phone.md", note("phone", "I called her on the phone about Python.\n"))
    env.write("memory/edu.md", note("edu", "Caroline wants to go back into education.\n"))
    env.write("memory/coffee.md", "---\ntopic: espresso machine\n---\nDescale it every month.\n")
    env.sync()
    assert env.query("xylophone", mode="text") == []
    assert env.query("xylophone zzqqxx", mode="text") == []
    assert paths(env.query("descale xylophone", mode="text")) == ["memory/coffee.md"]  # by its known word
    assert paths(env.query("month phnoe", mode="text")) == ["memory/coffee.md", "memory/phone.md"]
    assert paths(env.query("educaton", mode="text")) == ["memory/edu.md"]
    assert paths(env.query("phnoe", mode="text")) == ["memory/phone.md"]  # two letters swapped
    assert paths(env.query("expresso", mode="text")) == ["memory/coffee.md"]  # by its topic


def test_a_long_query_looks_up_only_its_longest_unknown_words(env):
    from vaultmem.fulltext import LOOSE_MAX_WORDS
    env.write("memory/edu.md", note("edu", "Caroline wants to go back into education and counseling.\n"))
    env.sync()
    words = ["zzqa", "educaton", "qqzzx", "carolinne", "wxyzvb", "zzqqxxyy", "qzqz"]
    from vaultmem.index import VaultIndex
    from vaultmem.search import Query, Searcher
    with VaultIndex(env.settings()) as idx:
        _, info = Searcher(idx).search(Query(" ".join(words), mode="text"))
    assert len(words) > LOOSE_MAX_WORDS == 4
    assert info["unknown_words"] == ["educaton", "carolinne", "wxyzvb", "zzqqxxyy"]  # longest, in query order


def test_word_trigrams_skip_numbers_short_and_overlong_words():
    from vaultmem.text import word_trigrams
    assert word_trigrams("go to 2024 api") == ["^ap", "api", "pi$"]
    assert word_trigrams("x" * 65) == [] and len(word_trigrams("x" * 64)) == 64
    assert word_trigrams("café") == ["^ca", "caf", "afe", "fe$"]  # accents folded, as in `words`
    from vaultmem.text import fold
    assert fold("résumé ά 한") == "resume ά 한"  # one character for one: snippet offsets hold


def test_word_trigrams_fold_the_text_once_as_each_word_alone_would_be():
    """word_trigrams folds the whole text once, not word by word: the same only while folding
    keeps each character's place, whether it is a word character and whether it is a digit.
    Checked for every code point, and on text with accents, a Kelvin sign, Greek and CJK."""
    import sys
    from vaultmem.text import MAX_WORD_CHARS, WORD, fold, trigrams, word_trigrams
    for c in map(chr, range(sys.maxunicode + 1)):
        f = fold(c)
        assert len(f) == 1 and bool(WORD.fullmatch(c)) == bool(WORD.fullmatch(f)) and c.isdigit() == f.isdigit(), hex(ord(c))
    for text in ("café naïve résumé", "\u212aelvin ångström", "ά έ ή 日本語 한국어 mixed", "x² ①②③ 42 four2"):
        each = [t for w in WORD.findall(text) if 3 <= len(w) <= MAX_WORD_CHARS and not w.isdigit() for t in trigrams(w)]
        assert word_trigrams(text) == each, text


def test_gram_tokens_are_bigrams_numbered_within_a_run_and_apart_across_runs():
    from vaultmem.text import gram_tokens
    assert gram_tokens("日本語 x 한 국어", lambda *t: t) == [
        ("日本", 0, 0, 2), ("本語", 1, 1, 3),  # one run: consecutive positions, offsets in the text
        ("한", 4, 6, 7),  # a one-character run is its own unigram, two positions on
        ("국어", 7, 8, 10)]


def test_a_word_the_index_knows_is_not_loosened(env):
    env.write("memory/cart.md", note("cart", "The shopping cart keeps its items.\n"))
    env.write("memory/map.md", note("map", "Cartography of the old harbour.\n"))
    env.sync()
    # "cart" is a term of the index: it must not also match "cartography" by its trigrams
    assert paths(env.query("cart", mode="text")) == ["memory/cart.md"]
    assert paths(env.query("shopping carts", mode="text")) == ["memory/cart.md"]
    env.write("memory/rel.md", note("rel", "Release build4243 went out on Friday.\n"))
    env.sync()
    # ids, versions and hashes are never matched by near spelling
    assert env.query("build4242", mode="text") == []
    assert paths(env.query("build4243", mode="text")) == ["memory/rel.md"]


def test_a_full_text_index_of_an_older_layout_is_rebuilt_from_the_notes(env):
    import shutil

    import tantivy

    from vaultmem.errors import IndexMissingError
    from vaultmem.index import VaultIndex

    env.write("memory/a.md", note("a", "Rotate the signing keys every quarter.\n"))
    env.write("memory/b.md", note("b", "The staging database restarts at noon.\n"))
    env.sync()
    old = env.state / "tantivy"
    shutil.rmtree(old)
    b = tantivy.SchemaBuilder()  # a layout with fewer fields, as an older vaultmem wrote
    b.add_text_field("chunk", stored=True, tokenizer_name="raw")
    b.add_text_field("note", stored=True, tokenizer_name="raw")
    tantivy.Index(b.build(), path=str(old.mkdir() or old))
    with pytest.raises(IndexMissingError, match="older layout"):
        VaultIndex(env.settings())  # a reader never deletes: it says what to do
    report = env.sync()
    assert report.updated == 2 and report.chunks_embedded == 0  # vectors reused, notes re-read
    assert paths(env.query("signing keys", mode="text")) == ["memory/a.md"]
    assert env.sync().unchanged == 2


def test_trigrams_in_most_chunks_are_left_out_of_the_fallback(env, monkeypatch):
    from vaultmem import fulltext

    env.write("memory/a.md", note("a", "Nightly backups of the ledger.\n"))
    env.write("memory/b.md", note("b", "Ledger totals are checked nightly.\n"))
    env.write("memory/c.md", note("c", "Restores are tested monthly.\n"))
    env.sync()
    assert set(paths(env.query("ledgr", mode="text"))) == {"memory/a.md", "memory/b.md"}
    # with "common" meaning more than half of the chunks, every trigram of "ledgr" is common
    monkeypatch.setattr(fulltext, "LOOSE_COMMON_DOCS", 0)
    monkeypatch.setattr(fulltext, "LOOSE_COMMON_SHARE", 0.5)
    assert env.query("ledgr", mode="text") == []
    assert paths(env.query("restorez", mode="text")) == ["memory/c.md"]  # rare trigrams still count


def test_a_large_exclusion_set_filtered_after_the_search_gives_the_same_hits(env, monkeypatch):
    import vaultmem.fulltext as ft
    from vaultmem.index import VaultIndex
    for i in range(12):
        who = "with Ada Lovelace" if i % 2 == 0 else "alone"
        env.write(f"memory/n{i:02d}.md", note(f"n{i}", "deploy " * (i + 1) + f"step{i} {who}.\n"))
    env.sync()
    with VaultIndex(env.settings()) as idx:
        text = idx.fulltext
        tq = text.analyze("deploy")
        deny = {f"v:memory/n{i:02d}.md" for i in (11, 10, 9, 7, 5, 4, 3, 0)}

        def both():
            return text.search(tq, 3, None, deny), text.entity_search(["ada lovelace"], 3, None, deny)

        monkeypatch.setattr(ft, "POST_FILTER_MIN_KEYS", 10_000)
        filtered = both()
        assert [h[1] for h in filtered[0]] == ["v:memory/n08.md", "v:memory/n06.md", "v:memory/n02.md"]
        assert {h[1] for h in filtered[1]} == {"v:memory/n08.md", "v:memory/n06.md", "v:memory/n02.md"}
        monkeypatch.setattr(ft, "POST_FILTER_MIN_KEYS", 0)  # filtered here, after a wide run
        assert both() == filtered
        monkeypatch.setattr(ft, "POST_FILTER_MARGIN", 0.2)  # too narrow: it must run again, filtered
        assert both() == filtered


def test_feedback_terms_are_the_words_that_set_the_best_notes_apart(env):
    env.write("memory/a.md", note("a", "Deploy with Hydra. Hydra reads Quokka manifests from build 42.\n"))
    for i in range(3):
        env.write(f"memory/filler-{i}.md", note(f"f{i}", "Deploy manifests are read at each build.\n"))
    env.sync()
    with VaultIndex(env.settings()) as idx:
        ft = idx.fulltext
        tq = ft.analyze("deploy with hydra")
        terms = ft.feedback_terms(tq, ["Deploy with Hydra. Hydra reads Quokka manifests from build 42. 東京都庁"], 3, 0.5)
        words = [t for t, _ in terms]
        assert words[0] == "quokka" and terms[0][1] == 0.5  # in one chunk only: the rarest
        assert "hydra" not in words and "deploy" not in words  # the query's own
        assert not any(w.isdigit() or len(w) < 3 for w in words)
        assert all(b <= 0.5 for _, b in terms) and len(terms) == 3
        assert ft.feedback_terms(tq, ["東京都庁の展望室"], 3, 0.5) == ()  # CJK: no words
        assert ft.feedback_terms(tq, ["anything"], 0, 0.5) == ()


def test_fold_drops_the_accents_of_every_character_that_has_an_ascii_base():
    """fold() is one str.translate over a table of the characters below FOLDS_BELOW: no
    character past it decomposes to an ASCII base, so the table folds as decomposing each
    character did, over all of Unicode."""
    import unicodedata
    from vaultmem.text import FOLDS_BELOW, fold
    every = [chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000]
    bases = {ch: unicodedata.normalize("NFD", ch)[0] for ch in every}
    assert all(ord(ch) < FOLDS_BELOW for ch, base in bases.items() if base.isascii())
    text = "".join(every)
    assert fold(text) == "".join(base if base.isascii() else ch for ch, base in bases.items())
    assert fold("Crème brûlée, Ångström: 한국어 日本語 ÉCOLE") == "Creme brulee, Angstrom: 한국어 日本語 ECOLE"
