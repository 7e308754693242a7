#!/usr/bin/python3
"""A small mixture-of-experts decoder with expert adapters.

The embedded decoder's layers with the MLP replaced by --experts experts (each
a gate/up/down MLP with LoRA adapters on its projections) and a frozen top-1
router: each token goes to one expert, so which expert adapters get a
gradient, and how much scratch each layer needs, depend on the routing. Full
recompute, gradient accumulation over --tokens, AdamW and
zero_grad(set_to_none=True) per step.

    build/peakscope record --host -o moe.pstrace -- /usr/bin/python3 workloads/torch/lora_moe.py
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from accumulation import parse_tokens, train_accumulating, workload_parser  # noqa: E402
from lora_model import BlockwiseCausalAttention, DecoderLayer, LoRADecoder, LoRALinear  # noqa: E402


class Expert(nn.Module):
    def __init__(self, hidden, intermediate, rank):
        super().__init__()
        self.gate = LoRALinear(hidden, intermediate, rank)
        self.up = LoRALinear(hidden, intermediate, rank)
        self.down = LoRALinear(intermediate, hidden, rank)

    def forward(self, h):
        return self.down(F.silu(self.gate(h)) * self.up(h))


class MoELayer(DecoderLayer):
    """Attention as in DecoderLayer; the MLP is a top-1 routed set of experts."""

    def __init__(self, hidden, heads, intermediate, rank, attention_block, experts):
        super().__init__(hidden, heads, intermediate, rank, attention_block)
        del self.gate, self.up, self.down
        self.router = nn.Linear(hidden, experts, bias=False)
        self.router.weight.requires_grad_(False)
        self.experts = nn.ModuleList(Expert(hidden, intermediate, rank) for _ in range(experts))

    def forward(self, x):
        h = self.attention_norm(x)
        q, k, v = (self._split_heads(p(h)) for p in (self.q, self.k, self.v))
        attended = BlockwiseCausalAttention.apply(q, k, v, self.attention_block)
        x = x + self.o(attended.transpose(0, 1).reshape(x.shape))
        h = self.mlp_norm(x)
        choice = self.router(h).argmax(-1)
        out = torch.zeros_like(x)
        for index, expert in enumerate(self.experts):
            rows = (choice == index).nonzero().squeeze(-1)
            if rows.numel():
                out = out.index_add(0, rows, expert(h.index_select(0, rows)))
        return x + out


def parse_arguments(argv=None):
    parser = workload_parser(__doc__, layers=8)
    parser.add_argument("--tokens", default="48,256")
    parser.add_argument("--experts", type=int, default=4)
    arguments = parser.parse_args(argv)
    arguments.tokens = parse_tokens(parser, arguments.tokens)
    return arguments


def build(arguments):
    torch.manual_seed(arguments.seed)
    model = LoRADecoder(layers=arguments.layers)
    model.layers = nn.ModuleList(MoELayer(64, 2, 128, 16, 32, arguments.experts) for _ in range(arguments.layers))
    return model


def main(argv=None):
    arguments = parse_arguments(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = build(arguments)
    return train_accumulating(model, model.adapter_parameters(), arguments.steps, arguments.tokens, arguments.seed)


if __name__ == "__main__":
    sys.exit(main())
