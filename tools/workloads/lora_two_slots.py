#!/usr/bin/python3
"""Two adapter slots trained as two gradient groups of one wave.

One frozen base model, two sets of LoRA adapters (slots "a" and "b"). Each wave
runs the forward of slot a on half of its tokens and the forward of slot b on
the other half (both graphs live until their backward), then the two
backward calls one after the other, in the order --order says ("ab", "ba", or
"alternate": ab in even steps, ba in odd ones). Every layer is checkpointed
(full recompute). Steps accumulate gradients over the waves of --tokens and
end with AdamW over both slots and zero_grad(set_to_none=True).

    build/peakscope record --host -o two.pstrace -- /usr/bin/python3 tools/workloads/lora_two_slots.py
"""

import argparse
import copy
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402

import peakscope  # noqa: E402
from lora_model import LoRADecoder  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--tokens", default="64,256", help="tokens of each wave (both groups together)")
    parser.add_argument("--order", choices=("ab", "ba", "alternate"), default="alternate")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args(argv)
    arguments.tokens = [int(t) for t in arguments.tokens.split(",") if t.strip()]
    if not arguments.tokens or min(arguments.tokens) < 4 or any(t % 2 for t in arguments.tokens):
        parser.error("--tokens: even counts of at least 4 (two groups of half each)")
    return arguments


def share_frozen(source, target):
    """Makes target's frozen tensors the very tensors of source (one base model)."""
    for (name, p), (_, q) in zip(source.named_parameters(), target.named_parameters()):
        if not p.requires_grad:
            q.data = p.data


def main(argv=None):
    arguments = parse_arguments(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(arguments.seed)
    slot_a = LoRADecoder(hidden=arguments.hidden, layers=arguments.layers, rank=arguments.rank)
    slot_b = copy.deepcopy(slot_a)
    share_frozen(slot_a, slot_b)
    for p in slot_b.adapter_parameters():  # a different adapter, same shapes
        torch.nn.init.normal_(p, std=0.02)
    optimizer = torch.optim.AdamW(slot_a.adapter_parameters() + slot_b.adapter_parameters(), lr=1e-3)
    annotations = [peakscope.annotate(m, layers=m.layers, head_modules=m.head_modules()) for m in (slot_a, slot_b)]
    annotations.append(peakscope.annotate_optimizer(optimizer))
    seen = set()
    generator = torch.Generator().manual_seed(arguments.seed)
    for step in range(arguments.steps):
        order = arguments.order if arguments.order != "alternate" else ("ab" if step % 2 == 0 else "ba")
        for tokens in arguments.tokens:
            cold = (tokens, order) not in seen
            seen.add((tokens, order))
            half = tokens // 2
            ids = torch.randint(128, (2, half + 1), generator=generator)
            with peakscope.wave(tokens=tokens, slots=["a", "b"], groups=2, cold=cold, order=order):
                losses = {"a": slot_a(ids[0, :-1], ids[0, 1:]), "b": slot_b(ids[1, :-1], ids[1, 1:])}
                for slot in order:
                    losses[slot].backward()
            print(f"step {step} tokens {tokens} order {order} cold {cold}: "
                  f"loss a {float(losses['a']):.3f} b {float(losses['b']):.3f}")
            del losses
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    peakscope.flush()
    for annotation in annotations:
        annotation.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
