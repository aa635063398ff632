"""The paper's segment encoder: one schema-constrained LLM call per segment.

Prompt order matters for provider prompt caching: the static instructions come first (identical for
every call), then the session date(s), the bounded reference context ρ_k, then the segment's turns.
"""

from __future__ import annotations

from typing import Any

from lychee_ray.ingest.encode.base import (
    EncodeOutput,
    EncodeRequest,
    EncodeResult,
    RecordDraft,
    check_reply_language,
    merge_to_summary,
    wrong_script_problem,
)
from lychee_ray.ingest.encode.salvage import TRUNCATED, salvage_cut_reply, salvage_note
from lychee_ray.config import EncoderConfig, TokenizerConfig
from lychee_ray.ingest.encode.candidates import candidates_block
from lychee_ray.core.records import RECORD_TYPES
from lychee_ray.core.tools import CALL_ARROW
from lychee_ray.llm.errors import LLMCallFailed
from lychee_ray.text.tokens import count_tokens, truncate_to_tokens
from lychee_ray.names import OPENAI_BACKEND

# How the prompt explains each RecordDraft field, where it says more than the field's description in
# the JSON schema; a field not listed here is explained by its Field(description=...) (draft_fields).
FIELD_NOTES = {
    "type": f"""one of {", ".join(RECORD_TYPES)}
  (fact = stable information; preference = likes/dislikes/opinions; event = something that happened or is
  planned, with its time; constraint = a rule, limit or requirement; procedure = how something is done;
  failure_pattern = what went wrong and why; tool_affordance = what a tool or resource can do)""",
    "text": "the standalone sentence",
    "entities": "people, places, organisations, objects named in it",
    "topics": "1-4 short lowercase keywords",
    "time": """start and end as YYYY-MM-DD (same day for a single day; first and last day for a month or year)
  or null when the record has no time; expression = the original time words or null""",
    "source_turns": "the [index] numbers of the turns the record comes from",
    "artifact": """code, table or document when the record describes ONE code block, table or drafted document
  (letter, e-mail, message, will) of the turns; else null""",
    "slot": """what the record states a value of, as 'subject · attribute' ('user · shipping address',
  'reservation ABC123 · flights'), or null when it states nothing that can change""",
    "slot_value": "that value in a few words, or null",
    "valid_from": "YYYY-MM-DD the value became true (the day of the change, from the session date), or null",
    "replaces": "labels of candidate records (given with the reference context) of the same slot whose value this one replaces",
    "contradicts": "labels of candidate records of the same slot this one contradicts without saying it changed",
}


def draft_fields() -> str:
    """The prompt's "Fields:" list: one line per :class:`RecordDraft` field, in its order, with its
    :data:`FIELD_NOTES` entry or else its ``Field(description=...)``."""
    lines = []
    shown = RecordDraft.model_json_schema()["properties"]  # (a field the model is not sent is not explained)
    for name, info in RecordDraft.model_fields.items():
        if name not in shown:
            continue
        note = FIELD_NOTES.get(name, info.description)
        lines.append(f"- {name}: {note}" if note else f"- {name}")
    return ";\n".join(lines) + "."


INSTRUCTIONS = f"""You write long-term memory records for a conversational agent.
You receive one segment of a conversation (consecutive turns on one topic), the date of its session, and
reference context from earlier segments. Return JSON with "records" and "resolution_state".

Each record is ONE standalone sentence that can be understood with no other context:
- use people's names instead of pronouns ("I", "you", "she", "my sister" -> the name when known);
- turn relative dates into absolute ones using the session date ("yesterday" -> "7 May 2023",
  "last year" -> "2022"); keep the original wording in time.expression;
- keep concrete details: names, numbers, places, titles, dates, quantities, reasons;
- one fact per record; skip greetings and small talk; do not invent anything;
- write in the language of the segment's turns (do not translate).
Fields:
{draft_fields()}
resolution_state: a short note of who or what the pronouns and aliases of this conversation refer to
(e.g. "I = Caroline; you = Melanie; 'the shelter' = Hope Animal Shelter"), for the next segment.
"""


