"""hindsight: long-term memory for LLM agents, distilled after the fact."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hindsight.logging import configure_default_logging

__version__ = "0.1.0"

if TYPE_CHECKING:
    from hindsight.client import MemoryClient

__all__ = ["MemoryClient", "__version__"]

# Logs go to stderr in every process that imports hindsight, also those that never call configure_logging
# (CLI commands, bench scripts, tests' subprocesses): stdout is for data.
configure_default_logging()


def __getattr__(name: str) -> Any:
    # Lazy, so that `import hindsight.config` in a worker does not import httpx and the client.
    if name == "MemoryClient":
        from hindsight.client import MemoryClient

        return MemoryClient
    raise AttributeError(f"module 'hindsight' has no attribute {name!r}")
