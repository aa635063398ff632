import numpy as np

from lychee_ray.embed import _dedup


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
