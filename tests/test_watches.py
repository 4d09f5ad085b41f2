"""The daemon's watches (watches.py, watching.py) in this process, on real inotify observers:
what is watched and counted, links outside the vaults, the watch limit, and lost events. What
the watches report is recorded here instead of going to a writer."""

import contextlib
import logging
import os
import time

import pytest

import vaultmem.watches as wmod
from vaultmem.config import Vault, resolve
from vaultmem.watches import Watches
from vaultmem.watching import PRUNES, directories_under, inotify_watches, make_observer, vault_pruner


class Recorder(Watches):
    """Watches whose reports land in `reported`: ("path", rel) and ("reconcile", reason)."""

    def __init__(self, settings, vaults):
        self.reported: list[tuple[str, str]] = []
        super().__init__(settings, vaults, on_path=lambda vault, rel: self.reported.append(("path", rel)),
                         on_reconcile=lambda reason: self.reported.append(("reconcile", reason)),
                         imported=lambda vault: frozenset())

    def take(self) -> list[tuple[str, str]]:
        out, self.reported[:] = list(self.reported), []
        return out


def test_lost_inotify_events_trigger_a_reconcile(tmp_path):
    """watchdog reports a queue overflow only as a log warning; the daemon turns it into a
    reconcile (checked in process: the 40,000-file flood is a robustness test of its own)."""
    w = Recorder(resolve({"state_dir": str(tmp_path / "s")}, env={}), {})
    logging.getLogger("watchdog.observers.inotify_c").addHandler(w.overflow)
    try:
        logging.getLogger("watchdog.observers.inotify_c").warning("Inotify queue overflowed; filesystem events were lost")
    finally:
        logging.getLogger("watchdog.observers.inotify_c").removeHandler(w.overflow)
    assert w.take() == [("reconcile", "inotify queue overflowed")]


