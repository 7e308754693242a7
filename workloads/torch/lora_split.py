#!/usr/bin/python3
"""A wave split into children: several forwards whose graphs all stay live
until one backward of their summed loss (full recompute, one adapter slot).

--waves lists the waves of a step, each as its children's token counts joined
by "+" (default "96+160,40+24+64"). Steps accumulate gradients over their waves
and end with AdamW and zero_grad(set_to_none=True). Repeats of a wave's shape
are warm.

    build/peakscope record --host -o split.pstrace -- /usr/bin/python3 workloads/torch/lora_split.py
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402

import peakscope  # noqa: E402
from accumulation import end_run, end_step  # noqa: E402
from lora_model import LoRADecoder  # noqa: E402
from wave_args import parse_children, workload_parser  # noqa: E402


def parse_arguments(argv=None):
    parser = workload_parser(__doc__)
    parser.add_argument("--waves", default="96+160,40+24+64")
    arguments = parser.parse_args(argv)
    arguments.waves = parse_children(parser, arguments.waves)
    return arguments


def main(argv=None):
    arguments = parse_arguments(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(arguments.seed)
    model = LoRADecoder(layers=arguments.layers)
    optimizer = torch.optim.AdamW(model.adapter_parameters(), lr=1e-3)
    annotations = [peakscope.annotate(model, layers=model.layers, head_modules=model.head_modules()),
                   peakscope.annotate_optimizer(optimizer)]
    generator = torch.Generator().manual_seed(arguments.seed)
    seen = set()
    for step in range(arguments.steps):
        for children in arguments.waves:
            shape = tuple(children)
            cold = shape not in seen
            seen.add(shape)
            batches = [torch.randint(128, (t + 1,), generator=generator) for t in children]
            payload_children = [{"tokens": t, "slots": ["a"], "groups": 1} for t in children]
            with peakscope.wave(tokens=sum(children), slots=["a"], groups=1, cold=cold, children=payload_children):
                loss = sum(model(ids[:-1], ids[1:]) for ids in batches)
                loss.backward()
            print(f"step {step} children {children} cold {cold}: loss {float(loss):.3f}")
            del loss
        end_step(optimizer)
    end_run(annotations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
