"""Settings, resolved in exactly one place: defaults < config file < environment < flags.

`resolve()` is the only function that reads the config file or the environment (but for
agents.py's `claude_home()` and `codex_home()`, which read the agents' own variables); everything else
receives a frozen `Settings`. Ranking weights and thresholds live here as data, not as literals
in search code. The documented copy of every default is `config/vaultmem.toml`; a test keeps the two
equal.

About 560 lines: one named tuple per section of the config file, each setting's meaning
beside its default, and the one resolver. Named tuples, not dataclasses: every fresh `vaultmem
query` and hook process imports this module, and making nine dataclasses (and importing the
module that makes them) took 12 of its 68 ms.
"""

import functools
import math
import os
import re
import unicodedata
from pathlib import Path
from typing import Any, NamedTuple

from . import logs
from .agents import claude_home, codex_home
from .errors import ConfigError

DEFAULTS: dict[str, Any] = {
    "state_dir": "",  # empty: $XDG_STATE_HOME/vaultmem
    "vaults": {},  # name -> directory
    "index": {
        "include": ["**/CLAUDE.md", "**/CLAUDE.local.md", "**/AGENTS.md", "**/AGENTS.override.md", "**/GEMINI.md",
                    "**/.claude/rules/**/*.md", "**/memory/**/*.md", "**/.claude/agent-memory*/**/*.md",
                    "**/.codex/memories/MEMORY.md", "**/.codex/memories/memory_summary.md",
                    "**/.codex/memories/rollout_summaries/*.md", "**/.cursor/rules/**/*.mdc",
                    "**/.github/copilot-instructions.md", "**/.github/instructions/**/*.instructions.md",
                    "**/.cursorrules", "**/.windsurf/rules/**/*.md", "**/.devin/rules/**/*.md", "**/.windsurfrules",
                    "**/.codeium/windsurf/memories/global_rules.md", "**/.clinerules", "**/.clinerules/**/*.md",
                    "**/.cline/rules/**/*.md"],
        "exclude": [
            "**/.git/**", "**/node_modules/**", "**/.venv/**", "**/venv/**", "**/site-packages/**",
            "**/__pycache__/**", "**/.tox/**", "**/.nox/**", "**/.mypy_cache/**", "**/.pytest_cache/**",
            "**/.ruff_cache/**", "**/.hypothesis/**", "**/.gradle/**", "**/.next/**", "**/.terraform/**",
            "**/.obsidian/**", "**/.trash/**", "**/.claude/plugins/**", "**/.codex/sessions/**",
            "**/.codex/archived_sessions/**",
            "**/.*.swp", "**/.*.swx", "**/*~", "**/.#*", "**/*.tmp", "**/4913",
        ],
        "max_file_bytes": 5_000_000,
        "chunk_chars": 1500,
        "preview_chars": 500,
        "batch_files": 256,
        "mark_superseded": False,
        "follow_imports": True,
    },
    "embedder": {
        "kind": "use",  # use (bundled, offline) | e5 (bundled, offline, slower) | ollama | openai
        "model": "",
        "url": "",
        "api_key_env": "",
        "dim": 0,  # remote embedders: 0 asks the endpoint once
        "batch_size": 64,
        "threads": 0,  # 0: one per core this process may use (USE: batches at once, each on one BLAS thread)
        "vector_dtype": "float16",
    },
    "search": {
        "mode": "hybrid",
        "k": 10,
        "candidates": 100,
        "text_weight": 0.7,
        "vector_weight": 0.3,
        "min_cosine": 0.05,
        "rrf_k": 10,
        "fusion": "score",
        "importance_weight": 0.2,
        "entity_weight": 0.05,
        "entity_cap": 0.15,
        "date_weight": 0.2,
        "half_life_days": 0.0,  # 0: no time decay
        "feedback_weight": 0.2,
        "feedback_alpha": 0.3,
        "expand_notes": 2,
        "expand_terms": 10,
        "expand_weight": 0.3,
        "snippet_chars": 240,
        # a hit's relevance, the chance it answers the query, fitted by bench/abstain.py:
        # sigmoid(b + w . [coverage, evidence, cosine, coverage x cosine]); text mode
        # (no cosine): [b, w_coverage, w_evidence]
        "relevance": [-6.314, 5.54, 0.422, -0.396, 2.109],
        "relevance_text": [-6.856, 6.535, 0.468],
    },
    "daemon": {
        "socket": "",  # empty: $XDG_RUNTIME_DIR/vaultmem/vaultmem.sock
        "debounce_ms": 10,
        "reconcile_minutes": 15.0,
        "unwatched_seconds": 60.0,
        "optimize_minutes": 60.0,
        "optimize_after_commits": 200,
        "max_request_bytes": 1_048_576,
        "client_idle_seconds": 30.0,
        "max_clients": 128,
        "vectors_later_at": 200,  # notes read in one reconcile; 0: never later
    },
    "memory": {
        "dir": "memory",  # where `vaultmem remember` writes, inside the vault
    },
    "agent": {
        "hook_tokens": 1500,  # the session-start digest
        "recall_tokens": 2000,  # one recall answer
        "section_chars": 1200,  # a hit's matching section, clipped
        "prompt_tokens": 500,  # what the prompt hook adds to one prompt
        "prompt_notes": 3,  # hits the prompt hook looks at
        # MCP recall answers nothing when no hit reaches this relevance (the chance it answers:
        # search.relevance), and the prompt hook shows a note only when it reaches
        # prompt_min_relevance; measured by bench/abstain.py and bench/prompt_gate.py (README)
        "min_relevance": 0.015,
        "prompt_min_relevance": 0.03,
    },
    "inventory": {
        "stale_days": 180.0,
        "unretrieved_days": 90.0,
        "duplicate_cosine": 0.92,
        "every_days": 30.0,  # the daemon saves a report this often; 0: never
        "check_minutes": 60.0,  # how often the daemon checks whether a report is due
    },
}

