#!/usr/bin/python3
"""The embedded default workload: LoRA training steps with a full-recompute backward.

Each step runs one wave (micro-batch) per entry of --tokens, accumulating
adapter gradients, then AdamW over the adapters and zero_grad(set_to_none=True).
The first wave of a step is the only one with pending adapter gradients. With
the default sizes a short wave's peak is the adapter gradients (it sits at
layer 0, when every layer's gradient exists) and a long wave's peak is the
saved layer boundaries (it sits at the top layer, when all of them are live).
Waves whose token count has not run before are cold, repeats are warm.
With --leak-bytes N each step also keeps one more tensor of N bytes, made in
a `train/leaky_cache` range: a leak for `peakscope report`'s growth section.

Run it under the recorder:
    build/peakscope record --host -o lora.pstrace -- /usr/bin/python3 workloads/torch/lora_step.py
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
from accumulation import parse_tokens  # noqa: E402
from lora_model import LoRADecoder  # noqa: E402

FLOAT_BYTES = 4


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps (default 3)")
    parser.add_argument("--tokens", default="32,128,384",
                        help="comma-separated tokens of each wave in a step (default 32,128,384)")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--intermediate", type=int, default=128)
    parser.add_argument("--rank", type=int, default=16, help="adapter rank")
    parser.add_argument("--vocab", type=int, default=128)
    parser.add_argument("--attention-block", type=int, default=32,
                        help="queries per attention block")
    parser.add_argument("--slot", default="a", help="name of the adapter slot being trained")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-annotate", action="store_true",
                        help="run without peakscope ranges (to compare)")
    parser.add_argument("--leak-bytes", type=int, default=0,
                        help="keep one more tensor of this many bytes every step, made in a "
                             "train/leaky_cache range (a planted leak; default 0: none)")
    arguments = parser.parse_args(argv)
    arguments.tokens = parse_tokens(parser, arguments.tokens)
    if arguments.steps < 1:
        parser.error("--steps must be at least 1")
    if arguments.leak_bytes < 0 or arguments.leak_bytes % FLOAT_BYTES:
        parser.error(f"--leak-bytes must be a non-negative multiple of {FLOAT_BYTES}")
    return arguments


def build(arguments):
    torch.manual_seed(arguments.seed)
    model = LoRADecoder(vocab=arguments.vocab, hidden=arguments.hidden, layers=arguments.layers,
                        heads=arguments.heads, intermediate=arguments.intermediate,
                        rank=arguments.rank, attention_block=arguments.attention_block)
    optimizer = torch.optim.AdamW(model.adapter_parameters(), lr=1e-3)
    return model, optimizer


def batch(arguments, step, wave, tokens):
    """Deterministic token ids and next-token targets for one wave."""
    generator = torch.Generator().manual_seed(arguments.seed * 1_000_003 + step * 1009 + wave)
    ids = torch.randint(arguments.vocab, (tokens + 1,), generator=generator)
    return ids[:-1], ids[1:]


def bytes_per_layer(model):
    """Adapter-gradient bytes of each decoder layer (all of them are trainable)."""
    return [sum(p.numel() for p in layer.parameters() if p.requires_grad) * FLOAT_BYTES
            for layer in model.layers]


def run(arguments, out=sys.stdout):
    torch.set_num_threads(arguments.threads)
    torch.use_deterministic_algorithms(True)
    model, optimizer = build(arguments)
    annotations = []
    if not arguments.no_annotate:
        annotations.append(peakscope.annotate(model, layers=model.layers,
                                              head_modules=model.head_modules()))
        annotations.append(peakscope.annotate_optimizer(optimizer))
    seen = set()
    waves = []
    leaked = []  # --leak-bytes: one more tensor every step, never freed
    started = time.perf_counter()
    for step in range(arguments.steps):
        for index, tokens in enumerate(arguments.tokens):
            cold = tokens not in seen
            seen.add(tokens)
            ids, targets = batch(arguments, step, index, tokens)
            wave_started = time.perf_counter()
            with peakscope.wave(tokens=tokens, slots=[arguments.slot], groups=1, cold=cold):
                loss = model(ids, targets)
                loss.backward()
            waves.append((step, tokens, cold, index == 0, float(loss),
                          time.perf_counter() - wave_started))
            del loss
        if arguments.leak_bytes:
            with peakscope.range("train/leaky_cache"):
                leaked.append(torch.ones(arguments.leak_bytes // FLOAT_BYTES))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    elapsed = time.perf_counter() - started
    peakscope.flush()
    for annotation in annotations:
        annotation.remove()
    summarize(arguments, model, waves, elapsed, out)
    return waves


def summarize(arguments, model, waves, elapsed, out):
    adapter = bytes_per_layer(model)
    print(f"lora_step: {arguments.layers} layers, hidden {arguments.hidden}, heads {arguments.heads}, "
          f"intermediate {arguments.intermediate}, adapter rank {arguments.rank} on "
          f"q k v o gate up down, vocab {arguments.vocab}; full recompute "
          "(checkpoint, use_reentrant=False); AdamW on adapters", file=out)
    print(f"  adapter gradients: {adapter[0]} bytes per layer, {sum(adapter)} in all; "
          f"annotations: {'off' if arguments.no_annotate else peakscope.get_backend().name}, "
          f"threads {arguments.threads}", file=out)
    print("  step  tokens  cold  pending  boundary/layer  boundaries    loss   seconds", file=out)
    for step, tokens, cold, pending, loss, seconds in waves:
        boundary = tokens * arguments.hidden * FLOAT_BYTES
        print(f"  {step:4d}  {tokens:6d}  {'yes' if cold else 'no':>4}  {'yes' if pending else 'no':>7}"
              f"  {boundary:14d}  {boundary * arguments.layers:10d}  {loss:6.3f}  {seconds:8.3f}",
              file=out)
    print(f"  {len(waves)} waves in {arguments.steps} steps, {elapsed:.2f} s", file=out)


def main(argv=None):
    run(parse_arguments(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
