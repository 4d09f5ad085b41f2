"""Bad input and hostile clients: odd files are indexed as well as they can be or skipped with
a reason, odd queries never raise, other users are refused, and the daemon keeps serving."""

import json
import os
import signal
import socket
import string
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import DaemonProc, atomic_save, note


def test_odd_file_names_deep_nesting_and_symlink_loops(env):
    names = ["memory/with space.md", "memory/quote'n\"dq.md", "memory/日本語のメモ.md", "memory/-leading-dash.md",
             "memory/" + "/".join(f"d{i}" for i in range(30)) + "/deep.md"]
    for i, rel in enumerate(names):
        env.write(rel, f"oddname{i} marker\n")
    os.symlink(env.vault / "memory", env.vault / "memory/loop")  # a directory symlink loop
    report = env.sync()
    assert report.added == len(names)
    for i, rel in enumerate(names):
        assert [h.path for h in env.query(f"oddname{i}", mode="text")] == [rel]


def test_a_note_reached_through_a_link_inside_the_vault_is_indexed_once(env):
    """`docs/memory -> ../memory`: the walk met each note first through the link ("docs" sorts
    first) and never walked the real folder again; the daemon, seeing an edit under the real
    path, then indexed it a second time. A note whose real path is a note is that note, under
    its real path, in a full sync and in an update of either path. A link whose real path is no
    note (`zz/memory -> ../notes`) is still the only way to the note, whichever is walked first;
    a link up to the vault root is a loop and is cut."""
    env.write("memory/x.md", "the quoll lives here\n")
    env.write("notes/n.md", "a numbat, kept in notes\n")
    env.write("notes2/m.md", "a mulgara, kept in notes2\n")
    (env.vault / "docs").mkdir()
    os.symlink("../memory", env.vault / "docs/memory")
    (env.vault / "a").mkdir()
    os.symlink("../notes2", env.vault / "a/memory")  # walked before notes2/ ...
    (env.vault / "zz").mkdir()
    os.symlink("../notes", env.vault / "zz/memory")  # ... and after notes/
    os.symlink("../notes", env.vault / "zz/more")  # a second way there, not a note path: nothing
    os.symlink("..", env.vault / "memory/up")
    report = env.sync()
    assert not report.problems
    assert [h.path for h in env.query("quoll", mode="text")] == ["memory/x.md"]
    assert [h.path for h in env.query("numbat", mode="text")] == ["zz/memory/n.md"]
    assert [h.path for h in env.query("mulgara", mode="text")] == ["a/memory/m.md"]
    # what the daemon does for an event at either path: update that path
    from vaultmem.index import VaultIndex
    s = env.settings()
    with VaultIndex(s, writable=True) as idx:
        v = list(s.vaults)[0]
        env.write("memory/x.md", "the quoll moved\n")
        idx.update(v, {"memory/x.md", "docs/memory/x.md", "docs/memory"})
    assert [h.path for h in env.query("quoll", mode="text")] == ["memory/x.md"]
    assert env.sync().changes == 0  # a full sync agrees

def test_a_50_mb_note_is_skipped_with_a_reason_and_the_rest_indexed(env):
    (env.vault / "memory").mkdir(parents=True)
    with open(env.vault / "memory/huge.md", "wb") as f:
        f.write(b"# Huge\n\n" + b"lorem ipsum dolor " * (50 * 1024 * 1024 // 18))
    env.write("memory/small.md", "small note\n")
    report = env.sync()
    assert report.added == 1 and "too large" in report.problems["v:memory/huge.md"]


def test_empty_and_whitespace_files_are_indexed_without_chunks_or_errors(env):
    env.write("memory/empty.md", "")
    env.write("memory/blank.md", "\n\n   \n")
    env.write("memory/only-fm.md", "---\ntopic: just a topic\n---\n")
    report = env.sync()
    assert report.added == 3 and not report.problems
    assert env.query("anything") == [] or all(h.path.startswith("memory/") for h in env.query("anything"))


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    from conftest import Env
    e = Env(tmp_path_factory.mktemp("fuzz"))
    e.write("memory/a.md", note("a", "# Deploy\n\nship with make release; 배포 절차; デプロイ手順\n", tags="[ops]"))
    e.write("memory/b.md", note("a", "older deploy note\n", date="2020-01-01"))
    e.sync()
    from vaultmem.index import VaultIndex
    from vaultmem.search import Searcher
    idx = VaultIndex(e.settings())
    yield Searcher(idx)
    idx.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300) | st.text(alphabet=string.punctuation + ' "():^~*?\\[]{}!+-AND OR NOT', max_size=60),
       mode=st.sampled_from(["hybrid", "text", "vector"]), history=st.booleans())