ENV = {
    "VAULTMEM_STATE_DIR": ("state_dir",),
    "VAULTMEM_EMBEDDER": ("embedder", "kind"),
    "VAULTMEM_EMBEDDER_URL": ("embedder", "url"),
    "VAULTMEM_EMBEDDER_MODEL": ("embedder", "model"),
}


@functools.lru_cache(maxsize=8)
def _real_path(path: str) -> Path:
    """`path` resolved, once per process (a vault's root is resolved once too: make_vaults)."""
    return Path(path).resolve()


class Vault:
    """A directory of notes by its name; equal, and hashed, by name and root. Immutable."""

    name: str
    root: Path
    inner: tuple[str, ...]

    def __init__(self, name: str, root: Path, inner: tuple[str, ...] = ()):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "root", root)
        # vault-relative POSIX paths of the other served vaults' roots inside this one: their files
        # are theirs alone (else `--vault ~/src --vault app=~/src/app` indexed each note twice)
        object.__setattr__(self, "inner", tuple(inner))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Vault is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return type(other) is Vault and (self.name, self.root) == (other.name, other.root)

    def __hash__(self) -> int:
        return hash((self.name, self.root))

    def __repr__(self) -> str:
        return f"Vault(name={self.name!r}, root={self.root!r})"

    @functools.cached_property
    def is_claude_dir(self) -> bool:
        """The vault is a `.claude` directory, or Claude Code's own under another name (a
        dotfiles link `~/.claude -> ~/dotfiles/claude`, `$CLAUDE_CONFIG_DIR=~/.config/claude`):
        see globbed."""
        return self.root.name == ".claude" or self.root == _real_path(str(claude_home()))

    @functools.cached_property
    def is_codex_dir(self) -> bool:
        """The vault is a `.codex` directory, or Codex's own under another name
        (`$CODEX_HOME`): see globbed."""
        return self.root.name == ".codex" or self.root == _real_path(str(codex_home()))

    def owns(self, rel: str) -> bool:
        """Whether the vault-relative path `rel` is this vault's, not a nested vault's."""
        return not any(rel == d or rel.startswith(d + "/") for d in self.inner)

    def globbed(self, rel: str) -> str:
        """The path the include and exclude globs see for the vault-relative `rel`: in a vault
        that is a `.claude` directory (`~/.claude`, or Claude Code's own by another name),
        `.claude/rel`, so that the user's rules in `~/.claude/rules/` are found by
        `**/.claude/rules/**/*.md` as a project's are; in Codex's directory `.codex/rel`, so
        that `**/.codex/memories/...` finds Codex's memory in a vault that is `~/.codex` as in
        one that holds it."""
        if self.is_claude_dir:
            return f".claude/{rel}"
        return f".codex/{rel}" if self.is_codex_dir else rel

    def status(self, configured: bool = True) -> dict:
        """As `status` reports it: `found` is false while the directory is missing (kept as last
        indexed); `configured` is false for a vault in the index that the settings no longer
        name (not updated; `vaultmem reindex --drop-vault` takes it out)."""
        return {"name": self.name, "root": str(self.root), "found": self.root.is_dir(), "configured": configured}


