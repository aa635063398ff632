"""Deterministic synthetic conversations with realistic turn lengths and topic shifts.

Used by tests and by ``benchmarks/build_throughput.py``: each conversation has a few dated
sessions; each session walks through topics, a few user/assistant exchanges per topic.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from lychee_ray.core.conversation import Conversation, Session, Turn

TOPICS: dict[str, list[str]] = {
    "pets": ["I adopted a {adj} puppy named {name} from the shelter.", "{name} loves chasing squirrels in the park.",
             "The vet said {name} needs a booster shot next month.", "We bought a new crate and a chew toy for {name}."],
    "music": ["I started taking violin lessons with my teacher {name}.", "My recital is scheduled for the spring concert.",
              "I practise scales for forty minutes every evening.", "{name} says my bowing has improved a lot."],
    "travel": ["We booked a trip to {city} for the summer holidays.", "The hotel in {city} is close to the old harbour.",
               "I want to try the local seafood and visit the museum.", "Our flight leaves early on a Saturday morning."],
    "work": ["My manager {name} asked me to lead the new project.", "The deadline for the report is the end of the quarter.",
             "I have been staying late to finish the budget review.", "The team celebrated the launch with a dinner."],
    "cooking": ["I tried a new recipe for {adj} lasagna yesterday.", "The secret is to let the sauce simmer for two hours.",
                "My sister {name} wants the recipe for her party.", "Next time I will add more basil and less salt."],
    "health": ["I signed up for a half marathon in {city}.", "My knee hurt after the long run on Sunday.",
               "The physiotherapist recommended stretching every day.", "I am up to twelve kilometres per run now."],
}
NAMES = ["Max", "Anna", "Luis", "Priya", "Tom", "Mei", "Oskar", "Zara"]
CITIES = ["Lisbon", "Kyoto", "Boston", "Cape Town", "Oslo", "Lima"]
ADJS = ["tiny", "cheerful", "spicy", "golden", "quiet", "curious"]
REPLIES = ["That sounds wonderful, tell me more about it.", "How did that make you feel?",
           "I will remember that for later.", "That is great news, congratulations!",
           "Interesting — what happens next?", "Thanks for sharing that with me."]


def synthetic_conversation(index: int, seed: int = 0, sessions: int = 3, topics_per_session: int = 3,
                           exchanges_per_topic: tuple[int, int] = (2, 4)) -> Conversation:
    """One deterministic conversation (``conv-<index>``), user/assistant turns, topic shifts."""
    rng = random.Random(seed * 1_000_003 + index)
    start = datetime(2023, 1, 1) + timedelta(days=rng.randrange(300))
    out: list[Session] = []
    n = 0
    for s in range(sessions):
        turns: list[Turn] = []
        for topic in rng.sample(sorted(TOPICS), topics_per_session):
            fill = {"name": rng.choice(NAMES), "city": rng.choice(CITIES), "adj": rng.choice(ADJS)}
            for _ in range(rng.randint(*exchanges_per_topic)):
                a, b = rng.sample(TOPICS[topic], 2)
                turns.append(Turn(turn_id=f"t{n}", role="user", speaker="user", content=f"{a.format(**fill)} {b.format(**fill)}"))
                turns.append(Turn(turn_id=f"t{n + 1}", role="assistant", speaker="assistant", content=rng.choice(REPLIES)))
                n += 2
        when = start + timedelta(days=7 * s, hours=rng.randrange(8, 20))
        out.append(Session(session_id=f"s{s}", started_at=when.isoformat(), turns=turns))
    return Conversation(conversation_id=f"conv-{index:06d}", user_id=f"user-{index % 97}", sessions=out)


def write_jsonl(path: str, n: int, seed: int = 0, **kw) -> int:
    """Write ``n`` synthetic conversations to a JSONL file; returns the number of turns."""
    turns = 0
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            c = synthetic_conversation(i, seed, **kw)
            turns += c.num_turns
            f.write(c.model_dump_json() + "\n")
    return turns
