"""The write path's steps as a build run's stages (ingest/decide.py, ingest/stages/, ingest/construct.py,
ingest/commit.py): routing before any embedding, increments through the same stages, batching across
conversations, the commit's re-check under the write lock (and deciding again), the memo and the
record/node embedder, and the Ray job's embedding stages on a GPU resource (a logical GPU here: no
CUDA device on this machine)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np

from lychee_ray.ingest import commit as commit_step
from lychee_ray.ingest.commit import Committer
from lychee_ray.ingest.construct import Constructor
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.decide import Decider
from lychee_ray.ingest.pipeline import build_conversation
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.ingest.stages.embedding import embed_memory, embed_turns, turn_texts
from lychee_ray.ingest.stages.work import from_row
from lychee_ray.config import EmbeddingConfig, load_config
from lychee_ray.embed import get_embedder
from lychee_ray.embed.memo import MemoEmbedder
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreReader, StoreWriter, iter_markers, read_part
from lychee_ray.testing.synthetic import synthetic_conversation
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})


class CountingEmbedder(HashEmbedder):
    """The hashing embedder, counting its calls and texts."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        return super().encode(texts)


def items(n: int, seed: int = 5, start: int = 0) -> list[AdapterItem]:
    return [AdapterItem(file="mem", line=i, conversation=synthetic_conversation(i, seed=seed, sessions=1,
                                                                                   topics_per_session=2))
            for i in range(start, start + n)]


def stages(tmp_path: Path, embedder=None, run_id: str = "run-1"):
    ctx = make_context(CFG, "rules", embedder or HashEmbedder())
    subjects = HashEmbedder()

    async def embed_subjects(texts):  # the construct step's own calls (stated values' subjects), counted apart
        return subjects.encode(list(texts))

    ctx.embed_subjects = embed_subjects
    writer = StoreWriter(tmp_path / "st", CFG.store)
    decider = Decider(writer, run_id, ctx.fingerprint, CFG.segmenter.max_turn_chars)
    return ctx, writer, decider, Constructor(ctx, writer, 4), Committer(writer)


def run_works(ctx, constructor, committer, works):
    async def go():
        await embed_turns(works, ctx.embed, ctx.embed_dim, CFG.segmenter.max_turn_chars)
        await constructor.run(works)
        await embed_memory(works, ctx.memory_embed, ctx.embed_dim)
        return await committer.run(works)

    return asyncio.run(go())


def test_decide_routes_before_any_embedding(tmp_path):
    emb = CountingEmbedder()
    ctx, writer, decider, constructor, committer = stages(tmp_path, emb)
    first = [decider.decide(i) for i in items(3)]
    assert [w.route for w in first] == ["build"] * 3 and not any(w.done for w in first) and emb.calls == []
    outs = run_works(ctx, constructor, committer, first)
    assert [o.status for o in outs] == ["built"] * 3
    # a new run: unchanged → skipped; more turns → increment (only the new turn embedded); other config → build
    decider2 = Decider(writer, "run-2", ctx.fingerprint, CFG.segmenter.max_turn_chars)
    convs = [i.conversation for i in items(3)]
    longer = convs[1].model_copy(deep=True)
    longer.sessions[-1].turns.append(longer.sessions[-1].turns[0].model_copy(update={"turn_id": "new-1"}))
    w_same = decider2.decide(AdapterItem(file="mem", line=0, conversation=convs[0]))
    w_more = decider2.decide(AdapterItem(file="mem", line=1, conversation=longer))
    assert w_same.done and w_same.outcome.status == "skipped"
    assert not w_more.done and w_more.route == "increment" and w_more.first_turn == convs[1].num_turns
    assert turn_texts(w_more, CFG.segmenter.max_turn_chars) == [longer.sessions[-1].turns[-1].content]
    other = Decider(writer, "run-3", "another-fingerprint", CFG.segmenter.max_turn_chars)
    assert other.decide(AdapterItem(file="mem", line=2, conversation=convs[2])).route == "build"
    # a duplicate id in one run is skipped with a warning naming both lines; unreadable inputs are quarantined
    dup = decider2.decide(AdapterItem(file="other", line=9, conversation=convs[0]))
    assert dup.done and dup.outcome.status == "duplicate" and "duplicate" in dup.outcome.message
    assert "other:9" in dup.outcome.warnings[0] and "mem:0" in dup.outcome.warnings[0]
    bad = decider2.decide(AdapterItem(file="in.jsonl", line=3, conversation=None))
    assert bad.done and bad.outcome.status == "failed" and bad.outcome.stage == "input"
    assert len(emb.calls) == 2  # the first run's two model calls (turns, records and nodes); deciding embeds nothing


