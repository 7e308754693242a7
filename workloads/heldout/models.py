"""Held-out models for the accuracy suite, built from PyTorch's own modules.

The embedded workloads (workloads/torch) use a hand-written decoder with a
blockwise attention. These models use what PyTorch ships instead:
nn.MultiheadAttention (eager attention: the softmax it saves grows with the
square of a sequence's length), nn.TransformerEncoderLayer, nn.LayerNorm,
nn.Linear. The estimator was never tuned on them.

Every model has a frozen embedding, frozen base weights and norms, a frozen lm
head with cross-entropy over a small vocabulary, and trainable low-rank
adapters only. Each decoder layer runs under torch.utils.checkpoint with
use_reentrant=False (full recompute inside the layer's own backward).

    mha      pre-norm layers: nn.MultiheadAttention (causal) and an MLP
    encoder  nn.TransformerEncoderLayer (post-norm, GELU), adapters around
             linear1 and linear2
    mlp      LayerNorm + Linear-GELU-Linear, residual, no attention
    packed   like mha, but a wave is several sequences concatenated along the
             token axis and attention runs on each sequence on its own, the
             way variable-length attention kernels do: the saved attention
             grows with the sum of the squared lengths
"""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


def _freeze(module):
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module


class LowRank(nn.Module):
    """scale * B(A(x)): the trainable low-rank pair, B starting at zero."""

    def __init__(self, in_features, out_features, rank, alpha=None):
        super().__init__()
        self.a = nn.Parameter(torch.empty(rank, in_features))
        self.b = nn.Parameter(torch.zeros(out_features, rank))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))
        self.scale = float(alpha if alpha is not None else rank) / rank

    def forward(self, x):
        return F.linear(F.linear(x, self.a), self.b) * self.scale


