"""`vaultmem service`: the systemd user unit written from the template, pinned to what this shell
resolved, installed atomically, enabled and removed through systemctl (a stand-in systemctl on
PATH: these tests never touch the real user manager), and its warnings. The readiness messages
the daemon sends systemd are tested with the daemon (test_daemon.py)."""

import os
import shutil

import pytest

from conftest import note, run_cli


def test_unit_file_verifies_and_matches_the_template(tmp_path):
    from vaultmem.service import TEMPLATE
    from conftest import ROOT
    repo_unit = (ROOT / "systemd/vaultmem.service").read_text()
    body = "\n".join(ln for ln in repo_unit.splitlines() if not ln.startswith("#")) + "\n"
    want = TEMPLATE.format(exec_start="%h/.local/bin/vaultmem daemon", environment="")
    strip = lambda t: [ln for ln in t.splitlines() if ln and not ln.startswith("#")]  # noqa: E731
    assert strip(body) == strip(want)
    r = run_cli("service", "print", "--vault", str(tmp_path))
    assert r.returncode == 0 and "Type=notify" in r.stdout and f"--vault {tmp_path.name}={tmp_path}" in r.stdout
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    unit = tmp_path / "vaultmem.service"
    unit.write_text(r.stdout)
    import subprocess
    v = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    problems = [ln for ln in (v.stdout + v.stderr).splitlines() if "vaultmem.service" in ln]
    assert v.returncode == 0 and not problems, v.stdout + v.stderr


def test_service_install_writes_the_unit_atomically(tmp_path):
    r = run_cli("service", "install", "--vault", str(tmp_path), env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert r.returncode == 0 and "enable-linger" in r.stdout
    unit = (tmp_path / "cfg/systemd/user/vaultmem.service").read_text()
    assert "Type=notify" in unit and f"--vault {tmp_path.name}={tmp_path}" in unit
    assert not list((tmp_path / "cfg/systemd/user").glob("*.tmp"))


def exec_start(unit: str) -> list[str]:
    """ExecStart as systemd splits it (double quotes, C escapes, $$ and %% kept once)."""
    import shlex
    line = next(ln for ln in unit.splitlines() if ln.startswith("ExecStart="))
    return [w.replace("$$", "$").replace("%%", "%") for w in shlex.split(line.removeprefix("ExecStart="))]


def test_service_unit_pins_what_this_shell_resolved(tmp_path):
    """systemd starts the daemon without the shell's environment: a state dir, config file,
    socket or embedder set there must be in the unit, or the service indexes into another state
    dir than `vaultmem query` reads and answers on another socket. A config error or a changed
    embedder stops the service (a restart every 2 s would fix neither)."""
    vault = tmp_path / "my notes $HOME"
    (vault / "memory").mkdir(parents=True)
    cfg = tmp_path / "cfg/vaultmem/vaultmem.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(f'[vaults]\nwork = "{vault}"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "VAULTMEM_STATE_DIR": str(tmp_path / "state 100%"),
           "VAULTMEM_SOCKET": str(tmp_path / "run/vm.sock"), "VAULTMEM_EMBEDDER_URL": "http://127.0.0.1:11434/%x",
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-work"), "CODEX_HOME": str(tmp_path / "codex-work")}
    r = run_cli("service", "print", env=env)
    assert r.returncode == 0, r.stderr
    words = exec_start(r.stdout)
    assert words[1:] == ["daemon", "--state-dir", str(tmp_path / "state 100%"), "--config", str(cfg),
                         "--socket", str(tmp_path / "run/vm.sock")], r.stdout  # vaults: the config's, read by the daemon
    assert "Environment=VAULTMEM_EMBEDDER_URL=http://127.0.0.1:11434/%%x" in r.stdout.splitlines()
    # the daemon must see Claude Code's and Codex's directories where the shell does (their memory is notes)
    assert f"Environment=CLAUDE_CONFIG_DIR={tmp_path / 'claude-work'}" in r.stdout.splitlines()
    assert f"Environment=CODEX_HOME={tmp_path / 'codex-work'}" in r.stdout.splitlines()
    assert "RestartPreventExitStatus=2 4" in r.stdout.splitlines()
    r = run_cli("service", "print", "--vault", f"w={vault}", env=env)
    assert exec_start(r.stdout)[2:4] == ["--vault", f"w={vault}"]
    if shutil.which("systemd-analyze"):
        (tmp_path / "vaultmem.service").write_text(r.stdout)
        import subprocess
        v = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "vaultmem.service")], capture_output=True, text=True)
        assert v.returncode == 0 and "vaultmem.service" not in v.stdout + v.stderr, v.stdout + v.stderr


