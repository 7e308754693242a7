"""A small LoRA decoder for the embedded workload and the tests.

Frozen base weights everywhere (embedding, projections, norms, lm head);
trainable low-rank adapters on the attention and MLP projections; every decoder
layer run under torch.utils.checkpoint with full recompute. Attention is
blockwise with a recomputing backward, like the flash attention kernels used on
GPUs, so its memory grows with tokens, not tokens squared. There is no
positional encoding: it would not change what is live when.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

# Which projections carry an adapter.
ADAPTED = ("q", "k", "v", "o", "gate", "up", "down")


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden), requires_grad=False)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LoRALinear(nn.Module):
    """A frozen bias-free projection plus scale * B(A(x)), A and B trainable."""

    def __init__(self, in_features, out_features, rank, alpha=None):
        super().__init__()
        self.base = nn.Linear(in_features, out_features, bias=False)
        self.base.weight.requires_grad_(False)
        self.rank = rank
        if rank > 0:
            self.lora_a = nn.Parameter(torch.empty(rank, in_features))
            self.lora_b = nn.Parameter(torch.zeros(out_features, rank))
            nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
            # A 0-dim tensor, not a Python float: autograd then saves an
            # ordinary tensor, which torch 1.13's dispatch modes can follow.
            self.register_buffer("scale", torch.tensor((alpha if alpha is not None else rank) / rank),
                                 persistent=False)

    def forward(self, x):
        y = self.base(x)
        if self.rank > 0:
            y = y + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale
        return y


class BlockwiseCausalAttention(torch.autograd.Function):
    """softmax(q kᵀ / √d + causal) v, one block of queries at a time.

    Saves q, k, v, the output and the log-sum-exp; the backward recomputes the
    probabilities block by block. Inputs are (heads, tokens, head_dim).
    """

    @staticmethod
    def _probabilities(q_block, k_prefix, start, scale, lse_block):
        scores = torch.matmul(q_block, k_prefix.transpose(-1, -2)) * scale
        _mask_future(scores, start)
        if lse_block is None:
            return scores
        return torch.exp(scores - lse_block.unsqueeze(-1))

    @staticmethod
    def forward(ctx, q, k, v, block):
        scale = q.shape[-1] ** -0.5
        tokens = q.shape[-2]
        out = torch.empty_like(q)
        lse = q.new_empty(q.shape[:-1])
        for start in range(0, tokens, block):
            end = min(start + block, tokens)
            scores = BlockwiseCausalAttention._probabilities(q[..., start:end, :], k[..., :end, :],
                                                             start, scale, None)
            block_lse = torch.logsumexp(scores, dim=-1)
            probabilities = torch.exp(scores - block_lse.unsqueeze(-1))
            out[..., start:end, :] = torch.matmul(probabilities, v[..., :end, :])
            lse[..., start:end] = block_lse
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.block = block
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        block, scale = ctx.block, ctx.scale
        tokens = q.shape[-2]
        grad_q = torch.empty_like(q)
        grad_k = torch.zeros_like(k)
        grad_v = torch.zeros_like(v)
        delta = (grad_out * out).sum(-1)
        for start in range(0, tokens, block):
            end = min(start + block, tokens)
            q_block, grad_out_block = q[..., start:end, :], grad_out[..., start:end, :]
            probabilities = BlockwiseCausalAttention._probabilities(
                q_block, k[..., :end, :], start, scale, lse[..., start:end])
            grad_v[..., :end, :] += torch.matmul(probabilities.transpose(-1, -2), grad_out_block)
            grad_p = torch.matmul(grad_out_block, v[..., :end, :].transpose(-1, -2))
            grad_scores = probabilities * (grad_p - delta[..., start:end].unsqueeze(-1)) * scale
            grad_q[..., start:end, :] = torch.matmul(grad_scores, k[..., :end, :])
            grad_k[..., :end, :] += torch.matmul(grad_scores.transpose(-1, -2), q_block)
        return grad_q, grad_k, grad_v, None


def _mask_future(scores, start):
    """Masks key j > query i in a (…, block, start + block) score tile, in place."""
    rows, cols = scores.shape[-2], scores.shape[-1]
    future = torch.ones(rows, cols - start, dtype=torch.bool).triu_(1)
    scores[..., :, start:].masked_fill_(future, float("-inf"))


def reference_attention(q, k, v):
    """The same attention, materialising every score (for tests)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    _mask_future(scores, 0)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate, rank, attention_block):
        super().__init__()
        self.heads = heads
        self.attention_block = attention_block
        self.attention_norm = RMSNorm(hidden)
        self.q = LoRALinear(hidden, hidden, rank)
        self.k = LoRALinear(hidden, hidden, rank)
        self.v = LoRALinear(hidden, hidden, rank)
        self.o = LoRALinear(hidden, hidden, rank)
        self.mlp_norm = RMSNorm(hidden)
        self.gate = LoRALinear(hidden, intermediate, rank)
        self.up = LoRALinear(hidden, intermediate, rank)
        self.down = LoRALinear(intermediate, hidden, rank)

    def _split_heads(self, x):
        tokens, hidden = x.shape
        return x.view(tokens, self.heads, hidden // self.heads).transpose(0, 1)

    def forward(self, x):
        h = self.attention_norm(x)
        q, k, v = (self._split_heads(p(h)) for p in (self.q, self.k, self.v))
        attended = BlockwiseCausalAttention.apply(q, k, v, self.attention_block)
        x = x + self.o(attended.transpose(0, 1).reshape(x.shape))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LoRADecoder(nn.Module):
    """embedding → layers (each checkpointed) → final norm → lm head → cross-entropy."""

    def __init__(self, vocab=128, hidden=64, layers=32, heads=2, intermediate=128, rank=16,
                 attention_block=32, checkpointing=True):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
        self.checkpointing = checkpointing
        self.embedding = nn.Embedding(vocab, hidden)
        self.embedding.weight.requires_grad_(False)
        self.layers = nn.ModuleList(
            DecoderLayer(hidden, heads, intermediate, rank, attention_block) for _ in range(layers))
        self.final_norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight.requires_grad_(False)
        self.loss = nn.CrossEntropyLoss()

    def head_modules(self):
        return {"embedding": self.embedding, "final_norm": self.final_norm,
                "lm_head": self.lm_head, "loss": self.loss}

    def adapter_parameters(self):
        return [p for p in self.parameters() if p.requires_grad]

    def forward(self, token_ids, targets):
        x = self.embedding(token_ids)
        for layer in self.layers:
            if self.checkpointing:
                # Non-reentrant: the recompute runs inside the layer's own
                # backward, and the layer's input needs no requires_grad.
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        logits = self.lm_head(self.final_norm(x))
        return self.loss(logits, targets)
