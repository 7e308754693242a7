#!/usr/bin/python3
"""Training steps of a random held-out model (random_models.py), annotated for peakscope.

The seed decides the model, its intra-op threads, whether it accumulates and
its waves; --waves says which of the seed's waves to run: the calibration
ones or the check ones. Every wave runs once per step, cold (its shape, the
list of its sequence lengths, not seen before in this process) the first
time and warm the next, like step.py:

    accumulating     a step is every wave, then AdamW over the adapters and
                     zero_grad(set_to_none=True): the first wave makes the
                     adapter gradients, the others add to them
    step per wave    every wave is a step of its own: every wave makes the
                     adapter gradients

Every wave's payload carries its tokens and sequence lengths ([tokens] when
the wave is one sequence).

Run it under the recorder, with no other setting:
    build/peakscope record --host -o cal.pstrace -- \\
        /usr/bin/python3 tools/heldout/random_step.py --seed 7 --waves cal
"""

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402

import peakscope  # noqa: E402
import random_models  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True, help="the model and its waves")
    parser.add_argument("--waves", choices=("cal", "check"), required=True,
                        help="the seed's calibration waves or its check waves")
    parser.add_argument("--steps", type=int, default=2,
                        help="times each wave runs (default 2: cold, then warm)")
    parser.add_argument("--slot", default="a", help="name of the adapter slot being trained")
    parser.add_argument("--describe", action="store_true", help="print the model and its waves, run nothing")
    arguments = parser.parse_args(argv)
    if arguments.steps < 1:
        parser.error("--steps must be at least 1")
    return arguments


def run_wave(model, spec, arguments, step, index, lengths, seen, out):
    """One micro-batch, forward and backward, inside its wave range."""
    tokens = sum(lengths)
    cold = lengths not in seen
    seen.add(lengths)
    ids, targets = random_models.batch(spec, step, index, lengths)
    started = time.perf_counter()
    with peakscope.wave(tokens=tokens, slots=[arguments.slot], groups=1, cold=cold,
                        sequence_lengths=list(lengths)):
        loss = model(ids, targets, lengths)
        loss.backward()
    print(f"  step {step} wave {index}: tokens {tokens:5d} sequences "
          f"{'+'.join(str(n) for n in lengths)} cold {'yes' if cold else 'no'} "
          f"loss {float(loss):.3f} {time.perf_counter() - started:.3f} s", file=out)


def run(arguments, out=sys.stdout):
    spec = random_models.draw(arguments.seed)
    print(spec.describe(), file=out)
    print(f"  {spec.describe_waves()}", file=out)
    if arguments.describe:
        return 0
    waves = spec.calibration if arguments.waves == "cal" else spec.check
    torch.set_num_threads(spec.threads)  # part of the model: the seed chose it
    torch.use_deterministic_algorithms(True)
    model = random_models.build_model(spec)
    optimizer = torch.optim.AdamW(model.adapter_parameters(), lr=1e-3)
    annotations = [peakscope.annotate(model, layers=model.layers, head_modules=model.head_modules()),
                   peakscope.annotate_optimizer(optimizer)]
    print(f"  adapter parameters {sum(p.numel() for p in model.adapter_parameters())}; "
          f"backend {peakscope.get_backend().name}, threads {torch.get_num_threads()}", file=out)
    seen = set()
    started = time.perf_counter()
    steps = 0
    for step in range(arguments.steps):
        for index, lengths in enumerate(waves):
            run_wave(model, spec, arguments, step, index, lengths, seen, out)
            if not spec.accumulate:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                steps += 1
        if spec.accumulate:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps += 1
    peakscope.flush()
    for annotation in annotations:
        annotation.remove()
    print(f"  {arguments.steps * len(waves)} waves in {steps} optimizer steps, "
          f"{time.perf_counter() - started:.2f} s", file=out)
    return 0


def main(argv=None):
    return run(parse_arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
