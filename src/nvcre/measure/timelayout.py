"""Go time layouts (``2006-01-02T15:04:05.999999999Z07:00``) turned into Python parsers.

A layout is compiled once into a regular expression with one group per element, so the
non-padded forms (``1``, ``2``, ``_2``), optional fractions (``.999``) and zones (``Z07:00``,
``-0700``) parse exactly as Go's ``time.Parse`` would. As in Go, a fractional second may follow
the seconds even when the layout does not show one. A value without a zone is UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# (layout element, regex of its value, the group name it fills); longest first where they share a prefix.
_ELEMENTS: tuple[tuple[str, str, str], ...] = (
    ("January", "|".join(_MONTHS), "month_name"),
    ("Jan", "|".join(m[:3] for m in _MONTHS), "month_name"),
    ("Monday", "|".join(_DAYS), "weekday"),
    ("Mon", "|".join(d[:3] for d in _DAYS), "weekday"),
    ("MST", r"[A-Z]{3,5}|[+-]\d{2,4}", "zone_name"),
    ("2006", r"\d{4}", "year"),
    ("002", r"\d{3}", "yday"),
    ("__2", r"[ \d]{2}\d", "yday"),
    ("01", r"\d{2}", "month"),
    ("02", r"\d{2}", "day"),
    ("_2", r"[ \d]\d", "day"),
    ("03", r"\d{2}", "hour12"),
    ("04", r"\d{2}", "minute"),
    ("05", r"\d{2}", "second"),
    ("06", r"\d{2}", "year2"),
    ("15", r"\d{1,2}", "hour"),
    ("1", r"\d{1,2}", "month"),
    ("2", r"\d{1,2}", "day"),
    ("3", r"\d{1,2}", "hour12"),
    ("4", r"\d{1,2}", "minute"),
    ("5", r"\d{1,2}", "second"),
    ("PM", r"AM|PM", "ampm"),
    ("pm", r"am|pm", "ampm"),
    ("Z07:00:00", r"Z|[+-]\d{2}:\d{2}:\d{2}", "zone"),
    ("Z070000", r"Z|[+-]\d{6}", "zone"),
    ("Z07:00", r"Z|[+-]\d{2}:\d{2}", "zone"),
    ("Z0700", r"Z|[+-]\d{4}", "zone"),
    ("Z07", r"Z|[+-]\d{2}", "zone"),
    ("-07:00:00", r"[+-]\d{2}:\d{2}:\d{2}", "zone"),
    ("-070000", r"[+-]\d{6}", "zone"),
    ("-07:00", r"[+-]\d{2}:\d{2}", "zone"),
    ("-0700", r"[+-]\d{4}", "zone"),
    ("-07", r"[+-]\d{2}", "zone"),
)
_FRACTION = re.compile(r"[.,](0+|9+)(?!\d)")
_OPTIONAL_FRACTION = r"(?:[.,](?P<fraction>\d{1,9}))?"


class LayoutError(ValueError):
    """A Go time layout nvcre cannot translate."""


@dataclass(frozen=True)
class TimeLayout:
    """A compiled Go time layout: ``parse(text)`` gives an aware datetime, or None if it does not fit."""

    layout: str
    regex: re.Pattern[str]

    def parse(self, text: str) -> datetime | None:
        match = self.regex.fullmatch(text.strip())
        if match is None:
            return None
        try:
            return _build(match.groupdict())
        except ValueError:
            return None


def compile_layout(layout: str) -> TimeLayout:
    """Translate ``layout`` (Go ``time`` reference-time notation) into a parser."""
    parts: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(layout):
        fraction = _FRACTION.match(layout, i)
        if fraction is not None and "second" in seen:
            digits = len(fraction.group(1))
            exact = fraction.group(1)[0] == "0"
            group = "?:" if "fraction" in seen else "?P<fraction>"
            parts.append(rf"[.,]({group}\d{{{digits}}})" if exact else rf"(?:[.,]({group}\d{{1,9}}))?")
            seen.add("fraction")
            i = fraction.end()
            continue
        element = next((e for e in _ELEMENTS if layout.startswith(e[0], i)), None)
        if element is None or (element[0] == "_2" and layout.startswith("_2006", i)):
            parts.append(re.escape(layout[i]))
            i += 1
            continue
        text, value, group = element
        if group in seen:
            parts.append(f"(?:{value})")
        else:
            parts.append(f"(?P<{group}>{value})")
            seen.add(group)
        i += len(text)
        if group == "second" and not _FRACTION.match(layout, i) and "fraction" not in seen:
            parts.append(_OPTIONAL_FRACTION)
            seen.add("fraction")
    if not seen & {"year", "year2", "hour", "hour12"}:
        raise LayoutError(
            f"time layout {layout!r} has no date or time element (Go reference time 2006-01-02 15:04:05)"
        )
    return TimeLayout(layout, re.compile("".join(parts), re.ASCII))


def _build(fields: dict[str, str | None]) -> datetime:
    def number(name: str, default: int) -> int:
        value = fields.get(name)
        return int(value) if value and value.strip() else default

    year = number("year", 0) or (2000 + number("year2", 0) if fields.get("year2") else 0)
    hour = number("hour", 0)
    if fields.get("hour12") is not None:
        hour = number("hour12", 0) % 12 + (12 if (fields.get("ampm") or "").lower() == "pm" else 0)
    name = fields.get("month_name")
    month = next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(name)) if name else number("month", 1)
    fraction = fields.get("fraction") or ""
    micro = int((fraction + "000000")[:6]) if fraction else 0
    moment = datetime(year, month, number("day", 1), hour, number("minute", 0), number("second", 0), micro)
    if fields.get("yday"):
        moment = moment.replace(month=1, day=1) + timedelta(days=number("yday", 1) - 1)
    return moment.replace(tzinfo=_zone(fields.get("zone")))


def _zone(text: str | None) -> timezone:
    if not text or text == "Z":
        return UTC
    digits = text[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0), seconds=int(digits[4:6] or 0))
    return timezone(-offset if text[0] == "-" else offset)
