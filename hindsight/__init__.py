"""hindsight: long-term memory for LLM agents, distilled after the fact."""

__version__ = "0.1.0"
