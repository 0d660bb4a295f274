"""`hindsight eval …`: measure memory quality on a data file (distill cases, LoCoMo, LongMemEval, MADial)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console

if TYPE_CHECKING:  # the suites load their heavy imports only when a command runs
    from evaluation.data import CaseFile, Conversation, MadialMemory, MadialQuery
    from evaluation.runtime import Runtime
    from evaluation.suites import SuiteResult

D = TypeVar("D")

eval_app = typer.Typer(
    help="Measure memory quality: each suite prints a table and, as its last line, one JSON object of metrics.",
    no_args_is_help=True,
)
console = Console(stderr=True)
out = Console()

ExternalOption = Annotated[
    bool,
    typer.Option(
        "--external",
        help="Use the configured PostgreSQL/Redis and a worker that is already running, instead of starting "
        "an embedded PostgreSQL, Redis and worker in a scratch directory.",
    ),
]
DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="Keep the embedded servers' files here (default: a temp dir).")
]
ConcurrencyOption = Annotated[int | None, typer.Option("--concurrency", "-c", help="Worker processes to start.")]
LimitOption = Annotated[int | None, typer.Option("--limit", min=1, help="Use only the first N conversations.")]


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(2)


def _run(
    load: Callable[[], D],
    run: Callable[[Runtime, D], SuiteResult],
    render: Callable[[SuiteResult], None],
    *,
    external: bool,
    data_dir: Path | None,
    concurrency: int | None,
) -> None:
    from evaluation.report import emit
    from evaluation.runtime import eval_runtime
    from hindsight.config import get_settings
    from hindsight.errors import HindsightError
    from hindsight.logging import configure_logging

    settings = get_settings()
    # The store's own info logs (one per memory written) would drown the report: warnings only, on stderr.
    configure_logging(settings.model_copy(update={"log_level": "WARNING"}))
    try:
        data = load()  # every line validated before anything touches the store
    except HindsightError as exc:
        raise _fail(str(exc)) from None
    try:
        with eval_runtime(
            settings, console=console, external=external, data_dir=data_dir, concurrency=concurrency
        ) as rt:
            result = run(rt, data)
    except (HindsightError, RuntimeError) as exc:
        raise _fail(str(exc)) from None
    render(result)
    emit(out, result.metrics)


@eval_app.command("distill")
def distill_cmd(
    file: Annotated[Path, typer.Argument(help="Cases in the FORMAT.md layout (JSONL).")],
    redteam: Annotated[
        bool | None,
        typer.Option("--redteam/--no-redteam", help="Score as a red-team file (default: when its name says so)."),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use only the first N cases.")] = None,
    min_score: Annotated[
        float,
        typer.Option(
            "--min-score",
            help="Score threshold for the expect.queries recalls (default 0: rank the top k whatever they score; "
            "-1 = the configured retrieval threshold, as the API applies it).",
        ),
    ] = 0.0,
    external: ExternalOption = False,
    data_dir: DataDirOption = None,
    concurrency: ConcurrencyOption = None,
) -> None:
    """Run every case through the real pipeline and score what the store keeps."""
    from evaluation.data import load_cases
    from evaluation.report import distill_table, failures_text
    from evaluation.suites import run_distill

    def load() -> CaseFile:
        data = load_cases(file, redteam=redteam)
        if limit:
            data.cases = data.cases[:limit]
        return data

    def render(result: SuiteResult) -> None:
        failing = failures_text(result.cases, result.notes.get("stored", {}))
        if failing:
            out.print(failing, markup=False, highlight=False, soft_wrap=True)
        out.print(distill_table(result.metrics))

    _run(
        load,
        lambda rt, data: run_distill(rt, data, console=console, min_score=None if min_score < 0 else min_score),
        render,
        external=external,
        data_dir=data_dir,
        concurrency=concurrency,
    )


def _evidence(
    suite: str,
    loader: Callable[[Path], list[Conversation]],
    file: Path,
    limit: int | None,
    external: bool,
    data_dir: Path | None,
    concurrency: int | None,
    episodes: bool,
    qa: bool,
    qa_budget: int,
) -> None:
    from evaluation.report import evidence_table, qa_table
    from evaluation.suites import run_evidence
    from hindsight.config import get_settings

    if qa and get_settings().llm.backend != "openai":
        raise _fail(
            "--qa needs a model: set HINDSIGHT_LLM__BACKEND=openai with HINDSIGHT_LLM__BASE_URL, "
            "HINDSIGHT_LLM__API_KEY and HINDSIGHT_LLM__MODEL (distillation uses it too)"
        )

    def load() -> list[Conversation]:
        convs = loader(file)
        return convs[:limit] if limit else convs

    def run(rt: Runtime, data: list[Conversation]) -> SuiteResult:
        judge = None
        if qa:
            from evaluation.qa import QA
            from hindsight.llm import OpenAICompatibleClient

            judge = QA(OpenAICompatibleClient.from_settings(rt.settings.llm), suite=suite, budget_tokens=qa_budget)
        return run_evidence(rt, data, suite=suite, console=console, use_episodes=episodes, qa=judge)

    def render(result: SuiteResult) -> None:
        out.print(evidence_table(result.metrics))
        if "qa" in result.metrics:
            out.print(qa_table(result.metrics))

    _run(
        load,
        run,
        render,
        external=external,
        data_dir=data_dir,
        concurrency=concurrency,
    )


QaOption = Annotated[
    bool,
    typer.Option(
        "--qa/--no-qa",
        help="Also answer each question from hindsight's context with the configured model (llm.backend=openai) "
        "and judge it against the reference answer: answer accuracy beside evidence recall.",
    ),
]
QaBudgetOption = Annotated[
    int, typer.Option("--qa-budget", min=64, max=100_000, help="Tokens of context the model answers from.")
]

EpisodesOption = Annotated[
    bool,
    typer.Option(
        "--episodes/--no-episodes", help="Recall episode summaries and rounds beside the memories (as /context does)."
    ),
]


@eval_app.command("locomo")
def locomo_cmd(
    file: Annotated[Path, typer.Argument(help="LoCoMo JSON (the layout of data/locomo10.json).")],
    limit: LimitOption = None,
    episodes: EpisodesOption = True,
    qa: QaOption = False,
    qa_budget: QaBudgetOption = 1000,
    external: ExternalOption = False,
    data_dir: DataDirOption = None,
    concurrency: ConcurrencyOption = None,
) -> None:
    """Evidence recall on LoCoMo (categories 1-4) beside dense and BM25 retrieval over the raw turns."""
    from evaluation.data import load_locomo

    _evidence("locomo", load_locomo, file, limit, external, data_dir, concurrency, episodes, qa, qa_budget)


@eval_app.command("longmemeval")
def longmemeval_cmd(
    file: Annotated[Path, typer.Argument(help="LongMemEval JSON (e.g. longmemeval_oracle.json).")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use only the first N questions.")] = None,
    episodes: EpisodesOption = True,
    qa: QaOption = False,
    qa_budget: QaBudgetOption = 1000,
    external: ExternalOption = False,
    data_dir: DataDirOption = None,
    concurrency: ConcurrencyOption = None,
) -> None:
    """Evidence recall of `has_answer` turns on LongMemEval, per question type, beside the raw-turn baselines."""
    from evaluation.data import load_longmemeval

    _evidence("longmemeval", load_longmemeval, file, limit, external, data_dir, concurrency, episodes, qa, qa_budget)


@eval_app.command("madial")
def madial_cmd(
    dialogues: Annotated[Path, typer.Argument(help="MADial dialogues (JSONL with test-turn and relevant-id).")],
    memories: Annotated[Path, typer.Option("--memories", help="MADial memories (JSONL, one {id: memory} a line).")],
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Use only the first N dialogues.")] = None,
    query: Annotated[
        str,
        typer.Option(
            "--query",
            help="How a dialogue becomes the query: user-3 (last three user turns), last-user, or context "
            "(every turn before the test turn). The same query goes to every system.",
        ),
    ] = "user-3",
    external: ExternalOption = False,
    data_dir: DataDirOption = None,
) -> None:
    """Chinese retrieval: recall@1/5/10 and MRR of the relevant memories, beside dense and BM25."""
    from evaluation.data import MADIAL_QUERY_MODES, load_madial
    from evaluation.report import madial_table
    from evaluation.suites import run_madial

    if query not in MADIAL_QUERY_MODES:
        raise _fail(f"--query must be one of {', '.join(MADIAL_QUERY_MODES)}")

    def load() -> tuple[list[MadialMemory], list[MadialQuery]]:
        mems, queries = load_madial(dialogues, memories)
        return mems, (queries[:limit] if limit else queries)

    _run(
        load,
        lambda rt, data: run_madial(rt, data[0], data[1], console=console, mode=query),
        lambda result: out.print(madial_table(result.metrics)),
        external=external,
        data_dir=data_dir,
        concurrency=1,
    )
