"""A row of nccl-tests' modern 13-column table as one regular expression (what the built-in
``nccl-bandwidth`` profile matched before it read tables by their headers): the ``grep -E``
baseline of the parser benchmarks, and the ``bandwidthResult`` of a profile of one's own."""

ROW_REGEX = (
    r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:)?\s*(?P<size>\d+)\s+\d+\s+[A-Za-z]\w*\s+[A-Za-z]\w*\s+-?\d+"
    r"\s+[\d.]+(?:[eE][+-]?\d+)?\s+(?P<algBW>[\d.]+(?:[eE][+-]?\d+)?)\s+(?P<busBW>[\d.]+(?:[eE][+-]?\d+)?)"
)
HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong"
)
"""The column header nccl-tests prints above such rows."""
