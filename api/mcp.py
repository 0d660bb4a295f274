"""The MCP server (official SDK), over stdio and streamable HTTP: thin async tools over hindsight.services.

Tools: memory_search, memory_write, memory_forget, memory_verify, and remember / recall for clients that
expect those names; one resource per memory (`memory://{namespace}/{memory_id}`). Two erase tools,
memory_erase_transcript and namespace_erase, cannot be undone: their descriptions say so and each needs a
`confirm` argument that repeats the namespace (security issue #10: an end user leaving must be erasable
wherever the agent runs). Erase of single memories or subjects stays on the HTTP API and the CLI.

Namespaces: over HTTP the bearer token decides (api/auth.py); a tool's `namespace` argument only picks one
of the namespaces the token grants, and may be left out when the token grants exactly one. Over stdio
the process acts for the namespace given with `hindsight mcp --namespace` (or auth.default_namespace);
it is the only namespace a stdio server may use. Over stdio nothing but protocol is written to stdout.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

import anyio
import structlog
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings as McpAuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import Field
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from api.auth import LOCAL, Authenticator, Forbidden, Principal, Unauthorized
from hindsight import __version__
from hindsight.config import Settings
from hindsight.db.engine import ReadRouter, ReadSession, Session, get_engine, session_scope
from hindsight.errors import HindsightError, NotFound
from hindsight.queue import Publisher
from hindsight.services import erase as erase_service
from hindsight.services import memory_reads as memory_service
from hindsight.services import privileged_writes
from hindsight.services.recall import MAX_QUERY_CHARS, MAX_TOP_K, recall_episodes, recall_rounds
from hindsight.services.recall import recall as recall_service
from pipeline.base import Embedder
from schemas.events import NAMESPACE_PATTERN
from schemas.memories import KEY_PATTERN, EraseResult, MemoryRead, MemoryWrite, RememberResult, WriteResult
from schemas.pipeline import MemoryKind, Source
from schemas.recall import EpisodeRecallResult, RecallResult, RoundRecallResult
from workers.publisher import CeleryPublisher

log = structlog.get_logger(__name__)
T = TypeVar("T")
S = TypeVar("S", ReadSession, Session)

Transport = Literal["stdio", "http"]
NamespaceArg = Annotated[
    str | None,
    Field(
        None,
        pattern=NAMESPACE_PATTERN,
        max_length=128,
        description="Namespace to use; may be left out when the connection is bound to one namespace.",
    ),
]
QueryArg = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")]
TopKArg = Annotated[int | None, Field(None, ge=1, le=MAX_TOP_K, description="How many hits at most.")]
MemoryIdArg = Annotated[uuid.UUID, Field(description="The memory's id (from memory_search).")]
ConfirmArg = Annotated[str, Field(max_length=128, description="The namespace again. This erase CANNOT be undone.")]


@dataclass
class McpState:
    settings: Settings
    engine: Engine
    reads: ReadRouter
    embedder: Embedder
    auth: Authenticator
    transport: Transport
    stdio_namespace: str | None
    publisher: Publisher
    written: str | None = None
    """The primary's WAL position after this server's last write: its reads see its own writes (`ReadRouter`)."""

    def read_session(self, _: Engine) -> AbstractContextManager[ReadSession]:
        """A read unit of work for `_in_session`: on the replica if it has replayed this server's writes."""
        return self.reads.session(self.written)


class _Verifier(TokenVerifier):
    """Lets the SDK's bearer middleware answer 401 itself; the grants ride along in the token's claims."""

    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            principal = self.auth.authenticate(token)
        except Unauthorized:
            return None
        return AccessToken(token=token, client_id=principal.name, scopes=[], claims={"grants": list(principal.grants)})


INSTRUCTIONS = (
    "hindsight is this user's long-term memory. Memories are distilled from past conversations after they end; "
    "search them before answering anything that depends on who the user is, their preferences, stack, projects "
    "or earlier decisions. Each hit carries its confidence, age and source: prefer fresh, confident ones and "
    "believe the user over a memory when they disagree."
)