# encoder.mode: summary — the paper's "summary-level records" ablation: the same call and output
# schema, but ONE record summarising the whole segment instead of one record per fact.
SUMMARY_INSTRUCTIONS = INSTRUCTIONS.replace(
    "Each record is ONE standalone sentence that can be understood with no other context:",
    "Write exactly ONE record: a short standalone summary (1-3 sentences) of the whole segment that can be\n"
    "understood with no other context:",
).replace("- one fact per record; skip greetings and small talk; do not invent anything;",
          "- summarise the segment as a whole; skip greetings and small talk; do not invent anything;")


# encoder.context_style: guarded — weak models copy a bare "Recent records" list into every later
# segment (docs/llm-quality.md); saying what the context is for, and that its records are already
# stored, keeps it useful for resolving names and dates without inviting copies.
GUARDED_CONTEXT_RULE = (
    "- write records ONLY for what the Segment turns say, citing their [index] numbers; the reference context\n"
    "  is already stored memory, given only so you know who is who and which dates are meant: never copy,\n"
    "  repeat or rephrase its records;\n"
)


# Agent logs: segments with tool calls ("-> tool(args)") and tool results. Shown only for
# such segments (a second static prefix: provider prompt caching still applies per variant).
AGENT_RULES = (
    "Agent logs: turns may be an assistant's tool calls ('-> tool(key=value)') and tool results ('tool result: ...').\n"
    "- attribute by role: what the assistant said or did is the agent's ('the agent cancelled ...'), what the user\n"
    "  said is the user's; a tool result is what the tool returned, never something the user said;\n"
    "- keep identifiers verbatim: reservation/order codes, ids, e-mails, amounts, dates, flight numbers, names;\n"
    "- event = an action that changed something (the tool, its key arguments and the result); fact = state a\n"
    "  lookup returned (one record per entity looked up); tool_affordance = which tool, with which arguments,\n"
    "  served which request; failure_pattern = a tool error, a refusal, a hand-over to a human, or the user\n"
    "  correcting the agent (say what failed and why); procedure = a multi-step flow that reached its goal.\n"
)

# Assistant chats: a user and an AI assistant (ChatGPT exports, coding and support chats). Shown only for
# segments with an assistant turn that says more than tool calls and no tool traffic (a segment with
# tool traffic gets AGENT_RULES instead); a third static prefix.
ASSISTANT_RULES = (
    "Assistant chats: a user talks with an AI assistant. The user's side is what a later question needs most.\n"
    "- record every fact, preference, plan, decision or change the user states, with its specifics, also when it\n"
    "  is said inside a question: \"I secured 5 interviews - how can I prepare?\" -> \"The user secured 5\n"
    "  interviews.\"; a question alone is not a fact or preference (record it, if at all, as an event: \"The user\n"
    "  asked how to ...\");\n"
    "- condense each assistant answer into ONE record of what it recommended, decided or produced, not a record\n"
    "  per sentence; the assistant has no preferences;\n"
    "- a code block, table or drafted document (letter, e-mail, message, will, cover letter) is ONE record with\n"
    "  artifact set (code / table / document): what it is, for whom, and its identifiers (function, class, table,\n"
    "  file and route names), names and numbers verbatim, e.g. \"The assistant wrote Python code for the user's\n"
    "  budget tracker: class Transaction, add_transaction(), table transactions, 'sqlite:///budget.db'.\";\n"
    "- rewrite I/you only in narrative text, never inside code, quotes, drafted text, URLs, paths or terms (I/O);\n"
    "  a draft written for the user is recorded as drafted for the user (\"The assistant drafted a cover letter\n"
    "  for the user's application to ...\"), never as the assistant's own facts.\n"
)