class IndexSettings(NamedTuple):
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    max_file_bytes: int
    chunk_chars: int
    preview_chars: int
    batch_files: int
    mark_superseded: bool
    follow_imports: bool


class EmbedderSettings(NamedTuple):
    kind: str
    model: str
    url: str
    api_key_env: str
    dim: int
    batch_size: int
    threads: int
    vector_dtype: str


class SearchSettings(NamedTuple):
    mode: str
    k: int
    candidates: int
    text_weight: float
    vector_weight: float
    min_cosine: float
    rrf_k: float
    fusion: str
    importance_weight: float
    entity_weight: float
    entity_cap: float
    date_weight: float
    half_life_days: float
    feedback_weight: float
    feedback_alpha: float
    expand_notes: int
    expand_terms: int
    expand_weight: float
    snippet_chars: int
    relevance: tuple[float, ...]
    relevance_text: tuple[float, ...]


class DaemonSettings(NamedTuple):
    socket: str
    debounce_ms: int
    reconcile_minutes: float
    unwatched_seconds: float
    optimize_minutes: float
    optimize_after_commits: int
    max_request_bytes: int
    client_idle_seconds: float
    max_clients: int
    vectors_later_at: int


class MemorySettings(NamedTuple):
    dir: str


class InventorySettings(NamedTuple):
    stale_days: float
    unretrieved_days: float
    duplicate_cosine: float
    every_days: float
    check_minutes: float


class AgentSettings(NamedTuple):
    hook_tokens: int
    recall_tokens: int
    section_chars: int
    prompt_tokens: int
    prompt_notes: int
    min_relevance: float
    prompt_min_relevance: float


SECTIONS = {"index": IndexSettings, "embedder": EmbedderSettings, "search": SearchSettings,
            "daemon": DaemonSettings, "memory": MemorySettings, "agent": AgentSettings, "inventory": InventorySettings}


class Settings(NamedTuple):
    """Every setting, resolved. Never used as a sequence: its `index` section hides tuple.index."""

    state_dir: Path
    vaults: tuple[Vault, ...]
    index: IndexSettings  # type: ignore[assignment]
    embedder: EmbedderSettings
    search: SearchSettings
    daemon: DaemonSettings
    memory: MemorySettings
    agent: AgentSettings
    inventory: InventorySettings
    config_file: Path | None = None
    debug: bool = False
    # groups of vault names whose notes share topics: one chain per topic across them
    # ([vaults] share_topics = [["ledger", "notes"]])
    shared_topics: tuple[tuple[str, ...], ...] = ()


def config_home() -> Path:
    """$XDG_CONFIG_HOME, else ~/.config (also where systemd reads user units from)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"))


def config_path_under(base: Path) -> Path:
    return base / "vaultmem" / "vaultmem.toml"


def default_config_path() -> Path:
    return config_path_under(config_home())


def cache_dir() -> Path:
    """Where vaultmem keeps files it can always make again (the model's tokenizer, its weights
    uncompressed, its word table as a file map): $XDG_CACHE_HOME/vaultmem, shared by every
    state dir."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "vaultmem"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "vaultmem"


# settings that are gone, and what took their place: a config file that still has one loads,
# and the log says so once
RETIRED = {"prompt_min_cosine": "[agent] prompt_min_relevance (the chance a hit answers, 0..1)"}


def _merge(base: dict, over: dict, where: str) -> None:
    for key, value in over.items():
        if key in RETIRED and key not in base:
            logs.logger(__name__).warning("%s: '%s' is no longer read; see %s", where, key, RETIRED[key])
            continue
        if key not in base:
            raise ConfigError(f"{where}: unknown setting '{key}'")
        if isinstance(base[key], dict) and key != "vaults":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: '{key}' must be a table")
            _merge(base[key], value, f"{where} [{key}]")
        else:
            base[key] = value


# A vault's name prefixes each of its notes' keys (`name:path`): a word in any script, no ':'.
VAULT_NAME = re.compile(r"[\w.-]+")


def parse_vault_arg(arg: str) -> tuple[str | None, str]:
    """`DIR` or `NAME=DIR` (a name is a plain word, so a path with '=' still works as DIR)."""
    m = re.fullmatch(f"({VAULT_NAME.pattern})=(.+)", arg)
    if m and not os.path.exists(arg):
        return unicodedata.normalize("NFC", m.group(1)), m.group(2)
    return None, arg


