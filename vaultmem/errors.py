"""The one error hierarchy. Every message is meant for a user: it says what went wrong and,
where there is one, what to do about it. Nothing here imports anything heavy."""

import errno


class VaultmemError(Exception):
    """Base class: the CLI prints str(err) as one line and exits with `exit_code`
    (0 and 1 are kept for "found" and "nothing found", as grep and ripgrep do)."""

    exit_code = 2


class ConfigError(VaultmemError):
    """A setting, flag or config file is invalid."""

    exit_code = 2


class UsageError(VaultmemError):
    """The command line asks for something that cannot be done as asked."""

    exit_code = 2


class IndexMissingError(VaultmemError):
    """There is no index in the state directory yet."""

    exit_code = 3


class IndexDamagedError(IndexMissingError):
    """A part of the index does not hold what the catalog says, or cannot be read: derived
    data, which `vaultmem index` checks and makes again from the notes."""


class IndexRemadeError(VaultmemError):
    """A read ran on a part of the index that this process has since made anew (a repair, a
    rebuild): its files are gone, not damaged. Asking again reads the new part."""

    exit_code = 3


class IndexBusy(VaultmemError):
    """Another process (a daemon, another `vaultmem index`) holds the index's writer lock."""

    def __init__(self, message: str, holder: int | None = None):
        super().__init__(message)
        self.holder = holder


class EmbedderMismatchError(VaultmemError):
    """The vector table was built by another embedder than the configured one."""

    exit_code = 4


class EmbedderError(VaultmemError):
    """The embedder failed (a remote endpoint is down, answered garbage, ...)."""

    exit_code = 5


class ServiceError(VaultmemError):
    """`systemctl --user` is missing or refused (service install --enable, service uninstall)."""

    exit_code = 7


class DatabaseUnreadable(VaultmemError):
    """A database file that cannot be opened; `damaged` when SQLite says its bytes are wrong
    (not when the directory is read-only or the file locked)."""

    def __init__(self, message: str, damaged: bool = False):
        super().__init__(message)
        self.damaged = damaged


class DiskFullError(VaultmemError):
    """The disk that holds the index is full (or the user's quota is used up)."""

    exit_code = 6


# how a full disk reads in the engines' errors: OSError, SQLite, Lance and Tantivy (Rust io errors)
_FULL = ("no space left on device", "disk quota exceeded", "database or disk is full")


def is_disk_full(err: BaseException | None) -> bool:
    """`err`, or an error it was raised from, says the disk is full."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, DiskFullError) or isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(s in str(err).lower() for s in _FULL):
            return True
        err = err.__cause__ or err.__context__
    return False


def exit_code_of(name: str) -> int:
    """The exit code of the error class called `name` (as the daemon names an error in its
    answer); 2 for a name that is no error of vaultmem's."""
    cls = globals().get(name)
    return cls.exit_code if isinstance(cls, type) and issubclass(cls, VaultmemError) else 2
