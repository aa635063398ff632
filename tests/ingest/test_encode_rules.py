"""The offline ``rules`` encoder: speaker/pronoun and date resolution, filtering, metadata, determinism."""

from __future__ import annotations

import asyncio

import pytest

from lychee_ray.ingest.encode.base import EncodeRequest, SegmentTurn, finalise_records
from lychee_ray.ingest.encode.rules import RulesEncoder, classify, extract_entities, extract_topics, rewrite_persons
from lychee_ray.text.sentences import split_sentences
from lychee_ray.text.time.normalise import make_resolver

DATE = "2023-05-08T13:56:00"


def request(*turns: tuple[str, str], speakers=("Caroline", "Melanie"), date: str | None = DATE, roles=None) -> EncodeRequest:
    ts = [
        SegmentTurn(
            index=i,
            turn_id=f"D1:{i + 1}",
            session_id="session_1",
            session_date=date,
            speaker=sp,
            role=(roles[i] if roles else "user"),
            content=c,
        )
        for i, (sp, c) in enumerate(turns)
    ]
    return EncodeRequest(conversation_id="c1", user_id="u1", segment_id="c1#s00000", segment_index=0, turns=ts, speakers=list(speakers))


def encode(*turns: tuple[str, str], enc: RulesEncoder | None = None, **kw):
    return (enc or RulesEncoder()).encode_sync(request(*turns, **kw))


def texts(out) -> list[str]:
    return [r.text for r in out.records]


def test_first_person_becomes_speaker():
    out = encode(("Caroline", "I adopted a puppy!"), ("Melanie", "That's great."))
    assert texts(out) == ["Caroline adopted a puppy!"]
    r = out.records[0]
    assert r.type == "event" and r.source_turns == [0] and "Caroline" in r.entities and "puppy" in r.topics


def test_question_names_the_other_speaker_and_asker():
    out = encode(("Melanie", "Hi!"), ("Caroline", "Did you go to the pride parade?"))
    assert texts(out) == ["Caroline asked: Did Melanie go to the pride parade?"]
    assert out.records[0].source_turns == [1]


@pytest.mark.parametrize(
    "text, speaker, other, expected",
    [
        ("I am tired", "Caroline", "Melanie", "Caroline is tired"),
        ("I'm swamped with work", "Melanie", "Caroline", "Melanie is swamped with work"),
        ("I've got two kids", "Melanie", "Caroline", "Melanie has got two kids"),
        ("I was so happy", "Caroline", "Melanie", "Caroline was so happy"),
        ("I have a dog", "Caroline", "Melanie", "Caroline has a dog"),
        ("I don't eat meat", "Caroline", "Melanie", "Caroline doesn't eat meat"),
        ("I do yoga", "Caroline", "Melanie", "Caroline does yoga"),
        ("I really love painting", "Melanie", "Caroline", "Melanie really loves painting"),
        ("I usually watch movies", "Melanie", "Caroline", "Melanie usually watches movies"),
        ("I'd love to help", "Caroline", "Melanie", "Caroline would love to help"),
        ("I'll call my mom", "Caroline", "Melanie", "Caroline will call Caroline's mom"),
        ("You're a great mom", "Caroline", "Melanie", "Melanie is a great mom"),
        ("You have a caring heart", "Melanie", "Caroline", "Caroline has a caring heart"),
        ("Do you like hiking?", "Melanie", "Caroline", "Does Caroline like hiking?"),
        ("Are you coming?", "Melanie", "Caroline", "Is Caroline coming?"),
        ("What jobs are you thinking of?", "Melanie", "Caroline", "What jobs is Caroline thinking of?"),
        ("Your kids are lucky to have you", "Caroline", "Melanie", "Melanie's kids are lucky to have Melanie"),
        ("I think you love it", "Caroline", "Melanie", "Caroline thinks Melanie loves it"),
        ("We went camping", "Melanie", "Caroline", "We went camping"),  # "we" = Melanie's family, left as is
    ],
)
def test_rewrite_persons(text, speaker, other, expected):
    assert rewrite_persons(text, speaker, other)[0] == expected


def test_we_pair_only_on_contact_cues():
    out = encode(("Melanie", "Since we last talked, I started a pottery class."), ("Melanie", "We went camping with the kids."))
    assert texts(out) == [
        "Since Melanie and Caroline last talked, Melanie started a pottery class.",
        "Melanie said: We went camping with the kids.",
    ]
    pair = encode(("Melanie", "We went camping with the kids."), enc=RulesEncoder(we_mode="pair"))
    assert texts(pair) == ["Melanie and Caroline went camping with the kids."]
    with pytest.raises(ValueError):
        RulesEncoder(we_mode="sometimes")  # type: ignore[arg-type]


