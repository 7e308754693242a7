"""Command-line pieces the workloads share, with nothing to import beyond the standard library.

Kept apart from accumulation.py (which needs torch and the peakscope helper) so
that a workload can check its arguments before it imports what it trains with.
"""

import argparse


def workload_parser(doc, steps=2, layers=32):
    """The options every small LoRA workload takes: --steps, --layers, --seed;
    its description is the first line of `doc`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def parse_tokens(parser, text):
    """Comma-separated token counts of a step's waves; errors through `parser`."""
    try:
        tokens = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        parser.error(f"--tokens: expected comma-separated integers, got {text!r}")
    if not tokens or min(tokens) < 2:
        parser.error("--tokens: every wave needs at least 2 tokens")
    return tokens


def parse_children(parser, text):
    """Comma-separated waves, each its children's token counts joined by '+'."""
    try:
        waves = [[int(t) for t in wave.split("+")] for wave in text.split(",") if wave]
    except ValueError:
        parser.error("--waves: comma-separated waves of '+'-joined token counts")
    if not waves or min(min(w) for w in waves) < 2:
        parser.error("--waves: every child needs at least 2 tokens")
    return waves