def test_any_query_text_returns_results_or_nothing_never_raises(small_index, text, mode, history):
    from vaultmem.query import Query
    hits, info = small_index.search(Query(text, k=5, mode=mode, history=history))
    assert isinstance(hits, list) and info["took_ms"] >= 0


# values YAML reads as something other than a string, or fails on in ways other than YAMLError
_AWKWARD_VALUES = ["2025-13-45", "2025-02-30", "2025-01-01T25:00:00", "2025-01-01 10:00:00 +25:00",
                   "2001-12-14t21:59:43.10-05:00", "!!timestamp 2025-1-1", "[a, b", "{a: 1}", "!!binary abc",
                   "!!python/object:os.system", "!!set {a, b}", "*anchor", "&a [1]", "1e999", ".inf", "0x1F",
                   "~", "-", "'", '"', "|\n  block", "- a\n  - b", "[[[[[", "? complex",
                   "&a [1, *a]", "&b [&a [1, 2, 3], [*a, *a, *a], [*a, *a, *a]]"]


@settings(max_examples=400, deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from(["topic", "tags", "date", "importance", "kind", "supersedes",
                                                 "entities", "name", "description", "type", "metadata", "other"]),
                                st.text(max_size=30) | st.sampled_from(_AWKWARD_VALUES)), max_size=6),
       body=st.text(max_size=50))
def test_any_frontmatter_gives_a_note_or_a_reason_never_an_error(pairs, body):
    """`date: 2025-13-45` made YAML raise ValueError, which the salvage of broken frontmatter
    did not expect: one such note stopped a whole index. Whatever the frontmatter says, a note
    is read (with its errors listed) or refused as Unreadable."""
    from vaultmem.notes import Unreadable, parse_note
    data = ("---\n" + "\n".join(f"{k}: {v}" for k, v in pairs) + f"\n---\n{body}").encode("utf-8", "surrogatepass")
    try:
        n = parse_note("v", "memory/a.md", data)
    except Unreadable:
        return
    assert n.key == "v:memory/a.md" and all(isinstance(e, str) for e in n.errors)


def test_a_very_long_query_is_answered(small_index):
    from vaultmem.query import Query
    hits, _ = small_index.search(Query("deploy " * 20000, k=3))
    assert hits and hits[0].path == "memory/a.md"


@pytest.mark.slow
def test_bad_files_while_the_daemon_runs_are_skipped_and_listed(daemon):
    atomic_save(daemon.vault / "memory/good.md", "the okapi hides\n")
    daemon.start()
    (daemon.vault / "memory/bin.md").write_bytes(b"\x00\x01\x02binary")
    (daemon.vault / "memory/gbk.md").write_bytes("部署前先运行迁移".encode("gbk"))
    os.symlink(daemon.vault / "nowhere.md", daemon.vault / "memory/dangling.md")
    os.mkfifo(daemon.vault / "memory/pipe.md")
    atomic_save(daemon.vault / "memory/badyaml.md", "---\nname: x: y: z\n  - [\n---\nstill indexed pangolin\n")
    daemon.wait_for(lambda: daemon.paths("pangolin") == ["memory/badyaml.md"])
    st_ = daemon.wait_for(lambda: (lambda s: s if s["skipped"] == 4 else None)(daemon.request({"op": "status"})))
    assert {s["key"]: s["reason"] for s in st_["skipped_files"]} == {
        "v:memory/bin.md": "binary file (NUL bytes)", "v:memory/gbk.md": "not UTF-8 (invalid bytes from offset 0: "
        "another encoding, or not text; `iconv -f ENCODING -t UTF-8` converts a note)",
        "v:memory/dangling.md": "dangling symlink", "v:memory/pipe.md": "not a regular file (a named pipe)"}
    assert daemon.paths("okapi") == ["memory/good.md"]