def test_watch_coverage_is_counted_as_the_kernel_holds_it(tmp_path):
    """The premise of the unwatched-directory check: recursive watchdog watches hold one
    inotify watch per directory (symlinks not entered, a directory of two vaults once), as
    counted from /proc, and grow with a new directory."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer
    for i in range(7):
        (tmp_path / f"v/p{i}/memory").mkdir(parents=True)
    (tmp_path / "elsewhere/deep").mkdir(parents=True)
    (tmp_path / "v/link").symlink_to(tmp_path / "elsewhere")
    v = str(tmp_path / "v")
    assert directories_under([v]) == 15 == directories_under([v, v + "/p0"]), "a nested vault: once"
    before = inotify_watches() or 0
    obs = Observer()
    obs.schedule(FileSystemEventHandler(), v, recursive=True)
    obs.schedule(FileSystemEventHandler(), v + "/p0", recursive=True)  # one instance: watched once
    obs.start()
    try:
        assert inotify_watches() - before == 15
        (tmp_path / "v/p0/memory/new").mkdir()
        deadline = time.time() + 10
        while inotify_watches() - before != 16 and time.time() < deadline:
            time.sleep(0.02)
        assert inotify_watches() - before == 16 == directories_under([v])
    finally:
        obs.stop()
        obs.join(5)


@pytest.mark.filterwarnings("ignore:Callback with id .* already exists for watch")  # as the daemon does
def test_excluded_directories_are_not_watched_and_their_events_never_come(tmp_path):
    """The vaults' watch prunes what the scan prunes: .git, node_modules, .venv, ... hold no
    notes, so they take no inotify watch and a build or `git gc` in them sends the daemon
    nothing. Directories made, or moved in, later are pruned by the same rule; a new folder of
    notes is watched, and the notes in it are reported."""
    from watchdog.events import FileSystemEventHandler
    if not PRUNES:
        pytest.skip("watchdog's inotify observer is not here")
    v = tmp_path / "v"
    for d in ("memory/a", ".git/objects/ab", "web/node_modules/left-pad/lib", ".venv/lib/site", "web/src",
              ".mypy_cache/3.11/pkg", "py/venv/lib"):
        (v / d).mkdir(parents=True)
    vault, exclude = Vault("v", v), resolve({}, env={}).index.exclude
    pruned = vault_pruner(vault, exclude)
    assert [pruned(str(v / d)) for d in ("", "memory/a", ".git", ".git/objects", "web/node_modules", "web/src")] \
        == [False, False, True, True, True, False]
    assert directories_under([str(v)], (), {str(v): pruned}) == 6  # v, memory, memory/a, web, web/src, py
    assert directories_under([str(v)]) == 20

    seen: list[str] = []

    class Record(FileSystemEventHandler):
        def on_any_event(self, event):
            seen.append(os.path.relpath(event.src_path, v))

    before = inotify_watches() or 0
    obs = make_observer()
    obs.schedule(Record(), str(v), recursive=True, pruned=pruned)
    obs.start()

    def settle(want_watches, want_seen=None):
        deadline = time.time() + 10
        while time.time() < deadline:
            if inotify_watches() - before == want_watches and (want_seen is None or want_seen <= set(seen)):
                return
            time.sleep(0.02)
        raise AssertionError(f"{inotify_watches() - before} watches, wanted {want_watches}; seen {seen}")
    try:
        settle(6)
        (v / "web/node_modules/new/deeper").mkdir(parents=True)  # npm install
        (v / "web/node_modules/new/deeper/index.js").write_text("x")
        (v / ".git/objects/ab/cdef").write_text("blob")  # git
        outside = tmp_path / "elsewhere/node_modules/pkg"
        outside.mkdir(parents=True)
        os.rename(tmp_path / "elsewhere/node_modules", v / "web/src/node_modules")  # moved in, excluded name
        (v / "proj/memory/deep").mkdir(parents=True)  # a new folder of notes, made at once
        (v / "proj/memory/deep/n.md").write_text("note")
        settle(9, {"proj/memory/deep/n.md"})  # + proj, proj/memory, proj/memory/deep
        time.sleep(0.3)  # anything late from the excluded directories would come by now
        assert inotify_watches() - before == 9 == directories_under([str(v)], (), {str(v): pruned})
        # the moved-in directory's own entry is an event in a watched directory; nothing below it
        assert not [p for p in seen if "node_modules/" in p or ".git/" in p], seen
        assert "web/src/node_modules" in seen
        # a watched folder renamed in place to an excluded name (`mv vendor node_modules`): the
        # move is reported, and its watch is dropped as if it had always been there
        os.rename(v / "memory/a", v / "memory/node_modules")
        settle(8, {"memory/a"})
        assert inotify_watches() - before == 8 == directories_under([str(v)], (), {str(v): pruned})
    finally:
        obs.stop()
        obs.join(5)


@contextlib.contextmanager
def watching_in_process(tmp_path, vault):
    """The watches of vault `vault` on a real observer, with a scheduler that is not started."""
    from apscheduler.schedulers.background import BackgroundScheduler
    settings = resolve({"state_dir": str(tmp_path / "s"), "vaults": [f"v={vault}"]}, env={})
    w = Recorder(settings, {v.name: v for v in settings.vaults})
    w.scheduler = BackgroundScheduler()
    w.start()
    try:
        yield w
    finally:
        w.stop()
        w.join()


def test_the_daemon_watches_and_counts_only_what_can_hold_notes(tmp_path):
    """The daemon's own watch and its count of it agree with excluded directories left out."""
    vault = tmp_path / "vault"
    for d in ("memory", ".venv/lib/python3/site-packages/pkg", ".git/refs/heads", "src/app"):
        (vault / d).mkdir(parents=True)
    with watching_in_process(tmp_path, vault) as w:
        w.check(rewatch=False)
        assert w.status["complete"] and w.status["directories"] == w.status["watched"] == 4, w.status  # root, memory, src, src/app


def test_a_symlinked_folder_of_notes_is_watched_without_its_excluded_directories(tmp_path):
    """`memory -> ~/notes`, a git checkout: its .git takes no watch either."""
    notes = tmp_path / "notes"
    for d in (".git/objects/ab", ".git/refs/heads", "2026"):
        (notes / d).mkdir(parents=True)
    (notes / "a.md").write_text("a note\n")
    vault = tmp_path / "vault"
    (vault / "proj").mkdir(parents=True)
    (vault / "proj/memory").symlink_to(notes)
    with watching_in_process(tmp_path, vault) as w:
        w.links.reset(w.vaults["v"], ["proj/memory/a.md"])
        w.watch_links()
        assert list(w._link_watches) == [(str(notes), True)]
        assert w._linked_dir_excluded(str(notes / ".git")) and not w._linked_dir_excluded(str(notes / "2026"))
        w.check(rewatch=False)
        # the vault, proj; notes, notes/2026
        assert w.status["complete"] and w.status["directories"] == w.status["watched"] == 4, w.status