# A system prompt (kind "system_prompt") is the agent's instructions, encoded once per distinct text.
SYSTEM_PROMPT_INSTRUCTIONS = f"""You write long-term memory records from an AI agent's system prompt (its instructions).
Return JSON with "records" and "resolution_state" (an empty string).
Write one record per rule the agent must follow: type constraint, ONE standalone sentence starting with
"Policy:", keeping numbers, limits and conditions verbatim; a step-by-step flow the prompt prescribes is
one record of type procedure. Skip greetings, formatting and text that states no rule. Do not invent rules.
Fields: type (one of {", ".join(RECORD_TYPES)}), text, entities (named things), topics (1-4 lowercase
keywords), time (null), source_turns ([index] of the prompt turn).
"""


def instructions_for(cfg: EncoderConfig, agent: bool = False, chat: bool = False) -> str:
    """Static system prompt for ``encoder.mode`` (atomic records or one summary record) and
    ``encoder.context_style`` (the guarded style adds the do-not-copy rule); ``agent``: the segment
    has tool traffic (:data:`AGENT_RULES` added); ``chat``: a user talks with an assistant
    (:data:`ASSISTANT_RULES` added)."""
    base = SUMMARY_INSTRUCTIONS if cfg.mode == "summary" else INSTRUCTIONS
    anchor = "- write in the language of the segment's turns (do not translate).\n"
    if cfg.context_style == "guarded":
        base = base.replace(anchor, anchor + GUARDED_CONTEXT_RULE, 1)
    if agent:
        base = base.replace(anchor, anchor + AGENT_RULES, 1)
    if chat:
        base = base.replace(anchor, anchor + ASSISTANT_RULES, 1)
    return base


def is_chat_segment(request: EncodeRequest) -> bool:
    """A user and an assistant that says more than tool calls: the assistant-chat rules apply."""
    return any(t.role == "user" for t in request.turns) and any(
        t.role == "assistant" and any(not line.startswith(CALL_ARROW) and line.strip() for line in t.content.split("\n"))
        for t in request.turns)


def _format_turn(t: Any, max_chars: int) -> str:
    text = t.content if len(t.content) <= max_chars else t.content[:max_chars] + " […]"
    return f"[{t.index}] {t.speaker} ({t.role}): {text}"


