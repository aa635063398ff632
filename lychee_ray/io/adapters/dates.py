"""Parsing of the date formats found in the supported datasets."""

from __future__ import annotations

from datetime import datetime

# Formats tried in order before falling back to dateparser (which is slow but lenient).
KNOWN_FORMATS = (
    "%I:%M %p on %d %B, %Y",  # LoCoMo: "1:56 pm on 8 May, 2023"
    "%I:%M %p on %d %b, %Y",
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: "2023/05/20 (Sat) 02:21"
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
)


def parse_datetime(text: str) -> str:
    """Parse a dataset date string to an ISO datetime string; ``ValueError`` when impossible."""
    s = " ".join(str(text).split())
    if not s:
        raise ValueError("empty date")
    try:
        return datetime.fromisoformat(s).isoformat()
    except ValueError:
        pass
    for fmt in KNOWN_FORMATS:
        try:
            return datetime.strptime(s, fmt).isoformat()
        except ValueError:
            continue
    import dateparser  # delays dateparser's load (~0.3 s) to a date no fixed format reads

    dt = dateparser.parse(s, settings={"STRICT_PARSING": True, "PREFER_DAY_OF_MONTH": "first"}, languages=["en"])
    if dt is None:
        raise ValueError(f"unparseable date {text!r}")
    return dt.replace(tzinfo=None).isoformat()
