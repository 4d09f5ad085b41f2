"""`vaultmem service install|uninstall|print`: the systemd user unit for this user, from the
template in systemd/vaultmem.service (also embedded here so an installed package does not need
the repo), and with `--enable` the `systemctl --user` calls that start it at login.

The unit pins what this shell resolved (state dir, config file, socket, vaults, embedder
settings from the environment): systemd starts the daemon without the user's shell
environment, and a daemon that indexed another state dir than the one `vaultmem query` reads
would look like an empty index."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from .config import Vault, config_home, config_path_under
from .errors import ServiceError, UsageError

log = logging.getLogger("vaultmem.service")


def sd_notify(message: str) -> bool:
    """Send a state line to systemd's notify socket, if we run under Type=notify."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(addr)
            s.sendall(message.encode())
        return True
    except OSError as err:
        log.warning("cannot notify systemd at %s: %s", addr, err)
        return False

UNIT = "vaultmem.service"
# settings read from the environment that the daemon started by systemd would not see
# (and Claude Code's and Codex's own directories, whose files the globs see as `.claude/...` and
# `.codex/...`: config.Vault)
PINNED_ENV = ("VAULTMEM_EMBEDDER", "VAULTMEM_EMBEDDER_URL", "VAULTMEM_EMBEDDER_MODEL", "CLAUDE_CONFIG_DIR", "CODEX_HOME")

TEMPLATE = """\
[Unit]
Description=vaultmem: local memory index for AI coding agents
After=default.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={exec_start}
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=2
RestartPreventExitStatus=2 4
TimeoutStartSec=30min
TimeoutStopSec=60
KillSignal=SIGTERM
Environment=PYTHONUNBUFFERED=1
Environment=MALLOC_ARENA_MAX=2
{environment}
[Install]
WantedBy=default.target
"""


def watch_warning(vaults: list[Vault], exclude: tuple[str, ...]) -> str | None:
    """A warning when the vaults' directories (one inotify watch each, excluded ones not
    watched) take more than half of the kernel's per-user watch limit, which editors and other
    watchers share; None if fine."""
    from .watching import RAISE_WATCH_LIMIT, directories_under, vault_pruners, watch_limit

    limit = watch_limit()
    need = directories_under([str(v.root) for v in vaults], (), vault_pruners(vaults, exclude))
    if limit is None or need <= limit // 2:
        return None
    return (f"warning: the vaults have {need:,} directories, one inotify watch each, and the limit is "
            f"{limit:,} for all of your programs; the daemon will say so if it runs short. Raise it: "
            + RAISE_WATCH_LIMIT)


def unit_text(args, settings) -> str:
    beside = Path(sys.executable).parent / "vaultmem"  # the script of this very installation
    if beside.is_file() and os.access(beside, os.X_OK):
        cmd = [str(beside)]
    elif found := shutil.which("vaultmem"):
        cmd = [str(Path(found).resolve())]
    else:
        cmd = [sys.executable, "-m", "vaultmem.cli"]
    cmd.append("daemon")
    if args.vault or os.environ.get("VAULTMEM_VAULTS"):  # else the config file's, which the daemon reads
        for v in settings.vaults:
            cmd += ["--vault", f"{v.name}={v.root}"]
    cmd += ["--state-dir", str(settings.state_dir)]
    config = settings.config_file and Path(settings.config_file).resolve()
    if config and config != config_path_under(Path.home() / ".config").resolve():  # systemd's default: read anyway
        cmd += ["--config", str(config)]
    socket = args.socket or os.environ.get("VAULTMEM_SOCKET")
    if socket:
        cmd += ["--socket", os.path.abspath(os.path.expanduser(socket))]
    environment = "".join(f"Environment={_quote(f'{k}={os.environ[k]}')}\n" for k in PINNED_ENV if os.environ.get(k))
    # systemd expands % (specifiers) in both lines and $ (variables) in ExecStart: doubled, they are kept
    exec_start = " ".join(_quote(c) for c in cmd).replace("%", "%%").replace("$", "$$")
    return TEMPLATE.format(exec_start=exec_start, environment=environment.replace("%", "%%"))


