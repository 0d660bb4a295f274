"""Stages 3 and 4: conflict-detect / merge, then dedupe. Pure: facts and memories in, decisions out.

Per candidate, in order (later candidates see what earlier ones did):
0. Each statement of its value that a live memory of the same subject already makes, under any key, refreshes
   that memory, and one that repeats a memory's statement and adds to it takes that statement's place
   (`_covering`); the rest of the value goes on.
1. Compare with memories of the same key first; only when none matches, fall back to embedding
   neighbours (cosine = dot product, vectors are L2-normalised).
2. Same key, same polarity, same numbers, similar text → refresh; new value adds detail → merge;
   opposite polarity or a different value/number → supersede on a change-of-state cue or a strong
   explicit contradiction, else conflict (old confidence lowered). Pinned memories are never superseded.
3. A neighbour ≥ threshold refreshes only with the same polarity and the same numbers: "not allergic to
   penicillin" never merges into "allergic to penicillin", whatever the cosine says.
Quarantined (and tool-sourced) candidates never touch active memories.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pipeline import extract_lexicon as lx
from pipeline.slots import BY_NAME, KEY_FILLER, canonical_slot, exact_slot, key_slot
from pipeline.text import (
    CORRECTION_RE,
    content_tokens,
    core_negated,
    extract_numbers,
    has_cjk,
    normalize,
    numbers_conflict,
    pos_cut,
)
from schemas.pipeline import (
    CandidateFact,
    EmbeddedFact,
    ExistingMemory,
    MemoryKind,
    MemoryOp,
    MemoryState,
    Source,
)

SOURCE_CONFIDENCE_CAP: dict[Source, float] = {
    Source.user: 0.95,
    Source.manual: 1.0,
    Source.assistant: 0.6,
    Source.tool: 0.3,
}
CONFLICT_DECAY = 0.6
"""A contradicted memory keeps this share of its confidence."""
STRONG_CONTRADICTION_CONFIDENCE = 0.85
"""An explicit ("remember: …") user statement this confident retires an opposite-polarity memory."""
REFINEMENT_OVERLAP = 0.4
"""Share of the old value's content that a new value must repeat to count as a refinement of it."""
CHANGE_NEIGHBOUR_COSINE = 0.45
"""A change whose key no live memory shares is weighed against the nearest memory of its subject at this cosine or
above. Chosen on hand-written (old memory, new turn) pairs, half of them held back (`bench/change_pairs.py`): 0.40
retired two more memories that still held (dev half), 0.50 and 0.55 found 2 and 7 fewer of 80 changes (val half)."""
CONFUSED_NEIGHBOUR_COSINE = 0.3
"""The bar for a memory filed under a slot the change's own is often confused with (`Slot.confused_with`: a job and
an employer, an operating system and a device): "switched everything over to a MacBook Air" (device) beside "uses a
Windows 10 desktop PC" (os), cosine 0.35."""
MAX_MERGED_CHARS = 200
"""A refinement that would make a many-valued memory longer than this becomes a memory of its own: a value is
short, directly usable text, not a growing list."""

_LIVE = (MemoryState.active, MemoryState.stale)


_TEAM_SUBJECTS = frozenset(("team", "we", "our", "us"))


@lru_cache(maxsize=4096)
def canonical_key(key: str) -> tuple[str, tuple[str, ...]]:
    """(subject, attribute concepts) so that differently spelled keys about the same thing compare equal."""
    key = normalize(key).lower()
    subject, _, attr = key.partition(".")
    whole = exact_slot(re.sub(r"[.\-]", "_", attr))
    if whole is not None:
        # A key that is a slot's name or alias as a whole is that slot, whatever its words name one by one:
        # `home_town` is a hometown (not a city), `previous_role` the user's past (not their job), `lives_with` family.
        concepts = [whole.name]
    else:
        concepts = []
        for token in re.split(r"[._\-]+", attr):
            if not token or token in KEY_FILLER:
                continue
            concept = canonical_slot(token) or token
            if concept not in concepts:
                concepts.append(concept)
        if any(c in BY_NAME for c in concepts):
            # Words that name no slot only qualify the one named (`language_learning`, `mobile_carrier`,
            # `phone_model`): writers spell a slot's key their own way, and those keys are one slot. Two slots in
            # one key name one thing by the last, as an English compound does (`company.cloud`, `work_stack`: a
            # stack; `project.deadline`: a deadline).
            concepts = [c for c in concepts if c in BY_NAME][-1:]
    if subject in _TEAM_SUBJECTS and any(c in BY_NAME and "team" in BY_NAME[c].subjects for c in concepts[:1]):
        # The offline extractor files "we moved the database to Postgres" under `user.database` (value "the user's
        # team …"); another writer (an LLM, a manual write) may say `team.database`. For a slot a team can hold,
        # both are the user's working context: one slot, so a change to either retires the other.
        subject = "user"
    return subject, tuple(concepts)


def _single_valued(key: str) -> bool:
    """Whether the key's slot holds one value at a time (a city, an employer): the registry says."""
    return any(c in BY_NAME and BY_NAME[c].cardinality == "one" for c in canonical_key(key)[1])


def keys_match(a: str, b: str) -> bool:
    return a == b or canonical_key(a) == canonical_key(b)


@dataclass
class _Mem:
    """Reconcile's working copy of a memory (existing, or created earlier in this batch)."""

    id: uuid.UUID
    key: str
    value: str
    negated: bool
    state: MemoryState
    pinned: bool
    confidence: float
    embedding: list[float] | None
    also_slots: tuple[str, ...] = ()
    in_batch: bool = False
    """Created earlier in this batch (the same transcript), not held before it."""


def _slots(key: str, also: Sequence[str]) -> set[str]:
    slot = key_slot(key)
    return {*([slot.name] if slot else []), *also}


def _slots_meet(mem: _Mem, fact: CandidateFact) -> bool:
    """Same subject, and a slot in common among each one's key slot and the others its value fills: "moved to a
    job in Leeds" filed under employer, with city as its runner-up, meets "User lives in York" (city)."""
    return canonical_key(mem.key)[0] == canonical_key(fact.key)[0] and bool(
        _slots(mem.key, mem.also_slots) & _slots(fact.key, fact.also_slots)
    )


def _cosine(a: list[float] | None, b: list[float] | None) -> float | None:
    if not a or not b or len(a) != len(b):
        return None
    return float(sum(x * y for x, y in zip(a, b, strict=True)))


_SUBJECT_WORDS_RE = re.compile(r"用户的?|\bthe user's\b|\buser's\b|\bthe user\b|\buser\b", re.I)


def _core(text: str) -> str:
    """Value without the subject words and punctuation, for containment checks."""
    t = _SUBJECT_WORDS_RE.sub("", normalize(text).lower())
    return re.sub(r"[\s\W_]+", "", t)


