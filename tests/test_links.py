"""LinkMap (links.py): which note paths an event at a real path concerns, on real symlinks in
a temp dir. The daemon's use of it is tested end to end in test_daemon.py."""

import os

from vaultmem.config import Vault
from vaultmem.links import LinkMap


def _tree(tmp_path):
    vault, out = tmp_path / "vault", tmp_path / "out"
    for d in ("vault/repo", "vault/proj", "out/dotfiles", "out/sync/memory/sub"):
        (tmp_path / d).mkdir(parents=True)
    (vault / "repo/README.md").write_text("agents\n")
    (vault / "repo/CLAUDE.md").symlink_to("README.md")
    (out / "dotfiles/CLAUDE.md").write_text("global\n")
    (vault / "CLAUDE.md").symlink_to(out / "dotfiles/CLAUDE.md")
    (vault / "proj/memory").symlink_to(out / "sync/memory")
    (out / "sync/memory/sub/a.md").write_text("a\n")
    (vault / "plain.md").write_text("plain\n")
    return Vault("v", vault), out


def test_events_at_real_paths_map_back_to_the_note_paths(tmp_path):
    v, out = _tree(tmp_path)
    links = LinkMap()
    links.reset(v, ["repo/CLAUDE.md", "CLAUDE.md", "proj/memory/sub/a.md", "plain.md"])
    assert links.notes_at(str(v.root / "repo/README.md")) == [("v", "repo/CLAUDE.md")]
    assert links.notes_at(str(out / "dotfiles/CLAUDE.md")) == [("v", "CLAUDE.md")]
    assert links.notes_at(str(out / "dotfiles/other.md")) == []
    # anything under the symlinked folder, a note made later or a folder, has its vault path
    assert links.notes_at(str(out / "sync/memory/sub/new.md")) == [("v", "proj/memory/sub/new.md")]
    assert links.notes_at(str(out / "sync/memory")) == [("v", "proj/memory")]
    assert links.notes_at(str(v.root / "plain.md")) == []  # no link on its way: the vault's watch sees it
    assert links.is_linked_dir("v", "proj/memory") and not links.is_linked_dir("v", "proj")
    assert links.paths() == [("v", "CLAUDE.md"), ("v", "proj/memory"), ("v", "repo/CLAUDE.md")]
    assert links.directories() == {str(v.root / "repo"): False, str(out / "dotfiles"): False,
                                   str(out / "sync/memory"): True}
    assert sorted(links.notes_in(str(out))) == [("v", "CLAUDE.md"), ("v", "proj/memory")]


def test_a_link_changed_or_removed_is_forgotten_and_reset_starts_afresh(tmp_path):
    v, out = _tree(tmp_path)
    links = LinkMap()
    links.reset(v, ["repo/CLAUDE.md", "CLAUDE.md", "proj/memory/sub/a.md"])
    # the dotfiles link now points elsewhere; the folder link is gone
    (out / "elsewhere.md").write_text("x\n")
    os.unlink(v.root / "CLAUDE.md")
    (v.root / "CLAUDE.md").symlink_to(out / "elsewhere.md")
    os.unlink(v.root / "proj/memory")
    # the link pointed elsewhere is told back (its note is read again); the one gone is not
    assert links.update(v, ["CLAUDE.md", "proj/memory"]) == [("v", "CLAUDE.md")]
    assert links.update(v, ["CLAUDE.md"]) == []  # no change since
    assert links.notes_at(str(out / "dotfiles/CLAUDE.md")) == []
    assert links.notes_at(str(out / "elsewhere.md")) == [("v", "CLAUDE.md")]
    assert links.notes_at(str(out / "sync/memory/sub/a.md")) == []
    assert not links.is_linked_dir("v", "proj/memory")
    assert links.directories() == {str(v.root / "repo"): False, str(out): False}
    # a note that stopped being a link (replaced by a file) is forgotten too
    os.unlink(v.root / "repo/CLAUDE.md")
    (v.root / "repo/CLAUDE.md").write_text("own text\n")
    links.update(v, ["repo/CLAUDE.md"])
    assert links.notes_at(str(v.root / "repo/README.md")) == []
    # a directory moved away takes the links under it along
    (v.root / "team").mkdir()
    (v.root / "team/CLAUDE.md").symlink_to(out / "dotfiles/CLAUDE.md")
    assert links.update(v, ["team/CLAUDE.md"]) == [("v", "team/CLAUDE.md")]  # a new link
    assert links.notes_at(str(out / "dotfiles/CLAUDE.md")) == [("v", "team/CLAUDE.md")]
    os.rename(v.root / "team", v.root / "team2")
    links.update(v, ["team", "team2", "team2/CLAUDE.md"])
    assert links.notes_at(str(out / "dotfiles/CLAUDE.md")) == [("v", "team2/CLAUDE.md")]
    # reset drops whatever the new list does not hold, for this vault only
    other = Vault("w", v.root)
    links.update(other, ["CLAUDE.md"])
    links.reset(v, [])
    assert links.notes_at(str(out / "elsewhere.md")) == [("w", "CLAUDE.md")]


def test_a_dangling_link_still_names_where_its_target_will_be(tmp_path):
    """A dotfiles checkout not there yet: when the target appears, its event maps to the note."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "dotfiles").mkdir()
    (vault / "CLAUDE.md").symlink_to(tmp_path / "dotfiles/CLAUDE.md")
    links = LinkMap()
    links.reset(Vault("v", vault), ["CLAUDE.md"])
    assert links.notes_at(str(tmp_path / "dotfiles/CLAUDE.md")) == [("v", "CLAUDE.md")]
    assert links.directories() == {str(tmp_path / "dotfiles"): False}
