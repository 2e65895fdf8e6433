"""Go ``time.ParseDuration`` and ``Duration.String``, for ``orchestration.timeoutPerJob``.

The Workflow stores a ``metav1.Duration``, which serialises as Go prints it (``24h0m0s``).
"""

from __future__ import annotations

import re
from fractions import Fraction

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_MAX = (1 << 63) - 1


def parse_duration(text: str) -> int:
    """Nanoseconds of a Go duration string; ``ValueError`` if Go would reject it."""
    s = text
    sign = 1
    if s and s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total = Fraction(0)
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m:
            raise ValueError(f"invalid duration {text!r}")
        total += Fraction(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    ns = int(total)
    if ns > _MAX:
        raise ValueError(f"invalid duration {text!r}")
    return sign * ns


def _fraction(value: int, digits: int) -> tuple[str, int]:
    """Go's fmtFrac: ``value`` split at ``digits`` decimals, trailing zeros dropped."""
    frac = ""
    for _ in range(digits):
        digit = value % 10
        if frac or digit:
            frac = str(digit) + frac
        value //= 10
    return ("." + frac if frac else ""), value


def format_duration(ns: int) -> str:
    """``time.Duration(ns).String()``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1_000_000_000:
        for unit, digits in (("ns", 0), ("µs", 3), ("ms", 6)):
            if u < 10 ** (digits + 3):
                frac, whole = _fraction(u, digits)
                return f"{sign}{whole}{frac}{unit}"
    frac, secs = _fraction(u, 9)
    out = f"{secs % 60}{frac}s"
    mins = secs // 60
    if mins:
        out = f"{mins % 60}m" + out
        hours = mins // 60
        if hours:
            out = f"{hours}h" + out
    return sign + out
