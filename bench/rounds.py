"""Experiment for issue #12: would a round-level index with fact-augmented keys beat raw-turn search?

    .venv/bin/python bench/rounds.py locomo|longmemeval

Distils the dev file through the real pipeline (embedded PostgreSQL, Redis and worker, as `hindsight eval`
does), then ranks, per question, units built from the raw turns with BM25, dense and their reciprocal-rank
fusion, and prints evidence recall at 250 / 500 / 1,000 / 2,000 tokens and at k = 10 (the suites' tokenizer and
rendering):

* `raw`: one turn, keyed by its text (the suites' baselines);
* `A`: one turn, keyed by its text and the values of the memories whose provenance names it (key expansion);
* `Braw`: a round (a turn and the next turn of its session), keyed by their text, rendered whole;
* `B`: the same round keyed by its text and its memories' values;
* `C`: as B, with the second turn rendered only to its first 200 characters.

Nothing here is product code: it measures whether the index is worth building (BENCHMARKS.md, issue #12).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import sqlalchemy as sa
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation import data, suites  # noqa: E402
from evaluation.baselines import BM25Index, DenseIndex, reciprocal_rank_fusion  # noqa: E402
from evaluation.render import render_turn  # noqa: E402
from evaluation.runtime import eval_runtime  # noqa: E402
from evaluation.scoring import RankedItem, evidence_scores, mean_rows  # noqa: E402
from hindsight.config import get_settings  # noqa: E402
from hindsight.embeddings import cached_embedder  # noqa: E402
from hindsight.logging import configure_logging  # noqa: E402
from pipeline.wordpiece import count_tokens  # noqa: E402
from schemas.events import TranscriptIn  # noqa: E402

FILES = {
    "locomo": ("../shared/eval/locomo-dev.json", data.load_locomo),
    "longmemeval": ("../shared/eval/longmemeval-oracle-dev.json", data.load_longmemeval),
}
SHOWN = ("recall@250tok", "recall@500tok", "recall@1000tok", "recall@2000tok", "recall@10")
DEPTH = 50


def _history(conv: data.Conversation, namespace: str) -> list[TranscriptIn]:
    return [
        TranscriptIn.model_validate(
            {
                "namespace": namespace,
                "conversation_id": f"{conv.conv_id}/{s.session_id}",
                "occurred_at": s.occurred_at,
                "turns": [
                    {"role": t.role, "content": t.text, "turn_id": t.turn_id}
                    | ({"name": t.speaker} if t.speaker not in (t.role, "") else {})
                    for t in s.turns
                ],
            }
        )
        for s in conv.sessions
    ]


def _units(conv: data.Conversation, facts: dict[str, list[str]]) -> dict[str, tuple[list[str], list[RankedItem]]]:
    """Each variant's keys and the items they retrieve (the turns credited, the tokens rendered)."""
    turns = conv.turns
    rendered = [count_tokens(render_turn(t.text, speaker=t.speaker, at=s.occurred_at)) for s, t in turns]
    single = [RankedItem(frozenset([t.turn_id]), n) for (_, t), n in zip(turns, rendered, strict=True)]
    texts = [t.text for _, t in turns]
    pairs, cut, keys_raw, keys_facts = [], [], [], []
    for i, (session, turn) in enumerate(turns):
        j = i + 1 if i + 1 < len(turns) and turns[i + 1][0] is session else None
        ids = [turn.turn_id] + ([turns[j][1].turn_id] if j is not None else [])
        pairs.append(RankedItem(frozenset(ids), rendered[i] + (rendered[j] if j is not None else 0)))
        short = (
            count_tokens(render_turn(turns[j][1].text[:200], speaker=turns[j][1].speaker, at=session.occurred_at))
            if j is not None
            else 0
        )
        cut.append(RankedItem(frozenset(ids), rendered[i] + short))
        text = " ".join(texts[k] for k in ([i] + ([j] if j is not None else [])))
        keys_raw.append(text)
        keys_facts.append(text + " " + " ".join(v for tid in ids for v in facts.get(tid, [])))
    with_facts = [t.text + " " + " ".join(facts.get(t.turn_id, [])) for _, t in turns]
    return {
        "raw": (texts, single),
        "A": (with_facts, single),
        "Braw": (keys_raw, pairs),
        "B": (keys_facts, pairs),
        "C": (keys_facts, cut),
    }


def main(suite: str) -> None:
    console = Console(stderr=True)
    settings = get_settings()
    configure_logging(settings.model_copy(update={"log_level": "WARNING"}))
    path, load = FILES[suite]
    conversations = load(Path(path))
    with eval_runtime(settings, console=console, external=False, data_dir=None, concurrency=None) as rt:
        embedder = cached_embedder(settings.embedding.model, settings.embedding.batch_size, settings.embedding.threads)
        namespaces = {c.conv_id: suites._ns(suite[:3], c.conv_id) for c in conversations}
        with suites._progress(console) as progress:
            histories = [_history(c, namespaces[c.conv_id]) for c in conversations]
            suites._publish_rounds(rt, histories, progress, "distilling sessions")
        rows: dict[str, list[dict[str, float]]] = defaultdict(list)
        for conv in conversations:
            if not conv.questions:
                continue
            with rt.engine.connect() as conn:
                found = conn.execute(
                    sa.text(
                        "SELECT m.value, p.turn_ids FROM memories m JOIN memory_provenance p ON p.memory_id = m.id"
                        " WHERE m.namespace = :n"
                    ),
                    {"n": namespaces[conv.conv_id]},
                ).all()
            facts: dict[str, list[str]] = defaultdict(list)
            for value, turn_ids in found:
                for t in turn_ids:
                    facts[t].append(value)
            variants = {
                name: (BM25Index(keys), DenseIndex(keys, embedder), items)
                for name, (keys, items) in _units(conv, facts).items()
            }
            for q in conv.questions:
                query = q.question[-suites.QUERY_CHARS :]
                qv = embedder.embed([query])[0]
                for name, (bm25, dense, items) in variants.items():
                    by_words, by_meaning = bm25.rank(query, DEPTH), dense.rank(query, DEPTH, query_vector=qv)
                    fused = reciprocal_rank_fusion([by_meaning, by_words], DEPTH)
                    for how, order in (("bm25", by_words), ("dense", by_meaning), ("hybrid", fused)):
                        rows[f"{name}_{how}"].append(evidence_scores(q.evidence, [items[i] for i in order]))
    for name, r in rows.items():
        m = mean_rows(r)
        print(f"{name:12}", "  ".join(f"{k}={m[k]}" for k in SHOWN))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "locomo")