def _small_disk(path, size: str):
    """A tmpfs of `size` at `path` (needs root), or None where it cannot be had."""
    import subprocess
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return path if r.returncode == 0 else None


def test_a_vector_table_that_cannot_be_made_on_a_full_disk_reads_as_empty_and_is_made_at_its_first_write(tmp_path):
    """A first index leaves its vector table to be made with its first vectors, after the notes
    are searchable by words, and by then the disk may be full: making it failed half way, and the
    half-made table then read as damage (every hybrid query failed). Now what was made is
    removed, the table reads as empty until its first write makes it, and a table whose making a
    kill cut short is made anew."""
    import subprocess
    import numpy as np
    from vaultmem.vectors import Vectors
    small = _small_disk(tmp_path / "small", "256k")
    if small is None:
        pytest.skip("mounting a tmpfs needs root")
    try:
        filler = small / "filler"
        with open(filler, "wb") as f:
            with pytest.raises(OSError):
                f.write(b"x" * (1 << 20))
        v = Vectors(small / "lance", "test-embedder", 8)
        assert v.count() == 0 and v.search(np.ones(8, dtype=np.float32), 5) == []
        assert not (small / "lance" / "chunks.lance").exists()
        filler.unlink()
        v.replace(set(), [("v:a.md#0", "v:a.md", "h", np.ones(8, dtype=np.float32))])
        assert v.count() == 1 and Vectors(small / "lance", "test-embedder", 8).count() == 1
        (small / "lance2" / "chunks.lance" / "_versions").mkdir(parents=True)  # killed before its first version
        assert Vectors(small / "lance2", "test-embedder", 8).count() == 0
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


