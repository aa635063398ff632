import numpy as np
import pytest

from lychee_ray.embed.base import dedup_texts as _dedup


def test_dedup_keeps_order_and_inverse():
    uniq, inv = _dedup(["a", "b", "a", "c", "b"])
    assert uniq == ["a", "b", "c"]
    assert [uniq[i] for i in inv] == ["a", "b", "a", "c", "b"]


def test_local_minilm_offline(embedder):
    texts = ["I adopted a dog last week.", "My new puppy is a golden retriever.", "The stock market fell today.", "I adopted a dog last week."]
    before = embedder.texts_embedded
    m = embedder.encode(texts)
    assert m.shape == (4, 384) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert embedder.texts_embedded - before == 3  # the repeated text is embedded once
    assert np.allclose(m[0], m[3])
    assert m[0] @ m[1] > m[0] @ m[2]
    assert embedder.encode([]).shape == (0, 384)


def test_async_batch_embedder_coalesces_and_never_strands_requests():
    import asyncio
    import threading
    import time

    from lychee_ray.embed import AsyncBatchEmbedder

    class Slow:
        name, dim = "slow", 4

        def __init__(self):
            self.calls = 0

        def encode(self, texts):
            self.calls += 1
            time.sleep(0.05)  # requests keep arriving while the model runs
            return np.tile(np.array([1, 0, 0, 0], dtype=np.float32), (len(texts), 1)) * np.arange(1, len(texts) + 1)[:, None]

    slow = Slow()
    b = AsyncBatchEmbedder(slow, wait_ms=5, max_texts=6)
    threads_before = set(threading.enumerate())

    async def main():
        async def one(i):
            await asyncio.sleep(0.01 * (i % 7))
            return await b.embed([f"t{i}-a", f"t{i}-b"])

        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(40))), timeout=10)

    out = asyncio.run(main())
    assert len(out) == 40 and all(o.shape == (2, 4) for o in out)
    assert slow.calls < 40  # coalesced
    # the model ran in worker threads that ended with the event loop: none left behind
    leaked = [t for t in threading.enumerate() if t not in threads_before]
    assert leaked == [], leaked


@pytest.mark.heavy
def test_onnx_runtime_matches_torch_and_falls_back(embedder, tmp_path, monkeypatch):
    """The default ONNX runtime gives the torch model's vectors (stores are interchangeable); a model it
    cannot export, or a failed export, keeps torch instead of failing the job."""
    from lychee_ray.embed import onnx as onnx_embed
    from lychee_ray.config import EmbeddingConfig
    from lychee_ray.embed.local import LocalEmbedder

    assert embedder.runtime == "onnx"
    torch_emb = LocalEmbedder(EmbeddingConfig(runtime="torch"))
    texts = ["When did Caroline go to the support group?", "x", "", "a long turn about painting " * 120, "x"]
    a, b = embedder.encode(texts), torch_emb.encode(texts)
    assert a.shape == b.shape == (5, torch_emb.dim)
    assert float(np.abs(a - b).max()) < 1e-5
    assert np.allclose(np.linalg.norm(a[[0, 1, 3]], axis=1), 1.0, atol=1e-5)

    monkeypatch.setattr(onnx_embed, "unsupported_reason", lambda model: "test: unsupported pipeline")
    assert LocalEmbedder(EmbeddingConfig(onnx_cache_dir=str(tmp_path))).runtime == "torch"
    monkeypatch.undo()

    def broken_export(*a, **k):
        raise RuntimeError("test: exporter crashed")

    monkeypatch.setattr(onnx_embed, "_export", broken_export)
    e = LocalEmbedder(EmbeddingConfig(onnx_cache_dir=str(tmp_path / "fresh")))
    assert e.runtime == "torch" and not list((tmp_path / "fresh").glob("*.onnx"))
    assert float(np.abs(e.encode(texts[:1]) - b[:1]).max()) < 1e-6


