"""The client talks to the same kind of API process the API tests use: started with bearer tokens."""

from tests.api.conftest import alpha_ns, auth_api, beta_ns  # noqa: F401