def test_service_install_refuses_a_unit_with_nothing_to_watch(tmp_path):
    """Such a daemon exits at every start; the unit is not written. A vault already indexed
    into the state dir is something to watch (the daemon serves the index's vaults)."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "VAULTMEM_SOCKET": ""}
    state = str(tmp_path / "state")
    r = run_cli("service", "install", "--state-dir", state, env=env)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"vaultmem: error: no vault for the service to watch: pass --vault DIR (or set vaults in the config "
        f"file, or index one into {state} first)"), r.stderr
    assert not (tmp_path / "cfg/systemd").exists()
    (tmp_path / "v/memory").mkdir(parents=True)
    (tmp_path / "v/memory/a.md").write_text(note("aardvarks", "An aardvark.\n"))
    assert run_cli("index", "--vault", str(tmp_path / "v"), "--state-dir", state, "-q").returncode == 0
    r = run_cli("service", "install", "--state-dir", state, env=env)
    assert r.returncode == 0, r.stderr
    assert exec_start((tmp_path / "cfg/systemd/user/vaultmem.service").read_text())[1:] == ["daemon", "--state-dir", state]


def fake_systemctl(tmp_path, fail_on: str = "") -> dict:
    """A `systemctl` first on PATH that logs its arguments and fails (as a session with no user
    bus does) when they contain `fail_on`. No test machine has a user systemd to enable."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "systemctl"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {tmp_path}/systemctl.log
case "$*" in *"{fail_on or '@never@'}"*) echo "Failed to connect to bus: No such file or directory" >&2; exit 1;; esac
""")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "VAULTMEM_SOCKET": ""}


def test_service_enable_and_uninstall_run_systemctl(tmp_path):
    env = fake_systemctl(tmp_path)
    unit = tmp_path / "cfg/systemd/user/vaultmem.service"
    r = run_cli("service", "install", "--vault", str(tmp_path), "--enable", env=env)
    assert r.returncode == 0 and "enabled at login and started" in r.stdout, r.stdout + r.stderr
    assert (tmp_path / "systemctl.log").read_text().splitlines() == [
        "--user daemon-reload", "--user enable vaultmem.service", "--user restart vaultmem.service"]
    assert unit.is_file()
    r = run_cli("service", "uninstall", env=env)
    assert r.returncode == 0 and not unit.exists(), r.stdout + r.stderr
    assert (tmp_path / "systemctl.log").read_text().splitlines()[3:] == [
        "--user disable --now vaultmem.service", "--user daemon-reload"]
    r = run_cli("service", "uninstall", env=env)
    assert r.returncode == 0 and "nothing to uninstall" in r.stdout


def test_service_enable_says_in_one_line_what_systemctl_refused(tmp_path):
    env = fake_systemctl(tmp_path, fail_on="daemon-reload")
    unit = tmp_path / "cfg/systemd/user/vaultmem.service"
    r = run_cli("service", "install", "--vault", str(tmp_path), "--enable", env=env)
    assert r.returncode == 7 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("vaultmem: error: `systemctl --user daemon-reload` failed (exit 1): Failed to connect "
                               "to bus: No such file or directory; the unit is written"), r.stderr
    assert unit.is_file(), "the unit stays written: the user can enable it by hand"
    env = fake_systemctl(tmp_path, fail_on="disable")
    r = run_cli("service", "uninstall", env=env)
    assert r.returncode == 7 and "the unit is kept" in r.stderr and unit.is_file(), r.stderr


def test_service_install_warns_when_the_vaults_take_most_of_the_watch_limit(tmp_path, monkeypatch):
    """Checked at install time, before the daemon runs short (the limit is the kernel's and
    machine-wide: the test sets what this process reads of it)."""
    import vaultmem.watching as wmod
    from vaultmem.config import Vault, resolve
    from vaultmem.service import watch_warning
    for i in range(5):
        (tmp_path / f"v/d{i}").mkdir(parents=True)
    for i in range(9):
        (tmp_path / f"v/node_modules/p{i}").mkdir(parents=True)  # excluded: no watch, not counted
    vault, exclude = [Vault("v", tmp_path / "v")], resolve({}, env={}).index.exclude
    assert wmod.watch_limit() is None or watch_warning(vault, exclude) is None  # 6 directories
    monkeypatch.setattr(wmod, "watch_limit", lambda: 12)
    assert watch_warning(vault, exclude) is None, "half of the limit is fine"
    monkeypatch.setattr(wmod, "watch_limit", lambda: 10)
    said = watch_warning(vault, exclude)
    assert "6 directories" in said and "limit is 10 " in said and "fs.inotify.max_user_watches=" in said
