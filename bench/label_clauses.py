"""Draw the dialogue clauses the offline extractor's classifier is asked about, for labelling by hand.

    .venv/bin/python bench/label_clauses.py sample --split train --per-lang 3000 --out /tmp/clauses_train.jsonl
    .venv/bin/python bench/label_clauses.py sample --split val --per-lang 600 --out /tmp/clauses_val.jsonl

The classifier learns "this clause states nothing" mostly from hand-written sentences: a first-person clause of a
persona chat that is far from every persona sentence may still be a fact (speakers say more than their persona
lists), so distant supervision cannot call it a negative. Labelled by hand, the same clauses are honest
negatives and positives, in the register the service meets.

`sample` runs the whole extractor (the packaged model) on the persona-split dialogues of Synthetic-Persona-Chat
(en) and XPersona zh, as `hindsight train validate` does, and records every clause the extractor asks its
classifier about, as the classifier sees it (a subject the speaker left out already supplied), with the turn it
came from and the partner's turn before it. Only the persona's own speaker is read (the partner's persona, and
so its split, is unknown). Half the draw is uniform over those clauses; half is over the ones the model scores
P(fact) ≥ 0.3, where a wrong keep costs precision. Seeded. The labels written against a sample go to
`hindsight/training/data/dialogue_clauses_<lang>.jsonl` (`{"text", "slot", "also", "why"}`): `slot` a registry slot
or null, `why` for a null: remark / transient / plan / question / other / unclear.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

app = typer.Typer(add_completion=False)
CORPORA = {"en": "spc", "zh": "xpersona_zh"}


@app.callback()
def main() -> None:
    """Draw clauses for labelling by hand."""


@app.command()
def sample(
    out: Annotated[Path, typer.Option(help="Where to write the sample (JSONL).")],
    split: Annotated[str, typer.Option(help="Persona split: train or val.")] = "train",
    per_lang: Annotated[int, typer.Option(help="Clauses drawn per language.")] = 3000,
    seed: Annotated[int, typer.Option(help="Random seed of the draw.")] = 0,
    exclude: Annotated[
        list[Path] | None, typer.Option(help="Earlier samples whose clauses are not drawn again.")
    ] = None,
    train_dir: Annotated[Path, typer.Option(help="The persona corpora.")] = Path("../shared/train"),
) -> None:
    from hindsight.training.extractor import _norm, _rows, persona_split
    from hindsight.training.persona_eval import dialogue_facts
    from pipeline.slot_model import SlotJudge
    from pipeline.slots import Slot

    class Recording(SlotJudge):
        """The packaged judge, remembering what it was asked."""

        asked: list[str]

        def slot(self, clause: str, min_p_fact: float | None = None) -> Slot | None:
            self.asked.append(clause)
            return super().slot(clause, min_p_fact)

    judge = Recording()
    seen = {_norm(json.loads(line)["text"]) for path in exclude or () for line in path.open(encoding="utf-8")}
    rows = []
    for lang, corpus in CORPORA.items():
        pool: dict[str, dict[str, object]] = {}
        for r in _rows(train_dir / corpus / "dialogues.jsonl"):
            if persona_split([p.get("en") or p["text"] for p in r["persona"]]) != split:
                continue
            judge.asked = []
            turns, _ = dialogue_facts(r, judge)
            users = [i for i, (who, _) in enumerate(turns) if who == "user"]
            for clause in dict.fromkeys(judge.asked):
                key = _norm(clause)
                if key in pool or key in seen or not users:
                    continue
                i = max(users, key=lambda j: _overlap(clause, turns[j][1]))
                before = turns[i - 1][1] if i and turns[i - 1][0] != "user" else ""
                pool[key] = {"lang": lang, "corpus": corpus, "dialogue_id": r["dialogue_id"], "text": clause,
                             "turn": turns[i][1], "partner_before": before,
                             "p_fact": round(judge.predict(clause).p_fact, 3)}  # fmt: skip
        rng = random.Random(seed)
        everything = sorted(pool.values(), key=lambda row: str(row["text"]))
        likely = [row for row in everything if isinstance(p := row["p_fact"], float) and p >= 0.3]
        drawn = rng.sample(likely, min(per_lang // 2, len(likely)))
        ids = {id(row) for row in drawn}
        rest = [row for row in everything if id(row) not in ids]
        drawn += rng.sample(rest, min(per_lang - len(drawn), len(rest)))
        rng.shuffle(drawn)
        rows += drawn
        typer.echo(f"{lang}: {len(pool)} clauses asked about, {len(likely)} with P(fact) >= 0.3; drew {len(drawn)}")
    with out.open("w", encoding="utf-8") as fh:
        for i, r in enumerate(rows):
            fh.write(json.dumps({"id": i, "split": split, **r}, ensure_ascii=False) + "\n")
    typer.echo(json.dumps({"sample": str(out), "rows": len(rows), "produced_by": judge.classifier.produced_by}))


def _overlap(clause: str, turn: str) -> int:
    """How many of the clause's character bigrams the turn holds: which turn a clause was taken from."""
    a, b = clause.lower(), turn.lower()
    return sum(a[k : k + 2] in b for k in range(len(a) - 1))


if __name__ == "__main__":
    app()