def _units(text: str) -> set[str]:
    """Overlap units: CJK characters (robust to segmentation) plus crudely stemmed English content words."""
    t = _SUBJECT_WORDS_RE.sub(" ", normalize(text))
    out = {ch for ch in t if has_cjk(ch) and ch not in "的了是在我你他她它们和与也都就还很有这那个一"}
    for w in content_tokens(re.sub(r"[\u3400-\u9fff]+", " ", t)):
        out.add(_stem(w))
    return out


def _stem(word: str) -> str:
    w = re.sub(r"(?:ing|ed|es|s)$", "", word) if len(word) > 4 else word
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


_EN_SALIENT_RE = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][A-Za-z0-9+#.\-]*[A-Za-z0-9+#]|\b[A-Za-z]*\d[A-Za-z0-9.\-]*")


def _salient(text: str) -> set[str]:
    """Specific tokens (names, places, products, versions) that make a value *this* value."""
    t = _SUBJECT_WORDS_RE.sub(" ", normalize(text))
    out = {m.group(0).lower().rstrip(".") for m in _EN_SALIENT_RE.finditer(t)}
    if has_cjk(t):
        out |= {w for w, flag in pos_cut(t) if flag in {"nr", "ns", "nt", "nz"} and len(w) >= 2}
    return {w for w in out if w and w not in {"user", "user's"}}


_LIGHT_WORDS_TEXT = (
    "live lives living lived based work works working worked job use uses using used prefer prefers preferred "
    "like likes liked love loves loved enjoy enjoys is am are was were be been being has have had do does did "
    "now currently still also really mostly usually always since main mainly primarily full time part "
    "这边 那边 现在 目前 一直 主要 平时 工作 生活"
)
_LIGHT_WORDS = frozenset(_LIGHT_WORDS_TEXT.split())
"""Words that say how a value is held, not which value it is ("lives in", "works as", "现在")."""
_ZH_SPECIFIC_FLAGS = ("n", "eng", "vn", "j", "nz")


def _specifics(text: str, key: str) -> set[str]:
    """What makes a one-value slot's value this value: its names and numbers (`_salient`) and its content words
    ("backend engineer" vs "engineering manager", "后端 工程师" vs "技术 经理"), less the words of the slot's topic
    ("editor", "工作") and the words that only say how the value is held ("lives in", "works as")."""
    slot = key_slot(key)
    topic = {*slot.en, *slot.aliases, *slot.zh} if slot else set()
    t = _SUBJECT_WORDS_RE.sub(" ", normalize(text))
    words = {_stem(w) for w in content_tokens(re.sub(r"[\u3400-\u9fff]+", " ", t)) if w not in _LIGHT_WORDS}
    words -= {_stem(w) for w in topic}
    if has_cjk(t):
        words |= {w for w, f in pos_cut(t) if f.startswith(_ZH_SPECIFIC_FLAGS) and len(w) >= 2}
        words -= topic | _LIGHT_WORDS
    # Stemmed like the content words: "Emacs" (a name) and "emacs" (a word) are one specific, not two.
    return {_stem(w) for w in _salient(text)} | {w for w in words if w and w not in {"user", "user's"}}


_FONDNESS = frozenset(
    [
        "like",
        "likes",
        "liked",
        "love",
        "loves",
        "loved",
        "enjoy",
        "enjoys",
        "enjoyed",
        "adore",
        "adores",
        "fond",
        "喜欢",
        "喜爱",
        "热爱",
        "爱",
        "享受",
    ]
)
"""Verbs of liking, one predicate for `_claim_words`: "loves the park" and "likes going to the park" say one thing."""


@lru_cache(maxsize=4096)
def _claim_words(text: str, *, light: bool = False) -> frozenset[str]:
    """What a value asserts, as a set: its content words (stemmed English, jieba words for Chinese) without the
    subject, the verbs of liking as one word, and (unless `light`) without the words that only say how a value is
    held ("now", "lives", "工作")."""
    t = _SUBJECT_WORDS_RE.sub(" ", normalize(text))
    out: set[str] = set()
    for w in content_tokens(t):
        if w in _FONDNESS:
            out.add("♥")
        elif (light or w not in _LIGHT_WORDS) and w not in {"user", "user's"}:
            out.add(w if has_cjk(w) else _stem(w[:-1] if len(w) > 3 and w[-1] == "s" and w[-2] != "s" else w))
    return frozenset(out)


@lru_cache(maxsize=4096)
def _numbers(text: str) -> frozenset[str]:
    return frozenset(extract_numbers(text))


def _covers(longer: str, shorter: str) -> bool:
    """`longer` says all that `shorter` does: every claim word of the shorter value and its numbers are in the
    longer one. A claim of one word must be the same statement ("is a welder"): a lone topic word is no claim
    ("has a dog" is not "loves dogs", "lives in Paris" is not "works in Paris")."""
    short, long_ = _claim_words(shorter), _claim_words(longer)
    if not short or not short <= long_ or not _numbers(shorter) <= _numbers(longer):
        return False
    return len(short) >= 2 or _claim_words(shorter, light=True) == _claim_words(longer, light=True)


def _shares_salient(old: set[str], new: set[str]) -> bool:
    # "Postgres" and "PostgreSQL" are the same product: a shared prefix of 5+ letters counts.
    return any(a == b or (min(len(a), len(b)) >= 5 and (a.startswith(b) or b.startswith(a))) for a in old for b in new)


def _overlap(old: str, new: str) -> float:
    units = _units(old)
    return len(units & _units(new)) / len(units) if units else 0.0


def _similarity(fact: CandidateFact, emb: list[float], mem: _Mem) -> float:
    cos = _cosine(emb, mem.embedding)
    if cos is not None:
        return cos
    a, b = _units(fact.value), _units(mem.value)
    return len(a & b) / len(a | b) if a | b else 0.0


def _mem_negated(mem: _Mem) -> bool:
    # Seeded memories may carry negated=False although their text says "not"; read the text too.
    return mem.negated or _text_negated(mem.value)


@lru_cache(maxsize=4096)
def _text_negated(value: str) -> bool:
    return core_negated(value)


def _cap(fact: CandidateFact) -> CandidateFact:
    cap = SOURCE_CONFIDENCE_CAP.get(fact.source, 0.95)
    update: dict[str, object] = {}
    if fact.confidence > cap:
        update["confidence"] = cap
    if fact.source is Source.tool and fact.state is MemoryState.active and fact.kind is not MemoryKind.observation:
        # Tool text posing as a preference/profile fact is never allowed to go live.
        update["state"] = MemoryState.quarantined
    return fact.model_copy(update=update) if update else fact


def _merge_text(old: str, new: str) -> str:
    if _core(old) and _core(old) in _core(new):
        return new
    sep = "；" if has_cjk(old + new) else "; "
    return f"{old}{sep}{new}"


def reconcile(
    facts: list[EmbeddedFact], existing: list[ExistingMemory], *, dedupe_threshold: float, by_statement: bool = True
) -> list[MemoryOp]:
    """Decide, for each candidate fact, whether it inserts, refreshes, merges, conflicts or supersedes.

    With `by_statement` (distilled facts), the statements of a value are first compared with the live memories under
    any key (`_covering`), so a fact may take more than one decision: the memories that already say part of it are
    refreshed, and the rest is decided on its own. Off (a caller's own writes, whose key is the caller's choice),
    each fact takes exactly one decision, in order."""
    pool = [
        _Mem(m.id, m.key, m.value, m.negated, m.state, m.pinned, m.confidence, m.embedding, tuple(m.also_slots))
        for m in existing
    ]
    ops: list[MemoryOp] = []
    for ef in facts:
        fact = _cap(ef.fact)
        untrusted = fact.state is MemoryState.quarantined or fact.source is Source.tool
        said, rest = _covering(fact, ef.embedding, pool) if by_statement and not untrusted else ([], fact)
        for op in [*said, *([_decide(rest, ef.embedding, pool, dedupe_threshold)] if rest is not None else [])]:
            ops.append(op)
            _apply(op, pool)
    return ops


def _supersede(fact: CandidateFact, emb: list[float], old: _Mem, why: str) -> MemoryOp:
    """Store `fact` as a new memory and archive `old`: the one way a memory is superseded."""
    return MemoryOp(
        action="supersede",
        fact=fact,
        embedding=emb,
        new_id=uuid.uuid4(),
        target_id=old.id,
        reason=f"{why}: old memory archived",
    )


def _changed_neighbour(fact: CandidateFact, emb: list[float], candidates: list[_Mem]) -> _Mem | None:
    """The live memory of the fact's subject, under another key, nearest the change in meaning, when its cosine is
    at least `CHANGE_NEIGHBOUR_COSINE`. Only a memory held before this transcript: what the same conversation said
    under another slot ("I love hiking … these days it's mostly bouldering") is two things said, not a change."""
    subject = canonical_key(fact.key)[0]
    own = key_slot(fact.key)
    confused = own.confused_with if own is not None else ()

    def bar(m: _Mem) -> float:
        slot = key_slot(m.key)
        return CONFUSED_NEIGHBOUR_COSINE if slot is not None and slot.name in confused else CHANGE_NEIGHBOUR_COSINE

    near = [
        (cos, m) for m in candidates
        if not m.in_batch and canonical_key(m.key)[0] == subject and not keys_match(m.key, fact.key)
        and (cos := _cosine(emb, m.embedding)) is not None and cos >= bar(m)
    ]  # fmt: skip
    return max(near, key=lambda p: p[0])[1] if near else None


def _decide(fact: CandidateFact, emb: list[float], pool: list[_Mem], threshold: float) -> MemoryOp:
    untrusted = fact.state is MemoryState.quarantined or fact.source is Source.tool
    if untrusted:
        # Quarantined text may only dedupe against other quarantined text, never touch live memories.
        candidates = [m for m in pool if m.state is MemoryState.quarantined]
    else:
        candidates = [m for m in pool if m.state in _LIVE]

    same_key = [m for m in candidates if keys_match(m.key, fact.key)]
    former = None if untrusted else _former_holder(fact, emb, candidates)
    if former is not None:
        return _supersede(fact, emb, former, f"a new {_relation(fact.key)[0]}: {former.key} held that relation")
    ended = None if untrusted else _ended_status(fact, candidates)
    if ended is not None:
        return _supersede(fact, emb, ended[0], f"the user is now {ended[1]}: {ended[0].key} said otherwise")
    replaced = None if untrusted else _named_source(fact, candidates)
    if replaced is not None and not any(_replaces(fact, m) for m in same_key):
        # "switched from Polars to DuckDB" retires the memory that names Polars, whichever slot it was filed
        # under ("prefers Polars over pandas" as a stack, the change as a language): the text says what it replaces.
        return _supersede(fact, emb, replaced, f"change-of-state cue names what it replaces, held by {replaced.key}")
    if same_key and not untrusted:
        target = max(same_key, key=lambda m: _similarity(fact, emb, m))
        return _same_key_decision(fact, emb, target, threshold, sole=len(same_key) == 1)
    # Only a memory held before this transcript: what the same conversation said under a slot the change also reads
    # as its own is two things said, not a change (as for `_changed_neighbour`).
    meeting = (
        [m for m in candidates if not m.in_batch and _slots_meet(m, fact)]
        if fact.supersedes_previous and not untrusted
        else []
    )
    if meeting:
        # A change whose key is another slot of the same thing (the classifier filed it under its runner-up, or
        # the old memory was) may still retire the old value, as if the keys were the same. Only that: a runner-up
        # is a second reading, so nothing is merged into or conflicts with the other slot's memory, and a change
        # that names no old value is not taken as replacing that slot's only one.
        target = max(meeting, key=lambda m: _similarity(fact, emb, m))
        op = _same_key_decision(fact, emb, target, threshold, sole=False)
        if op.action == "supersede":
            return op
    neighbour = _changed_neighbour(fact, emb, candidates) if fact.supersedes_previous and not untrusted else None
    if neighbour is not None:
        # A change filed under a slot no memory holds ("been on firefox for months now" as a project, beside
        # "uses Chrome" as a browser): the memory nearest in meaning, when it is near enough, is weighed as if it
        # were the only one of the same slot. It is retired only where the same-slot rules would retire it.
        op = _same_key_decision(fact, emb, neighbour, threshold, sole=True)
        if op.action == "supersede":
            return op

    ranked = sorted(((_similarity(fact, emb, m), m) for m in candidates), key=lambda p: -p[0])
    for sim, mem in ranked:
        if sim < threshold:
            break
        if fact.negated != _mem_negated(mem):
            continue  # a negation is never the same memory as its opposite
        if extract_numbers(fact.value) != extract_numbers(mem.value):
            continue  # "3 次" and "5 次" stay two memories
        return MemoryOp(
            action="refresh",
            fact=fact,
            embedding=emb,
            target_id=mem.id,
            reason=f"near-duplicate of {mem.key} (cosine {sim:.2f}), same polarity and numbers",
        )
    near = ranked[0] if ranked and ranked[0][0] >= threshold else None
    reason = "new memory"
    if untrusted:
        reason = "quarantined: kept apart from live memories"
    elif near is not None:
        reason = f"similar to {near[1].key} (cosine {near[0]:.2f}) but polarity or numbers differ; kept separate"
    return MemoryOp(action="insert", fact=fact, embedding=emb, new_id=uuid.uuid4(), reason=reason)


_PART_SEP_RE = re.compile(r"\s*[;；]\s*")


def _parts(value: str) -> list[str]:
    """The statements a value joins ("User is a plumber; User likes helping people"): the extractor keeps one
    memory per slot per transcript, its clauses joined by semicolons."""
    return [p for p in _PART_SEP_RE.split(value) if p.strip()] or [value]


def _covering(fact: CandidateFact, emb: list[float], pool: list[_Mem]) -> tuple[list[MemoryOp], CandidateFact | None]:
    """What live memories of the same subject already say, statement by statement, whichever slots they are
    filed under: one fact stays one memory when the classifier files two sentences of it under two slots.

    Each statement of the new value (`_parts`):
    - that a memory already makes ("is a welder" beside "is a welder; likes night shifts") refreshes it;
    - that repeats a statement of a memory and adds to it ("likes hiking" → "likes hiking and singing") takes
      that statement's place in the memory (merge), unless the memory is pinned or holds a one-value slot, the
      merged value would grow past `MAX_MERGED_CHARS`, or the new value's own slot holds another memory to be
      weighed against first;
    - else stays in what is returned, to be decided as usual (None when nothing is left).
    Not for negations or changes: "not", "no longer", "instead of" are about a value, not more of it.
    """
    if fact.negated or fact.supersedes_previous or _CONTRAST_RE.search(fact.value):
        return [], fact
    subject = canonical_key(fact.key)[0]
    parts = _parts(fact.value)
    # A memory that shares no claim word with the value can neither say it nor be refined by it: a substring test
    # (stems are prefixes) spares reading every memory of the pool.
    words = {w for p in parts for w in _claim_words(p)} - {"♥"}
    live = [
        m
        for m in pool
        if m.state in _LIVE
        and canonical_key(m.key)[0] == subject
        and any(w in m.value.lower() for w in words)
        and not _mem_negated(m)
    ]

    def rank(m: _Mem) -> tuple[bool, float]:
        # Where several memories would do: the one of the value's own key, then the closest. (Only among those:
        # similarity is a dot product over the embedding.)
        return not keys_match(m.key, fact.key), -_similarity(fact, emb, m)

    own_slot = [m for m in pool if m.state in _LIVE and keys_match(m.key, fact.key)]
    statements = {m.id: _parts(m.value) for m in live}
    sep = "；" if has_cjk(fact.value) else "; "
    said: dict[uuid.UUID, list[str]] = {}
    rest: list[str] = []
    for part in parts:
        if _text_negated(part):
            rest.append(part)
            continue
        saying = [m for m in live if any(_covers(o, part) for o in statements[m.id])]
        mem = min(saying, key=rank) if saying else _refined_by(part, live, statements, own_slot, sep, rank)
        if mem is None:
            rest.append(part)
        else:
            said.setdefault(mem.id, []).append(part)
    ops = []
    for mem in live:
        if mem.id not in said:
            continue
        merged = _join(statements[mem.id], sep)
        adds = merged != _join(_parts(mem.value), sep)
        ops.append(
            MemoryOp(
                action="merge" if adds else "refresh",
                fact=fact.model_copy(update={"value": sep.join(said[mem.id])}),
                embedding=emb,
                target_id=mem.id,
                merged_value=merged if adds else None,
                reason=f"repeats {mem.key} and adds to it"
                if adds
                else f"{mem.key} already says {'this' if not rest else 'part of it'}",
            )
        )
    if not rest:
        return ops, None
    if not ops:
        return ops, fact
    # What is left may be only the value's negated statements ("likes tea; doesn't drink coffee"): its polarity is
    # its own, as the extractor sets it for a whole value.
    return ops, fact.model_copy(update={"value": sep.join(rest), "negated": all(_text_negated(p) for p in rest)})


def _join(statements: list[str], sep: str) -> str:
    return sep.join(dict.fromkeys(statements))


def _refined_by(
    part: str,
    live: list[_Mem],
    statements: dict[uuid.UUID, list[str]],
    own_slot: list[_Mem],
    sep: str,
    rank: Callable[[_Mem], tuple[bool, float]],
) -> _Mem | None:
    """The memory that `part` refines: `part` repeats some of its statements and adds to them. Those statements
    give way to `part` in `statements` (the first one's place), and the memory is returned."""
    choices: list[tuple[_Mem, list[str]]] = []
    for mem in live:
        if mem.pinned or _single_valued(mem.key) or any(m is not mem for m in own_slot):
            continue  # a one-value slot's new value is weighed by `_same_key_decision`: it may replace the old one
        olds = statements[mem.id]
        hit = [i for i, old in enumerate(olds) if _covers(part, old)]
        if not hit:
            continue
        new = [part if i == hit[0] else old for i, old in enumerate(olds) if i == hit[0] or i not in hit]
        if len(_join(new, sep)) <= MAX_MERGED_CHARS:
            choices.append((mem, new))
    if not choices:
        return None
    mem, new = min(choices, key=lambda c: rank(c[0]))
    statements[mem.id] = new
    return mem


_LATIN_WORD = r"[^\W\u2e80-\u9fff]"
"""A word character that is not Chinese: a Latin name ends where Chinese begins ("用Jira管理任务" names Jira; to a
regex, Chinese characters are word characters too)."""
_NAME = r"[A-Za-z](?:" + _LATIN_WORD + r"|[+#.\-])*"
"""A Latin name ("Node.js", "C++", "Zürich"): "从Jira迁到" names Jira, not "Jira迁"."""
_CAP_NAME = r"[A-Z](?:" + _LATIN_WORD + r"|[+#.\-])*"
"""A capitalised word of a Latin name ("Google Chrome")."""
_TERM = (
    r"(?:(?:the user's|user's|the|my|our|a|an)\s+)?(?:(?:old|former|previous|ex-?)\s*)?"
    r"(" + _NAME + r"(?-i:\s" + _CAP_NAME + r")?)"
)
_ZH_WHEN = r"(?:\d{4}年(?:\d{1,2}月)?(?:\d{1,2}日)?(?:初|底|中|末|那周|那天)?|去年|前年|上个?月|上周)?\s*"
"""A resolved or relative date that may stand between a Chinese object and its verb ("车2026年11月卖了", "豆豆2026年初
走了", "2026年11月23日那周": last week resolved)."""
_ZH_GONE = (
    r"(?:卸了|卸载了|删了|退了|扔了|丢下了|放下了|荒废了|停了|卖了|送人了|(?:卖|扔|退|卸|删)掉了"
    r"|不(?:打|学|玩|练|跑|弹|写|追|考|做|去|用|喝|吃|抽|看|养)了)"
)
_ZH_ADVERBS = "其实|真的|确实|现在|目前|平时|后来|一直|已经|早就?|也|都"
"""Adverbs that may stand between a Chinese object and the verb that ends it ("咖啡用户现在不喝了"); none is a term."""
_PARTED = r"(?:have |had )?(?:broke up|split up|split|separated|divorced|got divorced)\b"
_REPLACED_RES = (
    re.compile(r"\bfrom\s+(" + _NAME + r"(?-i:\s" + _CAP_NAME + r")?)\s+(?:to|for|onto)\b", re.I),
    # "从后端转岗到算法", "从北京搬到": a verb of one or two characters may stand before 到.
    re.compile(r"从\s*(" + _NAME + r"|[\u4e00-\u9fff]{2,6}?)\s*(?:换成|改成|改用|[\u4e00-\u9fff]{0,2}到)"),
    # "migrating off Mongo onto Postgres", "moved away from Notion", "moved everything out of Notion"
    re.compile(r"\b(?:off|away from|out of)\s+" + _TERM, re.I),
    # "doing ACCA instead of the CFA", "tea rather than coffee", "cashews, not peanuts", "用 A 而不是 B"
    re.compile(r"\b(?:instead of|rather than)\s+" + _TERM, re.I),
    re.compile(r"[,，]\s*not\s+" + _TERM + r"\s*(?:[.!,;]|$)", re.I),
    re.compile(r"而不是\s*(" + _NAME + r"|[\u4e00-\u9fff]{2,6})"),
    # "gave up on the CFA", "put Spanish on hold", "rehomed the fish", "left Deliveroo", "sold the car"; a service
    # or an account ended ("cancelled Dropbox", "closed my Barclays account", "deleted instagram", "stopped using
    # Notion", "unsubscribed from Netflix")
    re.compile(
        r"\b(?:gave up|given up|giving up|give up|quit|quitting|left|leaving|ditched|dropped|sold|rehomed|put"
        r"|got rid of|gave away|cancell?ed|cancell?ing|closed|closing|deleted|deleting|uninstalled|deactivated"
        r"|unsubscribed from|stopped using|stopped going to)"
        r"(?:\s+on)?\s+" + _TERM,
        re.I,
    ),
    re.compile(r"\bgave\s+" + _TERM + r"\s+away\b", re.I),  # "gave my bike away"
    # "Spanish is officially shelved", "the CFA was dropped", "Biscuit passed away", "we lost Biscuit in March"
    re.compile(
        r"(" + _NAME + r")\s+(?:is|was|'s|has been|got)\s+(?:\w+ly\s+)?"
        r"(?:shelved|dropped|ditched|scrapped|abandoned|over)\b"
        r"|(" + _NAME + r")\s+(?:died|passed away|passed on)\b|\blost\s+" + _TERM,
        re.I,
    ),
    # the same in Chinese: "豆豆年初走了", "球球去年去世了", "奶奶前年过世了" (a two-character name, as most pets' and
    # kin's are: a longer run would take in the words before the name; not a pronoun's "他们都走了")
    re.compile(
        r"(?<![他她它我你])(?![他她它我你]?们)([\u4e00-\u9fff]{2})"
        + _ZH_WHEN
        + r"(?:已经|也)?(?:去世|过世|离世|病逝|走了|死了)"
    ),
    # "Hannah and I broke up", "broke up with Hannah", "divorced Tom", "我和小雨分手了", "跟老李离婚了"
    re.compile(
        rf"([A-Z][a-z]+) and (?:I|me|the user|User) {_PARTED}|(?:\bI|\b[Uu]ser|\bthe user) and ([A-Z][a-z]+) {_PARTED}"
        r"|\b(?:broke up|split up|split|separated) (?:with|from) ([A-Z][a-z]+)|\bdivorced ([A-Z][a-z]+)"
    ),
    re.compile(r"(?:和|跟|与)\s*([\u4e00-\u9fff]{2,3}|[A-Za-z]+)\s*(?:已经|早就?)?(?:分手|离婚|分开|分)了"),
    # "keto didn't stick", "Spanish honestly didn't stick"
    re.compile(r"(" + _NAME + r")\s+(?:\w+ly\s+)?(?:didn't|did not|never)\s+(?:stick|last|work out)\b", re.I),
    re.compile(
        r"(?:不再|放弃了?|离开了?|辞掉了?)\s*(?:用|喝|吃|学|做|玩|去)?\s*("
        + _NAME
        + r"|[\u4e00-\u9fff]{2,6}?)(?:了|[，,。]|$)"
    ),
    # "VS Code 已经卸了", "微信读书删了", "日语那摊子早扔了": the object before the verb that removed or dropped it
    re.compile(
        r"(?:我们?|用户)?(?:把|将)?\s*(" + _NAME + r"(?: " + _CAP_NAME + r")?|[\u4e00-\u9fff]{2,6}?)\s*"
        rf"(?:那摊子|这块|那块)?\s*(?:用户|我们?)?(?:{_ZH_ADVERBS}){{0,2}}{_ZH_WHEN}(?:{_ZH_ADVERBS}){{0,2}}{_ZH_GONE}"
    ),
    # "用户车2026年11月卖了", "我把猫送人了": one character names the thing right after the one who owned it
    re.compile(rf"(?:用户|我们?)的?(?:把|将)?([\u4e00-\u9fff]){_ZH_WHEN}(?:{_ZH_ADVERBS}){{0,2}}{_ZH_GONE}"),
)
_ZH_LEAD_RE = re.compile(r"^(?:用户的?|我们?的?|的|去年|前年|上个?月|上周|把|将)+")
_ZH_NOT_A_TERM_RE = re.compile(rf"(?:{_ZH_ADVERBS}|这个|那个|这些|那些|这块|那块|它|他|她){{1,3}}")
_NOT_A_TERM_TEXT = (
    "it that this them him her one ones me us you work home job place way time thing things stuff everything "
    "something anything nothing all some my the a an old new user user's hold"
)
_NOT_A_TERM = frozenset(_NOT_A_TERM_TEXT.split())


@lru_cache(maxsize=4096)
def _replaced_terms(value: str) -> tuple[str, ...]:
    """What a value says it moved away from, gave up or denies: "switched from Polars to DuckDB" → Polars,
    "migrating off Mongo onto Postgres" → Mongo, "put Spanish on hold" → Spanish, "keto didn't stick" → keto,
    "it's cashews, not peanuts" → peanuts, "从 MySQL 换成" → MySQL. Words that name nothing ("it", "work") are no
    term."""
    out: list[str] = []
    for pattern in _REPLACED_RES:
        for m in pattern.finditer(value):
            term = next(g for g in m.groups() if g is not None).strip() if m.lastindex else ""
            term = _ZH_LEAD_RE.sub("", term)  # "用户车", "去年把车": the owner and the date are no part of it
            if (
                len(term) >= (1 if has_cjk(term) else 2)
                and term.lower() not in _NOT_A_TERM
                and not _ZH_NOT_A_TERM_RE.fullmatch(term)
                and term not in out
            ):
                out.append(term)
    return tuple(out)


def _names(value: str, term: str) -> bool:
    if has_cjk(term):  # Chinese has no word boundaries: "后端" is named in "Java 后端开发"
        return term in value
    # An English compound names its head ("the fish" is the one in "a goldfish tank"), and a name of five letters or
    # more names what it begins ("Mongo" is MongoDB, "Postgres" PostgreSQL).
    head = r"[a-z]*" if len(term) >= 4 and term.islower() else ""
    rest = rf"{_LATIN_WORD}*" if len(term) >= 5 else ""
    if term.islower() and len(term) > 5 and term.endswith("ing"):
        # "gave up on running" names "runs 5k every morning": a word that begins with the verb's stem ("brunch"
        # holds "run" but does not begin with it)
        stem = term[:-3]
        head, term, rest = "", (stem[:-1] if len(stem) > 3 and stem[-1] == stem[-2] else stem), rf"{_LATIN_WORD}*"
    pattern = rf"(?<!{_LATIN_WORD}){head}{re.escape(term)}{rest}(?!{_LATIN_WORD})"
    return bool(term) and re.search(pattern, value, re.I) is not None


def _replaces(fact: CandidateFact, mem: _Mem) -> bool:
    """Whether the fact says the memory's value is what changed or was wrong (a term of `_replaced_terms` that
    the memory names). The terms are read once per value: `_decide` asks this of every candidate memory."""
    return any(_names(mem.value, term) for term in _replaced_terms(fact.value))


@lru_cache(maxsize=4096)
def _relation(key: str) -> tuple[str | None, str | None]:
    """(which one-at-a-time relation, the person's name) a key is about: `manager:sam.identity` → (boss, sam), a
    writer's `user.manager` or `user.girlfriend` → (boss, None), (partner, None); (None, None) for other keys."""
    subject, _, attr = key.lower().partition(".")
    rel, _, name = subject.partition(":")
    if name:
        return lx.ONE_AT_A_TIME.get(lx.EN_RELATIONS.get(rel, rel)), name
    if subject != "user":
        return None, None
    for token in re.split(r"[._\-]+", attr):
        family = lx.ONE_AT_A_TIME.get(lx.EN_RELATIONS.get(token, token))
        if family:
            return family, None
    return None, None


_WHO_THEY_ARE = frozenset(("identity", "name", "family"))
"""The attributes of a relation's subject that say who the person is to the user (`manager:priya.name`)."""


def _former_holder(fact: CandidateFact, emb: list[float], candidates: list[_Mem]) -> _Mem | None:
    """The memory that named someone else in a relation a person has one of at a time, when a change names a new one
    ("my new manager Sam" retires "User's manager is Priya" or `manager:priya.name`). Only the statement of who held
    the relation: what else is known about that person stays true of them."""
    family, name = _relation(fact.key)
    if family is None or name is None or not fact.supersedes_previous:
        return None
    former = []
    for m in candidates:
        if m.pinned:
            continue
        m_family, m_name = _relation(m.key)
        if m_family != family:
            continue
        if (m_name is None and not _names(m.value, name)) or (m_name not in (None, name) and _holds_relation(m)):
            former.append(m)
    return max(former, key=lambda m: _similarity(fact, emb, m)) if former else None


_USERS = r"(?:\b[Uu]ser(?:'s|’s)|\b[Mm]y|用户的?|我的?|\b[Uu]ser has an?|用户有)"
_STATUS_RES: tuple[tuple[str, str, re.Pattern[str], bool], ...] = (
    # (what the status is of, the status, how a value says it, whether it says it only of the user's own subject)
    ("marital", "divorced", re.compile(r"\bdivorced\b|离婚了|离异|离了婚", re.I), True),
    ("marital", "divorced", re.compile(rf"{_USERS}\s*(?:ex-?(?:wife|husband)|前妻|前夫)", re.I), False),
    (
        "marital",
        "married",
        re.compile(
            # not a wedding ahead or one that was ("getting married", "was married before"), nor a honeymoon planned
            r"(?<!getting )(?<!get )(?<!be )(?<!not )(?<!was )(?<!were )\bmarried\b|\bnewlywed|"
            r"\b(?:back from|after|on|during) (?:the|our|my|a) honeymoon\b|"
            r"已婚|(?<![要想快准备打算])结婚了|结了婚|领了?(?:结婚)?证|领的证|新婚",
            re.I,
        ),
        True,
    ),
    (
        "marital",
        "married",
        re.compile(rf"{_USERS}\s*(?:wife|husband|spouse|老婆|老公|妻子|丈夫)", re.I),
        False,
    ),
    (
        "marital",
        "engaged",
        # not "engaged in", "engaged with" (taking part)
        re.compile(r"\bengaged\b(?! (?:in|with|by)\b)|\bfianc[eé]e?\b|(?<![要想准备打算])订婚|未婚[妻夫]", re.I),
        True,
    ),
    ("marital", "engaged", re.compile(rf"{_USERS}\s*(?:fianc[eé]e?|未婚[妻夫])", re.I), False),
    ("marital", "dating", re.compile(rf"{_USERS}\s*(?:girlfriend|boyfriend|女朋友|男朋友|女友|男友)", re.I), False),
    (
        "marital",
        "single",
        re.compile(r"\b(?:is|am|'m|been|still|currently|now|happily) single\b(?![- ](?:origin|malt|bed))|单身", re.I),
        True,
    ),
    ("diet", "meatless", re.compile(r"\bvegetarian\b|\bvegan\b|\bplant-based\b|吃素|素食|茹素|吃全素", re.I), True),
    (
        "diet",
        "eats meat",
        re.compile(
            r"开荤|(?:开始|又|重新|恢复)吃肉|吃肉了|\beats? meat\b|\b(?:back to|started|start) eating "
            r"(?:meat|chicken|fish|beef|pork|steak)\b",
            re.I,
        ),
        True,
    ),
)
"""The user's marital status and whether they eat meat, as a value says it. Each status follows the one before or
excludes the other, so a new one ends the old."""
_ENDS_STATUS: dict[str, frozenset[str]] = {
    "married": frozenset(("single", "dating", "engaged", "divorced")),
    "engaged": frozenset(("single", "dating", "divorced")),
    "dating": frozenset(("single",)),
    "single": frozenset(("dating", "engaged", "married")),
    "divorced": frozenset(("married",)),
    "meatless": frozenset(("eats meat",)),
    "eats meat": frozenset(("meatless",)),
}
"""Which status a new one ends ("User's wife …" ends "User is single" and "User is engaged to Marco"; being divorced
and dating again are both true)."""


_RELATION_WORDS = "|".join(sorted(map(re.escape, [*lx.EN_RELATIONS, *lx.ZH_RELATIONS]), key=len, reverse=True))
_OTHERS_RE = re.compile(rf"{_USERS}\s*(?:{_RELATION_WORDS})")
"""A value that names someone of the user's ("User's sister is single", "用户儿子吃素"): a status in it may be
theirs."""


def _statuses(value: str, negated: bool, own: bool) -> dict[str, str]:
    """What a value says the user is, by what it is of (the one status of each; none for a denial or where a value
    says two)."""
    if negated:
        return {}
    own = own and not _OTHERS_RE.search(value)
    found: dict[str, set[str]] = {}
    for of, status, pattern, own_only in _STATUS_RES:
        if (own or not own_only) and pattern.search(value):
            found.setdefault(of, set()).add(status)
    return {of: statuses.pop() for of, statuses in found.items() if len(statuses) == 1}


def _ended_status(fact: CandidateFact, candidates: list[_Mem]) -> tuple[_Mem, str] | None:
    """The user's memory, held before this transcript, of a status the fact's ends, and the new status:
    "用户跟用户的老婆…" retires "用户目前单身", a honeymoon "User is engaged to Marco", "…就开荤了" "用户吃素".
    Statuses are read from the words, whichever slot either was filed under."""
    for of, new in _statuses(fact.value, fact.negated, canonical_key(fact.key)[0] == "user").items():
        ended = [
            m for m in candidates
            if not (m.pinned or m.in_batch)
            and canonical_key(m.key)[0] == "user"
            and _statuses(m.value, _mem_negated(m), own=True).get(of) in _ENDS_STATUS[new]
        ]  # fmt: skip
        if len(ended) == 1:
            return ended[0], new
    return None


def _holds_relation(mem: _Mem) -> bool:
    """A memory that says who holds a one-at-a-time relation to the user (`partner:hannah.family`): the user's
    own statement that it ended ("Hannah and I broke up") retires it."""
    family, name = _relation(mem.key)
    return family is not None and name is not None and mem.key.partition(".")[2] in _WHO_THEY_ARE


def _named_source(fact: CandidateFact, candidates: list[_Mem]) -> _Mem | None:
    """The one live, unpinned memory of the fact's subject, under another key, that names what the change moved
    away from. A correction ("cashews, not peanuts") needs no change cue; other terms do."""
    if not fact.supersedes_previous and not _CONTRAST_RE.search(fact.value):
        return None
    subject = canonical_key(fact.key)[0]
    named = [
        m for m in candidates
        if not m.pinned and m.key != fact.key and _replaces(fact, m)
        and (canonical_key(m.key)[0] == subject or subject == "user" and _holds_relation(m))
    ]  # fmt: skip
    return named[0] if len(named) == 1 else None


_CONTRAST_RE = re.compile(r"[,，]\s*not\s|\binstead of\b|\brather than\b|而不是")


_FROM_NOW_ON_RE = re.compile(
    r"\bfrom now on\b|\bgoing forward\b|\bfrom today on\b|\bstarting (?:now|today)\b|"
    r"从现在起|从现在开始|从今天起|从今天开始|从今以后|今后"
)
"""A value said to hold from now on: on a one-value slot, what held until now no longer does."""
_ADDS_RE = re.compile(r"\balso\b|,? too[.!]*$|\bas well\b|\bin addition\b|还要|也要|另外|再加")
"""An addition ("from now on also cite sources"): it joins the old value instead of replacing it."""


def _changes(fact: CandidateFact, mem: _Mem) -> bool:
    """Whether `fact` says `mem`'s value no longer holds: a change cue, or, on a one-value slot, a new value that
    holds from now on ("from now on bullet points and short answers" after "likes long explanations") and does
    not only add to the old one."""
    return fact.supersedes_previous or (
        _single_valued(mem.key) and bool(_FROM_NOW_ON_RE.search(fact.value)) and not _ADDS_RE.search(fact.value)
    )


_NAMES_ITS_SOURCE = re.compile(
    r"\bfrom\b|\binstead of\b|(?<!自)从(?![来小前不没未此今现头])|(?<![自理经缘来])由[^，,。]{1,12}?(?:改|换|变|转)"
)
"""A change that says what it changed from ("switched from Polars to DuckDB") retires that value only. 从 in 自从
(since), 从来, 从小, 从前, 从不, 从此, 从今, 从现在, 从头 names no old value."""


_OLD_SOURCE_RE = re.compile(
    r"\bfrom (?:the user's|my|our|the|his|her|their|\w+'s) (?:old|previous|former|last|current)\b"
    r"|(?:从|由)(?:之前|以前|原来|原先|旧)的?",
    re.I,
)
"""A change that says what it changed from only by calling it old ("moved from our old host to X", "从原来的方案换成…")
points at the value held, and names no other one."""


_ONE_MORE_RE = re.compile(
    r"\b(?:adopted|rescued|took in|brought home|taken in|took up|taken up)\s+"
    r"(?:a|an|another|a second|a third|one more)\b"
    r"|(?:领养|收养|捡|抱回)了?(?:一|两|只|条)|又(?:领养|收养|养|捡|抱回)了?",
    re.I,
)
"""One more of something taken in or taken up ("adopted a kitten", "又领养了一只猫", "took up a second instrument"):
it joins a many-valued slot's value (the dog, the old hobby) and does not replace it, whatever a classifier reads
as changed. Only with an article or "another": "took up pottery" is not matched and may still replace the only
hobby. The deeper fix is the change classifier's: it reads an adoption as a change."""


def _same_key_decision(
    fact: CandidateFact, emb: list[float], mem: _Mem, threshold: float, *, sole: bool = False
) -> MemoryOp:
    """`sole`: `mem` is the only live memory of its slot, so a change that names no old value ("现在改成爬山")
    can only be a change from it."""
    sim = _similarity(fact, emb, mem)
    flipped = fact.negated != _mem_negated(mem)
    num_clash = numbers_conflict(mem.value, fact.value)
    same_numbers = extract_numbers(mem.value) == extract_numbers(fact.value)
    old_core, new_core = _core(mem.value), _core(fact.value)
    new_has_old = bool(old_core) and old_core in new_core
    old_has_new = bool(new_core) and new_core in old_core
    changes = _changes(fact, mem)

    if (fact.supersedes_previous or _CONTRAST_RE.search(fact.value)) and _replaces(fact, mem) and not mem.pinned:
        # "keto didn't stick, I'm eating mediterranean now", "it's cashews I'm allergic to, not peanuts": the value
        # says the memory's value is what changed or was wrong, whatever else the two share.
        return _supersede(fact, emb, mem, f"same key {mem.key}: names its value as what changed or was wrong")
    if not flipped and not num_clash:
        # A change or a correction that repeats the old value says what it was ("对X过敏的是我妹妹" after "对X过敏"):
        # it is weighed as a change below, never merged into or refreshing the memory for containing its words.
        contained = not fact.supersedes_previous
        if contained and new_has_old and len(new_core) > len(old_core) + 3:
            return MemoryOp(
                action="merge",
                fact=fact,
                embedding=emb,
                target_id=mem.id,
                merged_value=fact.value,
                reason=f"same key {mem.key}: new value contains the old one and adds detail",
            )
        if same_numbers and (sim >= threshold or (contained and (old_has_new or new_has_old))):
            return MemoryOp(
                action="refresh",
                fact=fact,
                embedding=emb,
                target_id=mem.id,
                reason=f"same key {mem.key}, same polarity and numbers, similar text ({sim:.2f})",
            )
        old_sal, new_sal = _salient(mem.value), _salient(fact.value)
        fresh = {w for w in new_sal if not _shares_salient({w}, old_sal)}
        if not fact.supersedes_previous and not fresh and same_numbers and _overlap(fact.value, mem.value) >= 0.6:
            # Mostly repeats the memory and names nothing new: a confirmation, not a second copy.
            return MemoryOp(
                action="refresh",
                fact=fact,
                embedding=emb,
                target_id=mem.id,
                reason=f"same key {mem.key}: restates it without new specifics",
            )
        single = _single_valued(mem.key)
        dropped = {w for w in old_sal if not _shares_salient({w}, new_sal)}
        # One value at a time, and the new value names something else instead of the old specifics
        # ("editor is Vim" -> "editor is Emacs", "a backend engineer" -> "the engineering manager"): shared
        # template words do not make it a refinement.
        replaced = single and bool(fresh) and bool(dropped)
        slot = key_slot(mem.key)
        if single and not replaced and slot is not None and slot.named_value:
            old_spec, new_spec = _specifics(mem.value, mem.key), _specifics(fact.value, fact.key)
            fresh_spec = {w for w in new_spec if not _shares_salient({w}, old_spec)}
            replaced = bool(fresh_spec) and any(not _shares_salient({w}, new_spec) for w in old_spec)
        related = (
            _overlap(mem.value, fact.value) >= REFINEMENT_OVERLAP
            or _shares_salient(old_sal, new_sal)
            or (sim >= threshold and not same_numbers)
            or not fresh  # names nothing that could contradict the memory
        )
        merged = _merge_text(mem.value, fact.value)
        # On a many-valued attribute, naming nothing contradictory is no sign of a refinement: only shared words do.
        shares = _overlap(mem.value, fact.value) >= REFINEMENT_OVERLAP or _shares_salient(old_sal, new_sal)
        if not single and not fact.supersedes_previous and (not shares or len(merged) > MAX_MERGED_CHARS):
            # Another value of a many-valued attribute ("hobby: painting", then "hobby: hiking"): its own memory,
            # so each stays short, is found by its own words and can be forgotten on its own.
            return MemoryOp(
                action="insert",
                fact=fact,
                embedding=emb,
                new_id=uuid.uuid4(),
                reason=f"same key {mem.key}: another value of a many-valued attribute, kept as its own memory",
            )
        implicit = (
            sole
            and (not _NAMES_ITS_SOURCE.search(fact.value) or bool(_OLD_SOURCE_RE.search(fact.value)))
            and not _ONE_MORE_RE.search(fact.value)
        )
        if (
            not single
            and fact.supersedes_previous
            and (implicit or _shares_salient(old_sal, new_sal))
            and not mem.pinned
        ):
            # "switched from Polars to DuckDB" beside "prefers Polars": a change that names the old value retires
            # it, on a many-valued slot too; the other values of the slot stay. A change that names none ("now
            # I swim instead") retires the slot's value only when there is one.
            return _supersede(
                fact,
                emb,
                mem,
                f"same slot as {mem.key}, change-of-state cue naming its value or replacing its only value",
            )
        refines = not replaced and (related or not single)
        # A change that names what it moved from, where that is not the memory's value but the two share a name
        # ("从零售部门转岗到京东物流" beside "在京东工作", "moved from Shoreditch to Camden, still in London"), happened
        # inside what the memory says: the memory still holds, and the change refines it.
        inside = (
            single
            and bool(_replaced_terms(fact.value))
            and not _OLD_SOURCE_RE.search(fact.value)
            and _shares_salient(old_sal, new_sal)
        )
        # A change cue retires a single-valued memory
        # ("moved to Lyon"); on a many-valued one ("绿茶早就不喝了"
        # next to a tea habit) it only refines.
        if refines and (not changes or not single or inside):
            # Refinement: repeats what is known and adds detail (numbers only added, never changed).
            return MemoryOp(
                action="merge",
                fact=fact,
                embedding=emb,
                target_id=mem.id,
                merged_value=merged,
                reason=f"same key {mem.key}: refinement without contradicting polarity or numbers",
            )

    what = "opposite polarity" if flipped else "different numbers" if num_clash else "different value"
    # An explicit ("remember: …") or corrected ("turns out I'm not allergic after all", "其实不过敏") statement of the
    # user's own that flips the memory retires it: it was never so.
    strong = (
        flipped
        and fact.source in (Source.user, Source.manual)
        and (fact.confidence >= STRONG_CONTRADICTION_CONFIDENCE or CORRECTION_RE.search(fact.value) is not None)
    )
    if (changes or strong) and not mem.pinned:
        cue = "strong explicit contradiction"
        if changes:
            cue = "change-of-state cue" if fact.supersedes_previous else "holds from now on"
        return _supersede(fact, emb, mem, f"same key {mem.key}, {what}, {cue}")
    pinned_note = " (old memory is pinned, never superseded automatically)" if mem.pinned else ""
    return MemoryOp(
        action="conflict",
        fact=fact,
        embedding=emb,
        new_id=uuid.uuid4(),
        target_id=mem.id,
        new_confidence=round(mem.confidence * CONFLICT_DECAY, 4),
        reason=f"same key {mem.key}, {what}: both kept, old confidence lowered{pinned_note}",
    )


def _apply(op: MemoryOp, pool: list[_Mem]) -> None:
    """Let later candidates of the batch see this decision."""
    by_id = {m.id: m for m in pool}
    target = by_id.get(op.target_id) if op.target_id else None
    if op.new_id is not None:
        fact = op.fact
        pool.append(
            _Mem(
                op.new_id,
                fact.key,
                fact.value,
                fact.negated,
                fact.state,
                False,
                fact.confidence,
                op.embedding,
                tuple(fact.also_slots),
                in_batch=True,
            )
        )
    if target is None:
        return
    if op.action == "supersede":
        target.state = MemoryState.archived
    elif op.action == "conflict" and op.new_confidence is not None:
        target.confidence = op.new_confidence
    elif op.action == "merge" and op.merged_value is not None:
        target.value = op.merged_value
        target.embedding = op.embedding
    elif op.action == "refresh":
        target.confidence = max(target.confidence, op.fact.confidence)
