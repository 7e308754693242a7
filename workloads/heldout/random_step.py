#!/usr/bin/python3
"""Training steps of a random held-out model (random_models.py), annotated for peakscope.

The seed decides the model, its intra-op threads, whether it accumulates and
its waves; --waves says which of the seed's waves to run: the calibration
ones or the check ones. Every wave runs once per step, cold (its shape, the
list of its sequence lengths, not seen before in this process) the first
time and warm the next, like step.py:

    accumulating     a step is every wave, then AdamW over the adapters and
                     zero_grad(set_to_none=True): the first wave makes the
                     adapter gradients, the others add to them; step k
                     starts at wave k, as a data loader's steps do not all
                     start with one wave (README: gradient accumulation)
    step per wave    every wave is a step of its own: every wave makes the
                     adapter gradients

Every wave's payload carries its tokens and sequence lengths ([tokens] when
the wave is one sequence).

With --groups the seed draws a model with 2 or 3 adapter slots over one
shared frozen base (random_models.draw_groups) and waves of several gradient
groups: each slot's forward runs on its own share of the wave's tokens, then
one backward call per slot, in the wave's backward order. --waves cal: the
multi-group calibration waves; single: one-group waves, one slot at a time;
check: multi-group waves of group sizes never calibrated. Each payload is the
list form: {"tokens", "slots", "groups": [{"tokens", "slot",
"sequence_lengths" (packed groups only)}...], "cold", "backward_order"}.

Run it under the recorder, with no other setting:
    build/peakscope record --host -o cal.pstrace -- \\
        /usr/bin/python3 workloads/heldout/random_step.py --seed 7 --waves cal
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
import random_models  # noqa: E402
from training import end_run, train_steps  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True, help="the model and its waves")
    parser.add_argument("--waves", choices=("cal", "check", "single"), required=True,
                        help="the seed's calibration waves or its check waves (single: one-group "
                             "calibration waves, with --groups only)")
    parser.add_argument("--groups", action="store_true",
                        help="the seed's multi-slot model and its waves of several gradient groups")
    parser.add_argument("--steps", type=int, default=2,
                        help="times each wave runs (default 2: cold, then warm)")
    parser.add_argument("--slot", default="a", help="name of the adapter slot being trained")
    parser.add_argument("--describe", action="store_true", help="print the model and its waves, run nothing")
    arguments = parser.parse_args(argv)
    if arguments.steps < 1:
        parser.error("--steps must be at least 1")
    if arguments.waves == "single" and not arguments.groups:
        parser.error("--waves single needs --groups")
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


def run_group_wave(models, spec, step, index, wave, seen, out):
    """One wave of several gradient groups: every group's forward, in order,
    then one backward call per group in the wave's backward order."""
    cold = wave not in seen
    seen.add(wave)
    batches = [random_models.batch(spec.model, step, index * len(random_models.SLOT_NAMES) + g, lengths)
               for g, (_, lengths) in enumerate(wave.groups)]
    groups = [peakscope.group(sum(lengths), slot, list(lengths) if len(lengths) > 1 else None)
              for slot, lengths in wave.groups]
    started = time.perf_counter()
    with peakscope.wave(groups=groups, cold=cold, backward_order=list(wave.backward_order)):
        losses = [models[slot](ids, targets, lengths)
                  for (slot, lengths), (ids, targets) in zip(wave.groups, batches)]
        for g in wave.backward_order:
            losses[g].backward()
    print(f"  step {step} wave {index}: tokens {wave.tokens:5d} groups {wave.describe()} "
          f"cold {'yes' if cold else 'no'} loss {'/'.join(f'{float(loss):.3f}' for loss in losses)} "
          f"{time.perf_counter() - started:.3f} s", file=out)


def run_groups(arguments, out=sys.stdout):
    spec = random_models.draw_groups(arguments.seed)
    print(spec.describe(), file=out)
    print(f"  {spec.describe_waves()}", file=out)
    if arguments.describe:
        return 0
    waves = spec.waves(arguments.waves)
    torch.set_num_threads(spec.model.threads)
    torch.use_deterministic_algorithms(True)
    models = random_models.build_slots(spec)
    parameters = [p for model in models.values() for p in model.adapter_parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=1e-3)
    annotations = [peakscope.annotate(model, layers=model.layers, head_modules=model.head_modules())
                   for model in models.values()]
    annotations.append(peakscope.annotate_optimizer(optimizer))
    print(f"  adapter parameters {sum(p.numel() for p in parameters)} in {len(models)} slots; "
          f"backend {peakscope.get_backend().name}, threads {torch.get_num_threads()}", file=out)
    seen = set()
    started = time.perf_counter()
    steps = train_steps(arguments.steps, waves,
                        lambda step, index, wave: run_group_wave(models, spec, step, index, wave, seen, out),
                        optimizer, spec.model.accumulate, rotate=True)
    end_run(annotations)
    print(f"  {arguments.steps * len(waves)} waves in {steps} optimizer steps, "
          f"{time.perf_counter() - started:.2f} s", file=out)
    return 0


def run(arguments, out=sys.stdout):
    if arguments.groups:
        return run_groups(arguments, out)
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
    steps = train_steps(arguments.steps, waves,
                        lambda step, index, lengths: run_wave(model, spec, arguments, step, index, lengths, seen,
                                                              out),
                        optimizer, spec.accumulate, rotate=True)
    end_run(annotations)
    print(f"  {arguments.steps * len(waves)} waves in {steps} optimizer steps, "
          f"{time.perf_counter() - started:.2f} s", file=out)
    return 0


def main(argv=None):
    return run(parse_arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
