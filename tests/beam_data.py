"""Small synthetic BEAM conversation folders (the benchmark's layout, made-up content): the adapter,
evaluation and CLI tests write them; nothing here is copied from BEAM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# (date, [(user message, assistant message), ...]) per batch; ids are given in order from 0
BATCHES: list[tuple[str, list[tuple[str, str]]]] = [
    ("March-15-2024", [
        ("I'm Dana and I am building a plant watering app in Python with Flask.",
         "Great project! Start with a Flask app factory and a SQLite database for the plants."),
        ("My first sprint ends on March 29 and covers user login.",
         "For login use Flask-Login with hashed passwords; here is a sketch:\n\n```python\nfrom flask_login import LoginManager\n"
         "login_manager = LoginManager()\n```"),
        ("The watering reminders should go out at 3 PM every day.",
         "You can schedule the 3 PM reminders with APScheduler's cron trigger."),
    ]),
    ("April-05-2024", [
        ("Update: the reminders now go out at 4 PM instead, users asked for later.",
         "Change the cron trigger's hour to 16 so the reminders go out at 4 PM."),
        ("I prefer minimal dependencies to keep the app lightweight.",
         "Then skip Celery: APScheduler inside the app process is enough for the reminders."),
        ("Which table layout would you suggest for watering logs?",
         "| column | type |\n|---|---|\n| plant_id | int |\n| watered_at | datetime |\n| amount_ml | int |"),
    ]),
]

QUESTIONS: dict[str, list[dict[str, Any]]] = {
    "information_extraction": [
        {"question": "When does my first sprint end?", "answer": "Your first sprint ends on March 29.",
         "source_chat_ids": [2], "rubric": ["LLM response should state: March 29"]},
    ],
    "knowledge_update": [
        {"question": "At what time do the watering reminders go out?", "answer": "At 4 PM.",
         "source_chat_ids": {"original_info": [4], "updated_info": [6]}, "rubric": ["LLM response should state: 4 PM"]},
    ],
    "preference_following": [
        {"question": "Which task queue should I add for the reminders?",
         "source_chat_ids": [8], "rubric": ["LLM response should contain: suggests lightweight options"]},
    ],
    "event_ordering": [
        {"question": "In what order did I bring up login, reminders and the logs table?",
         "answer": "Login, then reminders, then the logs table.", "source_chat_ids": [2, [4, 10]],
         "rubric": ["login", "reminders", "logs table"]},
    ],
    "multi_session_reasoning": [
        {"question": "What did I change about the reminders?", "answer": "From 3 PM to 4 PM.",
         "source_chat_ids": [4, 6, 99], "rubric": ["LLM response should state: 3 PM", "LLM response should state: 4 PM"]},
        {"question": "What empty question is this?", "answer": "none", "source_chat_ids": []},
    ],
    "abstention": [
        {"question": "What is my dog's name?", "ideal_response": "There is no information about a dog.",
         "rubric": ["there is no information about a dog"]},
    ],
}


def batches_json(batches: list[tuple[str, list[tuple[str, str]]]] = BATCHES) -> list[dict[str, Any]]:
    """The chat document of ``batches`` (ids in order from 0; the first message of a batch carries its date)."""
    out, next_id = [], 0
    for n, (date, pairs) in enumerate(batches, start=1):
        exchanges = []
        for k, (u, a) in enumerate(pairs):
            user = {"role": "user", "id": next_id, "content": u, "index": f"{n},{k + 1}", "question_type": "main_question"}
            if k == 0:
                user["time_anchor"] = date
            exchanges.append([user, {"role": "assistant", "id": next_id + 1, "content": a}])
            next_id += 2
        out.append({"batch_number": n, "turns": exchanges, "time_anchor": None})
    return out


def write_beam(folder: Path, chat: list[dict[str, Any]] | None = None, questions: dict[str, Any] | None = None,
               truncated: list[dict[str, Any]] | None = None) -> Path:
    """One BEAM conversation folder: ``chat.json`` (+ ``chat_trunecated.json``) and its probing questions."""
    (folder / "probing_questions").mkdir(parents=True, exist_ok=True)
    (folder / "chat.json").write_text(json.dumps(chat if chat is not None else batches_json(), indent=2))
    if truncated is not None:
        (folder / "chat_trunecated.json").write_text(json.dumps(truncated, indent=2))
    qs = QUESTIONS if questions is None else questions
    (folder / "probing_questions" / "probing_questions.json").write_text(json.dumps(qs, indent=2))
    return folder


def write_split(root: Path, n: int = 2) -> Path:
    """A folder of ``n`` BEAM conversation folders ``1/`` … ``n/`` (the benchmark's ``chats/100K/``)."""
    for i in range(1, n + 1):
        write_beam(root / str(i))
    return root