@pytest.mark.slow
def test_a_full_disk_is_said_in_one_line_retried_with_a_pause_and_recovered_from(tmp_path):
    """On a full disk the daemon's writer retried at once, in a loop: 75,000 failed batches and
    55 MB of tracebacks in 25 seconds, on the disk that was full. `vaultmem index` died with a
    Lance traceback. Now: one line and exit 6; the daemon waits longer each time, says so in
    status, answers queries meanwhile, and once there is room the index is what the files say."""
    import subprocess
    from conftest import run_cli
    small = _small_disk(tmp_path / "small", "1m")
    if small is None:
        pytest.skip("mounting a tmpfs needs root")
    try:
        vault = tmp_path / "vault"
        words = "deploy rollback schedule review cache latency index budget ledger".split()
        for i in range(400):
            body = " ".join(words[(i * 7 + j) % len(words)] for j in range(60))
            atomic_save(vault / f"memory/n{i:03d}.md", note(f"topic {i}", f"note{i} {body}\n"))
        r = run_cli("index", "--vault", f"v={vault}", "--state-dir", str(small / "cli"))
        assert r.returncode == 6, r.stderr
        assert r.stderr.count("\n") == 1 and "no space left on the disk of" in r.stderr and "Traceback" not in r.stderr
        subprocess.run(["rm", "-rf", str(small / "cli")], check=True)

        d = DaemonProc(vault, small / "state", tmp_path / "run" / "vaultmem.sock")
        d.log = tmp_path / "daemon.log"  # not on the full disk
        d.start()
        st = d.wait_for(lambda: d.request({"op": "status"})["write_failure"], timeout=30)
        assert "no space left" in st["error"]
        time.sleep(4)
        log = d.log.read_text()
        assert log.count("tries again in") <= 5 and "Traceback" not in log, log[-2000:]
        assert d.request({"op": "query", "text": "deploy"})["ok"], "queries answered meanwhile"
        subprocess.run(["mount", "-o", "remount,size=40m", str(small)], check=True)
        # the background embedding failed on the full disk at the start and paused for a minute;
        # the first write that succeeds ends that pause (before: the vectors waited ~55 s more)
        d.wait_for(lambda: (lambda x: x["notes"] == 400 and x["pending"] == 0 and x["write_failure"] is None
                            and x["vectors_to_embed"] == 0)(d.request({"op": "status"})), timeout=40)
        assert d.paths("note123") == ["memory/n123.md"]
        assert d.stop() == 0
        from vaultmem.config import resolve
        from vaultmem.index import VaultIndex
        s = resolve({"state_dir": str(small / "state"), "vaults": [f"v={vault}"]}, env={})
        with VaultIndex(s) as idx:
            assert (idx.fulltext.count(), idx.vectors.count(), idx.catalog.pending()) == (400, 400, set())
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.slow
def test_socket_abuse_at_scale_keeps_every_well_formed_request_answered(daemon):
    for i in range(20):
        atomic_save(daemon.vault / f"memory/n{i}.md", f"note {i} about the quokka\n")
    daemon.start()
    from vaultmem.client import Client
    with Client(str(daemon.sock)) as c:
        for _ in range(50):
            c.request({"op": "query", "text": "quokka", "k": 3})
    before = _rss_mb(daemon.proc.pid)
    for i in range(1000):  # opened and dropped, some after half a request
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(daemon.sock))
        if i % 3 == 0:
            s.sendall(b'{"op": "qu')
        s.close()
    errors, answered = [], []

    def client(n):
        try:
            with Client(str(daemon.sock)) as c:
                for j in range(200):
                    if j % 50 == 0:
                        c.sock.sendall(b"{garbage\n")
                        assert json.loads(c.sock.recv(65536).split(b"\n")[0])["code"] == "bad_json"
                    out = c.request({"op": "query", "text": f"quokka {n} {j}", "k": 3, "mode": "text"})
                    assert out["ok"] and out["hits"]
                    answered.append(1)
        except Exception as err:  # gathered and asserted below
            errors.append(repr(err))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(50)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[:3]
    assert len(answered) == 50 * 200
    assert _rss_mb(daemon.proc.pid) - before < 100, "memory grew under load"
    assert daemon.request({"op": "status"})["ok"] and time.time() - t0 < 600