class AdaptedLinear(nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update of its output.

    Wraps an existing linear (so a module that calls `self.linear1(x)` still
    calls it) and exposes its `weight`, `bias`, `in_features` and
    `out_features`, which some PyTorch modules read directly.
    """

    def __init__(self, base, rank):
        super().__init__()
        self.base = _freeze(base)
        self.adapter = LowRank(base.in_features, base.out_features, rank)

    @property
    def weight(self):
        return self.base.weight

    @property
    def bias(self):
        return self.base.bias

    @property
    def in_features(self):
        return self.base.in_features

    @property
    def out_features(self):
        return self.base.out_features

    def forward(self, x):
        return self.base(x) + self.adapter(x)


class ResidualAdapter(nn.Module):
    """x + scale * B(A(x)): a low-rank adapter on a tensor with no linear of its own.

    nn.MultiheadAttention applies its projections with F.linear on its own
    weights, not through submodules, so its adapter goes on its input.
    """

    def __init__(self, features, rank):
        super().__init__()
        self.adapter = LowRank(features, features, rank)

    def forward(self, x):
        return x + self.adapter(x)


def causal_mask(length, device=None):
    """True where a query may not see a key (key after query), length × length."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu_(1)


class AttentionLayer(nn.Module):
    """Pre-norm: x + MHA(adapter(LN(x))) (causal), then x + down(GELU(up(LN(x))))."""

    def __init__(self, hidden, heads, intermediate, rank):
        super().__init__()
        self.attention_norm = nn.LayerNorm(hidden)
        self.attention_adapter = ResidualAdapter(hidden, rank)
        self.attention = nn.MultiheadAttention(hidden, heads, dropout=0.0, batch_first=True)
        self.mlp_norm = nn.LayerNorm(hidden)
        self.up = AdaptedLinear(nn.Linear(hidden, intermediate), rank)
        self.down = AdaptedLinear(nn.Linear(intermediate, hidden), rank)

    def attend(self, h):
        """Causal attention over one batch of sequences, h: (batch, length, hidden)."""
        out, _ = self.attention(h, h, h, attn_mask=causal_mask(h.shape[1], h.device),
                                need_weights=False)
        return out

    def mlp(self, x):
        return x + self.down(F.gelu(self.up(self.mlp_norm(x))))

    def forward(self, x):
        # x: (1, tokens, hidden)
        h = self.attention_adapter(self.attention_norm(x))
        return self.mlp(x + self.attend(h))


class PackedAttentionLayer(AttentionLayer):
    """AttentionLayer over packed sequences, x: (tokens, hidden).

    The hidden states of several sequences lie one after the other; attention
    runs on each sequence alone (split by `lengths`, attended, concatenated
    back), so no token attends across a sequence boundary and the attention
    saved for backward is sum(length²) per head, not tokens².
    """

    def forward(self, x, lengths):
        h = self.attention_adapter(self.attention_norm(x))
        pieces = torch.split(h, list(lengths), dim=0)
        attended = torch.cat([self.attend(piece.unsqueeze(0)).squeeze(0) for piece in pieces], dim=0)
        return self.mlp(x + attended)


class CausalEncoderLayer(nn.TransformerEncoderLayer):
    """nn.TransformerEncoderLayer with its causal mask built from the input.

    linear1 and linear2 are replaced by AdaptedLinear wrappers around the
    layer's own (frozen) linears; the layer's feed-forward block still calls
    self.linear1 and self.linear2. Everything else is frozen.
    """

    def __init__(self, hidden, heads, intermediate, rank, norm_first=False):
        super().__init__(hidden, heads, dim_feedforward=intermediate, dropout=0.0,
                         activation="gelu", batch_first=True, norm_first=norm_first)
        _freeze(self)
        self.linear1 = AdaptedLinear(self.linear1, rank)
        self.linear2 = AdaptedLinear(self.linear2, rank)

    def forward(self, x):
        # x: (1, tokens, hidden)
        return super().forward(x, src_mask=causal_mask(x.shape[1], x.device))


class MLPLayer(nn.Module):
    """x + fc2(GELU(fc1(LN(x)))), adapters on fc1 and fc2."""

    def __init__(self, hidden, intermediate, rank):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = AdaptedLinear(nn.Linear(hidden, intermediate), rank)
        self.fc2 = AdaptedLinear(nn.Linear(intermediate, hidden), rank)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class HeldOutModel(nn.Module):
    """embedding → layers (each checkpointed) → final LayerNorm → lm head → cross-entropy.

    Only adapter parameters (the LowRank pairs) are trainable.
    """

    packed = False

    def __init__(self, vocab, hidden, layers):
        super().__init__()
        self.hidden = hidden
        self.embedding = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.loss = nn.CrossEntropyLoss()
        for parameter in self.parameters():
            parameter.requires_grad_(False)
        for module in self.modules():
            if isinstance(module, LowRank):
                for parameter in module.parameters():
                    parameter.requires_grad_(True)

    def head_modules(self):
        return {"embedding": self.embedding, "final_norm": self.final_norm,
                "lm_head": self.lm_head, "loss": self.loss}

    def adapter_parameters(self):
        return [p for p in self.parameters() if p.requires_grad]

    def run_layers(self, x, lengths):
        x = x.unsqueeze(0)  # (1, tokens, hidden): one batch-first sequence
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x.squeeze(0)

    def forward(self, token_ids, targets, lengths=None):
        if lengths is None:
            lengths = [token_ids.shape[0]]
        if sum(lengths) != token_ids.shape[0]:
            raise ValueError(f"sequence lengths {lengths} do not add up to {token_ids.shape[0]} tokens")
        x = self.run_layers(self.embedding(token_ids), lengths)
        logits = self.lm_head(self.final_norm(x))
        return self.loss(logits, targets)


class PackedModel(HeldOutModel):
    """HeldOutModel whose layers take the packed (tokens, hidden) states and the lengths."""

    packed = True

    def run_layers(self, x, lengths):
        lengths = [int(n) for n in lengths]
        for layer in self.layers:
            x = checkpoint(layer, x, lengths, use_reentrant=False)
        return x


# name → (default sizes, builder). Sizes differ between models on purpose.
DEFAULTS = {
    "mha": dict(layers=8, hidden=64, heads=4, intermediate=256, rank=8, vocab=128),
    "encoder": dict(layers=6, hidden=96, heads=6, intermediate=192, rank=8, vocab=128),
    "mlp": dict(layers=12, hidden=128, heads=0, intermediate=256, rank=8, vocab=128),
    "packed": dict(layers=6, hidden=64, heads=2, intermediate=128, rank=8, vocab=128),
}

MODELS = tuple(DEFAULTS)


def build_model(name, **sizes):
    """A held-out model by name; `sizes` override DEFAULTS[name] (None keeps the default)."""
    if name not in DEFAULTS:
        raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)})")
    s = dict(DEFAULTS[name])
    s.update({k: v for k, v in sizes.items() if v is not None})
    if name != "mlp" and s["hidden"] % s["heads"]:
        raise ValueError(f"hidden {s['hidden']} is not a multiple of heads {s['heads']}")
    count, hidden, rank = s["layers"], s["hidden"], s["rank"]
    if name == "mha":
        layers = [AttentionLayer(hidden, s["heads"], s["intermediate"], rank) for _ in range(count)]
        model = HeldOutModel(s["vocab"], hidden, layers)
    elif name == "encoder":
        layers = [CausalEncoderLayer(hidden, s["heads"], s["intermediate"], rank) for _ in range(count)]
        model = HeldOutModel(s["vocab"], hidden, layers)
    elif name == "mlp":
        layers = [MLPLayer(hidden, s["intermediate"], rank) for _ in range(count)]
        model = HeldOutModel(s["vocab"], hidden, layers)
    else:
        layers = [PackedAttentionLayer(hidden, s["heads"], s["intermediate"], rank)
                  for _ in range(count)]
        model = PackedModel(s["vocab"], hidden, layers)
    model.sizes = s
    return model
