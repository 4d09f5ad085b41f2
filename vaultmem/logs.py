"""How vaultmem's log lines reach stderr: `vaultmem: LEVEL: message`, at the level the command
line asked for (--debug, --quiet), the chattiest libraries held to errors. Set up here only.

A client process that the daemon answers (`vaultmem query`, an agent's hook on every prompt)
logs nothing, and importing `logging` took 5 of its ~55 ms. So the command line says what it
wants (`want`), and logging is imported and set up when this process opens the index itself
(`ready`: the daemon, `index`, a client answering in-process) or logs its first line (`logger`).
Modules that only run with the index open use `logging.getLogger` as usual.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

QUIET_LIBRARIES = ("lancedb", "pylance", "lance", "apscheduler", "watchdog")
_wanted: tuple[bool, bool] | None = None  # (debug, quiet), once the command line said
_set_up = False


def want(debug: bool, quiet: bool) -> None:
    """The levels the command line asks for; applied now if logging is in use already."""
    global _wanted
    _wanted = (debug, quiet)
    if "logging" in sys.modules:
        ready()


def ready() -> None:
    """Set logging up as wanted (once; nothing before the command line has said)."""
    global _set_up
    if _set_up or _wanted is None:
        return
    _set_up = True
    import logging

    debug, quiet = _wanted
    logging.basicConfig(level=logging.DEBUG if debug else logging.ERROR if quiet else logging.WARNING,
                        format="vaultmem: %(levelname)s: %(message)s")
    if not debug:
        for noisy in QUIET_LIBRARIES:
            logging.getLogger(noisy).setLevel(logging.ERROR)
        # overflow warnings matter (unless asked for quiet)
        logging.getLogger("watchdog.observers").setLevel(logging.ERROR if quiet else logging.WARNING)


def logger(name: str) -> logging.Logger:
    """The logger `name`, logging set up first: for the few lines a client process may log."""
    ready()
    import logging

    return logging.getLogger(name)
