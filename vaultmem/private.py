"""What keeps vaultmem's files and socket its user's alone, in one place: the checks a place
must pass before vaultmem trusts it, the modes it makes things with, and the peer check of a
socket. Standard library only: the thin client imports it.

Who vaultmem trusts: its own uid and root, nobody else. Another local user must not read what
vaultmem keeps (the state and cache directories are 0700, their files 0600, whatever the umask),
must not plant what vaultmem reads or loads (a directory vaultmem uses must be its user's, not a
symlink, and not writable by others; nothing code-bearing is ever loaded), and must not stand in
for the daemon (a client checks the socket's directory before it connects and the answering
process's uid before it sends a byte). Nothing here changes the mode of a directory vaultmem did
not make, but for the state and cache directories, which are vaultmem's own.
"""

from __future__ import annotations

import _socket  # the socket module's C half: see client.py
import os
import stat
import sys
from pathlib import Path

from .errors import VaultmemError

DIR_MODE = 0o700
FILE_MODE = 0o600
UMASK = 0o077


class NotPrivateError(VaultmemError):
    """A directory, file or socket vaultmem would use is not its user's alone."""

    exit_code = 2


def restrict_umask() -> None:
    """Everything this process makes from now on (the engines' files too, which take no mode)
    is its user's alone: 0700 directories, 0600 files."""
    os.umask(UMASK)


def _who(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def dir_problem(path: str | os.PathLike, what: str, loose_ok: bool = False) -> str | None:
    """Why the directory at `path` cannot be trusted, or None: it must be a directory (not a
    symlink to one: lstat), owned by this user, and writable by nobody else (`loose_ok`: the
    caller will tighten its mode itself)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"{what} {path} cannot be checked: {err.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return f"{what} {path} is a symlink; vaultmem uses only a real directory there"
    if not stat.S_ISDIR(st.st_mode):
        return f"{what} {path} is not a directory"
    if st.st_uid != os.getuid():
        return f"{what} {path} belongs to {_who(st.st_uid)}, not to you"
    if st.st_mode & 0o022 and not loose_ok:
        return f"{what} {path} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def make_dirs(path: Path) -> list[Path]:
    """Make `path` and any missing parents, each new one 0700; the ones that were there are left
    as they are. Returns the directories made."""
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    made = []
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(d, DIR_MODE)  # whatever the umask
        made.append(d)
    return made


def own_dir(path: Path, what: str) -> Path:
    """A directory that is vaultmem's own (the state dir, the cache dir): made 0700 when missing;
    when there, it must be this user's real directory, and is made 0700 if it was not (an index
    made by an earlier vaultmem, or under a loose umask). Raises NotPrivateError."""
    make_dirs(path)
    if problem := dir_problem(path, what, loose_ok=True):
        raise NotPrivateError(problem)
    if stat.S_IMODE(os.lstat(path).st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE, follow_symlinks=False)
    return path


def tighten(root: Path) -> int:
    """Make every directory under `root` 0700 and every file 0600 (symlinks are not followed,
    entries of another user are not touched); the number of modes changed. A state dir written
    by an earlier vaultmem, or by an engine under umask 002, held 0644 and 0664 files."""
    changed = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
                continue
            want = DIR_MODE if stat.S_ISDIR(st.st_mode) else FILE_MODE
            if stat.S_IMODE(st.st_mode) & ~want:
                try:
                    os.chmod(p, stat.S_IMODE(st.st_mode) & want)
                    changed += 1
                except OSError:
                    continue
    return changed


def open_nofollow(path: Path, flags: int) -> int:
    """os.open of a file of vaultmem's own, 0600, never through a symlink (a symlink planted in
    its place would have had vaultmem write or truncate a file of the planter's choosing)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except OSError as err:
        if os.path.islink(path):
            raise NotPrivateError(f"{path} is a symlink, which vaultmem never opens; remove it") from None
        raise err


# ------------------------------------------------------------------ the socket


def runtime_dir() -> str | None:
    """The user's runtime directory: $XDG_RUNTIME_DIR, else /run/user/UID (what pam_systemd
    makes; a shell from cron, su or ssh without it has no variable, and the service listens
    there), each only when it is this user's and no one else can write it."""
    for cand in (os.environ.get("XDG_RUNTIME_DIR"), f"/run/user/{os.getuid()}"):
        if cand and os.path.isabs(cand) and os.path.isdir(cand) and dir_problem(cand, "") is None:
            return cand
    return None


def socket_problem(path: str) -> str | None:
    """Why a client must not connect to `path`, or None: its directory must be this user's
    real directory that no one else can write (else another user could have put a socket
    there, or can swap it), and a socket file there must be this user's."""
    if problem := dir_problem(os.path.dirname(os.path.abspath(path)), "the socket's directory"):
        return problem
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket"
    if st.st_uid != os.getuid():
        return f"the socket {path} belongs to {_who(st.st_uid)}, not to you"
    return None


def peer_uid(sock: _socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (None where the
    system cannot say)."""
    if not hasattr(_socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # struct ucred: pid, uid, gid, 32 bits each
    return int.from_bytes(creds[4:8], sys.byteorder)


def peer_problem(sock: _socket.socket, path: str) -> str | None:
    """Why the process answering on `path` is not to be trusted (another uid), or None."""
    try:
        uid = peer_uid(sock)
    except OSError as err:
        return f"cannot tell who answers on {path}: {err.strerror}"
    if uid is not None and uid != os.getuid():
        return f"the process answering on {path} runs as {_who(uid)}, not as you"
    return None