def build_server(
    settings: Settings,
    *,
    transport: Transport,
    namespace: str | None = None,
    embedder: Embedder | None = None,
    host: str | None = None,
) -> MCPServer[McpState]:
    """The MCP server for one transport. Over HTTP, auth is resolved now (a misconfigured process refuses
    to start); over stdio the caller is the local user who launched it, bound to one namespace."""
    stdio_ns = namespace or settings.auth.default_namespace
    auth = (
        Authenticator(mode="none")
        if transport == "stdio"
        else Authenticator.from_settings(settings, host=host or settings.api_host)
    )

    @asynccontextmanager
    async def lifespan(_: MCPServer[McpState]) -> AsyncIterator[McpState]:
        from hindsight.embeddings import build_embedder

        emb: Embedder = (
            embedder if embedder is not None else await anyio.to_thread.run_sync(build_embedder, settings.embedding)
        )
        engine = get_engine(settings)
        state = McpState(
            settings=settings,
            engine=engine,
            reads=ReadRouter.for_settings(settings, engine),
            embedder=emb,
            auth=auth,
            transport=transport,
            stdio_namespace=stdio_ns,
            publisher=CeleryPublisher(),
        )
        log.info("mcp.started", transport=transport, auth=auth.mode, version=__version__)
        yield state

    kwargs: dict[str, Any] = {}
    if transport == "http" and auth.enabled:
        kwargs = {
            "token_verifier": _Verifier(auth),
            # Validated from the string (as pydantic coerces it), so the URL keeps its form: no trailing "/".
            "auth": McpAuthSettings.model_validate(
                {"issuer_url": f"http://{host or settings.api_host}", "resource_server_url": None}
            ),
        }
    server: MCPServer[McpState] = MCPServer(
        "hindsight",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
        log_level="WARNING",
        **kwargs,
    )
    _register(server)

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_: Request) -> Response:
        """Liveness for health checks (no token needed; it says nothing about any memory)."""
        return JSONResponse({"status": "ok"})

    return server


# -- access ------------------------------------------------------------------------------------------------


def _state(ctx: Context) -> McpState:
    state = ctx.request_context.lifespan_context
    if not isinstance(state, McpState):  # the lifespan yields it before the first call
        raise ToolError("server state is not ready")
    return state


def _principal(ctx: Context) -> Principal:
    st = _state(ctx)
    if st.transport == "stdio":
        return Principal(name="stdio", grants=(st.stdio_namespace,)) if st.stdio_namespace else LOCAL
    if not st.auth.enabled:
        return LOCAL
    request = ctx.request_context.request
    user = request.scope.get("user") if request is not None and hasattr(request, "scope") else None
    token = getattr(user, "access_token", None) or get_access_token()
    if token is None or not token.claims:
        raise ToolError("unauthorized: a bearer token is required")
    return Principal(name=token.client_id, grants=tuple(token.claims.get("grants", ())))


def _resolve(ctx: Context, namespace: str | None) -> tuple[str, str]:
    """(namespace, actor) for this call; the namespace must be one the connection may use."""
    st = _state(ctx)
    principal = _principal(ctx)
    if namespace is None:
        exact = [g for g in principal.grants if not g.endswith("*")]
        if st.transport == "stdio" and st.stdio_namespace:
            namespace = st.stdio_namespace
        elif len(principal.grants) == 1 and len(exact) == 1:
            namespace = exact[0]
        elif principal is LOCAL and st.settings.auth.default_namespace:
            namespace = st.settings.auth.default_namespace
        else:
            raise ToolError("namespace is required: this connection may use more than one")
    try:
        principal.require(namespace)
    except Forbidden as exc:
        raise ToolError(str(exc)) from None
    return namespace, f"mcp/{principal.name}"


def _confirmed(confirm: str, namespace: str) -> None:
    """An irreversible tool runs only when the caller repeated the namespace it acts on."""
    if confirm != namespace:
        raise ToolError(f"not erased: confirm must repeat the namespace ({namespace!r})")


def _tool_error(exc: HindsightError) -> Exception:
    return ToolError(f"{type(exc).__name__}: {exc}")


def _resource_error(exc: HindsightError) -> Exception:
    return ResourceNotFoundError(str(exc)) if isinstance(exc, NotFound) else ResourceError(str(exc))