def _vault_name(root: Path) -> str:
    """The name of a vault given by its directory alone: the folder's name as a word (노트,
    メモ帳, my-notes), in one Unicode form whatever the file system gave."""
    return re.sub(r"[^\w.-]+", "-", unicodedata.normalize("NFC", root.name)).strip("-.") or "vault"


def nest(vaults: list[Vault], served: list[Vault] | None = None) -> list[Vault]:
    """`vaults`, each with `inner` set to the roots of the `served` vaults (default: `vaults`)
    that lie inside it."""
    served = vaults if served is None else served
    out = []
    for v in vaults:
        inner = sorted(w.root.relative_to(v.root).as_posix() for w in served
                       if w.root != v.root and w.root.is_relative_to(v.root))
        out.append(Vault(v.name, v.root, tuple(inner)))
    return out


def make_vaults(items: list[tuple[str | None, str]]) -> tuple[Vault, ...]:
    vaults: list[Vault] = []
    for name, raw in items:
        root = Path(os.path.expanduser(str(raw))).resolve()
        if any(v.root == root for v in vaults):  # named twice (the config and --vault): one vault
            continue
        base = name or _vault_name(root)
        unique, n = base, 2
        while any(v.name == unique for v in vaults):
            unique, n = f"{base}-{n}", n + 1
        if name and unique != name:
            raise ConfigError(f"vault name '{name}' is used twice")
        vaults.append(Vault(unique, root))
    return tuple(nest(vaults))


