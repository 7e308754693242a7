#!/usr/bin/python3
"""Two adapter slots trained as two gradient groups of one wave.

One frozen base model, two sets of LoRA adapters (slots "a" and "b"). Each wave
runs the forward of slot a on half of its tokens and the forward of slot b on
the other half (both graphs live until their backward), then the two
backward calls one after the other, in the order --order says ("ab", "ba", or
"alternate": ab in even steps, ba in odd ones). Every layer is checkpointed
(full recompute). Steps accumulate gradients over the waves of --tokens and
end with AdamW over both slots and zero_grad(set_to_none=True).

    build/peakscope record --host -o two.pstrace -- /usr/bin/python3 workloads/torch/lora_two_slots.py
"""

import copy
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402

import peakscope  # noqa: E402
from accumulation import end_run, end_step, workload_parser  # noqa: E402
from lora_model import LoRADecoder  # noqa: E402


def parse_arguments(argv=None):
    parser = workload_parser(__doc__)
    parser.add_argument("--tokens", default="64,256", help="tokens of each wave (both groups together)")
    parser.add_argument("--share-a", type=float, default=0.5,
                        help="slot a's share of each wave's tokens (default 0.5: halves)")
    parser.add_argument("--order", choices=("ab", "ba", "alternate"), default="alternate")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--rank", type=int, default=16)
    arguments = parser.parse_args(argv)
    arguments.tokens = [int(t) for t in arguments.tokens.split(",") if t.strip()]
    if not arguments.tokens or min(arguments.tokens) < 4:
        parser.error("--tokens: counts of at least 4 (two groups of at least 2 each)")
    if not 0 < arguments.share_a < 1:
        parser.error("--share-a: a fraction between 0 and 1")
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
            part = {"a": min(tokens - 2, max(2, round(tokens * arguments.share_a)))}
            part["b"] = tokens - part["a"]
            ids = {slot: torch.randint(128, (part[slot] + 1,), generator=generator) for slot in "ab"}
            groups = [peakscope.group(part["a"], slot="a"), peakscope.group(part["b"], slot="b")]
            with peakscope.wave(groups=groups, cold=cold, backward_order=["ab".index(s) for s in order]):
                losses = {"a": slot_a(ids["a"][:-1], ids["a"][1:]), "b": slot_b(ids["b"][:-1], ids["b"][1:])}
                for slot in order:
                    losses[slot].backward()
            print(f"step {step} tokens {tokens} order {order} cold {cold}: "
                  f"loss a {float(losses['a']):.3f} b {float(losses['b']):.3f}")
            del losses
        end_step(optimizer)
    end_run(annotations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
