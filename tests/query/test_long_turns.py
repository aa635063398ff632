"""Long turns are searchable in full (docs/data-format.md, "Long turns"): the raw-turn channels index
the passages of a turn longer than one passage, and a hit shows that passage with its turn's id.

Generated here: a 3 MB tool result whose first line names a reservation, and a user turn with a
marker after 50,000 characters (the segmenter and encoder see only ``segmenter.max_turn_chars``
of it). The embedder is the tests' bag-of-words hash of a text's first 64 words, so a turn's own
vector is blind past its start, as MiniLM's is past its window.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreReader, StoreWriter
from lychee_ray.io.verify import verify_store
from lychee_ray.memory import MemoryStore
from lychee_ray.query.view import ConversationView
from tests.query.test_view_extend import assert_same_view
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})
WORDS = "alpha beta gamma delta epsilon zeta theta iota kappa lambda sigma omega river stone cloud".split()
MARKER = "The secret code word is xylophonequartz, remember it."
FIRST_LINE = "reservation ZQ81KX confirmed for passenger Okonkwo on flight HAT027"


def filler(seed: int, n_chars: int) -> str:
    """Lines of common words (none of the words the questions ask about), ``n_chars`` or a few more."""
    rnd = random.Random(seed)
    line = " ".join(rnd.choice(WORDS) for _ in range(12)) + "."
    lines = [" ".join(rnd.choice(WORDS) for _ in range(12)) + "." for _ in range(200)]
    out, size = [], 0
    while size < n_chars:
        line = lines[len(out) % len(lines)]
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def long_conversation(cid: str = "c-long") -> Conversation:
    tool_out = FIRST_LINE + "\n" + filler(1, 3_000_000)
    long_user = filler(2, 50_500) + "\n" + MARKER + "\n" + filler(3, 2_000)
    return Conversation.model_validate({"conversation_id": cid, "user_id": "u-long", "sessions": [
        {"session_id": "s1", "started_at": "2024-03-01T10:00:00", "turns": [
            {"turn_id": "t1", "role": "user", "content": "Hi, can you check my booking please?"},
            {"turn_id": "t2", "role": "assistant", "content": "Sure, looking it up.",
             "tool_calls": [{"call_id": "c1", "name": "get_reservation", "arguments": "{\"id\": \"ZQ81KX\"}"}]},
            {"turn_id": "t3", "role": "tool", "tool_call_id": "c1", "tool_name": "get_reservation", "content": tool_out},
            {"turn_id": "t4", "role": "user", "content": long_user},
            {"turn_id": "t5", "role": "assistant", "content": "Thanks, noted."},
        ]}]})


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("long_turns")
    conv = long_conversation()
    s = run_local_build_items(CFG, [AdapterItem(file="mem", line=1, conversation=conv)], root, backend="rules",
                              ctx=make_context(CFG, "rules", HashEmbedder()))
    assert s.built == 1, s.errors
    return root


@pytest.fixture(scope="module")
def store(built):
    s = MemoryStore.open(built, CFG, embedder=HashEmbedder(), llm="rules")
    yield s
    s.close()


@pytest.mark.heavy
def test_the_first_line_of_a_3_mb_tool_turn_is_found(store):
    res = store.search("c-long", "Which passenger is on reservation ZQ81KX?", budget_tokens=1500)
    assert "Okonkwo" in res.context and res.usage.context_tokens <= 1500
    hit = next(e for e in res.evidence if "Okonkwo" in e.text)
    assert hit.kind == "passage" and hit.id == "t3#p1" and hit.source_turn_ids == ["t3"]
    assert hit.passage is not None and hit.passage.index == 1 and hit.passage.char_start == 0
    assert hit.session_date and hit.session_date.startswith("2024-03-01")
    assert hit.tokens <= 1500 and len(hit.text) < 5000, "the passage, not the 3 MB turn"


@pytest.mark.heavy
def test_a_marker_after_50000_characters_of_a_user_turn_is_found(store):
    res = store.search("c-long", "What is the secret code word?", budget_tokens=1500)
    assert "xylophonequartz" in res.context
    hit = next(e for e in res.evidence if "xylophonequartz" in e.text)
    assert hit.kind == "passage" and "t4" in hit.source_turn_ids and hit.id.startswith("t4#p")
    at = next(t for *_, t in long_conversation().iter_turns() if t.turn_id == "t4").text.index(MARKER)
    assert at > 50_000
    assert hit.passage is not None and hit.passage.char_start <= at < hit.passage.char_end
    assert hit.passage.count > hit.passage.index > 1
    assert "(part " in res.context  # the context line says it is a part of a longer turn


def test_passages_are_stored_verified_and_a_cap_is_reported(built):
    reader = StoreReader(built)
    data = reader.load("c-long")
    pas = data.tables["passages"]
    by_turn = pas.group_by("turn_id").aggregate([("passage_id", "count")]).to_pydict()
    counts = dict(zip(by_turn["turn_id"], by_turn["passage_id_count"], strict=False))
    assert set(counts) == {"t3", "t4"}, "short turns stay one passage: no rows"
    assert data.indexes["passages"].ntotal == pas.num_rows
    assert max(pas.column("tokens").to_pylist()) <= CFG.passages.max_tokens
    # the 3 MB turn is cut into passages up to passages.max_turn_chars, and the build says so
    t3_end = max(e for t, e in zip(pas.column("turn_id").to_pylist(), pas.column("char_end").to_pylist(), strict=False)
                 if t == "t3")
    assert t3_end <= CFG.passages.max_turn_chars
    warnings = [r["message"] for r in reader.errors().to_pylist() if r["stage"] == "warning"]
    assert any("passages.max_turn_chars" in w and "t3" in w for w in warnings)
    assert not any("passages.max_turn_chars" in w and "t4" in w for w in warnings)
    assert verify_store(built)["ok"]


@pytest.mark.parametrize("queue", [False, True])
def test_an_append_of_a_long_turn_makes_its_passages_searchable(tmp_path, queue):
    StoreWriter(tmp_path)  # an empty store
    store = MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules")
    try:
        first = [{"turn_id": f"a{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"Short message {i} about the trip."}
                 for i in range(6)]
        store.append("c-app", first, user_id="u-app")
        before = store.search("c-app", "What is the secret code word?", budget_tokens=1500)
        assert "xylophonequartz" not in before.context  # (the view is loaded: the append extends or reloads it)
        long_turn = {"turn_id": "a6", "role": "user", "content": filler(4, 20_000) + "\n" + MARKER + "\n" + filler(5, 500)}
        extended = store.cache.extended
        store.append("c-app", [long_turn], queue=queue)
        res = store.search("c-app", "What is the secret code word?", budget_tokens=1500)
        if queue:  # a delta of turns and passages: the cached view is extended, and equals one built whole
            assert store.cache.extended == extended + 1
            fresh = MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules")
            view = store.view("c-app")
            assert_same_view(view, ConversationView.from_data(fresh.reader.load("c-app"), committed_at=view.committed_at))
            assert view.num_passages > 1
            fresh.close()
        assert "xylophonequartz" in res.context
        hit = next(e for e in res.evidence if "xylophonequartz" in e.text)
        assert hit.kind == "passage" and "a6" in hit.source_turn_ids and hit.id.startswith("a6#p")
        assert verify_store(tmp_path)["ok"]
    finally:
        store.close()