def test_embedding_stages_batch_across_conversations(tmp_path):
    emb = CountingEmbedder()
    ctx, _writer, decider, constructor, committer = stages(tmp_path, emb)
    works = [decider.decide(i) for i in items(4)]
    texts = [turn_texts(w, CFG.segmenter.max_turn_chars) for w in works]
    outs = run_works(ctx, constructor, committer, works)
    assert [o.status for o in outs] == ["built"] * 4
    # one model call for the turns of all four, one for their records and nodes
    assert len(emb.calls) == 2 and emb.calls[0] == sum(len(t) for t in texts)
    # each conversation's vectors are its own texts' (split back in order)
    r = StoreReader(tmp_path / "st")
    for w, t in zip(works, texts):
        got = r.load(w.conversation_id).table_vectors("turns")
        assert np.allclose(got.vectors, HashEmbedder().encode(t)[got.rows])


def test_commit_rechecks_the_marker_under_the_lock_and_the_conversation_is_decided_again(tmp_path):
    """Another writer commits the conversation between the decision and the commit: the work is not
    committed over it but goes back to the decide step, which routes it again from the new commit
    (an increment of the turns the other writer did not store); a run does that by itself."""
    ctx, writer, decider, constructor, committer = stages(tmp_path)
    (item,) = items(1)
    conv = item.conversation
    work = decider.decide(item)
    assert work.route == "build" and work.marker is None

    def short():
        return conv.model_copy(update={"sessions": [conv.sessions[0].model_copy(
            update={"turns": conv.sessions[0].turns[:4]})]})

    async def build_then_race():
        await embed_turns([work], ctx.embed, ctx.embed_dim, CFG.segmenter.max_turn_chars)
        await constructor.run([work])
        await embed_memory([work], ctx.memory_embed, ctx.embed_dim)
        # meanwhile: a shorter history of the same conversation is committed by another build
        await asyncio.to_thread(run_local_build_items, CFG, [AdapterItem(file="other", line=1, conversation=short())],
                                tmp_path / "st", backend="rules", ctx=make_context(CFG, "rules", HashEmbedder()))
        return await committer.run([work])

    (o,) = asyncio.run(build_then_race())
    assert o is None and work.again and work.pending is None  # nothing committed: decided again
    (m,) = list(iter_markers(tmp_path / "st"))
    assert m.counts.turns == 4
    again = decider.decide(work.item)
    assert again.route == "increment" and again.first_turn == 4 and again.marker == m
    (o,) = run_works(ctx, constructor, committer, [again])
    # the other writer's 4 turns kept, the rest appended: nothing lost, nothing doubled
    assert o.status == "built" and o.appended
    (m,) = list(iter_markers(tmp_path / "st"))
    assert m.counts.turns == conv.num_turns
    assert StoreReader(tmp_path / "st").load(conv.conversation_id).turns.num_rows == conv.num_turns


