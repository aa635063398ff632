"""Derived segmentation corpora, the paired bootstrap and eval-seg's exchange-mode option (issue 38)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lychee_ray.config import SegmenterConfig
from lychee_ray.core.conversation import Conversation, Session, Turn
from lychee_ray.eval.metrics.segmentation import paired_bootstrap
from lychee_ray.eval.runners.segmentation import (
    SegDialogue,
    eval_exchange_mode,
    evaluate_dialogues,
    load_seg_corpus,
)
from lychee_ray.eval.setup.seg_corpora import STOP_MARKER, locomo_mix, tau_mix, tau_text_messages


def _conversation(cid: str, sessions: int = 3, turns: int = 17) -> Conversation:
    return Conversation(
        conversation_id=cid,
        sessions=[
            Session(session_id=f"{cid}-s{s}", turns=[Turn(turn_id=f"{cid}:{s}:{t}", role="user", content=f"{cid} s{s} t{t}") for t in range(turns)])
            for s in range(sessions)
        ],
    )


def _trajectory(i: int, task: int, user: str, n: int = 8) -> dict:
    msgs = [{"role": "system", "content": "policy"}]
    for k in range(n):
        ask = "?" if k % 3 == 2 else "."
        msgs.append({"role": "user" if k % 2 == 0 else "assistant", "content": f"traj {i} message {k}{ask}"})
        if k % 3 == 1:
            msgs.append({"role": "assistant", "content": "", "tool_calls": [{"id": "x"}]})
            msgs.append({"role": "tool", "content": "{}"})
    msgs.append({"role": "user", "content": f"thanks {STOP_MARKER}"})
    return {"conversation_id": f"c{i}", "user_id": user, "metadata": {"task_id": task}, "messages": msgs}


def test_locomo_mix_joins_chunks_of_different_conversations(tmp_path):
    convs = [_conversation(c) for c in ("a", "b", "c")]
    out = locomo_mix(convs, seed=1, min_len=4, max_len=6, min_chunks=3, max_chunks=4)
    assert out and out == locomo_mix(convs, seed=1, min_len=4, max_len=6, min_chunks=3, max_chunks=4)  # deterministic
    used = []
    for d in out:
        assert sum(d["segments"]) == len(d["utterances"]) and 3 <= len(d["segments"]) <= 4
        assert all(4 <= n <= 6 for n in d["segments"]) and "roles" not in d
        assert all(x != y for x, y in zip(d["sources"], d["sources"][1:]))  # neighbours differ in conversation
        pos = 0
        for n, src in zip(d["segments"], d["sources"]):
            chunk = d["utterances"][pos : pos + n]
            assert all(u.startswith(src + " ") for u in chunk)  # one chunk = one conversation's consecutive turns
            sess = {u.split()[1] for u in chunk}
            assert len(sess) == 1
            used += chunk
            pos += n
    assert len(used) == len(set(used))  # every turn used at most once: the streams are independent
    path = tmp_path / "mix.json"
    path.write_text(json.dumps(out))
    assert len(load_seg_corpus(path)) == len(out)  # eval-seg reads it
    with pytest.raises(ValueError):
        locomo_mix(convs[:1])
    with pytest.raises(ValueError):
        locomo_mix(convs, min_len=5, max_len=4)


def test_tau_mix_keeps_text_messages_and_different_tasks():
    assert tau_text_messages(_trajectory(0, 1, "u")["messages"])[-1] == ("user", "thanks")
    trajs = [_trajectory(i, task=i % 5, user=f"u{i % 3}") for i in range(20)]
    whole = tau_mix(trajs, seed=0, min_len=4, max_len=None, min_chunks=2, max_chunks=3)
    assert whole and all(n == 9 for d in whole for n in d["segments"])  # whole trajectories: 8 messages + the closing
    out = tau_mix(trajs, seed=0, min_len=4, max_len=6, min_chunks=2, max_chunks=3)
    assert out and all(4 <= n <= 6 for d in out for n in d["segments"])
    for d in out:  # every excerpt ends at a pause: its last message asks nothing
        pos = 0
        for n in d["segments"]:
            pos += n
            assert "?" not in d["utterances"][pos - 1]
    for d in out:
        assert len(d["roles"]) == len(d["utterances"]) == sum(d["segments"])
        assert set(d["roles"]) <= {"user", "assistant"}
        assert not any(STOP_MARKER in u or u == "" or u == "policy" or u == "{}" for u in d["utterances"])
        tasks = [s.split("/") for s in d["sources"]]
        assert all(a[0] != b[0] and a[1] != b[1] for a, b in zip(tasks, tasks[1:]))
        pos = 0
        for n in d["segments"]:
            assert d["roles"][pos] == "user" and d["utterances"][pos].endswith("message 0.")  # a trajectory's opening
            pos += n


def test_paired_bootstrap():
    a, b = [0.5, 0.4, 0.3, 0.6], [0.6, 0.6, 0.6, 0.6]
    r = paired_bootstrap(a, b, resamples=500, seed=3)
    assert r["mean"] == pytest.approx(-0.15)
    assert r["boot_low"] <= r["mean"] <= r["boot_high"] < 0
    assert r == paired_bootstrap(a, b, resamples=500, seed=3)
    same = paired_bootstrap(a, a)
    assert same["boot_low"] == same["boot_high"] == 0.0
    with pytest.raises(ValueError):
        paired_bootstrap([0.1], [0.1, 0.2])
    with pytest.raises(ValueError):
        paired_bootstrap([], [])


def test_eval_exchange_mode_option():
    plain = [SegDialogue("d", ["a", "b", "c", "d"], [2, 2])]
    roles = [SegDialogue("d", ["a", "b", "c", "d"], [2, 2], roles=["user", "agent", "user", "agent"])]
    assert eval_exchange_mode(plain) == "turn" and eval_exchange_mode(roles) == "role"
    # auto follows segmenter.auto_without_roles (eval-seg scores the units the build uses)
    assert eval_exchange_mode(plain, "auto", "pair") == "pair" and eval_exchange_mode(roles, "auto", "pair") == "role"
    assert eval_exchange_mode(plain, "pair") == "pair" and eval_exchange_mode(roles, "turn") == "turn"
    with pytest.raises(ValueError):
        eval_exchange_mode(plain, "role")  # no user/agent roles to build role units from
    with pytest.raises(ValueError):
        eval_exchange_mode(plain, "sentence")
    rng = np.random.default_rng(0)
    topics = [0] * 7 + [1] * 7
    basis = np.eye(16)
    dialogues = [SegDialogue(f"d{i}", [f"u{j}" for j in range(14)], [7, 7]) for i in range(4)]
    vectors = np.concatenate([[basis[t] + 0.1 * rng.standard_normal(16) for t in topics] for _ in dialogues])
    report = evaluate_dialogues(dialogues, vectors, SegmenterConfig(), exchange_mode="pair")
    assert report["exchange_mode"] == "pair"
    wd = report["paired"]["no_boundary"]["windowdiff"]
    assert wd["boot95_low"] <= wd["mean"] <= wd["boot95_high"]
