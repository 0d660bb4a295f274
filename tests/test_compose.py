"""docker-compose.yml cannot run here (no Docker engine), so check it against the code it deploys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer.core
import typer.main
import yaml
from pydantic import BaseModel

from hindsight.cli import app
from hindsight.config import Settings

REPO = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def _cli_commands() -> dict[str, Any]:
    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    return dict(command.commands)


def _setting_exists(name: str) -> bool:
    """HINDSIGHT_A__B names settings field a.b (env_nested_delimiter '__')."""
    assert name.startswith("HINDSIGHT_"), name
    model: type[BaseModel] = Settings
    parts = name[len("HINDSIGHT_") :].lower().split("__")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        ann = field.annotation
        if i < len(parts) - 1:
            if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
                return False
            model = ann
    return True


def test_has_the_production_services() -> None:
    assert {"postgres", "redis", "migrate", "worker", "beat", "api"} <= set(SERVICES)
    assert SERVICES["postgres"]["image"].startswith("pgvector/pgvector:")
    assert "--appendonly" in SERVICES["redis"]["command"]
    assert SERVICES["redis"]["command"][SERVICES["redis"]["command"].index("--appendonly") + 1] == "yes"
    assert any(v.endswith(":/data") for v in SERVICES["redis"]["volumes"])


def test_postgres_runs_the_major_version_the_tests_run() -> None:
    """Production and the embedded default (which the tests and the eval harness use) run one PostgreSQL major,
    and the data volume sits where that image keeps its data (18 moved it below /var/lib/postgresql)."""
    from hindsight.local_servers import embedded_postgres_major

    pg = SERVICES["postgres"]
    assert pg["image"].endswith(f"pg{embedded_postgres_major()}")
    assert "pgdata:/var/lib/postgresql" in pg["volumes"]


def test_every_command_is_a_real_cli_command_with_real_options() -> None:
    commands = _cli_commands()
    for name in ("migrate", "worker", "beat", "api"):
        cmd = SERVICES[name]["command"]
        assert cmd[0] == "hindsight", name
        assert cmd[1] in commands, f"{name}: `hindsight {cmd[1]}` does not exist"
        options = {opt for p in commands[cmd[1]].params for opt in getattr(p, "opts", [])}
        for arg in cmd[2:]:
            if arg.startswith("--"):
                assert arg in options, f"{name}: hindsight {cmd[1]} has no option {arg}"
        assert "--wait" in cmd, f"{name} must wait for its dependencies, not trust depends_on"


def test_environment_names_real_settings() -> None:
    env = COMPOSE["x-hindsight-env"]
    assert env, "shared hindsight environment missing"
    unknown = [k for k in env if not _setting_exists(k)]
    assert unknown == []
    assert env["HINDSIGHT_DATABASE_URL"].startswith("postgresql://")
    assert "@postgres:" in env["HINDSIGHT_DATABASE_URL"]
    assert "redis:6379" in env["HINDSIGHT_REDIS_URL"]
    # The URL in compose must survive the settings validator.
    s = Settings(database_url=env["HINDSIGHT_DATABASE_URL"].replace("${POSTGRES_PASSWORD:-hindsight}", "pw"))
    assert s.database_url
    assert s.database_url.startswith("postgresql+psycopg://")


def test_health_checks_and_readiness_ordering() -> None:
    for name in ("postgres", "redis", "worker", "beat", "api"):
        assert "healthcheck" in SERVICES[name], f"{name} has no healthcheck"
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("worker", "beat", "api"):
        deps = SERVICES[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert deps["redis"]["condition"] == "service_healthy"
    api_check = " ".join(SERVICES["api"]["healthcheck"]["test"])
    port = SERVICES["api"]["command"][SERVICES["api"]["command"].index("--port") + 1]
    assert f":{port}/readyz" in api_check
    assert "workers.celery_app" in " ".join(SERVICES["worker"]["healthcheck"]["test"])
    import importlib

    assert importlib.util.find_spec("workers.celery_app") is not None


def test_beat_health_check_matches_where_beat_writes_its_schedule() -> None:
    data_dir = COMPOSE["x-hindsight-env"]["HINDSIGHT_DATA_DIR"]
    assert f"{data_dir}/beat-schedule" in " ".join(SERVICES["beat"]["healthcheck"]["test"])
    assert str(Settings(data_dir=data_dir).beat_schedule_file) in " ".join(SERVICES["beat"]["healthcheck"]["test"])


def test_mcp_service_serves_streamable_http_with_auth(monkeypatch) -> None:
    mcp = SERVICES["mcp"]
    cmd = mcp["command"]
    command = _cli_commands()[cmd[1]]
    options = {opt for p in command.params for opt in getattr(p, "opts", [])}
    assert cmd[:2] == ["hindsight", "mcp"]
    assert all(a in options for a in cmd[2:] if a.startswith("--"))
    assert cmd[cmd.index("--transport") + 1] == "http"
    assert "--wait" in cmd
    port = cmd[cmd.index("--port") + 1]
    assert f"{port}:{port}" in mcp["ports"]
    assert f":{port}/healthz" in " ".join(mcp["healthcheck"]["test"])
    assert mcp["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    env = COMPOSE["x-hindsight-env"]
    assert env["HINDSIGHT_ENV"] == "prod", "prod: the API and MCP refuse to start without tokens"
    assert {"HINDSIGHT_AUTH__TOKENS", "HINDSIGHT_AUTH__TOKEN_DIGESTS"} <= set(env)
    # The compose defaults ("{}") parse, and with no tokens a prod process refuses to serve.
    import pytest

    from api.auth import AuthConfigError, Authenticator

    for name in ("HINDSIGHT_AUTH__TOKENS", "HINDSIGHT_AUTH__TOKEN_DIGESTS"):
        assert env[name].endswith(":-{}}"), name
        monkeypatch.setenv(name, "{}")
    s = Settings(env="prod")
    assert s.auth.tokens == {}
    with pytest.raises(AuthConfigError):
        Authenticator.from_settings(s, host="0.0.0.0")
