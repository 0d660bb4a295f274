"""Bearer tokens bound to namespaces: the settings rules, then isolation probes against a real API process."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from api.auth import AuthConfigError, Authenticator, Forbidden, Unauthorized, token_digest
from hindsight.config import AuthSettings, Settings
from tests.api.conftest import DIGEST_TOKEN, AuthApi
from tests.conftest import Services


def _settings(**kw: Any) -> Settings:
    auth = kw.pop("auth", AuthSettings())
    return Settings(auth=auth, **kw)


class TestAuthenticator:
    def test_local_dev_on_loopback_defaults_to_no_auth(self) -> None:
        a = Authenticator.from_settings(_settings(env="dev"))
        assert a.mode == "none"
        assert a.authenticate(None).allows("anything")

    def test_prod_without_tokens_refuses_to_start(self) -> None:
        with pytest.raises(AuthConfigError, match="env=prod"):
            Authenticator.from_settings(_settings(env="prod"))

    def test_prod_with_explicit_no_auth_mode_starts(self) -> None:
        assert Authenticator.from_settings(_settings(env="prod", auth=AuthSettings(mode="none"))).mode == "none"

    def test_listening_beyond_loopback_without_tokens_refuses(self) -> None:
        with pytest.raises(AuthConfigError, match="0.0.0.0"):
            Authenticator.from_settings(_settings(env="dev"), host="0.0.0.0")

    def test_tokens_mode_without_tokens_refuses(self) -> None:
        with pytest.raises(AuthConfigError, match="no tokens"):
            Authenticator.from_settings(_settings(auth=AuthSettings(mode="tokens")))

    def test_bad_grant_and_bad_digest_refuse(self) -> None:
        with pytest.raises(AuthConfigError):
            Authenticator.from_settings(_settings(auth=AuthSettings(tokens={"t": ["a*b"]})))
        with pytest.raises(AuthConfigError):
            Authenticator.from_settings(_settings(auth=AuthSettings(tokens={"t": []})))
        with pytest.raises(AuthConfigError, match="digest"):
            Authenticator.from_settings(_settings(auth=AuthSettings(token_digests={"abc": ["x"]})))

    def test_tokens_exact_prefix_and_digest_grants(self) -> None:
        a = Authenticator.from_settings(
            _settings(
                env="prod",
                auth=AuthSettings(
                    tokens={"t1": ["agent-42:*"], "t2": ["solo"]},
                    token_digests={token_digest("t3"): ["*"]},
                ),
            )
        )
        assert a.mode == "tokens"
        p1 = a.authenticate("t1")
        assert p1.allows("agent-42:user-7")
        assert not p1.allows("agent-420:user-7")
        assert not p1.allows("agent-43:user-7")
        p2 = a.authenticate("t2")
        assert p2.allows("solo")
        assert not p2.allows("solo2")
        with pytest.raises(Forbidden):
            p2.require("other")
        assert a.authenticate("t3").allows("anything")
        assert "t1" not in p1.name, "the principal's name never carries the token"
        for bad in (None, "", "t4", "t1 "):
            with pytest.raises(Unauthorized):
                a.authenticate(bad)

    def test_env_json_configures_tokens(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("HINDSIGHT_AUTH__TOKENS", '{"secret": ["team-a:*"]}')
        s = Settings()
        assert s.auth.tokens == {"secret": ["team-a:*"]}
        assert Authenticator.from_settings(s).authenticate("secret").allows("team-a:x")


def _write(client: httpx.Client, ns: str, key: str, value: str) -> dict[str, Any]:
    r = client.post(f"/v1/namespaces/{ns}/memories", json={"key": key, "value": value})
    assert r.status_code == 201, r.text
    return r.json()["memory"]


def test_every_v1_route_needs_a_valid_token(auth_api: AuthApi, alpha_ns: str) -> None:
    routes = [
        ("GET", f"/v1/namespaces/{alpha_ns}/memories", None),
        ("GET", f"/v1/namespaces/{alpha_ns}/search?q=x", None),
        ("GET", f"/v1/namespaces/{alpha_ns}/context?q=x", None),
        ("GET", f"/v1/namespaces/{alpha_ns}/episodes/search?q=x", None),
        ("POST", f"/v1/namespaces/{alpha_ns}/memories", {"key": "user.x", "value": "v"}),
        ("POST", f"/v1/namespaces/{alpha_ns}/transcripts", {"turns": [{"role": "user", "content": "hi"}]}),
    ]
    for token in (None, "wrong-token"):
        with auth_api.client(token) as c:
            for method, path, body in routes:
                r = c.request(method, path, json=body)
                assert r.status_code == 401, (method, path, r.status_code)
                assert r.headers["www-authenticate"] == "Bearer"
    with auth_api.client(None) as c:
        assert c.get("/healthz").status_code == 200


def test_a_digest_configured_token_works_for_its_namespace_only(auth_api: AuthApi) -> None:
    with auth_api.client(DIGEST_TOKEN) as c:
        assert c.get("/v1/namespaces/gamma-one/memories").status_code == 200
        assert c.get("/v1/namespaces/gamma-two/memories").status_code == 403


def test_isolation_probes_find_nothing_across_namespaces(
    alpha: httpx.Client, beta: httpx.Client, alpha_ns: str, beta_ns: str, engine
) -> None:
    secret = f"alpha keeps its keys in drawer {uuid.uuid4().hex[:6]}"
    mem = _write(alpha, alpha_ns, "user.keys_location", secret)
    mid = mem["id"]
    _write(beta, beta_ns, "user.keys_location", "beta keeps its keys in the car")

    # A foreign namespace in the path: 403 on every route, before anything is looked up, whether the
    # namespace exists or not (so 403 says nothing about existence).
    for path in (
        f"/v1/namespaces/{alpha_ns}/memories",
        f"/v1/namespaces/{alpha_ns}/memories/{mid}",
        f"/v1/namespaces/{alpha_ns}/search?q=keys",
        f"/v1/namespaces/{alpha_ns}/context?q=keys",
        f"/v1/namespaces/{alpha_ns}/episodes",
        f"/v1/namespaces/{alpha_ns}/episodes/search?q=keys",
        "/v1/namespaces/alpha-does-not-exist/memories",
    ):
        r = beta.get(path)
        assert r.status_code == 403, (path, r.status_code)
        assert secret not in r.text
    for method, path in (
        ("POST", f"/v1/namespaces/{alpha_ns}/memories/{mid}/forget"),
        ("POST", f"/v1/namespaces/{alpha_ns}/memories/{mid}/verify"),
        ("DELETE", f"/v1/namespaces/{alpha_ns}/memories/{mid}"),
        ("POST", f"/v1/namespaces/{alpha_ns}/erase"),
    ):
        assert beta.request(method, path, json={"key_prefix": "user."}).status_code == 403

    # Another namespace's memory id through one's own namespace: 404, exactly like an id that never existed.
    unknown = uuid.uuid4()
    for method, suffix in (("GET", ""), ("POST", "/forget"), ("POST", "/verify"), ("POST", "/unforget")):
        stolen = beta.request(method, f"/v1/namespaces/{beta_ns}/memories/{mid}{suffix}")
        never = beta.request(method, f"/v1/namespaces/{beta_ns}/memories/{unknown}{suffix}")
        assert stolen.status_code == never.status_code == 404
        assert stolen.json()["detail"].replace(str(mid), "ID") == never.json()["detail"].replace(str(unknown), "ID")
    assert beta.delete(f"/v1/namespaces/{beta_ns}/memories/{mid}").status_code == 404

    # Beta's own search and list never show alpha's memory.
    found = beta.get(f"/v1/namespaces/{beta_ns}/search", params={"q": secret, "min_score": 0}).json()
    assert all(h["memory"]["namespace"] == beta_ns for h in found["hits"])
    assert secret not in str(found["hits"])
    assert secret not in beta.get(f"/v1/namespaces/{beta_ns}/memories").text

    # A namespace in a body never widens access: extra fields are refused, and nothing was written.
    r = beta.post(
        f"/v1/namespaces/{beta_ns}/transcripts",
        json={"namespace": alpha_ns, "turns": [{"role": "user", "content": "I prefer tea."}]},
    )
    assert r.status_code == 422

    # Nothing of alpha's changed.
    after = alpha.get(f"/v1/namespaces/{alpha_ns}/memories/{mid}").json()
    assert after["state"] == "active"
    assert after["confidence"] == mem["confidence"]
    assert [h["action"] for h in after["history"]] == ["created"]


def test_a_token_for_two_namespaces_sees_each_separately(auth_api: AuthApi, alpha_ns: str) -> None:
    other = alpha_ns + "-2"
    with auth_api.client("tok-alpha") as c:
        _write(c, alpha_ns, "user.pet", "User has a cat named Momo")
        assert c.get(f"/v1/namespaces/{other}/memories").json()["total"] == 0
        hits = c.get(f"/v1/namespaces/{other}/search", params={"q": "cat Momo", "min_score": 0}).json()["hits"]
        assert hits == []


@pytest.mark.slow  # starts three API/MCP processes, each of which must refuse to serve
def test_processes_refuse_to_serve_open_by_mistake(services: Services) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    env = services.env(HINDSIGHT_ENV="prod")
    env.pop("HINDSIGHT_AUTH__TOKENS", None)
    for args, env_ in (
        (["api", "--port", "1"], env),
        (["mcp", "--transport", "http", "--port", "1"], env),
        (["mcp", "--transport", "http", "--host", "0.0.0.0", "--port", "1"], services.env(HINDSIGHT_ENV="dev")),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "hindsight.cli", *args], env=env_, cwd=REPO, capture_output=True, timeout=120
        )
        assert done.returncode == 2, (args, done.stderr[-2000:])
        assert b"HINDSIGHT_AUTH__MODE=none" in done.stderr


def test_token_command_prints_a_token_and_its_digest() -> None:
    import json

    from typer.testing import CliRunner

    from hindsight.cli import app

    result = CliRunner().invoke(app, ["token", "agent-42:*", "shared"])
    assert result.exit_code == 0, result.output
    made = json.loads(result.output)
    assert made["token"].startswith("hs_")
    assert made["token_digests"] == {token_digest(made["token"]): ["agent-42:*", "shared"]}
    a = Authenticator.from_settings(_settings(auth=AuthSettings(token_digests=made["token_digests"])))
    assert a.authenticate(made["token"]).allows("agent-42:u1")
