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


@pytest.mark.parametrize("toml, message", [
    ('vaults = 5', "vaults must be a table"),
    ('[vaults]\nclaude = 5', "vaults must be a table"),
    ('state_dir = 5', "state_dir must be text"),
    ('[search]\nk = "ten"', r"\[search\] k must be a whole number, not 'ten'"),
    ('[search]\nk = 2.5', r"\[search\] k must be a whole number"),
    ('[search]\nk = 0', r"\[search\] k must be more than 0, not 0"),
    ('[search]\ntext_weight = -1', r"\[search\] text_weight must be at least 0, not -1"),
    ('[search]\nvector_weight = nan', r"\[search\] vector_weight must be a number"),
    ('[search]\nmode = 3', r"\[search\] mode must be text"),
    ('[daemon]\ndebounce_ms = -5', r"\[daemon\] debounce_ms must be at least 0"),
    ('[daemon]\nunwatched_seconds = 0', r"\[daemon\] unwatched_seconds must be more than 0"),
    ('[index]\nmark_superseded = "maybe"', r"\[index\] mark_superseded must be true or false, not 'maybe'"),
    ('[index]\nexclude = [1, 2]', r"\[index\] exclude must be a list of strings"),
    ('[inventory]\nstale_days = true', r"\[inventory\] stale_days must be a number"),
])
def test_a_wrong_type_or_range_in_the_config_file_is_named_with_what_it_wants(tmp_path, toml, message):
    """`vaults = [...]` (a list) crashed with a traceback, `debounce_ms = -5` and
    `mark_superseded = "maybe"` (read as false) passed unseen."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml + "\n")
    with pytest.raises(ConfigError, match=message):
        resolve({"config": str(cfg)}, env={})


def test_vaults_in_the_config_file_as_a_table_or_a_list(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for toml in (f'[vaults]\nnotes = "{a}"\nwork = "{b}"\n', f'vaults = ["notes={a}", "{b}"]\n'):
        cfg = tmp_path / "c.toml"
        cfg.write_text(toml)
        s = resolve({"config": str(cfg)}, env={})
        assert [(v.name, v.root) for v in s.vaults] == [("notes", a), ("work" if "work" in toml else "b", b)]
    cfg.write_text('[index]\nmark_superseded = "yes"\ninclude = "notes/*.md"\n[search]\nk = "7"\n')
    s = resolve({"config": str(cfg)}, env={})
    assert (s.index.mark_superseded, s.index.include, s.search.k) == (True, ("notes/*.md",), 7)


def test_vault_names_may_be_korean_or_japanese_and_never_hold_a_colon(tmp_path):
    """A folder named 노트 or メモ was the vault 'vault' (and the next one 'vault-2'): names
    kept ASCII only. Names are words in any script now, one form of each (a macOS path gives
    the decomposed form); a name that would make a note's key `name:path` ambiguous is refused."""
    import unicodedata
    ko, ja = tmp_path / "노트", tmp_path / unicodedata.normalize("NFD", "メモ帳")
    s = resolve({"vaults": [str(ko), str(ja), f"업무={tmp_path / 'b'}", f"{tmp_path / 'x y=z'}"]}, env={})
    assert [v.name for v in s.vaults] == ["노트", "メモ帳", "업무", "x-y-z"]
    cfg = tmp_path / "c.toml"
    for bad in ('"my:notes"', '""', '"a/b"'):
        cfg.write_text(f'[vaults]\n{bad} = "{tmp_path}"\n')
        with pytest.raises(ConfigError, match="vault name .* letters, digits"):
            resolve({"config": str(cfg)}, env={})
    cfg.write_text(f'[vaults]\n"메모" = "{ko}"\n')
    assert [v.name for v in resolve({"config": str(cfg)}, env={}).vaults] == ["메모"]
