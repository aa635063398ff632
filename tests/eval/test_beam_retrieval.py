"""BEAM in ``eval-retrieval``: passages of the hybrid passage RAG, rubric short answers, the
content-based recall a citation without content cannot inflate, per-role gold recall, per-conversation
summaries, full context at the budget, per-question rows and the paired comparison (synthetic
folders: tests/beam_data.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import QAItem
from lychee_ray.eval.baselines.passages import PassageRAG, split_passages
from lychee_ray.eval.baselines.retrieval import TurnUnits, plain_line
from lychee_ray.eval.metrics.context import content_words, normalized_context
from lychee_ray.eval.metrics.rubric import answers_in_context, rubric_claim, short_answers
from lychee_ray.eval.runners.retrieval import _Measure, evaluate_retrieval, load_questions
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_tokens
from tests.beam_data import batches_json, write_beam, write_split

ENC = DEFAULT_ENCODING


@pytest.fixture(scope="module")
def beam(tmp_path_factory, embedder):
    """Two synthetic BEAM conversations (one with a long, mostly blank assistant turn) built with rules."""
    from lychee_ray.memory import MemoryStore

    root = tmp_path_factory.mktemp("beam")
    data = write_split(root / "100K", 1)
    chat = batches_json()
    chat[1]["turns"][2][1]["content"] = "Diagram:\n" + ("   |" + " " * 300 + "\\\n") * 400 + "The logs table is done."
    write_beam(data / "2", chat=chat)
    cfg = load_config(env={})
    s = run_local_build(cfg, "beam", data, root / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert s.built == 2
    store = MemoryStore.open(root / "st", cfg, embedder=embedder, llm="rules")
    yield data, root / "st", store
    store.close()


def test_passages_cut_at_paragraphs_within_the_bound():
    text = ("First paragraph about the reminders at 4 PM.\n\nSecond one, short.\n\n"
            + "\n".join(f"line {i} of a long code block with several words" for i in range(80)))
    ps = split_passages(text, "assistant", 40, ENC)
    assert ps[:2] == ["First paragraph about the reminders at 4 PM.", "Second one, short."]  # a passage per paragraph
    assert 2 < len(ps) - 2 < 80  # the long paragraph: its lines merged back into passages that fit
    assert all(count_tokens(plain_line("assistant", p), ENC) <= 40 for p in ps)
    assert content_words(" ".join(ps)) == content_words(text)  # nothing lost
    one = "word " * 500  # one paragraph, one line, one sentence: cut between words
    assert all(count_tokens(plain_line("user", p), ENC) <= 40 for p in split_passages(one, "user", 40, ENC))
    assert split_passages(" \n\n \t\n", "user", 40, ENC) == []
    blank = "Diagram:\n" + ("   |" + " " * 440 + "\\\n") * 790 + "Done."
    assert len(blank) > 349_000
    bp = split_passages(blank, "assistant", 200, ENC)
    assert 1 <= len(bp) < 100 and bp[-1].endswith("Done.") and all(len(p) < 2_000 for p in bp)


def test_rubric_short_answers():
    assert rubric_claim("LLM response should state: March 29") == "March 29"
    assert rubric_claim("LLM response should mention: 'category' and 'notes'.") == "'category' and 'notes'"
    assert rubric_claim("Core functionality") == "Core functionality"
    assert rubric_claim('LLM response should state: "250ms".') == "250ms"
    chat = normalized_context("My first sprint ends on March 29. Reminders at 4 PM, then 3 PM.")
    rubric = ["LLM response should state: March 29", "LLM response should state: 4 PM",
              "LLM response should contain: suggests lightweight options", "LLM response should state: from March 1 till"]
    assert short_answers(rubric, chat, 6) == ["March 29", "4 PM"]  # only claims the chat holds, within the bound
    assert short_answers(rubric, chat, 1) == []
    assert answers_in_context(["March 29", "4 PM"], normalized_context("sprint ends March 29; reminders 4 pm")) is True
    assert answers_in_context(["March 29", "4 PM"], normalized_context("sprint ends March 29")) is False
    assert answers_in_context([], normalized_context("x")) is None


@pytest.mark.heavy
def test_a_citation_without_content_earns_the_id_not_the_content(beam):
    _, _, store = beam
    view = store.view("beam-1")
    q = QAItem(conversation_id="beam-1", question_id="q", question="?", answer="", category="x", evidence=["2", "3"])
    m = _Measure(q, view, [0.5])
    empty = m([(["2", "3"], "The user talked about something.")], "The user talked about something.", 10, 0, 0)
    assert empty.recall == 1.0 and empty.all and empty.hits == ["2", "3"] and empty.content_coverage < 0.2
    whole = m([(["2"], view.turn_text[view.turn_pos["2"]])], view.turn_text[view.turn_pos["2"]], 10, 0, 0)
    assert whole.recall == 0.5 and whole.content_coverage == pytest.approx(0.5)
    assert whole.recall_by_role == {"user": 1.0, "assistant": 0.0} and m.gold_roles == ["user", "assistant"]


@pytest.mark.heavy
def test_passage_rag_finds_text_past_a_long_turns_start(beam):
    _, _, store = beam
    view = store.view("beam-2")
    rag = PassageRAG(TurnUnits(view, store.encoding), store.embedder, 200, 1.2, 0.75, 60)
    qv = store.embedder.encode(["Is the logs table done?"])[0]
    sel = rag.select("Is the logs table done?", qv, 120)
    assert sel.tokens <= 120 and any(u.id.startswith("11#p") and "logs table is done" in u.text for u in sel.units)


@pytest.mark.heavy
def test_beam_report(beam):
    data, _, store = beam
    qs = load_questions("beam", data, None)
    assert len(qs) == 10 and {q.category for q in qs} >= {"knowledge_update", "event_ordering"}  # gold only
    rep, res = evaluate_retrieval(store, qs, 150, baselines=["passage_rag", "turn_rag", "full_context"])
    assert rep["systems"] == ["lychee", "passage_rag", "turn_rag", "full_context"]
    assert rep["conversations"] == ["beam-1", "beam-2"]
    for name in rep["systems"]:
        s = rep[name]
        assert s["per_split"] == {} and set(s["per_conversation"]) == {"beam-1", "beam-2"}
        assert "knowledge_update" in s["per_category"] and 0 <= s["content_coverage"] <= 1
        assert set(s["gold_role_recall"]) == {"user"} and s["gold_role_recall"]["user"]["questions"] == 10
        assert s["answer_in_context"] is not None
        assert {"updated_in_context", "original_only", "stale_unmarked"} <= set(s["per_category"]["knowledge_update"])
    fc = rep["full_context"]
    assert fc["fits_budget"] == 0 and fc["at_budget"] is None and fc["recall"] == 1.0  # the ceiling; n/a at 150
    ie = next(r for r in res if r.category == "information_extraction" and r.conversation_id == "beam-1")
    assert ie.gold == ["2"] and ie.gold_roles == ["user"]
    assert ie.systems["full_context"].answer_in_context is True  # "March 29" is in the chat, and so in full context
    big, _ = evaluate_retrieval(store, qs, 100_000, baselines=["full_context"])
    assert big["full_context"]["fits_budget"] == 10 and big["full_context"]["at_budget"]["recall"] == 1.0


@pytest.mark.heavy
def test_eval_retrieval_cli_on_beam_and_paired_comparison(beam, tmp_path, capsys):
    import sys

    from lychee_ray.cli.main import main

    data, st, _ = beam
    out = tmp_path / "er.json"
    rc = main(["eval-retrieval", "--memory", str(st), "--data", str(data), "--budget-tokens", "150", "--per-question",
               "--out", str(out), "--markdown", str(tmp_path / "er.md")])
    assert rc == 0
    rep = json.loads(out.read_text())
    assert rep["systems"] == ["lychee", "passage_rag", "turn_rag", "full_context"]  # eval.beam.retrieval_baselines
    row = rep["details"][0]
    assert {"question_id", "category", "gold", "gold_roles", "systems"} <= set(row)
    assert {"recall", "hits", "all", "content_coverage", "covered"} <= set(row["systems"]["passage_rag"])
    md = (tmp_path / "er.md").read_text()
    assert "## Conversation beam-1" in md and "`full_context` fits the budget for 0 of 10 questions" in md
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from retrieval_paired import main as paired

    assert paired(["--a", str(out), "--b", str(out), "--system", "lychee", "--system-b", "passage_rag",
                   "--resamples", "50", "--out", str(tmp_path / "paired.json")]) == 0
    cmp = json.loads((tmp_path / "paired.json").read_text())["splits"]
    assert list(cmp) == ["all"] and cmp["all"]["recall"]["questions"] == 10


def test_knowledge_update_and_contradiction_scores_from_a_beam_folder(beam, tmp_path):
    """BEAM's gold groups reach the scores: the updated message (id 6, "4 PM") cited and the original
    (id 4, "3 PM") only in a marked unit; a contradiction's two statements both marked."""
    _, _, store = beam
    qs = {"knowledge_update": [{"question": "When do the reminders go out?", "answer": "4 PM",
                                "source_chat_ids": {"original_info": [4], "updated_info": [6]}}],
          "contradiction_resolution": [{"question": "Do I use Flask?", "answer": "Conflicting statements.",
                                        "source_chat_ids": {"first_statement": [0], "second_statement": [8]}}]}
    data = write_beam(tmp_path / "100K" / "1", questions=qs).parent
    ku, cr = load_questions("beam", data, None)
    assert ku.meta["gold_groups"] == {"original_info": ["4"], "updated_info": ["6"]}
    view = store.view("beam-1")
    m = _Measure(ku, view, [0.5])
    units = [(["4"], "reminders at 3 PM"), (["6"], "reminders at 4 PM")]
    assert m(units, "", 10, 0, 0).current == {"updated_in_context": 1.0, "updated_marked": 0.0, "original_only": 0.0,
                                              "stale_unmarked": None,
                                              "stale_message_unmarked": 1.0}
    marked = m(units, "", 10, 0, 0, statuses=["superseded", "current"]).current
    assert marked["stale_message_unmarked"] == 0.0 and marked["updated_in_context"] == 1.0
    valued = _Measure(ku.model_copy(update={"meta": {**ku.meta, "replaced_values": ["3 PM"]}}), view, [0.5])
    assert valued(units, "", 10, 0, 0).current["stale_unmarked"] == 1.0
    assert valued(units, "", 10, 0, 0, statuses=["superseded", "current"]).current["stale_unmarked"] == 0.0
    c = _Measure(cr, view, [0.5])
    both = [(["0"], "Flask"), (["8"], "minimal dependencies")]
    assert c(both, "", 10, 0, 0).current == {"contradiction_in_context": 1.0, "contradiction_marked": 0.0}
    assert c(both, "", 10, 0, 0, statuses=["conflicting", "conflicting"]).current["contradiction_marked"] == 1.0