def test_relative_date_rewritten_and_time_set():
    out = encode(("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."))
    r = out.records[0]
    assert r.text == "Caroline went to a LGBTQ support group on 7 May 2023 and it was so powerful."
    assert (r.time.start, r.time.end, r.time.expression) == ("2023-05-07", "2023-05-07", "yesterday")
    assert "LGBTQ" in r.entities and r.type == "event"
    recs, problems = finalise_records(out, request(("Caroline", "x")), "rules", "rules-v1", resolve_time=make_resolver())
    assert not problems and recs[0].time.start == "2023-05-07" and recs[0].time.granularity == "day"


@pytest.mark.parametrize(
    "content, text, start, end",
    [
        ("I ran a charity race last Saturday.", "Melanie ran a charity race on 6 May 2023.", "2023-05-06", "2023-05-06"),
        ("I'm starting a new job next month.", "Melanie is starting a new job in June 2023.", "2023-06-01", "2023-06-30"),
        ("I moved to Boston two years ago.", "Melanie moved to Boston in 2021.", "2021-01-01", "2021-12-31"),
        ("I visited Paris in May 2023.", "Melanie visited Paris in May 2023.", "2023-05-01", "2023-05-31"),
        ("I finished my degree in 2022.", "Melanie finished Melanie's degree in 2022.", "2022-01-01", "2022-12-31"),
    ],
)
def test_dates(content, text, start, end):
    r = encode(("Melanie", content)).records[0]
    assert r.text == text
    assert (r.time.start, r.time.end) == (start, end)
    assert r.type == "event"


def test_greetings_and_fillers_dropped():
    out = encode(
        ("Caroline", "Hey Mel! Good to see you! How have you been?"),
        ("Melanie", "Hey Caroline! Thanks! Wow, that's so cool! Talk to you soon!"),
        ("Caroline", "Thanks, Melanie! That's really sweet. What's up with you?"),
    )
    assert out.records == []


def test_short_sentences_merged_into_neighbour():
    out = encode(("Caroline", "I adopted a dog last week. Named him Max. Puppy training soon!"))
    assert texts(out) == ["Caroline adopted a dog in the week of 1 May 2023. Named him Max. Puppy training soon!"]
    assert out.records[0].time.start == "2023-05-01"
    # a short sentence without any content word is dropped rather than merged
    out = encode(("Melanie", "Yeah, I painted that lake sunrise last year! It's special to me."))
    assert texts(out) == ["Melanie painted that lake sunrise in 2022!"]
    # short sentences at the start of a turn go with the next one
    out = encode(("Melanie", "Guess what? New puppy! We named him Oscar and he is adorable."))
    assert texts(out) == ["Melanie said: New puppy! We named him Oscar and he is adorable."]


def test_statement_without_speaker_is_attributed():
    out = encode(("Melanie", "You'd be a great counselor! The transgender stories were so inspiring."))
    assert texts(out) == ["Melanie said: Caroline would be a great counselor!", "Melanie said: The transgender stories were so inspiring."]


def test_image_caption_record():
    out = encode(("Melanie", "By the way, take a look at this. [image: a photo of a painting of a sunset over a lake]"))
    assert texts(out) == ["Melanie shared a photo of a painting of a sunset over a lake."]
    r = out.records[0]
    assert r.source_turns == [0] and {"painting", "sunset", "lake"} <= set(r.topics)
    out = encode(("Melanie", "Look! [image: a photography of two dogs in a field]"))
    assert texts(out) == ["Melanie shared a photo of two dogs in a field."]
    assert encode(("Melanie", "x y z [image: a dog]"), enc=RulesEncoder(image_records=False)).records == []


def test_entities_and_topics():
    r = encode(("Melanie", "I visited the Grand Canyon with John last summer.")).records[0]
    assert r.entities == ["Melanie", "Grand Canyon", "John"]
    assert "summer" not in r.entities and "visited" in r.topics
    assert extract_entities("Broadening Dave's musical knowledge is awesome.", {"dave": "Dave"}, set(), 8) == ["Dave"]
    assert extract_entities("I have 3 kg of flour and 20 dollars.", {}, set(), 8) == []
    assert extract_entities("She works at the University of Michigan in New York.", {}, set(), 8) == ["University of Michigan", "New York"]
    topics = extract_topics("Caroline researched adoption agencies and support groups.", {"caroline"}, 6)
    assert topics[:2] == ["adoption agency", "support group"]
    assert "agency" in topics and "caroline" not in topics
    assert len(extract_topics("alpha beta gamma delta epsilon zeta eta theta", set(), 3)) == 3