def _fresh(value: Any) -> Any:
    """A deep copy of plain data (dicts, lists, scalars): the defaults, before a config changes
    them (copy.deepcopy costs every process ~1 ms to import)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return [_fresh(v) for v in value] if isinstance(value, list) else value


def resolve(flags: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Settings:
    """Build the settings. `flags` holds only what the user passed on the command line:
    `config`, `state_dir`, `vaults` (list of `DIR`/`NAME=DIR`: these and no others),
    `more_vaults` (the same, added to the config's: the daemon's --vault), `debug`, and per-section
    overrides as {"search": {...}, "embedder": {...}, "index": {...}, "daemon": {...}}."""
    flags = dict(flags or {})
    env = dict(os.environ) if env is None else env
    data = _fresh(DEFAULTS)

    config_file: Path | None = None
    explicit = flags.get("config") or env.get("VAULTMEM_CONFIG")
    if explicit:
        config_file = Path(os.path.expanduser(explicit))
        if not config_file.is_file():
            raise ConfigError(f"config file not found: {config_file}")
    elif default_config_path().is_file():
        config_file = default_config_path()
    if config_file is not None:
        import tomllib  # here: most processes (a hook on every prompt) have no config file to read

        try:
            loaded = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise ConfigError(f"cannot read config file {config_file}: {err}") from err
        _merge(data, loaded, str(config_file))

    for var, path in ENV.items():
        if env.get(var):
            target = data
            for part in path[:-1]:
                target = target[part]
            target[path[-1]] = env[var]
    vaults_table = dict(data["vaults"]) if isinstance(data["vaults"], dict) else data["vaults"]
    shared = vaults_table.pop("share_topics", []) if isinstance(vaults_table, dict) else []
    if not (isinstance(shared, list) and all(isinstance(g, list) and all(isinstance(n, str) for n in g) for g in shared)):
        raise ConfigError('[vaults] share_topics must be a list of lists of vault names '
                          '(share_topics = [["ledger", "notes"]])')
    vault_items = _config_vaults(vaults_table)
    if env.get("VAULTMEM_VAULTS"):
        vault_items = [parse_vault_arg(p) for p in env["VAULTMEM_VAULTS"].split(os.pathsep) if p]

    if flags.get("state_dir"):
        data["state_dir"] = flags["state_dir"]
    if flags.get("vaults"):
        vault_items = [parse_vault_arg(v) for v in flags["vaults"]]
    if flags.get("more_vaults"):  # the daemon's --vault: beside the config's, which a reload reads again
        vault_items = vault_items + [parse_vault_arg(v) for v in flags["more_vaults"]]
    for section in SECTIONS:
        over = {k: v for k, v in (flags.get(section) or {}).items() if v is not None}
        _merge(data[section], over, f"flags [{section}]")

    if not isinstance(data["state_dir"], str):
        raise ConfigError(f"state_dir must be text (a directory), not {data['state_dir']!r}")
    state_dir = Path(os.path.expanduser(data["state_dir"])) if data["state_dir"] else default_state_dir()
    try:
        settings = Settings(
            state_dir=state_dir.resolve(),
            vaults=make_vaults(vault_items),
            **{name: cls(**{k: _coerce(DEFAULTS[name][k], v, f"[{name}] {k}") for k, v in data[name].items()})
               for name, cls in SECTIONS.items()},
            config_file=config_file,
            debug=bool(flags.get("debug")),
            shared_topics=tuple(tuple(unicodedata.normalize("NFC", n) for n in g) for g in shared),
        )
    except TypeError as err:
        raise ConfigError(f"invalid settings: {err}") from err
    _validate(settings)
    return settings


def _config_vaults(value: Any) -> list[tuple[str | None, str]]:
    """The config file's vaults: a table of name = "directory", or a list of directories
    (each DIR or NAME=DIR, as --vault takes them)."""
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        for name in value:
            if not VAULT_NAME.fullmatch(name):
                raise ConfigError(f"vault name {name!r}: use letters, digits, '_', '.' and '-' "
                                  "(it begins every note's key, name:path)")
        return [(unicodedata.normalize("NFC", n), p) for n, p in value.items()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [parse_vault_arg(v) for v in value]
    raise ConfigError('vaults must be a table of name = "directory" ([vaults] claude = "~/.claude") '
                      f'or a list of directories, not {value!r}')


_KINDS = {bool: "true or false", int: "a whole number", float: "a number", list: "a list of strings", str: "text"}


def _coerce(default: Any, value: Any, where: str) -> Any:
    """`value` as the type of `default` (config files, the environment and flags all arrive
    here), or a ConfigError that says which setting wants what: `k = "ten"` was reported as
    "invalid literal for int() with base 10", and `mark_superseded = "maybe"` read as false."""
    kind = type(default)
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            word = str(value).strip().lower()
            if word in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                return word in ("1", "true", "yes", "on")
        elif kind is int:
            number = float(value) if isinstance(value, str) else value
            if not isinstance(number, bool) and isinstance(number, (int, float)) and float(number).is_integer():
                return int(number)
        elif kind is float:
            if not isinstance(value, bool):
                number = float(value)
                if math.isfinite(number):
                    return number
        elif kind is list and default and all(isinstance(v, (int, float)) for v in default):  # numbers
            if isinstance(value, (list, tuple)) and len(value) == len(default) and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
                return tuple(float(v) for v in value)
            raise ConfigError(f"{where} must be a list of {len(default)} numbers, not {value!r}")
        elif kind is list:
            items = [value] if isinstance(value, str) else value
            if isinstance(items, list) and all(isinstance(v, str) for v in items):
                return tuple(items)
        elif isinstance(value, str):
            return value
    except (TypeError, ValueError, OverflowError):
        pass
    raise ConfigError(f"{where} must be {_KINDS[kind]}, not {value!r}")


# Number settings must be at least 0 (0 turns intervals and weights off); these must be more.
_POSITIVE = {
    "index": ("max_file_bytes", "batch_files"),
    "embedder": ("batch_size",),
    "search": ("k", "candidates", "rrf_k", "snippet_chars"),
    "daemon": ("unwatched_seconds", "optimize_after_commits", "max_request_bytes", "client_idle_seconds", "max_clients"),
    "agent": ("hook_tokens", "recall_tokens", "section_chars", "prompt_tokens", "prompt_notes"),
}


def _validate(s: Settings) -> None:
    if s.search.mode not in ("hybrid", "text", "vector"):
        raise ConfigError(f"search mode must be hybrid, text or vector, not '{s.search.mode}'")
    if s.search.fusion not in ("rrf", "score"):
        raise ConfigError(f"search fusion must be rrf or score, not '{s.search.fusion}'")
    if s.embedder.kind not in ("use", "e5", "ollama", "openai"):
        raise ConfigError(f"embedder kind must be use, e5, ollama or openai, not '{s.embedder.kind}'")
    if s.embedder.vector_dtype not in ("float16", "float32"):
        raise ConfigError("embedder vector_dtype must be float16 or float32")
    for name in SECTIONS:
        for key, value in getattr(s, name)._asdict().items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if value < 0 or (value == 0 and key in _POSITIVE.get(name, ())):
                least = "more than 0" if key in _POSITIVE.get(name, ()) else "at least 0"
                raise ConfigError(f"[{name}] {key} must be {least}, not {value:g}")
    if not 0.0 < s.search.feedback_alpha <= 1.0:
        raise ConfigError("search feedback_alpha must be in (0, 1]")
    if not 0.0 < s.inventory.duplicate_cosine <= 1.0:
        raise ConfigError("inventory duplicate_cosine must be in (0, 1]")
    if s.index.chunk_chars < 200:
        raise ConfigError("index chunk_chars must be at least 200")