def test_a_run_decides_again_what_another_writer_committed_meanwhile_and_gives_up_after_its_rounds(tmp_path,
                                                                                                    monkeypatch):
    """The local runner sends a conversation committed by another writer after its decision through
    the stages again; one committed again after each of its ``build.decide_rounds`` decisions fails
    at stage ``commit`` with nothing of the run's work written."""
    (item,) = items(1)
    conv = item.conversation
    short = conv.model_copy(update={"sessions": [conv.sessions[0].model_copy(
        update={"turns": conv.sessions[0].turns[:4]})]})
    ctx = make_context(CFG, "rules", HashEmbedder())
    real = Committer.one
    raced: list[int] = []

    async def racing_one(self, work, times):
        if len(raced) < times and work.pending is not None:  # another writer commits first, each time
            raced.append(1)
            n = 4 + len(raced)
            grown = conv.model_copy(update={"sessions": [conv.sessions[0].model_copy(
                update={"turns": conv.sessions[0].turns[:n]})]})
            other = StoreWriter(tmp_path / "st", CFG.store)
            art = await build_conversation(grown, ctx)
            await asyncio.to_thread(other.commit, art, based_on=other.commit_marker(conv.conversation_id))
        return await real(self, work)

    run_local_build_items(CFG, [AdapterItem(file="other", line=1, conversation=short)], tmp_path / "st", backend="rules",
                          ctx=ctx)
    monkeypatch.setattr(Committer, "one", lambda self, work: racing_one(self, work, 1))
    s = run_local_build_items(CFG, [item], tmp_path / "st", backend="rules", ctx=ctx)
    assert (s.built, s.appended, s.failed) == (1, 1, 0) and raced == [1]
    assert list(iter_markers(tmp_path / "st"))[0].counts.turns == conv.num_turns
    raced.clear()
    longer = conv.model_copy(deep=True)
    longer.sessions[-1].turns.append(longer.sessions[-1].turns[0].model_copy(update={"turn_id": "new-1"}))
    monkeypatch.setattr(Committer, "one", lambda self, work: racing_one(self, work, 10))
    s = run_local_build_items(CFG, [AdapterItem(file="mem", line=0, conversation=longer)], tmp_path / "st",
                              backend="rules", ctx=ctx)
    assert (s.built, s.failed) == (0, 1) and len(raced) == CFG.build.decide_rounds
    assert s.errors[0]["stage"] == "commit" and "another writer" in s.errors[0]["message"]
    assert "new-1" not in tables_turn_ids(tmp_path / "st", conv.conversation_id)


def tables_turn_ids(root, cid):
    return StoreReader(root).load(cid).turns.column("turn_id").to_pylist()


def test_commit_stage_is_fenced_on_the_lineage_it_read(tmp_path, monkeypatch):
    """The writer's fence (issue 39) backs the re-check: were the re-check wrong, a staged build of a
    conversation the decision found new is still refused once another writer has created it."""
    ctx, writer, decider, constructor, committer = stages(tmp_path)
    (item,) = items(1)
    work = decider.decide(item)
    assert work.route == "build" and work.marker is None

    async def build_then_recreate():
        await embed_turns([work], ctx.embed, ctx.embed_dim, CFG.segmenter.max_turn_chars)
        await constructor.run([work])
        await embed_memory([work], ctx.memory_embed, ctx.embed_dim)
        await asyncio.to_thread(run_local_build_items, CFG, [AdapterItem(file="other", line=1, conversation=item.conversation)],
                                tmp_path / "st", backend="rules", ctx=make_context(CFG, "rules", HashEmbedder()))
        return await committer.run([work])

    monkeypatch.setattr(commit_step, "still_decided", lambda decided_on, current: True)  # the re-check disabled
    before = writer.commit_marker(item.conversation.conversation_id)
    (o,) = asyncio.run(build_then_recreate())
    after = writer.commit_marker(item.conversation.conversation_id)
    assert o.status == "failed" and o.stage == "commit" and "ConversationReplaced" in (o.message or "")
    # the other writer's commit stands: nothing of the refused build was committed over it
    assert before is None and after is not None and [m.generation for m in iter_markers(tmp_path / "st")] == [after.generation]


def test_work_travels_as_one_row(tmp_path):
    ctx, _w, decider, constructor, _c = stages(tmp_path)
    (w,) = [decider.decide(i) for i in items(1)]
    asyncio.run(embed_turns([w], ctx.embed, ctx.embed_dim, CFG.segmenter.max_turn_chars))
    asyncio.run(constructor.run([w]))
    back = from_row(w.to_row())
    assert back.conversation_id == w.conversation_id and back.pending is not None
    assert back.pending.plan.texts == w.pending.plan.texts


def test_memo_returns_the_same_vectors_and_embeds_each_text_once():
    emb = CountingEmbedder()
    memo = MemoEmbedder(emb, max_texts=3)
    a = memo.encode(["x y", "y z", "x y"])
    b = memo.encode(["y z", "q r", "x y"])
    assert np.array_equal(a[0], b[2]) and np.array_equal(a[1], b[0])
    assert emb.calls == [2, 1] and (memo.hits, memo.misses) == (2, 3)
    memo.encode(["a b", "c d"])  # the oldest texts leave the memo (3 at most)
    assert len(memo._kept) == 3