@pytest.mark.parametrize(
    "text, rtype",
    [
        ("Melanie loves painting landscapes.", "preference"),
        ("Caroline's favorite book is Becoming Nicole.", "preference"),
        ("Melanie is allergic to peanuts.", "constraint"),
        ("Caroline can't eat gluten.", "constraint"),
        ("To make the dough, first mix flour and water, then knead it.", "procedure"),
        ("Here is how to reset the router.", "procedure"),
        ("Melanie went camping with her kids.", "event"),
        ("Caroline is planning to adopt a child.", "event"),
        ("Melanie's sister is a nurse.", "fact"),
        ("It looks like rain.", "fact"),
    ],
)
def test_classify(text, rtype):
    assert classify(text, has_time=False) == rtype


def test_classify_time_means_event():
    assert classify("Caroline loved the concert on 6 May 2023.", has_time=True) == "event"


def test_role_based_chat():
    out = encode(
        ("user", "I usually prefer window seats. Can you help me book a flight to Denver?"),
        ("assistant", "Sure! I can help you with that."),
        speakers=("user", "assistant"),
        roles=["user", "assistant"],
    )
    # the assistant's short reply is folded into the user's question (question → answer pair)
    assert texts(out)[:2] == ["User usually prefers window seats.",
                              "Can Assistant help User book a flight to Denver? Assistant can help User with that."]
    assert out.records[0].type == "preference"


def test_sentence_split():
    assert split_sentences("I met Dr. Smith at 3.5 p.m. today. It was great! Was it? e.g. this.\nNew line") == [
        "I met Dr. Smith at 3.5 p.m. today.",
        "It was great!",
        "Was it?",
        "e.g. this.",
        "New line",
    ]


def test_deterministic_and_async():
    turns = (
        ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "Wow! Did you hear any inspiring stories? [image: a photo of a flag]"),
        ("Caroline", "The transgender stories were so inspiring! I was so happy and thankful for all the support."),
    )
    a = RulesEncoder().encode_sync(request(*turns))
    b = RulesEncoder().encode_sync(request(*turns))
    c = asyncio.run(RulesEncoder().encode(request(*turns)))
    assert a.model_dump() == b.model_dump() == c.output.model_dump()
    assert c.model == "rules-v2" and RulesEncoder.backend == "rules"
    assert "Caroline" in a.resolution_state and "Melanie" in a.resolution_state


def test_max_records_per_turn_and_missing_date():
    long_turn = " ".join(f"I visited museum number {i} in town." for i in range(10))
    assert len(encode(("Caroline", long_turn), enc=RulesEncoder(max_records_per_turn=3)).records) == 3
    r = encode(("Caroline", "I went there yesterday with my brother."), date=None).records[0]
    assert r.text == "Caroline went there yesterday with Caroline's brother." and r.time is None


def test_short_answer_is_folded_into_the_question_record():
    out = encode(("Caroline", "What did you paint last week?"), ("Melanie", "A sunset by the lake. I also painted a horse for my kids."))
    first = out.records[0]
    assert first.text.startswith("Caroline asked: What did Melanie paint") and first.text.endswith("Melanie answered: A sunset by the lake.")
    assert first.source_turns == [0, 1] and "sunset" in first.topics and {"Caroline", "Melanie"} <= set(first.entities)
    assert texts(out)[1] == "Melanie also painted a horse for Melanie's kids."


def test_reaction_only_answer_confirms_the_question():
    out = encode(("Caroline", "Did you go to the pride parade?"), ("Melanie", "Yes! It was so fun!"))
    assert texts(out) == ["Caroline asked: Did Melanie go to the pride parade? Melanie answered: Yes! It was so fun!"]
    assert out.records[0].source_turns == [0, 1]


def test_answer_names_its_speaker_later_still_attributed():
    out = encode(("Caroline", "Where do you hike?"), ("Melanie", "Mostly at Mount Tam with my dad."))
    assert texts(out) == ["Caroline asked: Where does Melanie hike? Melanie answered: Mostly at Mount Tam with Melanie's dad."]


def test_no_pair_same_speaker_long_answer_or_disabled():
    # the same speaker continuing is not an answer
    assert texts(encode(("Caroline", "Did you go to the pride parade?"), ("Caroline", "I went to the pride parade."))) == [
        "Caroline asked: Did Melanie go to the pride parade?", "Caroline went to the pride parade."]
    # a long answer is a record of its own
    long = "I went with my kids and we stayed until the very end of the evening because the music was great."
    out = encode(("Caroline", "Did you go to the pride parade?"), ("Melanie", long))
    assert len(out.records) == 2 and out.records[0].source_turns == [0] and out.records[1].source_turns == [1]
    # a question ending the segment stays alone (pairs never cross segments), and the switch turns it off
    out = encode(("Caroline", "Did you go to the pride parade?"), ("Melanie", "Yes! It was so fun!"), enc=RulesEncoder(pair_answers=False))
    assert texts(out) == ["Caroline asked: Did Melanie go to the pride parade?"]
