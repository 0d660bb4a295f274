"""`hindsight train extractor`: one seeded command writes the model and prints its validation figures; the same
seed and data give the same file. Run on a small corpus in the layout of ../shared/train."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from hindsight.cli import app
from hindsight.training.extractor import SHIPPED_THRESHOLD, THRESHOLDS, persona_split
from pipeline.slot_model import NONE, SlotClassifier

PERSONAS = [
    ["i have two dogs.", "i live in denver.", "i work as a nurse."],
    ["i love to bake cookies.", "my favorite band is queen.", "i am a teacher."],
    ["i grew up in ohio.", "i drive a red truck.", "i am allergic to cats."],
    ["i play the violin.", "i have three kids.", "i hate spicy food."],
    ["i am a vegan.", "i run every morning.", "i live in paris."],
    ["i study chemistry.", "i have a cat named tom.", "i drink green tea."],
]
SLOTS = {
    "dogs": "user.pet",
    "cat": "user.pet",
    "live": "user.city",
    "nurse": "user.role",
    "teacher": "user.role",
    "bake": "user.hobby",
    "band": "user.music",
    "violin": "user.music",
    "grew": "user.hometown",
    "truck": "user.possession",
    "allergic": "user.allergy",
    "kids": "user.family",
    "spicy": "user.food",
    "vegan": "user.diet",
    "run": "user.exercise",
    "study": "user.education",
    "tea": "user.drink",
}


def _slot(sentence: str) -> str | None:
    return next((slot for word, slot in SLOTS.items() if word in sentence), None)


def _persona(texts: list[str], zh: bool = False) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for t in texts:
        row: dict[str, object] = {"text": ("我" + t) if zh else t, "facts": [{"slot": _slot(t)}] if _slot(t) else []}
        if zh:
            row["en"] = t
        out.append(row)
    return out


def _corpus(root: Path) -> Path:
    for name in ("spc", "xpersona_zh", "convai2_dnli", "paed_personaext"):
        (root / name).mkdir(parents=True)
    dialogues, zh, utterances = [], [], []
    for copy in range(4):  # enough dialogues that some personas land in validation
        for i, persona in enumerate(PERSONAS):
            said = [*persona, "what do you do for fun?", "that sounds great!"]
            turns = [
                {"speaker": "A" if k % 2 == 0 else "B", "text": s}
                for k, s in enumerate(sum(([s, "cool."] for s in said), []))
            ]
            base = {
                "target_speaker": "A",
                "dialogue": turns,
                "persona": _persona([p.replace("i ", f"i {copy} ", 0) for p in persona]),
            }
            dialogues.append(
                {"lang": "en", "source": "spc", "split": "valid", "dialogue_id": f"spc-{copy}-{i}", **base}
            )
            zh.append({"lang": "zh", "source": "xpersona_zh", "split": "valid", "dialogue_id": f"x-{copy}-{i}",
                       "target_speaker": "A", "dialogue": [{"speaker": "A", "text": "我" + s} for s in said],
                       "persona": _persona(persona, zh=True)})  # fmt: skip
    for k, p in enumerate(sum(PERSONAS, [])):
        facts = [{"slot": _slot(p)}] if _slot(p) else []
        utterances.append(
            {"lang": "en", "source": "convai2_dnli", "split": "valid", "dialogue_id": "c-0", "turn": k}
            | {"speaker": "A", "utterance": p, "facts": facts}
        )
    files: dict[str, list[dict[str, Any]]] = {
        "spc/dialogues.jsonl": dialogues,
        "xpersona_zh/dialogues.jsonl": zh,
        "convai2_dnli/dialogues.jsonl": [{**d, "source": "convai2_dnli"} for d in dialogues[:6]],
        "convai2_dnli/utterances.jsonl": utterances,
        "paed_personaext/utterances.jsonl": [{**u, "source": "paed"} for u in utterances],
    }
    for path, rows in files.items():
        (root / path).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return root


def test_persona_split_is_the_same_for_the_same_persona_in_any_corpus_or_language() -> None:
    english = ["i have two dogs.", "I live in Denver"]
    assert persona_split(english) == persona_split(["I live in Denver.", "i have two dogs"])
    assert {persona_split([f"persona {i}"]) for i in range(50)} == {"train", "val"}


@pytest.mark.slow  # trains the classifier twice: minutes on two busy cores
def test_one_seeded_command_trains_the_model_and_prints_its_figures(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "train")
    runner = CliRunner()
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / f"model-{run}.npz"
        result = runner.invoke(
            app, ["train", "extractor", "--train-dir", str(corpus), "--seed", "3", "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["meta"]["seed"] == 3
        assert report["meta"]["threshold"] == SHIPPED_THRESHOLD  # the bar is fixed, whatever the clause figures say
        assert {t["threshold"] for t in report["tried"]} >= set(THRESHOLDS)  # every bar's clause figures printed
        assert report["validation"]  # clause-level figures per validation set
        assert set(report["extractor"]) == {"spc", "convai2_dnli", "xpersona_zh"}
        outputs.append(out)
    assert outputs[0].read_bytes() == outputs[1].read_bytes()  # same seed, same data: the same model
    chosen = runner.invoke(
        app, ["train", "extractor", "--train-dir", str(corpus), "--seed", "3", "--out", str(tmp_path / "c.npz"),
              "--threshold", "0.55"],
    )  # fmt: skip
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.stdout.strip().splitlines()[-1])["meta"]["threshold"] == 0.55
    assert SlotClassifier(tmp_path / "c.npz").threshold == 0.55
    # --choose-threshold stores the bar the clause validation prefers: the first of `tried` (best mean first)
    preferred = runner.invoke(
        app, ["train", "extractor", "--train-dir", str(corpus), "--seed", "3", "--out", str(tmp_path / "p.npz"),
              "--choose-threshold"],
    )  # fmt: skip
    assert preferred.exit_code == 0, preferred.output
    report = json.loads(preferred.stdout.strip().splitlines()[-1])
    assert report["meta"]["threshold"] == report["tried"][0]["threshold"]
    assert report["meta"]["threshold"] in THRESHOLDS
    both = runner.invoke(app, ["train", "extractor", "--train-dir", str(corpus), "--threshold", "0.5",
                               "--choose-threshold"])  # fmt: skip
    assert both.exit_code == 2
    assert "exclude each other" in both.output
    model = SlotClassifier(outputs[0])
    assert NONE in model.classes
    assert model.version == "v1-s3"
    p = model.probabilities(np.zeros((1, model.layers[0][0].shape[0]), np.float32))
    assert np.isclose(p.sum(), 1.0)


def test_persona_sentences_take_their_hand_label_over_the_corpus_relation(tmp_path: Path) -> None:
    from hindsight.training.extractor import load_dialogues, persona_labels
    from pipeline.slots import BY_NAME

    labels = persona_labels("en")
    assert len(labels) > 900  # every distinct SPC persona sentence
    assert all(p.slot is None or p.slot in BY_NAME for p in labels.values())
    assert all(a in BY_NAME and a != p.slot for p in labels.values() for a in p.also)
    hand = next(p for p in labels.values() if p.slot and p.slot != "pet")
    root = tmp_path / "c"
    (root / "spc").mkdir(parents=True)
    row = {
        "lang": "en", "source": "spc", "split": "valid", "dialogue_id": "d", "target_speaker": "A",
        "dialogue": [{"speaker": "A", "text": hand.text}],
        # the corpus says pet: the hand label wins; a sentence nobody labelled keeps its corpus relation
        "persona": [{"text": hand.text, "facts": [{"slot": "user.pet"}]},
                    {"text": "i keep seven hamsters.", "facts": [{"slot": "user.pet"}]}],
    }  # fmt: skip
    (root / "spc" / "dialogues.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    [d] = load_dialogues(root, "spc")
    assert d.persona[0].slot == hand.slot
    assert d.persona[0].accepted == frozenset((hand.slot, *hand.also))
    assert d.persona[1].slot == "pet"


def test_a_slot_the_annotator_accepted_as_well_is_learned_and_scored_as_right() -> None:
    from hindsight.training import extractor as ex

    rng = np.random.default_rng(0)
    a, b, c = (rng.normal(size=8).astype(np.float32) for _ in range(3))

    def near(v: np.ndarray, n: int) -> list[np.ndarray]:
        return [v + 0.05 * rng.normal(size=8) for _ in range(n)]

    # Sentences like `b` are labelled "music" only; one sentence between the two kinds is "hobby", and the
    # annotator accepted "music" as well.
    x = np.stack([*near(a, 40), *near(b, 40), *near(c, 40), 0.4 * a + 0.6 * b]).astype(np.float32)
    y = ["hobby"] * 40 + ["music"] * 40 + [NONE] * 40 + ["hobby"]
    plain, classes = ex.fit(x, y, seed=0, c=4.0, hidden=0, epochs=20)
    partial, _ = ex.fit(x, y, seed=0, c=4.0, hidden=0, epochs=20, also=[()] * 120 + [("music",)])
    music = classes.index("music")
    assert ex._probs(partial, x[-1:])[0, music] > ex._probs(plain, x[-1:])[0, music]
    # Scoring: a prediction of any accepted slot is right, and only of those.
    assert ex._probs(partial, x[-1:])[0].argmax() == music
    assert ex.score(partial, classes, x[-1:], [frozenset(("hobby", "music"))], 0.0)["slot_accuracy"] == 1.0
    assert ex.score(partial, classes, x[-1:], [frozenset(("hobby",))], 0.0)["slot_accuracy"] == 0.0


def test_validation_counts_statements_and_family_facts() -> None:
    from hindsight.training.persona_eval import _only_asks, _slots_of
    from schemas.pipeline import CandidateFact, MemoryKind, Source

    assert _only_asks("What's your favorite band?")
    assert _only_asks("你喜欢什么音乐？")
    assert not _only_asks("I'm from Ohio, have you ever been?")  # says something about the speaker
    assert not _only_asks("Me too! What's your favorite dish?")

    def fact(subject: str, key: str) -> CandidateFact:
        return CandidateFact(
            kind=MemoryKind.fact,
            key=key,
            value="v",
            source=Source.user,
            confidence=0.7,
            subject=subject,
            turn_ids=["0"],
        )

    assert _slots_of(fact("user", "user.role")) == {"role"}
    assert _slots_of(fact("father", "father.role")) == {"role", "family"}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_hand_written_file_is_read_whole(lang: str) -> None:
    """A new prototype file must be listed in `load_prototypes` to be learned from, and a row whose slot is not in
    the registry is skipped: either would leave hand-written data out of the model without a word."""
    from hindsight.training.extractor import DATA_DIR, load_prototypes

    files = [p for p in DATA_DIR.glob(f"*_{lang}.jsonl") if p.name.startswith(("prototypes", "contrast"))]
    rows = [line for p in files for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(files) >= 7
    assert len(load_prototypes(lang)) == len(rows)


@pytest.mark.slow  # embeds the hand-written sentences twice: about a minute on two busy cores
@pytest.mark.parametrize(("command", "positive", "step", "parts"), [
    ("change", "change", 8, {"all", "en", "zh"}),
    ("glue", "passing", 4, {"all", "en", "zh", "glue", "passing", "dialogue"}),
])  # fmt: skip
def test_one_seeded_command_trains_a_two_class_classifier_and_prints_its_figures(
    command: str, positive: str, step: int, parts: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hindsight train change` and `hindsight train glue`: the same seed and data give the same file, with the
    threshold chosen from the grid and the validation figures per language (and, for glue, per source)."""
    import importlib

    trainer = importlib.import_module(f"hindsight.training.{command}")
    monkeypatch.setattr(trainer, "C_GRID", (1.0,))
    monkeypatch.setattr(trainer, "EPOCHS", (20,))
    every = trainer.load_examples
    monkeypatch.setattr(trainer, "load_examples", lambda lang: every(lang)[::step])  # the same files, fewer lines
    runner = CliRunner()
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / f"{command}-{run}.npz"
        result = runner.invoke(app, ["train", command, "--seed", "2", "--out", str(out)])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["meta"]["threshold"] in trainer.THRESHOLDS
        assert set(report["validation"]) == parts
        assert report["validation"]["all"]["n"] == report["validation"]["en"]["n"] + report["validation"]["zh"]["n"]
        outputs.append(out)
    assert outputs[0].read_bytes() == outputs[1].read_bytes()  # same seed, same data: the same model
    model = SlotClassifier(outputs[0])
    assert sorted(model.classes) == sorted([positive, NONE])
    assert model.version == f"{command}-v1-s2"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_change_classifier_reads_every_hand_written_change_sentence(lang: str) -> None:
    """Every line of `change_<lang>.jsonl`, `prototypes_change_<lang>.jsonl`, `prototypes_change_chat_<lang>.jsonl` and
    `change_life_<lang>.jsonl` is an example, labelled as written; a prototype with a rule cue is left out
    rather than taken as no change."""
    from hindsight.training.change import load_examples
    from hindsight.training.extractor import DATA_DIR
    from pipeline.slot_model import CHANGE

    rows = load_examples(lang)
    by_source = Counter(src for _, _, src, _ in rows)
    for name in ("change", "prototypes_change", "prototypes_change_chat", "change_life"):
        lines = (DATA_DIR / f"{name}_{lang}.jsonl").read_text(encoding="utf-8").splitlines()
        assert by_source[f"{name}_{lang}"] == len([line for line in lines if line.strip()])
    written = {json.loads(line)["text"]: json.loads(line)["change"]
               for line in (DATA_DIR / f"change_{lang}.jsonl").read_text(encoding="utf-8").splitlines()}  # fmt: skip
    assert all((label == CHANGE) == bool(written[t]) for t, label, src, _ in rows if src == f"change_{lang}")
    assert sum(label == CHANGE for _, label, _, _ in rows) >= 300


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_glue_classifier_reads_every_hand_written_pair_with_its_label(lang: str) -> None:
    from hindsight.training.extractor import DATA_DIR
    from hindsight.training.glue import load_examples
    from pipeline.slot_model import PASSING

    lines = [json.loads(line) for line in (DATA_DIR / f"glue_{lang}.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = load_examples(lang)
    pairs = [(text, label) for text, label, source, _ in rows if source == "glue"]
    assert len(pairs) == len(lines) >= 400
    assert [label == PASSING for _, label in pairs] == [r["label"] == "passing" for r in lines]
    assert {r["label"] for r in lines} == {"passing", "detail"}
    # the persona corpora's clauses come from their training split alone for fitting; their validation split is
    # only ever validation
    labelled = (DATA_DIR / f"dialogue_clauses_{lang}.jsonl").read_text(encoding="utf-8").splitlines()
    dialogue = {json.loads(line)["text"]: json.loads(line)["split"] for line in labelled}
    assert all(split == dialogue[text] for text, _, source, split in rows if source == "dialogue")
    assert {source for _, _, source, _ in rows} == {"glue", "passing", "dialogue"}