def test_record_embedder_is_int8_and_independent_of_its_batch(embedder):
    """Record and node vectors come from the int8 query model one text per run: a text's vector
    never depends on the texts around it, and stays close to fp32 (the stated tolerance)."""
    cfg = EmbeddingConfig()
    memory = get_embedder(cfg, memory=True)
    assert getattr(memory, "runtime", "") == "onnx-int8"
    texts = ["Caroline went to a LGBTQ support group on 7 May 2023.", "painting", "Melanie ran a charity race.",
             "Melanie said: Love that painting! So cool Caroline found such a helpful group."]
    alone = np.stack([memory.encode([t])[0] for t in texts])
    together = memory.encode(texts)
    assert np.array_equal(alone, together)
    fp32 = embedder.encode(texts)
    assert float((together * fp32).sum(axis=1).min()) >= 0.95
    none = get_embedder(cfg.model_copy(update={"memory_quantization": "none"}), memory=True)
    assert np.allclose(none.encode(texts), fp32, atol=1e-5)


def test_embedding_stages_on_a_gpu_resource(ray_session, tmp_path):
    """Embedding stages given ``num_gpus`` are placed on GPU resources; without a CUDA device
    (the session's Ray offers one logical GPU: tests/conftest.py) they embed on the CPU, say so, and
    the build equals the CPU build."""
    from lychee_ray.ray.build_job import run_ray_build

    assert ray_session.cluster_resources().get("GPU") == 1
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(i.conversation.model_dump_json() for i in items(3)) + "\n")
    cfg = load_config(env={}, sets=["ray.stages.embed_turns.num_gpus=0.5", "ray.stages.embed_memory.num_gpus=0.5",
                                    "build.compact_conversations_per_file=0"])
    s = run_ray_build(cfg, "jsonl", src, tmp_path / "gpu", backend="rules", progress=False)
    assert (s.built, s.failed) == (3, 0)
    devices = json.loads((tmp_path / "gpu" / "manifest.json").read_text())["embedding_devices"]
    for stage in ("embed_turns", "embed_memory"):
        (info,) = devices[stage]
        assert info["gpu_ids"], info  # Ray gave the actor the GPU resource
        assert info["device"].startswith("cpu") and "no CUDA device" in info["device"]
    local = run_local_build_items(CFG, items(3), tmp_path / "cpu", backend="rules")
    assert local.built == 3
    ids = {m.conversation_id: m.counts.records for m in iter_markers(tmp_path / "gpu")}
    assert ids == {m.conversation_id: m.counts.records for m in iter_markers(tmp_path / "cpu")}


def test_a_stored_commit_that_cannot_be_read_fails_the_conversation_at_decide(tmp_path, monkeypatch):
    """The decision reads the stored turns of a conversation whose input differs; when they cannot be
    read (a damaged part, not a commit replaced meanwhile), that conversation is quarantined at stage
    ``decide`` and the others go on."""
    from lychee_ray.ingest import decide as decide_step

    ctx, writer, decider, constructor, committer = stages(tmp_path)
    run_works(ctx, constructor, committer, [decider.decide(i) for i in items(2)])
    convs = [i.conversation for i in items(2)]
    longer = [c.model_copy(deep=True) for c in convs]
    for c in longer:
        c.sessions[-1].turns.append(c.sessions[-1].turns[0].model_copy(update={"turn_id": "new-1"}))

    def damaged(root, table, marker, columns=None):
        if marker.conversation_id == convs[0].conversation_id:
            raise ValueError("Parquet magic bytes not found")
        return read_part(root, table, marker, columns)

    monkeypatch.setattr(decide_step, "read_part", damaged)
    again = Decider(writer, "run-2", ctx.fingerprint, CFG.segmenter.max_turn_chars)
    bad, good = (again.decide(AdapterItem(file="mem", line=i, conversation=c)) for i, c in enumerate(longer))
    assert bad.done and bad.outcome.status == "failed" and bad.outcome.stage == "decide"
    assert "magic bytes" in bad.outcome.message
    assert not good.done and good.route == "increment"
