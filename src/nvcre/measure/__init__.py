"""Measurements and verdicts (pure): LogProfiles, the NCCL and goodput parsers, thresholds.

One implementation serves the measurement controllers, ``nvcrectl analyze`` and the tests.
Parsers stream lines, keep bounded state and never raise on garbage.
"""
