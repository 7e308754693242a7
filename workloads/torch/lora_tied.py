#!/usr/bin/python3
"""A LoRA parameter shared by every layer and a head tied to the embedding.

The embedded dense decoder, with two changes: the `q` projection's adapter
matrix A is one Parameter used by all layers (its gradient counts once, at the
highest layer, where the backward reaches it first), and the lm head's weight
is the embedding's, trainable (a gradient outside the decoder, live through
the whole backward). Full recompute, gradient accumulation over --tokens,
AdamW and zero_grad(set_to_none=True) per step.

    build/peakscope record --host -o tied.pstrace -- /usr/bin/python3 workloads/torch/lora_tied.py
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402

from accumulation import parse_tokens, train_accumulating, workload_parser  # noqa: E402
from lora_model import LoRADecoder  # noqa: E402


def parse_arguments(argv=None):
    parser = workload_parser(__doc__)
    parser.add_argument("--tokens", default="48,256")
    arguments = parser.parse_args(argv)
    arguments.tokens = parse_tokens(parser, arguments.tokens)
    return arguments


def build(arguments):
    torch.manual_seed(arguments.seed)
    model = LoRADecoder(layers=arguments.layers)
    shared = model.layers[0].q.lora_a
    for layer in model.layers[1:]:
        layer.q.lora_a = shared
    model.embedding.weight.requires_grad_(True)
    model.lm_head.weight = model.embedding.weight
    return model


def main(argv=None):
    arguments = parse_arguments(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = build(arguments)
    return train_accumulating(model, [p for p in model.parameters() if p.requires_grad], arguments.steps, arguments.tokens, arguments.seed)


if __name__ == "__main__":
    sys.exit(main())