async def _call(fn: Callable[[], T], errors: Callable[[HindsightError], Exception] = _tool_error) -> T:
    """Run a sync service in a worker thread; hindsight's errors become MCP error results (`errors`)."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except HindsightError as exc:
        raise errors(exc) from None


async def _in_session(
    st: McpState,
    unit: Callable[[Engine], AbstractContextManager[S]],
    work: Callable[[S], T],
    errors: Callable[[HindsightError], Exception] = _tool_error,
) -> T:
    """`work` in one unit of work, in a worker thread: `unit` is `st.read_session` (rolled back; on a replica that
    has replayed this server's writes) for a read, or session_scope (committed when `work` returns, rolled back
    if it raises) for a write."""

    def run() -> T:
        with unit(st.engine) as session:
            out = work(session)
        if unit is session_scope:  # committed: later reads must see it
            st.written = st.reads.write_position()
        return out

    return await _call(run, errors)


async def _retrieve(ctx: Context, search: Callable[..., T], query: str, namespace: str | None, top_k: int | None) -> T:
    """One search tool: `search` (recall, recall_episodes or recall_rounds, which share their signature) over
    the caller's namespace, in a read session."""
    ns, _ = _resolve(ctx, namespace)
    st = _state(ctx)
    return await _in_session(
        st,
        st.read_session,
        lambda session: search(session, ns, query, embedder=st.embedder, settings=st.settings.retrieval, top_k=top_k),
    )


async def _write(ctx: Context, namespace: str | None, work: Callable[[Session, str, str, McpState], T]) -> T:
    """One writing tool: `work(session, namespace, actor, state)` for the caller, in one unit of work."""
    ns, actor = _resolve(ctx, namespace)
    st = _state(ctx)
    return await _in_session(st, session_scope, lambda session: work(session, ns, actor, st))


async def _erase(
    ctx: Context,
    namespace: str | None,
    confirm: str,
    erase: Callable[[Session, str, str, erase_service.Outside], EraseResult],
) -> EraseResult:
    """One irreversible erase tool: `erase(session, namespace, actor, outside)` once the caller has repeated the
    namespace, in one unit of work; the scrub outside PostgreSQL (logs, session store) runs when it commits
    and fills in the result's counts."""
    ns, actor = _resolve(ctx, namespace)
    _confirmed(confirm, ns)
    st = _state(ctx)

    def work(session: Session) -> EraseResult:
        outside = erase_service.outside_of(st.settings, publisher=st.publisher, engine=st.engine)
        return erase(session, ns, actor, outside)

    return await _in_session(st, session_scope, work)


# -- tools and resources -----------------------------------------------------------------------------------


