"""Batches of the ONNX encoder are formed by token count, not characters (agent logs' JSON and ids
take far more tokens per character than prose), and a text's vector does not depend on how it was batched."""

from __future__ import annotations

import numpy as np
import pytest

from lychee_ray.embed import onnx as onnx_embed


class _Input:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeSession:
    """Returns, per row, (sum of its real token ids, its real token count): independent of padding."""

    def __init__(self) -> None:
        self.widths: list[tuple[int, int]] = []

    def get_inputs(self) -> list[_Input]:
        return [_Input("input_ids"), _Input("attention_mask")]

    def run(self, _outputs: object, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        ids, mask = feed["input_ids"], feed["attention_mask"]
        self.widths.append(ids.shape)
        return [np.stack([(ids * mask).sum(axis=1), mask.sum(axis=1)], axis=1).astype(np.float32)]


def fake_tokenize(left: bool = False):
    """Every digit is a token, every word of letters one token; ids are character codes; pad 0."""

    def tokens(text: str) -> list[int]:
        out: list[int] = []
        for word in text.split():
            out.extend(ord(c) for c in word) if word.isdigit() else out.append(ord(word[0]))
        return out

    def tokenize(texts: list[str]) -> dict[str, np.ndarray]:
        rows = [tokens(t) for t in texts]
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), np.int64)
        mask = np.zeros_like(ids)
        for i, r in enumerate(rows):
            sl = slice(width - len(r), width) if left else slice(0, len(r))
            ids[i, sl], mask[i, sl] = r, 1
        return {"input_ids": ids, "attention_mask": mask}

    return tokenize


# characters and tokens disagree: by characters W1 > D1 > W2 > D2, by tokens D1 (15) > D2 (5) > W1 = W2 (2)
TEXTS = ["wwwwwwwwwwwwwwwwwwww xxxxxxxxxxxxxxxxxxx",  # W1: 40 characters, 2 tokens
         "123456789012345 678901",                     # D1: 22 characters, 15 + 6 = 21 tokens
         "yyyyyyyyyy zzzzzzzzz",                       # W2: 20 characters, 2 tokens
         "12345"]                                      # D2: 5 characters, 5 tokens


def expected(tokenize) -> np.ndarray:
    return np.concatenate([FakeSession().run(None, tokenize([t]))[0] for t in TEXTS])


@pytest.mark.parametrize("window", [1024, 3, 1])
def test_batches_group_texts_by_token_count_and_vectors_do_not_depend_on_it(monkeypatch, window):
    session = FakeSession()
    monkeypatch.setattr(onnx_embed, "open_session", lambda *a, **k: session)
    enc = onnx_embed.OnnxEncoder(None, fake_tokenize(), length_sort_window=window)  # type: ignore[arg-type]
    out = enc.encode(TEXTS, 2)
    assert np.array_equal(out, expected(fake_tokenize()))
    if window == 1024:
        # by tokens: [D1, D2] (width 21) and [W1, W2] (width 2); by characters it was [W1, D1] and [W2, D2]
        assert session.widths == [(2, 21), (2, 2)]
        assert enc.padded_tokens == 2 * 21 + 2 * 2 < 2 * 21 + 2 * 5
    assert sum(w[0] for w in session.widths) == len(TEXTS)


def test_left_padding_tokenizer_is_tokenized_per_batch(monkeypatch):
    session = FakeSession()
    monkeypatch.setattr(onnx_embed, "open_session", lambda *a, **k: session)
    enc = onnx_embed.OnnxEncoder(None, fake_tokenize(left=True))  # type: ignore[arg-type]
    assert np.array_equal(enc.encode(TEXTS, 2), expected(fake_tokenize(left=True)))
    assert enc.encode([], 2).shape[0] == 0


def test_real_model_vectors_equal_one_text_at_a_time(embedder):
    """MiniLM: prose, JSON and long texts batched by tokens give each text's own vector (float noise only)."""
    enc = embedder._onnx
    texts = ['{"reservation_id": "ZFA04Y", "flights": [{"flight_number": "HAT170", "date": "2024-05-20"}]}',
             "I adopted a dog last week.", "x", "a long turn about painting " * 60, "", "12345 67890 " * 10,
             "What is my dog's name?"]
    together = enc.encode(texts, 4)
    alone = np.concatenate([enc.encode([t], 1) for t in texts])
    assert together.shape == alone.shape
    assert np.abs(together - alone).max() < 1e-4
