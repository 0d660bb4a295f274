"""Precision of the offline extractor judged by hand: draw a sample, then score its labels.

    .venv/bin/python bench/precision.py sample --out bench/data/precision_sample_v2.jsonl [--per-corpus 100]
    .venv/bin/python bench/precision.py score bench/data/precision_sample_v2.jsonl bench/data/precision_labels_v2.jsonl

`sample` runs the whole extractor (the packaged model) on the persona-split validation dialogues of
Synthetic-Persona-Chat and XPersona zh (the same ones `hindsight train validate` reads), collects every memory
kept about the user or their family, and draws `--per-corpus` of them per corpus at random (seeded). Each row
is what an annotator needs and nothing more: the memory's key and value and what the user said in the turns
it came from; no persona, no model score.

`score` reads labels written against that sample, one JSON object per line: `{"id", "label", "slot_ok"}`
with `label` one of correct / transient / remark / wrong (a stable fact the user stated, rendered faithfully;
a passing state; a reaction or remark that says nothing to remember; garbled, misattributed or not what was
said) and `slot_ok` whether the key's slot suits the value. It prints precision (correct / all) and how often
the slot suits a correct value, per corpus, as one JSON line.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

app = typer.Typer(add_completion=False)
CORPORA = ("spc", "xpersona_zh")


@app.command()
def sample(
    out: Annotated[Path, typer.Option(help="Where to write the sample (JSONL).")],
    per_corpus: Annotated[int, typer.Option(help="Memories drawn per corpus.")] = 100,
    dialogues: Annotated[int, typer.Option(help="Validation dialogues read per corpus.")] = 120,
    seed: Annotated[int, typer.Option(help="Random seed of the draw.")] = 0,
    train_dir: Annotated[Path, typer.Option(help="The persona corpora.")] = Path("../shared/train"),
) -> None:
    from hindsight.training.persona_eval import dialogue_facts, val_rows
    from pipeline.slot_model import default_judge

    judge = default_judge()
    rows = []
    for corpus in CORPORA:
        pool = []
        for row in val_rows(train_dir, corpus, dialogues):
            turns, facts = dialogue_facts(row, judge)
            for f in facts:
                said = " / ".join(turns[int(i)][1] for i in f.turn_ids if turns[int(i)][0] == "user")
                pool.append({"corpus": corpus, "subject": f.subject, "key": f.key, "value": f.value, "said": said})
        rows += random.Random(seed).sample(pool, min(per_corpus, len(pool)))
    with out.open("w", encoding="utf-8") as fh:
        for i, r in enumerate(rows):
            fh.write(json.dumps({"id": i, **r}, ensure_ascii=False) + "\n")
    typer.echo(json.dumps({"sample": str(out), "rows": len(rows), "produced_by": judge.classifier.produced_by}))


@app.command()
def score(sample_file: Path, labels_file: Path) -> None:
    corpus_of = {}
    for line in sample_file.open(encoding="utf-8"):
        r = json.loads(line)
        corpus_of[r["id"]] = r["corpus"]
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for line in labels_file.open(encoding="utf-8"):
        r = json.loads(line)
        t = tally[corpus_of[r["id"]]]
        t[r["label"]] += 1
        t["slot_ok"] += bool(r["label"] == "correct" and r.get("slot_ok"))
    report = {}
    for corpus, t in tally.items():
        n = sum(t[k] for k in ("correct", "transient", "remark", "wrong"))
        report[corpus] = {
            "memories": n,
            "precision": round(t["correct"] / max(n, 1), 3),
            "slot_suits_correct": round(t["slot_ok"] / max(t["correct"], 1), 3),
            **{k: t[k] for k in ("correct", "transient", "remark", "wrong")},
        }
    typer.echo(json.dumps(report))


if __name__ == "__main__":
    app()