@pytest.mark.slow
def test_wrongly_typed_fields_of_every_op_are_usage_errors_and_write_nothing(daemon):
    atomic_save(daemon.vault / "memory/a.md", note("alpha", "the alpha note\n"))
    daemon.start()
    bad = [None, 1, 2.5, True, [], {}, [1, 2], {"a": 1}, "", "\x00", ["a", None], "x\ny"]
    fields = {
        "query": ({"text": "alpha"}, ["text", "k", "tags", "kinds", "topic", "vaults", "path", "history", "mode",
                                      "half_life", "as_of", "task", "section_chars"]),
        "remember": ({"topic": None, "text": "t"}, ["text", "tags", "kind", "importance", "vault", "cwd"]),
        "forget": ({"path": "memory/a.md", "dry_run": True}, ["path", "topic", "vault", "action", "cwd"]),
        "feedback": ({"path": "memory/a.md", "useful": True}, ["path", "useful", "task", "cwd"]),
        "stats": ({}, ["paths", "task", "cwd"]),
        "inventory": ({}, ["stale_days", "unretrieved_days"]),
        "shown": ({}, ["notes"]),
        "tags": ({}, ["tags", "kinds", "vaults", "history", "since", "until"]),
    }
    answered = 0
    for op, (base, names) in fields.items():
        for name in names:
            for value in bad:
                out = daemon.request({"op": op, **base, name: value})
                assert out.get("code") != "internal", (op, name, value, out)
                answered += 1
    for value in bad:  # remember's topic: never a note from a malformed one
        out = daemon.request({"op": "remember", "topic": value, "text": "some text"})
        assert out["ok"] is False and out["code"] == "UsageError", (value, out)
    assert answered == 40 * len(bad)
    # a lone surrogate, which JSON can spell ("\\udcff"), failed as an internal error wherever the
    # text was written (a catalog lookup, a note): it is a usage error like any other bad text
    import socket as socketlib
    for op, (base, names) in fields.items():
        for name in names:
            for value in ("a\udcffb", ["\ud800"]):
                with socketlib.socket(socketlib.AF_UNIX) as c:
                    c.connect(str(daemon.sock))
                    c.sendall(json.dumps({"op": op, **base, name: value}).encode() + b"\n")  # ASCII escapes
                    out = json.loads(c.makefile("rb").readline())
                assert out["ok"] is False and out["code"] == "UsageError" and "surrogate" in out["error"], (op, name, out)
    many = daemon.request({"op": "shown", "notes": ["v:memory/a.md"] * 101})
    assert many["ok"] is False and many["code"] == "UsageError"
    assert daemon.request({"op": "shown", "notes": ["v:memory/a.md", "v:memory/none.md"]})["recorded"] == 1
    assert sorted(p.name for p in (daemon.vault / "memory").iterdir()) == ["a.md"]
    assert daemon.request({"op": "ping"})["ok"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")
def test_a_connection_from_another_user_is_refused(tmp_path):
    import pwd
    import shutil
    import tempfile
    from pathlib import Path
    other = pwd.getpwnam("nobody").pw_uid
    public = Path(tempfile.mkdtemp(prefix="vaultmem-peer-", dir="/tmp"))  # pytest's tmp is 0700
    os.chmod(public, 0o755)
    daemon = DaemonProc(tmp_path / "vault", tmp_path / "state", public / "run" / "v.sock")
    atomic_save(daemon.vault / "memory/a.md", "the tapir swims\n")
    daemon.start()
    # open the door on purpose, so only the peer-credential check stands in the way
    os.chmod(daemon.sock.parent, 0o755)
    os.chmod(daemon.sock, 0o777)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child becomes the other user and tries
        os.close(r)
        try:
            os.setgid(pwd.getpwnam("nobody").pw_gid)
            os.setuid(other)
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(str(daemon.sock))
            os.write(w, b"CONNECTED ")
            s.sendall(b'{"op": "status"}\n')
            got = s.recv(65536)
            os.write(w, b"ANSWERED" if got else b"CLOSED")
        except (BrokenPipeError, ConnectionResetError):
            os.write(w, b"CLOSED")
        except OSError as err:
            os.write(w, f"ERROR {err}".encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    verdict = os.read(r, 4096).decode()
    try:
        # the file modes let it connect; the daemon's peer-credential check closed it unanswered
        assert verdict == "CONNECTED CLOSED", verdict
        assert daemon.request({"op": "status"})["ok"]  # its owner is still served
    finally:
        daemon.stop()
        shutil.rmtree(public, ignore_errors=True)


@pytest.mark.slow
def test_lost_events_40000_files_created_at_once_are_all_indexed(daemon):
    """Far more files than the inotify queue holds (16,384 by default): the overflow is only a
    watchdog log warning, which the daemon turns into a reconcile."""
    atomic_save(daemon.vault / "memory/seed.md", "seed\n")
    daemon.start()
    base = daemon.vault / "memory" / "flood"
    t0 = time.time()
    for d in range(40):
        sub = base / f"d{d:02d}"
        sub.mkdir(parents=True)
        for i in range(1000):
            (sub / f"n{i:04d}.md").write_text(f"flood{d}x{i}\n")
    made = time.time() - t0
    st_ = daemon.wait_for(lambda: (lambda s: s if s["notes"] == 40001 and s["pending"] == 0 else None)(
        daemon.request({"op": "status"})), timeout=900)
    assert st_["notes"] == 40001
    for d, i in ((0, 0), (17, 512), (39, 999)):
        assert daemon.paths(f"flood{d}x{i}") == [f"memory/flood/d{d:02d}/n{i:04d}.md"]
    print(f"40,000 files written in {made:.1f}s; all indexed {time.time() - t0:.0f}s after the first")


@pytest.mark.slow
def test_50_sigkills_at_random_moments_each_restart_converges(tmp_path):
    """Crash injection: edits keep landing while the daemon indexes and applies them; SIGKILL at
    a random moment; the restarted daemon must hold exactly what a fresh index of the same
    files holds (same notes, chunks and current flags; both engines hold those chunks)."""
    import random
    import shutil
    from test_daemon import snapshot
    from vaultmem.config import resolve
    from vaultmem.index import VaultIndex
    rng = random.Random(2026)
    vault = tmp_path / "vault"
    for i in range(40):
        atomic_save(vault / f"memory/n{i:02d}.md", note(f"t{i % 8}", f"# N{i}\n\nbody {i}\n\n## More\n\npart {i}\n",
                                                         date=f"2025-01-{1 + i % 28:02d}"))
    sock = tmp_path / "run/v.sock"
    d = DaemonProc(vault, tmp_path / "state", sock).start(wait=False)
    ref = tmp_path / "ref"
    try:
        for trial in range(50):
            stop_at = time.time() + rng.uniform(0.05, 1.5)
            while time.time() < stop_at:  # edits while it starts, reconciles or applies
                i = rng.randrange(50)
                p = vault / f"memory/n{i:02d}.md"
                roll = rng.random()
                if roll < 0.2:
                    p.unlink(missing_ok=True)
                elif roll < 0.3:
                    (vault / "memory" / f"big{i}.md").write_text(("paragraph of text " * 40 + "\n\n") * rng.randint(1, 6))
                else:
                    atomic_save(p, note(f"t{rng.randrange(8)}", f"# N{i}\n\nedit {trial} {rng.random()}\n",
                                        date=f"2025-{rng.randint(1, 12):02d}-01"))
                time.sleep(rng.uniform(0, 0.03))
            d.stop(signal.SIGKILL)
            # the reference is built while the daemon restarts: no file changes meanwhile
            d = DaemonProc(vault, tmp_path / "state", sock).start(wait=False)
            shutil.rmtree(ref, ignore_errors=True)
            s = resolve({"state_dir": str(ref), "vaults": [f"v={vault}"]}, env={})
            with VaultIndex(s, writable=True) as idx:
                idx.sync(list(s.vaults))
            d.wait_ready()
            got, want = snapshot(tmp_path / "state"), snapshot(ref)
            assert got[4] == set(), f"trial {trial}: pending marks left"
            assert got[0] == want[0], f"trial {trial}: notes differ"
            assert got[1] == want[1], f"trial {trial}: chunks differ"
            assert got[2] == got[3] == [c[0] for c in want[1]], f"trial {trial}: engines differ"

    finally:
        d.stop(signal.SIGTERM)


@pytest.mark.slow
def test_on_a_full_disk_reads_answer_writes_say_what_was_written_and_the_daemon_waits(tmp_path):
    """Reads failed with exit 2 ("disk I/O error": SQLite cannot make its WAL side files); a
    daemon started on a full disk exited 2, which systemd never restarts; `remember` exited 6
    with its note written, and a retry wrote a second copy."""
    import subprocess
    from conftest import run_cli
    from vaultmem import ops
    from vaultmem.config import resolve
    from vaultmem.errors import DiskFullError
    small = _small_disk(tmp_path / "small", "3m")
    if small is None:
        pytest.skip("mounting a tmpfs needs root")
    try:
        vault = tmp_path / "vault"
        for i in range(5):
            atomic_save(vault / f"memory/n{i}.md", note(f"topic {i}", f"the kiwi {i} sleeps\n", tags="birds"))
        state = small / "state"
        assert run_cli("index", "--vault", f"v={vault}", "--state-dir", str(state), "-q").returncode == 0
        filler = small / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        for args, code in ((("query", "kiwi"), 0), (("query", "kiwi", "--mode", "text"), 0), (("status",), 0),
                           (("stats",), 0), (("inventory",), 0), (("feedback", "v:memory/n1.md", "--useful"), 6),
                           (("index", "--vault", f"v={vault}"), 6)):
            r = run_cli(*args, "--state-dir", str(state), "--no-daemon" if args[0] != "index" else "-q")
            assert r.returncode == code, (args, r.stderr)
            if code:
                assert r.stderr.count("\n") == 1 and "no space left" in r.stderr, (args, r.stderr)
            else:
                assert "kiwi" in r.stdout or args[0] != "query", (args, r.stdout)
        before = sorted((vault / "memory").iterdir())
        r = run_cli("remember", "--topic", "kiwi care", "Feed the kiwi at dusk.", "--state-dir", str(state), "--no-daemon")
        assert r.returncode == 6 and sorted((vault / "memory").iterdir()) == before, "refused before anything is written"
        filler.unlink()
        ctx = ops.LocalContext(resolve({"state_dir": str(state), "vaults": [f"v={vault}"]}, env={}))
        ctx.open(True)  # a writer that opened while there was room
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        with pytest.raises(DiskFullError, match=r"the note is written \(.*kiwi-care.*\), but the index cannot take it"):
            ops.remember(ctx, {"topic": "kiwi care", "text": "Feed the kiwi at dusk."})
        written = sorted(set((vault / "memory").iterdir()) - set(before))
        assert len(written) == 1
        ctx.close()

        d = DaemonProc(vault, state, tmp_path / "run" / "vaultmem.sock")
        d.log = tmp_path / "daemon.log"
        d.start(wait=False)
        d.wait_for(lambda: "waits for room" in d.log.read_text(), timeout=60)
        assert d.proc.poll() is None, "it waits, it does not exit"
        filler.unlink()
        d.wait_ready(timeout=90)
        r = run_cli("remember", "--topic", "kiwi care", "Feed the kiwi at dusk.", "--state-dir", str(state),
                    env={"VAULTMEM_SOCKET": str(d.sock)})
        assert r.returncode == 0, r.stderr
        assert sorted(set((vault / "memory").iterdir()) - set(before)) == written, "a retry writes no second copy"
        assert d.paths("dusk") == [written[0].relative_to(vault).as_posix()]
        assert d.stop() == 0
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


@pytest.mark.slow
def test_a_stopped_daemon_does_not_hang_queries_or_hooks(daemon):
    """SIGSTOP: the kernel still queues connections, so the client connected and waited up to
    an hour for an answer, and the prompt hook with it."""
    from conftest import run_cli
    atomic_save(daemon.vault / "memory/a.md", note("kiwi", "the kiwi sleeps by day\n"))
    daemon.start()
    e = {"VAULTMEM_SOCKET": str(daemon.sock)}
    assert "answering in-process" not in run_cli("query", "kiwi", "--state-dir", str(daemon.state), env=e).stderr
    daemon.proc.send_signal(signal.SIGSTOP)
    try:
        t = time.time()
        q = run_cli("query", "kiwi", "--state-dir", str(daemon.state), env=e)
        took_query = time.time() - t
        t = time.time()
        h = run_cli("hook", "user-prompt-submit", "--prompt", "when does the kiwi sleep?", "--state-dir",
                    str(daemon.state), env=e)
        took_hook = time.time() - t
    finally:
        daemon.proc.send_signal(signal.SIGCONT)
    assert q.returncode == 0 and "memory/a.md" in q.stdout, q
    assert "did not answer within 5 s" in q.stderr and "answering in-process" in q.stderr, q.stderr
    assert took_query < 20, took_query
    assert h.returncode == 0 and "kiwi" in h.stdout and took_hook < 10, (took_hook, h)
    q = run_cli("query", "kiwi", "--state-dir", str(daemon.state), env=e)
    assert q.returncode == 0 and "answering in-process" not in q.stderr