def _quote(word: str) -> str:
    """A word as systemd reads it: in double quotes, with C escapes, when it needs them."""
    if not any(c in word for c in ' "\\\'\t'):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _check_vaults(args, settings) -> None:
    """Refuse a unit whose daemon would have nothing to watch (it would exit at every start)."""
    from .catalog import indexed_vaults

    for v in settings.vaults:
        if args.vault and not v.root.is_dir():
            raise UsageError(f"vault directory not found: {v.root}")
    if settings.vaults or indexed_vaults(settings.state_dir):
        return
    raise UsageError(f"no vault for the service to watch: pass --vault DIR (or set vaults in "
                     f"{settings.config_file or 'the config file'}, or index one into {settings.state_dir} first)")


def _systemctl(*words: str) -> None:
    """`systemctl --user WORDS`, or a ServiceError that says what it answered."""
    cmd = ["systemctl", "--user", *words]
    if shutil.which("systemctl") is None:
        raise ServiceError(f"`{' '.join(cmd)}` cannot run: systemctl is not installed (no systemd here?)")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise ServiceError(f"`{' '.join(cmd)}` did not finish in 120 s") from None
    if done.returncode != 0:
        said = next((ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()), "no message")
        raise ServiceError(f"`{' '.join(cmd)}` failed (exit {done.returncode}): {said}")


def unit_path() -> Path:
    return config_home() / "systemd" / "user" / UNIT


def run(args, settings) -> int:
    if args.action == "uninstall":
        return _uninstall(settings)
    _check_vaults(args, settings)
    text = unit_text(args, settings)
    if args.action == "print":
        sys.stdout.write(text)
        return 0
    target = unit_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    before = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else None
    tmp = target.with_suffix(".service.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    print(f"{'wrote' if before is None else 'unchanged' if before == text else 'replaced'} {target}")
    warning = watch_warning([v for v in settings.vaults if v.root.is_dir()], settings.index.exclude)
    if warning:
        print(warning, file=sys.stderr)
    if args.enable:
        try:
            _systemctl("daemon-reload")
            _systemctl("enable", UNIT)
            _systemctl("restart", UNIT)  # starts it, or restarts a running one with the new unit
        except ServiceError as err:
            raise ServiceError(f"{err}; the unit is written: enable it by hand with "
                               "`systemctl --user daemon-reload && systemctl --user enable --now vaultmem`") from None
        print("enabled at login and started: `systemctl --user status vaultmem` shows it, "
              "`vaultmem status` asks it")
    else:
        print("enable it at login and start it now (or run this again with --enable):")
        print("  systemctl --user daemon-reload && systemctl --user enable --now vaultmem")
    print("keep it running after you log out (and start it at boot):")
    print(f"  loginctl enable-linger {os.environ.get('USER', '$USER')}")
    print("follow its log:  journalctl --user -u vaultmem -f")
    return 0


def _uninstall(settings) -> int:
    """Stop and disable the service, then remove the unit. The index is kept."""
    target = unit_path()
    if not target.is_file():
        print(f"no unit at {target}: nothing to uninstall")
        return 0
    systemd = shutil.which("systemctl") is not None
    if systemd:
        try:
            _systemctl("disable", "--now", UNIT)
        except ServiceError as err:
            raise ServiceError(f"{err}; the unit is kept: remove it by hand with `rm {target}`") from None
    target.unlink()
    if systemd:
        try:
            _systemctl("daemon-reload")
        except ServiceError as err:
            print(f"warning: {err}", file=sys.stderr)
    print(f"stopped, disabled and removed {target}; the index in {settings.state_dir} is kept")
    return 0
