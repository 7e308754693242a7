"""Command-line pieces the workloads share, with nothing to import beyond the standard library.

Kept apart from accumulation.py (which needs torch and the peakscope helper) so
that a workload can check its arguments before it imports what it trains with.
"""


def parse_tokens(parser, text):
    """Comma-separated token counts of a step's waves; errors through `parser`."""
    try:
        tokens = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        parser.error(f"--tokens: expected comma-separated integers, got {text!r}")
    if not tokens or min(tokens) < 2:
        parser.error("--tokens: every wave needs at least 2 tokens")
    return tokens