@pytest.mark.heavy
def test_eval_retrieval_cli_replaced_values(beam, tmp_path, capsys):
    """``--replaced-values``: the annotated questions are scored stale by value and the report says
    which were matched; a file that is not a JSON object of lists of strings is refused (exit 2)."""
    from lychee_ray.cli.main import main

    data, st, _ = beam
    ku = next(q for q in load_questions("beam", data, None) if q.category == "knowledge_update")
    vals = tmp_path / "vals.json"
    vals.write_text(json.dumps({ku.question_id: ["3 PM"], "beam-9:knowledge_update:7": ["x"]}))
    out = tmp_path / "er.json"
    rc = main(["eval-retrieval", "--memory", str(st), "--data", str(data), "--budget-tokens", "150", "--baselines",
               "none", "--replaced-values", str(vals), "--per-question", "--out", str(out)])
    assert rc == 0
    rep = json.loads(out.read_text())
    assert rep["replaced_values"] == {"questions": 1, "unknown_question_ids": ["beam-9:knowledge_update:7"]}
    row = next(r for r in rep["details"] if r["question_id"] == ku.question_id)
    assert row["systems"]["lychee"]["current"]["stale_unmarked"] in (0.0, 1.0)
    assert "1 annotated question id(s) not among the questions" in capsys.readouterr().err
    for bad in ('["3 PM"]', '{"q": "3 PM"}', "{not json"):
        vals.write_text(bad)
        assert main(["eval-retrieval", "--memory", str(st), "--data", str(data), "--baselines", "none",
                     "--replaced-values", str(vals)]) == 2
    assert main(["eval-retrieval", "--memory", str(st), "--data", str(data), "--baselines", "none",
                 "--replaced-values", str(tmp_path / "missing.json")]) == 2