@pytest.mark.heavy
def test_int8_query_embedder_ranks_like_fp32_and_falls_back(embedder, tmp_path, monkeypatch):
    """Query embeddings run the per-channel int8 copy (the build's stay fp32): vectors within cosine
    0.98 of fp32 and the same nearest memory; a failed quantization keeps fp32 ONNX, not torch."""
    import shutil

    from lychee_ray.embed import onnx as onnx_embed
    from lychee_ray.config import EmbeddingConfig
    from lychee_ray.embed import get_embedder
    from lychee_ray.embed.local import LocalEmbedder

    q8 = get_embedder(EmbeddingConfig(), queries=True)
    assert q8.runtime == "onnx-int8" and embedder.runtime == "onnx"
    assert get_embedder(EmbeddingConfig(query_quantization="none"), queries=True).runtime == "onnx"
    assert get_embedder(EmbeddingConfig(runtime="torch"), queries=True).runtime == "torch"
    memories = ["Caroline went to the LGBTQ support group on 7 May 2023.", "Melanie painted a sunset by the lake.",
                "Jon lost his job as a banker in January.", "Deborah listens to classical music during yoga.",
                "Gina opened an online clothing store.", "The stock market fell today."]
    questions = ["When did Caroline go to the support group?", "What did Melanie paint?",
                 "When did Jon lose his banking job?", "What music does Deborah play while doing yoga?",
                 "What kind of store did Gina open?"]
    docs = embedder.encode(memories)
    a, b = q8.encode(questions), embedder.encode(questions)
    cos = (a * b).sum(1)
    assert cos.min() > 0.98, cos
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert ((a @ docs.T).argmax(1) == (b @ docs.T).argmax(1)).all()
    assert ((a @ docs.T).argmax(1) == np.arange(len(questions))).all()
    # a question's int8 vector does not depend on what it is embedded with (one text per run)
    assert np.array_equal(q8.encode(questions[:1])[0], q8.encode(questions)[0])

    # a fresh cache holding only the fp32 export: quantization fails → fp32 ONNX, no int8 file left behind
    src = next(p for p in embedder._onnx.path.parent.glob("*.onnx") if p.name == embedder._onnx.path.name)
    shutil.copy(src, tmp_path / src.name)

    def broken(*a, **k):
        raise RuntimeError("test: quantizer crashed")

    monkeypatch.setattr(onnx_embed, "_quantize_int8", broken)
    e = LocalEmbedder(EmbeddingConfig(onnx_cache_dir=str(tmp_path)), quantize="int8")
    assert e.runtime == "onnx" and [p.name for p in tmp_path.glob("*.onnx")] == [src.name]
    assert float(np.abs(e.encode(questions[:2]) - b[:2]).max()) < 1e-5
    monkeypatch.undo()

    # int8 kernels differ by CPU: a quantized model that disagrees with fp32 on the probe questions
    # of the machine that loads it is not used (here forced by an unreachable bound)
    from lychee_ray.embed.agreement import PROBE_TEXTS, quantized_agreement

    assert quantized_agreement(q8._onnx, embedder._onnx, 8) > 0.98
    assert quantized_agreement(embedder._onnx, embedder._onnx, 8) > 0.9999
    strict = LocalEmbedder(EmbeddingConfig(onnx_cache_dir=str(tmp_path), query_quantization_min_cosine=1.0),
                           quantize="int8")
    assert strict.runtime == "onnx" and len(PROBE_TEXTS) >= 5
    assert float(np.abs(strict.encode(questions[:2]) - b[:2]).max()) < 1e-5


@pytest.mark.heavy
def test_cached_onnx_query_model_needs_no_torch_and_gives_the_same_vectors(embedder, tmp_path, monkeypatch):
    """With the export cached, query embeddings load from the ONNX file and the model's fast tokenizer
    (no torch / sentence-transformers): the same token ids as sentence-transformers, bit-identical
    vectors; without a cached export the full loader runs (and exports)."""
    from lychee_ray.config import EmbeddingConfig
    from lychee_ray.embed import agreement
    from lychee_ray.embed.local import LocalEmbedder, offline_minilm_path
    from lychee_ray.embed.onnx_cache import CachedOnnxEmbedder, load_cached, load_tokenizer, model_files

    texts = ["When did Caroline go to the LGBTQ support group?", "", "  padded  ", "x", "émoji 🎉 tést\tTab\nnew",
             "中文字符", "a long turn about painting " * 120, "Wo habe ich meinen Urlaub verbracht?"]
    full = LocalEmbedder(EmbeddingConfig(), quantize="int8")  # exports into the default cache if needed
    tokenize = load_tokenizer(model_files(offline_minilm_path()))
    ours, theirs = tokenize(texts), full._model.preprocess(texts)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert np.array_equal(ours[name], theirs[name].numpy()), name

    fp32 = LocalEmbedder(EmbeddingConfig())
    for quantize, reference in (("int8", full), ("none", fp32)):
        fast = load_cached(EmbeddingConfig(), quantize)
        assert isinstance(fast, CachedOnnxEmbedder) and fast.runtime == reference.runtime
        assert fast.name == reference.name and fast.dim == reference.dim
        assert np.array_equal(fast.encode(texts), reference.encode(texts)), quantize
    # the build's embedder (every builder actor, the local build, Serve appends) is the cached one too,
    # once a process has exported the model (the session's `embedder` may have been that process)
    from lychee_ray.embed import factory, get_embedder

    monkeypatch.setattr(factory, "_CACHE", {})
    build = get_embedder(EmbeddingConfig())
    assert isinstance(build, CachedOnnxEmbedder) and build.runtime == "onnx"
    assert np.array_equal(build.encode(texts), fp32.encode(texts))
    monkeypatch.undo()

    # the int8 check against fp32 ran once on this CPU: later loads reuse its verdict
    def no_check(*_a: object) -> float:
        raise AssertionError("the agreement check ran again")

    monkeypatch.setattr(agreement, "quantized_agreement", no_check)
    assert load_cached(EmbeddingConfig(), "int8").runtime == "onnx-int8"
    strict = load_cached(EmbeddingConfig(query_quantization_min_cosine=1.0), "int8")
    assert strict.runtime == "onnx"  # the kept verdict still meets the configured bound, or fp32 is used
    monkeypatch.undo()

    assert load_cached(EmbeddingConfig(onnx_cache_dir=str(tmp_path)), "int8") is None  # nothing exported there
    assert load_cached(EmbeddingConfig(runtime="torch"), "none") is None
    assert load_cached(EmbeddingConfig(model=str(tmp_path)), "none") is None  # not a model directory