def reference_context(request: EncodeRequest, cfg: EncoderConfig, tokenizer: TokenizerConfig) -> str:
    """ρ_k = (d_{k−1}; last m records), newest records kept first when the token budget is short.

    ``context_style: guarded`` labels the records as already stored (not to be copied); a repair
    call (``request.repair``) shows no records (``no_records``) or adds the rejected copies as a
    "do not repeat" list (``do_not_repeat``), all within the same token budget.
    """
    budget = cfg.context_token_budget
    if budget <= 0:
        return ""
    state = truncate_to_tokens(request.prev_resolution_state.strip(), budget // 3 or budget, tokenizer.encoding)
    lines = [f"Resolution state: {state}"] if state else []
    used = count_tokens("\n".join(lines), tokenizer.encoding)
    records = request.prev_records[-cfg.context_records:] if cfg.context_records else []
    if request.repair == "no_records":
        records = []
    elif request.repair == "do_not_repeat":
        records = list(dict.fromkeys([*records, *request.avoid_texts]))
    kept: list[str] = []
    for text in reversed(records):
        line = f"- {text}"
        cost = count_tokens(line, tokenizer.encoding) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    if kept:
        if request.repair == "do_not_repeat":
            lines.append("Already stored — do NOT write these again, write only new facts from the Segment turns:")
        elif cfg.context_style == "guarded":
            lines.append("Already stored (for resolving names and dates only; do not copy):")
        else:
            lines.append("Recent records:")
        lines.extend(reversed(kept))
    return "\n".join(lines)


def build_messages(request: EncodeRequest, cfg: EncoderConfig, tokenizer: TokenizerConfig) -> list[dict[str, str]]:
    """The chat messages of one encode call (system = static instructions)."""
    if request.kind == "system_prompt":
        prompt = "\n".join(_format_turn(t, cfg.max_turn_chars) for t in request.turns)
        return [{"role": "system", "content": SYSTEM_PROMPT_INSTRUCTIONS},
                {"role": "user", "content": f"System prompt:\n{prompt}"}]
    agent = any(t.tool_calls or t.role == "tool" for t in request.turns)
    chat = not agent and is_chat_segment(request)  # tool traffic: the agent rules say what matters there
    dates = ", ".join(request.session_dates) or "unknown"
    rho = reference_context(request, cfg, tokenizer)
    speakers = ", ".join(request.speakers)
    turns = "\n".join(_format_turn(t, cfg.max_turn_chars) for t in request.turns)
    candidates = candidates_block(request.candidates, cfg.currency, tokenizer.encoding)
    user = (
        f"Session date: {dates}\n"
        f"Speakers: {speakers}\n"
        f"Reference context from earlier segments:\n{rho or '(none)'}\n\n"
        + (f"{candidates}\n\n" if candidates else "")
        + f"Segment turns:\n{turns}"
    )
    return [{"role": "system", "content": instructions_for(cfg, agent, chat)}, {"role": "user", "content": user}]


class OpenAIEncoder:
    """``SegmentEncoder`` backed by :class:`~lychee_ray.llm.client.LLMClient`."""

    backend = OPENAI_BACKEND
    # a degenerate reply is worth one more call with the repair prompt (encoder.guard.repair_mode)
    supports_repair = True

    def __init__(self, client: Any, cfg: EncoderConfig, tokenizer: TokenizerConfig) -> None:
        self.client = client
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.model = client.config.model

    async def encode(self, request: EncodeRequest) -> EncodeResult:
        """One call; a reply in the wrong language (``encoder.wrong_script_share``) is an invalid reply,
        retried by the client like malformed JSON. A reply cut at the token limit (finish_reason=length)
        is tried ``encoder.truncated_attempts`` times; still cut, its complete records are kept
        (``encoder.truncated_reply: salvage``, the result carries a :class:`SalvageNote`) or, when it
        holds none, the call's :class:`LLMCallFailed` (kind ``truncated``) is raised."""

        def validate(out: EncodeOutput) -> None:
            check_reply_language(out, request, self.cfg.wrong_script_share)

        try:
            res = await self.client.chat_json(
                "encode",
                build_messages(request, self.cfg, self.tokenizer),
                EncodeOutput,
                schema_name="segment_records",
                max_completion_tokens=self.cfg.max_completion_tokens,
                keys={"conversation_id": request.conversation_id, "segment_id": request.segment_id},
                validate=validate,
                max_truncated_attempts=self.cfg.truncated_attempts,
            )
        except LLMCallFailed as e:
            salvaged = self._salvage(e, request)
            if salvaged is None:
                raise
            return salvaged
        out = merge_to_summary(res.parsed) if self.cfg.mode == "summary" else res.parsed
        return EncodeResult(output=out, attempts=res.usage.attempts, model=self.model)

    def _salvage(self, e: LLMCallFailed, request: EncodeRequest) -> EncodeResult | None:
        """The complete records of a call that ended cut, or None (not cut, salvage off, nothing whole,
        or the kept records in the wrong language)."""
        if e.kind != TRUNCATED or not e.reply_text or self.cfg.truncated_reply != "salvage":
            return None
        s = salvage_cut_reply(e.reply_text)
        if not s.output.records or wrong_script_problem(s.output, request, self.cfg.wrong_script_share) is not None:
            return None
        out = merge_to_summary(s.output) if self.cfg.mode == "summary" else s.output
        return EncodeResult(output=out, attempts=e.attempts, model=self.model,
                            salvage=salvage_note(s, e.attempts, self.cfg.max_completion_tokens))
