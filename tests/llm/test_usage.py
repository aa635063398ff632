"""Usage ledger: totals by stage, per conversation / question, Arrow round trip, merge, threads."""

from __future__ import annotations

import pickle
import threading

import pyarrow as pa
import pytest
from pydantic import ValidationError

from lychee_ray.llm.usage import STAGES, USAGE_SCHEMA, CallUsage, UsageLedger


def u(stage="encode", p=100, c=20, **kw) -> CallUsage:
    return CallUsage(stage=stage, model="m", prompt_tokens=p, completion_tokens=c, **kw)


def sample() -> UsageLedger:
    led = UsageLedger()
    led.record(u("encode", 100, 50, conversation_id="c1", segment_id="s1", cached_tokens=40))
    led.record(u("encode", 200, 60, conversation_id="c1", segment_id="s2", attempts=3))
    led.record(u("encode", 10, 0, conversation_id="c2", ok=False, error="boom", error_kind="server_error", attempts=4))
    led.record(u("plan", 30, 10, conversation_id="c1", question_id="q1", estimated=True))
    led.record(u("answer", 300, 15, conversation_id="c1", question_id="q1"))
    led.record(u("judge", 50, 2, question_id="q1"))
    led.record(u("plan", 35, 12, conversation_id="c2", question_id="q2"))
    return led


def test_call_usage_validation_and_total():
    x = u("plan", 7, 3)
    assert x.total_tokens == 10 and x.ok and not x.estimated
    with pytest.raises(ValidationError):
        u("summarize")  # unknown stage
    with pytest.raises(ValidationError):
        CallUsage(stage="plan", model="m", prompt_tokens=-1)
    assert set(STAGES) == {"encode", "plan", "answer", "judge", "embed"}


def test_totals_by_stage():
    led = sample()
    by = led.totals_by_stage()
    assert set(by) == {"encode", "plan", "answer", "judge"}
    enc = by["encode"]
    assert (enc.calls, enc.ok_calls, enc.failed_calls) == (3, 2, 1)
    assert enc.prompt_tokens == 310 and enc.completion_tokens == 110 and enc.total_tokens == 420
    assert enc.cached_tokens == 40 and enc.attempts == 8
    assert by["plan"].estimated_calls == 1
    assert led.totals().calls == 7
    assert led.totals("encode", conversation_id="c1").total_tokens == 410
    with pytest.raises(ValueError):
        led.totals(user_id="x")


def test_per_conversation_and_question():
    led = sample()
    conv = led.by_conversation()
    assert set(conv) == {"c1", "c2"}
    assert conv["c1"]["encode"].total_tokens == 410
    assert conv["c1"]["total"].calls == 4  # 2 encode + plan + answer
    assert conv["c2"]["encode"].failed_calls == 1
    q = led.by_question()
    assert set(q) == {"q1", "q2"}
    assert q["q1"]["total"].total_tokens == 40 + 315 + 52
    assert set(q["q1"]) == {"total", "plan", "answer", "judge"}
    s = led.summary()
    assert s["total"]["calls"] == 7 and s["by_stage"]["answer"]["total_tokens"] == 315


def test_arrow_round_trip():
    led = sample()
    table = led.to_table()
    assert table.schema.equals(USAGE_SCHEMA)
    assert table.num_rows == 7
    back = UsageLedger.from_table(table)
    assert back.entries() == led.entries()
    empty = UsageLedger().to_table()
    assert empty.num_rows == 0 and empty.schema.equals(USAGE_SCHEMA)
    assert isinstance(table, pa.Table)


def test_merge_and_drain():
    a, b = sample(), UsageLedger([u("answer", 1, 1)])
    a.merge(b)
    assert len(a) == 8 and len(b) == 1
    m = UsageLedger.merged(a, b, UsageLedger())
    assert len(m) == 9
    with pytest.raises(ValueError):
        a.merge(a)
    drained = a.drain()
    assert len(drained) == 8 and len(a) == 0


def test_thread_safe_appends_and_pickle():
    led = UsageLedger()

    def work():
        for _ in range(500):
            led.record(u("encode", 1, 1))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(led) == 4000 and led.totals().total_tokens == 8000
    clone = pickle.loads(pickle.dumps(led))
    assert len(clone) == 4000
    clone.record(u())  # the lock came back
    assert len(clone) == 4001
