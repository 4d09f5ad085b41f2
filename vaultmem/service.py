"""`vaultmem service install|print`: the systemd user unit for this user, from the template in
systemd/vaultmem.service (also embedded here so an installed package does not need the repo)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from .errors import UsageError

TEMPLATE = """\
[Unit]
Description=vaultmem: local memory index for AI coding agents
After=default.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={exec_start}
Restart=on-failure
RestartSec=2
TimeoutStartSec=30min
TimeoutStopSec=60
KillSignal=SIGTERM
Environment=PYTHONUNBUFFERED=1
Environment=MALLOC_ARENA_MAX=2

[Install]
WantedBy=default.target
"""


def _vaults(args) -> list[tuple[str, str]]:
    """(name or "", absolute directory) of each --vault."""
    out = []
    for v in args.vault:
        name, _, path = v.rpartition("=") if "=" in v and not os.path.exists(v) else ("", "", v)
        full = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(full):
            raise UsageError(f"vault directory not found: {full}")
        out.append((name, full))
    return out


def watch_warning(roots: list[str]) -> str | None:
    """A warning when the vaults' directories (one inotify watch each) take more than half of
    the kernel's per-user watch limit, which editors and other watchers share; None if fine."""
    from .daemon import RAISE_WATCH_LIMIT, directories_under, watch_limit

    limit = watch_limit()
    need = directories_under(roots)
    if limit is None or need <= limit // 2:
        return None
    return (f"warning: the vaults have {need:,} directories, one inotify watch each, and the limit is "
            f"{limit:,} for all of your programs; the daemon will say so if it runs short. Raise it: "
            + RAISE_WATCH_LIMIT)


def unit_text(args) -> str:
    beside = Path(sys.executable).parent / "vaultmem"  # the script of this very installation
    if beside.is_file() and os.access(beside, os.X_OK):
        cmd = [str(beside)]
    elif shutil.which("vaultmem"):
        cmd = [str(Path(shutil.which("vaultmem")).resolve())]
    else:
        cmd = [sys.executable, "-m", "vaultmem.cli"]
    cmd.append("daemon")
    for name, full in _vaults(args):
        cmd += ["--vault", f"{name}={full}" if name else full]
    if args.state_dir:
        cmd += ["--state-dir", os.path.abspath(os.path.expanduser(args.state_dir))]
    if args.config:
        cmd += ["--config", os.path.abspath(os.path.expanduser(args.config))]
    if args.socket:
        cmd += ["--socket", os.path.abspath(os.path.expanduser(args.socket))]
    # systemd's ExecStart quoting: double quotes, with % doubled (specifier escape)
    exec_start = " ".join(('"' + c.replace('"', '\\"') + '"') if (" " in c or '"' in c) else c for c in cmd)
    return TEMPLATE.format(exec_start=exec_start.replace("%", "%%"))


def run(args) -> int:
    text = unit_text(args)
    if args.action == "print":
        sys.stdout.write(text)
        return 0
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    target = base / "systemd" / "user" / "vaultmem.service"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".service.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    print(f"wrote {target}")
    warning = watch_warning([full for _, full in _vaults(args)])
    if warning:
        print(warning, file=sys.stderr)
    print("enable it at login and start it now:")
    print("  systemctl --user daemon-reload && systemctl --user enable --now vaultmem")
    print("keep it running after you log out (and start it at boot):")
    print(f"  loginctl enable-linger {os.environ.get('USER', '$USER')}")
    print("follow its log:  journalctl --user -u vaultmem -f")
    return 0