def test_a_vault_not_wholly_watched_is_said_and_reconciled_every_minute(tmp_path, monkeypatch, caplog):
    """At the kernel's inotify watch limit watchdog skips subdirectories without a word. The
    limit is per user and machine-wide, so the test does not reach it: it makes the count of
    watches held come out short, as the kernel's refusal would, on a real observer."""
    vault = tmp_path / "vault"
    for i in range(3):
        (vault / f"p{i}/memory").mkdir(parents=True)
    with watching_in_process(tmp_path, vault) as w:
        w.check(rewatch=False)
        assert w.status["complete"] and w.status["directories"] == 7 and w.scheduler.get_job("unwatched-reconcile") is None
        walk, walks = wmod.directories_under, []

        def one_more_at_first(roots, single=(), pruned=None):
            walks.append(roots)
            return walk(roots, single, pruned) + (len(walks) == 1)
        monkeypatch.setattr(wmod, "directories_under", one_more_at_first)
        with caplog.at_level("WARNING", logger="vaultmem.daemon"):
            w.check()  # a directory made during the first walk and gone again: counted twice
        assert w.status["complete"] and len(walks) == 2 and "watched" not in caplog.text
        monkeypatch.setattr(wmod, "directories_under", walk)
        real = wmod.inotify_watches
        monkeypatch.setattr(wmod, "inotify_watches", lambda: real() - 2)  # two directories refused
        with caplog.at_level("WARNING", logger="vaultmem.daemon"):
            w.check()  # a rewatch is tried first, and is refused as well
        assert w.status == {"watched": 5, "directories": 7, "complete": False, "limit": wmod.watch_limit(), "missing": [],
                           "outside": 0, "outside_unwatched": 0}
        assert "only 5 of the vaults' 7 directories are watched" in caplog.text
        assert "max_user_watches" in caplog.text
        job = w.scheduler.get_job("unwatched-reconcile")
        assert job is not None and job.trigger.interval.total_seconds() == w.settings.daemon.unwatched_seconds == 60
        job.func()
        assert w.take() == [("reconcile", "watched afresh")] * 2 + [("reconcile", "vault not wholly watched")]
        monkeypatch.setattr(wmod, "inotify_watches", real)  # the limit was raised
        w.check()
        assert w.status["complete"] and w.scheduler.get_job("unwatched-reconcile") is None


def test_links_past_the_watch_limit_are_said_and_watched_when_room_is_made(tmp_path, monkeypatch, caplog):
    """Notes that are symlinks into more directories outside the vaults than MAX_LINK_WATCHES:
    the first ones (in sorted order) are watched, the rest said in the log and status; the
    watches are counted against the directories they need; a link removed makes room, and the
    directory watched anew has its notes looked at once. A real observer, in process."""
    vault = tmp_path / "vault"
    (vault / "memory").mkdir(parents=True)
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "n.md").write_text(f"note {name}\n")
        (vault / f"memory/{name}.md").symlink_to(tmp_path / name / "n.md")
    monkeypatch.setattr(wmod, "MAX_LINK_WATCHES", 2)
    with watching_in_process(tmp_path, vault) as w:
        w.links.reset(w.vaults["v"], ["memory/a.md", "memory/b.md", "memory/c.md"])
        with caplog.at_level("WARNING", logger="vaultmem.daemon"):
            w.watch_links()
        assert sorted(spec[0] for spec in w._link_watches) == [str(tmp_path / "a"), str(tmp_path / "b")]
        assert "symlinked notes live in 3 directories outside the vaults; 2 are watched" in caplog.text
        assert sorted(w.take()) == [("path", "memory/a.md"), ("path", "memory/b.md")]  # looked at once
        w.check(rewatch=False)
        assert w.status["complete"] and w.status["directories"] == 4  # vault, memory/, a, b
        assert (w.status["outside"], w.status["outside_unwatched"]) == (2, 1)
        (vault / "memory/a.md").unlink()
        w.links.update(w.vaults["v"], ["memory/a.md"])
        w.watch_links()
        assert sorted(spec[0] for spec in w._link_watches) == [str(tmp_path / "b"), str(tmp_path / "c")]
        assert (w.status["outside"], w.status["outside_unwatched"]) == (2, 0)
        rels = {rel for _, rel in w.take()}
        assert "memory/c.md" in rels and "memory/b.md" not in rels  # (a.md: the vault's own watch saw it go)
