"""The one error hierarchy. Every message is meant for a user: it says what went wrong and,
where there is one, what to do about it. Nothing here imports anything heavy."""


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


class EmbedderMismatchError(VaultmemError):
    """The vector table was built by another embedder than the configured one."""

    exit_code = 4


class EmbedderError(VaultmemError):
    """The embedder failed (a remote endpoint is down, answered garbage, ...)."""

    exit_code = 5
