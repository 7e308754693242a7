#!/usr/bin/python3
"""Held-out training steps: a model of workloads/heldout/models.py, annotated for peakscope.

Each step runs one wave (micro-batch) per entry of --tokens (or, for the packed
model, of --sequences), accumulating adapter gradients, then AdamW over the
adapters and zero_grad(set_to_none=True). A wave whose shape (token count, or
the list of sequence lengths when packed) has not run before is cold. Every
wave's payload carries its sequence lengths: [tokens] for an unpacked wave.

Run it under the recorder:
    build/peakscope record --host -o mha.pstrace -- \\
        /usr/bin/python3 workloads/heldout/step.py --model mha --tokens 64,128,256
"""

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402

import peakscope  # noqa: E402
from models import MODELS, build_model  # noqa: E402
from training import end_run, train_steps  # noqa: E402


def _integers(parser, option, text, separator):
    try:
        values = [int(t) for t in text.split(separator) if t.strip()]
    except ValueError:
        parser.error(f"{option}: expected integers separated by {separator!r}, got {text!r}")
    if not values:
        parser.error(f"{option}: nothing given in {text!r}")
    return values


def parse_waves(parser, arguments):
    """Each wave's sequence lengths, from --tokens or --sequences."""
    if arguments.sequences is not None:
        if arguments.tokens is not None:
            parser.error("give --tokens or --sequences, not both")
        waves = [_integers(parser, "--sequences", wave, "+")
                 for wave in arguments.sequences.split(",") if wave.strip()]
        if not waves:
            parser.error("--sequences: no wave given")
    else:
        waves = [[t] for t in _integers(parser, "--tokens", arguments.tokens or "64,128,256", ",")]
    for lengths in waves:
        if min(lengths) < 2:
            parser.error("every sequence needs at least 2 tokens")
        if len(lengths) > 1 and arguments.model != "packed":
            parser.error(f"--model {arguments.model} takes one sequence per wave "
                         "(several only with --model packed)")
    return waves


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--tokens", default=None,
                        help="comma-separated tokens of each wave in a step (default 64,128,256)")
    parser.add_argument("--sequences", default=None,
                        help="each wave's sequence lengths, '+' within a wave, ',' between waves "
                             "(e.g. 64+64,128+32+32,256)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps (default 2)")
    parser.add_argument("--layers", type=int, default=None, help="decoder layers (model default)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slot", default="a", help="name of the adapter slot being trained")
    arguments = parser.parse_args(argv)
    if arguments.steps < 1:
        parser.error("--steps must be at least 1")
    arguments.waves = parse_waves(parser, arguments)
    return arguments


def batch(arguments, step, wave, lengths, vocab):
    """Deterministic token ids and next-token targets, sequence by sequence."""
    generator = torch.Generator().manual_seed(arguments.seed * 1_000_003 + step * 1009 + wave)
    ids, targets = [], []
    for length in lengths:
        sequence = torch.randint(vocab, (length + 1,), generator=generator)
        ids.append(sequence[:-1])
        targets.append(sequence[1:])
    return torch.cat(ids), torch.cat(targets)


def run(arguments, out=sys.stdout):
    torch.set_num_threads(arguments.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(arguments.seed)
    model = build_model(arguments.model, layers=arguments.layers)
    optimizer = torch.optim.AdamW(model.adapter_parameters(), lr=1e-3)
    annotations = [peakscope.annotate(model, layers=model.layers, head_modules=model.head_modules()),
                   peakscope.annotate_optimizer(optimizer)]
    sizes = model.sizes
    print(f"heldout {arguments.model}: {sizes['layers']} layers, hidden {sizes['hidden']}, "
          f"heads {sizes['heads']}, intermediate {sizes['intermediate']}, rank {sizes['rank']}, "
          f"vocab {sizes['vocab']}; adapter parameters "
          f"{sum(p.numel() for p in model.adapter_parameters())}; "
          f"backend {peakscope.get_backend().name}, threads {arguments.threads}", file=out)
    seen = set()

    def run_wave(step, index, lengths):
        tokens = sum(lengths)
        shape = tuple(lengths)
        cold = shape not in seen
        seen.add(shape)
        ids, targets = batch(arguments, step, index, lengths, sizes["vocab"])
        wave_started = time.perf_counter()
        with peakscope.wave(tokens=tokens, slots=[arguments.slot], groups=1, cold=cold,
                            sequence_lengths=list(lengths)):
            loss = model(ids, targets, lengths)
            loss.backward()
        seconds = time.perf_counter() - wave_started
        print(f"  step {step} wave {index}: tokens {tokens:5d} sequences "
              f"{'+'.join(str(n) for n in lengths)} cold {'yes' if cold else 'no'} "
              f"loss {float(loss):.3f} {seconds:.3f} s", file=out)

    started = time.perf_counter()
    train_steps(arguments.steps, arguments.waves, run_wave, optimizer)
    end_run(annotations)
    print(f"  {arguments.steps * len(arguments.waves)} waves in {arguments.steps} steps, "
          f"{time.perf_counter() - started:.2f} s", file=out)
    return 0


def main(argv=None):
    return run(parse_arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
