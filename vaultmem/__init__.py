"""vaultmem: local memory for AI coding agents.

Markdown notes stay the single source of truth; vaultmem keeps a Tantivy full-text index and a
LanceDB vector table in sync with them and answers queries. The pipeline reads top to bottom:
scan -> notes (parse, chunk) -> embedders -> fulltext / vectors / catalog -> indexer -> search -> cli.
"""

__version__ = "0.1.0"
