"""Settings resolve in one place: defaults < config file < environment < flags."""

import tomllib
from pathlib import Path

import pytest

from vaultmem.config import DEFAULTS, resolve
from vaultmem.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_documented_config_equals_the_defaults():
    doc = tomllib.loads((ROOT / "config" / "vaultmem.toml").read_text())
    assert doc == DEFAULTS


def test_precedence_defaults_file_env_flags(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('state_dir = "/from/file"\n[search]\nk = 3\nmode = "text"\n')
    s = resolve({"config": str(cfg)}, env={})
    assert str(s.state_dir) == "/from/file" and s.search.k == 3 and s.search.mode == "text"
    s = resolve({"config": str(cfg)}, env={"VAULTMEM_STATE_DIR": "/from/env"})
    assert str(s.state_dir) == "/from/env"
    s = resolve({"config": str(cfg), "state_dir": "/from/flag", "search": {"k": 7}},
                env={"VAULTMEM_STATE_DIR": "/from/env"})
    assert str(s.state_dir) == "/from/flag" and s.search.k == 7 and s.search.mode == "text"


def test_env_config_path_and_vaults(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[index]\nchunk_chars = 900\n")
    a, b = tmp_path / "a", tmp_path / "b"
    s = resolve({}, env={"VAULTMEM_CONFIG": str(cfg), "VAULTMEM_VAULTS": f"{a}:work={b}"})
    assert s.index.chunk_chars == 900
    assert [(v.name, v.root) for v in s.vaults] == [("a", a), ("work", b)]


def test_unknown_key_and_bad_values_are_clear_errors(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[search]\nkk = 3\n")
    with pytest.raises(ConfigError, match="unknown setting 'kk'"):
        resolve({"config": str(cfg)}, env={})
    with pytest.raises(ConfigError, match="mode"):
        resolve({"search": {"mode": "fuzzy"}}, env={})
    with pytest.raises(ConfigError, match="not found"):
        resolve({"config": str(tmp_path / "missing.toml")}, env={})
