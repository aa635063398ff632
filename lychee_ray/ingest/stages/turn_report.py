"""Turns as they pass each stage of a build run, reported per conversation (the progress display's
stage counts and its ETA).

Each stage credits a conversation's turns as it gets through them — the encode stage segment by
segment, the others when they are done with the conversation — and tops them up to the
conversation's turn count when it is done with it (:func:`complete`), so every stage's count ends at
the run's turns. Turns a stage did not work on (a conversation skipped or failed before it, the
stored turns of an increment) are credited as passed without work: they shrink what is left without
making the stage look faster. What a work has been credited travels with it
(:attr:`~lychee_ray.ingest.stages.work.StageWork.passed`), so a stage in another process goes on
from there.
"""

from __future__ import annotations

from typing import NamedTuple
from collections.abc import Callable

from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.names import BUILD_STAGES, COMMIT_STAGE, BuildStageName


class StageTurns(NamedTuple):
    """``turns`` more turns passed ``stage``; ``worked``: the stage did work on them."""

    stage: BuildStageName
    turns: int
    worked: bool = True


# Where reports go: the run's progress counters (in process) or its progress actor (Ray).
TurnSink = Callable[[list[StageTurns]], None]


def advance(work: StageWork, stage: BuildStageName, turns: int, worked: bool = True) -> list[StageTurns]:
    """Credit ``turns`` more of ``work``'s turns to ``stage`` (never past the conversation's turns)."""
    have = work.passed.get(stage, 0)
    more = max(0, min(turns, work.num_turns - have))
    if not more:
        return []
    work.passed[stage] = have + more
    return [StageTurns(stage, more, worked)]


def advance_to(work: StageWork, stage: BuildStageName, share: float) -> list[StageTurns]:
    """Credit ``stage`` up to ``share`` of the turns ``work`` brought to be built (an increment's
    stored turns were credited at its decision): a stage that works through texts in calls."""
    target = work.first_turn + int((work.num_turns - work.first_turn) * share)
    return advance(work, stage, target - work.passed.get(stage, 0))


def chunk_reporter(stage: BuildStageName, sink: TurnSink | None) -> Callable[[StageWork, float], None] | None:
    """An embedding stage's ``on_chunk``: the share of a work's texts embedded, credited as turns."""
    if sink is None:
        return None

    def report(work: StageWork, share: float) -> None:
        if reports := advance_to(work, stage, share):
            sink(reports)

    return report


def complete(work: StageWork, stage: BuildStageName) -> list[StageTurns]:
    """``stage`` is done with ``work``: the rest of its turns, as worked."""
    return advance(work, stage, work.num_turns)


def stored_turns(work: StageWork) -> list[StageTurns]:
    """An increment's stored turns (before ``first_turn``): passed in every stage without work."""
    return [r for stage in BUILD_STAGES for r in advance(work, stage, work.first_turn, worked=False)]


def settle(work: StageWork, status: str) -> list[StageTurns]:
    """The outcome ``status`` of ``work`` is final: every stage gets the rest of its turns — worked
    only at the commit of a built conversation, without work otherwise (skipped, failed)."""
    out: list[StageTurns] = []
    for stage in BUILD_STAGES:
        out += advance(work, stage, work.num_turns, worked=status == "built" and stage == COMMIT_STAGE)
    return out


def stage_reporter(work: StageWork, sink: TurnSink | None) -> Callable[[BuildStageName, int], None] | None:
    """A callback crediting ``work``'s turns as a stage passes them (for code that does not know the
    work: the construct step's segmenter and encoder), or None without a sink."""
    if sink is None:
        return None

    def report(stage: BuildStageName, turns: int) -> None:
        if reports := advance(work, stage, turns):
            sink(reports)

    return report


__all__ = ["StageTurns", "TurnSink", "advance", "advance_to", "chunk_reporter", "complete", "settle", "stage_reporter",
           "stored_turns"]