def _register(server: MCPServer[McpState]) -> None:
    @server.tool(
        name="memory_search",
        description=(
            "Search the user's long-term memory (hybrid: meaning + keywords + recency + trust). USE before "
            "answering anything that depends on the user's identity, preferences, tech stack, projects, habits "
            "or past decisions, in any language (Chinese and English both work). Each hit has a score, "
            "confidence, age, state (stale = possibly outdated), source and provenance. DO NOT use it for "
            "general knowledge or for what was said earlier in this same conversation (that is in your context)."
        ),
    )
    async def memory_search(
        query: QueryArg, ctx: Context, namespace: NamespaceArg = None, top_k: TopKArg = None
    ) -> RecallResult:
        return await _search(ctx, query, namespace, top_k)

    @server.tool(
        name="recall",
        description=(
            "Same as memory_search (for clients that expect a `recall` tool): what the user's long-term memory "
            "holds about a query, best first. USE when the answer depends on who the user is or what they told "
            "you before. DO NOT use it for general knowledge or for the current conversation."
        ),
    )
    async def recall(
        query: QueryArg, ctx: Context, namespace: NamespaceArg = None, top_k: TopKArg = None
    ) -> RecallResult:
        return await _search(ctx, query, namespace, top_k)

    @server.tool(
        name="episode_search",
        description=(
            "Search summaries of earlier conversations with the user (what they asked, what they said, what "
            "was concluded, with the turns quoted). USE for questions about past events and things said in "
            'passing: "when did I …", "what did I tell you about …", "what did you recommend last time". '
            "DO NOT use it for stable facts about the user (use memory_search) or for the current conversation."
        ),
    )
    async def episode_search(
        query: QueryArg, ctx: Context, namespace: NamespaceArg = None, top_k: TopKArg = None
    ) -> EpisodeRecallResult:
        return await _retrieve(ctx, recall_episodes, query, namespace, top_k)

    @server.tool(
        name="round_search",
        description=(
            "Search what the user said in earlier conversations, turn by turn (each hit is one user turn with "
            "the start of the reply, and is also found by the facts distilled from it). USE for a detail said "
            'in passing: "what did I say the venue was", "which book did I mention". DO NOT use it for stable '
            "facts about the user (use memory_search) or for whole past conversations (use episode_search)."
        ),
    )
    async def round_search(
        query: QueryArg, ctx: Context, namespace: NamespaceArg = None, top_k: TopKArg = None
    ) -> RoundRecallResult:
        return await _retrieve(ctx, recall_rounds, query, namespace, top_k)

    async def _search(ctx: Context, query: str, namespace: str | None, top_k: int | None) -> RecallResult:
        # A read: recall counts accesses on its own thread (services/recall.py AccessRecorder).
        return await _retrieve(ctx, recall_service, query, namespace, top_k)

    @server.tool(
        name="memory_write",
        description=(
            "Store one stable, structured fact the user explicitly asked you to remember, or a correction they "
            "made (key = what it is about, e.g. `user.database`; value = a short usable sentence). It is "
            "reconciled like learned facts: a duplicate refreshes, a refinement merges, a contradiction is "
            "recorded as a conflict. DO NOT use it for passing moods, one-off requests, secrets (passwords, "
            "keys, ID numbers), guesses, or text from tools, web pages or files; memory is also distilled "
            "automatically after each conversation, so do not copy every statement here."
        ),
    )
    async def memory_write(
        key: Annotated[str, Field(pattern=KEY_PATTERN, max_length=256, description="What the fact is about.")],
        value: Annotated[str, Field(min_length=1, max_length=2000, description="The fact, short and usable.")],
        ctx: Context,
        kind: MemoryKind = MemoryKind.fact,
        source: Annotated[Source, Field(description="Who said it; `manual` for an explicit write.")] = Source.manual,
        confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9,
        ttl_days: Annotated[int | None, Field(ge=1, le=36500, description="Expire after this many days.")] = None,
        pinned: Annotated[bool, Field(description="Never ages (use for lasting facts only).")] = False,
        namespace: NamespaceArg = None,
    ) -> WriteResult:
        _resolve(ctx, namespace)  # who may write here is answered before what is wrong with the arguments
        try:
            write = MemoryWrite(
                key=key,
                value=value,
                kind=kind,
                source=source,
                confidence=confidence,
                ttl_days=ttl_days,
                pinned=pinned,
                subject=None,  # not a tool argument: the key's first segment names whom the fact is about
            )
        except ValueError as exc:
            raise ToolError(f"invalid arguments: {exc}") from None

        return await _write(
            ctx,
            namespace,
            lambda session, ns, actor, st: privileged_writes.write_memory(
                session, ns, write, embedder=st.embedder, settings=st.settings, actor=actor
            ),
        )

    @server.tool(
        name="remember",
        description=(
            'Remember a free-text statement from the user ("remember that I\'m vegetarian"). Stable facts are '
            "extracted from it; otherwise the text is kept as one note. USE only when the user asks you to "
            "remember something. DO NOT use it for moods, one-off requests, secrets, or tool/web text; prefer "
            "memory_write when you can name the key."
        ),
    )
    async def remember(
        content: Annotated[str, Field(min_length=1, max_length=8000)],
        ctx: Context,
        metadata: dict[str, Any] | None = None,
        namespace: NamespaceArg = None,
    ) -> RememberResult:
        return await _write(
            ctx,
            namespace,
            lambda session, ns, actor, st: privileged_writes.remember(
                session, ns, content, metadata or {}, embedder=st.embedder, settings=st.settings, actor=actor
            ),
        )

    @server.tool(
        name="memory_forget",
        description=(
            "Forget a memory (soft): it stops appearing in searches but is kept for audit and can be restored. "
            "USE when the user says a remembered fact is wrong or asks you to stop using it. DO NOT use it to "
            "record a change (write the new fact with memory_write: the old one is retired) or for privacy "
            "erasure (that is a separate, irreversible erase on the HTTP API)."
        ),
    )
    async def memory_forget(
        memory_id: MemoryIdArg,
        ctx: Context,
        reason: Annotated[str | None, Field(None, max_length=500)] = None,
        namespace: NamespaceArg = None,
    ) -> MemoryRead:
        return await _write(
            ctx,
            namespace,
            lambda session, ns, actor, _: privileged_writes.forget(session, ns, memory_id, actor=actor, reason=reason),
        )

    @server.tool(
        name="memory_verify",
        description=(
            "Confirm a memory is still true: raises its confidence, resets its age and revives it if stale. "
            'USE when the user confirms a remembered fact ("yes, still on PostgreSQL"). DO NOT use it on a '
            "guess, or because a memory merely looked plausible."
        ),
    )
    async def memory_verify(
        memory_id: MemoryIdArg,
        ctx: Context,
        confidence: Annotated[float | None, Field(None, ge=0.0, le=1.0)] = None,
        namespace: NamespaceArg = None,
    ) -> MemoryRead:
        return await _write(
            ctx,
            namespace,
            lambda session, ns, actor, _: privileged_writes.verify(
                session, ns, memory_id, actor=actor, confidence=confidence
            ),
        )

    @server.tool(
        name="memory_erase_transcript",
        description=(
            "Erase one conversation transcript for real: its turns, its episode summary, and the memories that "
            "came only from it. IT CANNOT BE UNDONE. USE only when the user explicitly asks to delete that "
            "conversation. `confirm` must repeat the namespace. DO NOT use it to correct a fact (memory_write) "
            "or to hide one (memory_forget)."
        ),
    )
    async def memory_erase_transcript(
        transcript_id: Annotated[uuid.UUID, Field(description="The transcript's id.")],
        confirm: ConfirmArg,
        ctx: Context,
        namespace: NamespaceArg = None,
    ) -> EraseResult:
        return await _erase(
            ctx,
            namespace,
            confirm,
            lambda session, ns, actor, outside: erase_service.erase_transcript(
                session, ns, transcript_id, actor=actor, outside=outside
            ),
        )

    @server.tool(
        name="namespace_erase",
        description=(
            "Erase EVERYTHING remembered in the namespace for real: all memories, transcripts, episodes, "
            "working-memory sessions and log lines. IT CANNOT BE UNDONE. USE only when the user explicitly asks "
            "to delete all their data (leaving the product). `confirm` must repeat the namespace. DO NOT use it "
            "to drop one fact (memory_forget) or one conversation (memory_erase_transcript)."
        ),
    )
    async def namespace_erase(
        confirm: ConfirmArg,
        ctx: Context,
        namespace: NamespaceArg = None,
    ) -> EraseResult:
        return await _erase(
            ctx,
            namespace,
            confirm,
            lambda session, ns, actor, outside: erase_service.erase_namespace(
                session, ns, actor=actor, outside=outside
            ),
        )

    @server.resource(
        "memory://{namespace}/{memory_id}",
        name="memory",
        description="One memory with its provenance, audit history and conflicts (JSON).",
        mime_type="application/json",
    )
    async def memory_resource(namespace: str, memory_id: str, ctx: Context) -> str:
        try:
            ns, _ = _resolve(ctx, namespace)
            mid = uuid.UUID(memory_id)
        except (ToolError, ValueError) as exc:
            raise ResourceError(str(exc)) from None
        return await _in_session(
            _state(ctx),
            _state(ctx).read_session,
            lambda session: memory_service.get_memory(session, ns, mid).model_dump_json(),
            _resource_error,
        )


def run(
    settings: Settings,
    *,
    transport: Transport,
    namespace: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8766,
) -> None:
    """Serve until interrupted (`hindsight mcp`)."""
    server = build_server(settings, transport=transport, namespace=namespace, host=host)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port, streamable_http_path="/mcp")
