"""Unseen LoRA decoders drawn at random from a seed, with the waves that measure them.

The held-out models of models.py are four fixed shapes; a fix that makes them
price well may still fail on the next model somebody trains. This module draws
a new model from an integer seed, from plain torch operations (matmul, softmax,
F.linear, F.gelu, F.silu, norms written here), so that no shape of it was seen
while the estimator was written:

    depth        2-8 layers
    width        hidden 32-160 (a multiple of the heads), intermediate 2-4x hidden
    attention    eager   causal multi-head attention over one sequence
                 gqa     the same with fewer key/value heads (repeat_interleave)
                 packed  a wave is several sequences one after the other on the
                         token axis; attention runs sequence by sequence, as
                         variable-length kernels do
                 none    no attention: an MLP stack
    MLP          GELU (up, down) or SwiGLU (gate, up, down)
    norm         LayerNorm or RMSNorm
    adapters     a non-empty subset of q, k, v, o, up, down, gate, rank 2-16
    head         tied to the frozen embedding, or a frozen head of its own
    threads      torch intra-op threads, 1 or 2
    steps        accumulating (every wave of a step, then one optimizer step) or
                 one optimizer step per wave

Base weights, norms and the embedding are frozen; only the adapters train.
Every layer runs under torch.utils.checkpoint (non-reentrant).

The same seed also draws the waves: three calibration sizes between 32 and
256 tokens, each at least 1.5x the one before, and six check sizes the
calibration never saw, three between calibration sizes and three beyond the
largest (up to 3x). A packed model's waves are packings; its check waves use
other sequence counts, and their longest sequence is at most twice the longest
calibrated one. As README's recipe for packed models asks, its calibration
also holds a wave of one sequence (the middle size) and a wave of many short
sequences (the largest size in up to 8), added after the draws.

draw_groups(seed) draws, from a random stream of its own (draw(seed) is
unchanged), a smaller model (2-4 layers, hidden up to 96) with 2 or 3 adapter
slots over one shared frozen base (build_slots), and waves of several
gradient groups, one group per slot, each with a backward order: calibration
waves whose groups have three calibrated sizes (equal and unequal, both
orders), the same sizes as one-group waves one slot at a time ("single"), and
check waves whose group sizes were never calibrated (three between, three
beyond the largest, up to 3x; a short group beside a long one as a packer
makes them); a packed model's calibration and single waves add the recipe's
groups of one sequence and of many short ones. tools/accuracy-groups
measures them.

    spec = draw(8)
    spec.describe()    # 'seed 8: 3L h40 i88 gqa 8h/kv2 swiglu rms lora{gate,down} r5 v269 untied t2 accum'
    model = build_model(spec)
"""

import copy
import dataclasses
import itertools
import math
import random

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

ATTENTION_KINDS = ("eager", "gqa", "packed", "none")
MLP_KINDS = ("gelu", "swiglu")
NORM_KINDS = ("layer", "rms")
ATTENTION_ADAPTERS = ("q", "k", "v", "o")

# Calibration sizes: the smallest, then each next one this many times the one
# before; the largest is kept at CALIBRATION_MAX tokens.
CALIBRATION_MIN = (32, 56)
CALIBRATION_RATIO = (1.6, 2.4)
CALIBRATION_MAX = 256
BEYOND = 3.0  # check sizes reach this many times the largest calibrated size
SHORTEST_SEQUENCE = 8
# The README's recipe for packed models adds three calibration waves to the
# drawn packings: one sequence of a middle size, one as long as the packer's
# longest, and many short ones (at most this many).
MOST_CALIBRATED_SEQUENCES = 8
# A packer's longest sequence, in the longest calibrated packing's: the
# check packings' sequences are at most this many times as long.
PACKER_LONGEST = 2


@dataclasses.dataclass(frozen=True)
class Spec:
    """Everything a seed decides: the model, how it trains, and its waves.

    calibration and check hold each wave's sequence lengths: one length for a
    model that attends over a whole wave, several for a packed one.
    """

    seed: int
    layers: int
    hidden: int
    heads: int  # 0 without attention
    kv_heads: int
    intermediate: int
    attention: str
    mlp: str
    norm: str
    adapters: tuple
    rank: int
    vocab: int
    tied: bool
    threads: int
    accumulate: bool
    calibration: tuple
    check: tuple

    @property
    def packed(self):
        return self.attention == "packed"

    def describe(self):
        """One short line naming every choice."""
        if self.attention == "none":
            attention = "no-attn"
        elif self.attention == "gqa":
            attention = f"gqa {self.heads}h/kv{self.kv_heads}"
        else:
            attention = f"{self.attention} {self.heads}h"
        return (f"seed {self.seed}: {self.layers}L h{self.hidden} i{self.intermediate} {attention} "
                f"{self.mlp} {self.norm if self.norm == 'rms' else 'ln'} lora{{{','.join(self.adapters)}}} "
                f"r{self.rank} v{self.vocab} {'tied' if self.tied else 'untied'} t{self.threads} "
                f"{'accum' if self.accumulate else 'step-per-wave'}")

    def describe_waves(self):
        """The calibration and check waves, '+' between a packed wave's sequences."""
        def waves(which):
            return ",".join("+".join(str(n) for n in lengths) for lengths in which)
        return f"calibrate {waves(self.calibration)}; check {waves(self.check)}"


def _calibration_sizes(rng):
    first = rng.randint(*CALIBRATION_MIN)
    sizes = [first]
    for _ in range(2):
        sizes.append(round(sizes[-1] * rng.uniform(*CALIBRATION_RATIO)))
    # The smallest is at most 56 and the ratio at most 2.4, so the middle size
    # is at most 134: capping the largest at 256 keeps a ratio above 1.9.
    sizes[2] = min(sizes[2], CALIBRATION_MAX)
    return sizes


def _recipe_packings(calibration, packings):
    """The packings the README asks a packed model's calibration to hold
    beside the ones a packer made (`packings`): the middle size as one
    sequence, the largest size as many short sequences, as even as it goes,
    and one sequence as long as the packer's longest. None is drawn: the draws
    after them (the check packings) stay as they were."""
    low, middle, high = calibration
    count = min(MOST_CALIBRATED_SEQUENCES, high // SHORTEST_SEQUENCE)
    base, extra = divmod(high, count)
    longest = PACKER_LONGEST * max(max(lengths) for lengths in packings)
    return [[middle], [base + (1 if i < extra else 0) for i in range(count)], [longest]]


def _check_sizes(rng, calibration):
    """Three sizes strictly between calibration sizes, three beyond the largest."""
    low, middle, high = calibration
    taken = set(calibration)

    def pick(lo, hi):
        choices = [n for n in range(lo, hi + 1) if n not in taken]
        n = rng.choice(choices)
        taken.add(n)
        return n

    inside = [pick(low + 1, middle - 1), pick(middle + 1, high - 1), pick(low + 1, high - 1)]
    beyond = [pick(high + 1, int(high * 1.6)), pick(int(high * 1.6) + 1, int(high * 2.3)),
              pick(int(high * 2.5) + 1, int(high * BEYOND))]
    return sorted(inside + beyond)


def _split(rng, total, count, longest):
    """`total` tokens as `count` sequences of at least SHORTEST_SEQUENCE, none over `longest`."""
    count = max(1, min(count, total // SHORTEST_SEQUENCE))
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, total), count - 1))
        lengths = [b - a for a, b in zip([0] + cuts, cuts + [total])]
        if min(lengths) >= SHORTEST_SEQUENCE and max(lengths) <= longest:
            return lengths
    # As even as it goes (the draw above seldom misses 200 times in a row).
    base, extra = divmod(total, count)
    return [base + (1 if i < extra else 0) for i in range(count)]


def _packings(rng, calibration, check):
    """Sequence lengths for a packed model: calibration packings of 2-4
    sequences, then check packings with other counts and a longest sequence up
    to twice the longest calibrated one."""
    cal = [_split(rng, total, rng.randint(2, 4), total) for total in calibration]
    longest = max(max(lengths) for lengths in cal)  # the packer's longest: PACKER_LONGEST times it
    counts = {len(lengths) for lengths in cal}
    waves = []
    for total in check:
        fewest = max(1, math.ceil(total / (PACKER_LONGEST * longest)))
        most = max(fewest, min(total // SHORTEST_SEQUENCE, fewest + 5))
        options = [n for n in range(fewest, most + 1) if n not in counts] or [most]
        waves.append(_split(rng, total, rng.choice(options), PACKER_LONGEST * longest))
    return cal, waves


def _draw_model(rng, layers=(2, 8), widest=160):
    """The model's choices, in the order draw() has always drawn them."""
    attention = rng.choice(ATTENTION_KINDS)
    mlp = rng.choice(MLP_KINDS)
    norm = rng.choice(NORM_KINDS)
    layers = rng.randint(*layers)
    if attention == "none":
        heads = kv_heads = 0
        hidden = 4 * rng.randint(8, widest // 4)
    elif attention == "gqa":
        # Key/value heads, then how many query heads share each: 2-8 heads in all.
        kv_heads = rng.randint(1, 4)
        heads = kv_heads * rng.randint(2, 8 // kv_heads)
        hidden = heads * rng.randint(math.ceil(32 / heads), widest // heads)
    else:
        heads = kv_heads = rng.randint(1, 8)
        hidden = heads * rng.randint(math.ceil(32 / heads), widest // heads)
    intermediate = 4 * round(hidden * rng.uniform(2.0, 4.0) / 4)
    places = (ATTENTION_ADAPTERS if attention != "none" else ()) + \
        (("gate", "up", "down") if mlp == "swiglu" else ("up", "down"))
    chosen = set(rng.sample(places, rng.randint(1, len(places))))
    adapters = tuple(p for p in places if p in chosen)
    rank = rng.randint(2, 16)
    vocab = rng.randint(64, 512)
    tied = rng.random() < 0.5
    threads = rng.choice((1, 2))
    accumulate = rng.random() < 0.5
    return dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                intermediate=intermediate, attention=attention, mlp=mlp, norm=norm,
                adapters=adapters, rank=rank, vocab=vocab, tied=tied, threads=threads,
                accumulate=accumulate)


def draw(seed):
    """The model and waves of `seed` (the same seed, the same Spec)."""
    rng = random.Random(seed)
    model = _draw_model(rng)
    calibration = _calibration_sizes(rng)
    check = _check_sizes(rng, calibration)
    if model["attention"] == "packed":
        cal_waves, check_waves = _packings(rng, calibration, check)
        cal_waves += _recipe_packings(calibration, cal_waves)
    else:
        cal_waves, check_waves = [[n] for n in calibration], [[n] for n in check]
    return Spec(seed=seed, **model,
                calibration=tuple(tuple(w) for w in cal_waves),
                check=tuple(tuple(w) for w in check_waves))


# ---- several gradient groups ----------------------------------------------------

SLOT_NAMES = ("a", "b", "c")
GROUP_LAYERS = (2, 4)  # smaller models than draw()'s: a wave holds 2-3 groups' graphs
GROUP_WIDEST = 96


@dataclasses.dataclass(frozen=True)
class GroupWave:
    """One wave of several gradient groups: (slot, sequence lengths) per group in
    forward order, and the groups' indices in the order their backward calls run."""

    groups: tuple
    backward_order: tuple

    @property
    def tokens(self):
        return sum(sum(lengths) for _, lengths in self.groups)

    def group_tokens(self):
        return [sum(lengths) for _, lengths in self.groups]

    def describe(self):
        """'a:64+64,b:256 bw 1,0' ('+' between a packed group's sequences)."""
        groups = ",".join(f"{slot}:{'+'.join(str(n) for n in lengths)}" for slot, lengths in self.groups)
        return f"{groups} bw {','.join(str(i) for i in self.backward_order)}"


@dataclasses.dataclass(frozen=True)
class GroupSpec:
    """A seed's multi-slot model and its waves of several gradient groups.

    model      the decoder of every slot (build_slots shares its frozen weights);
               its calibration and check hold the calibrated and the checked group
               sizes (their sequence lengths)
    slots      2 or 3 adapter slots, one group each in every multi-group wave
    calibration  multi-group waves whose groups have calibrated sizes, equal and
               unequal, in both backward orders
    single     one-group waves, one slot at a time, every slot at every calibrated size
    check      multi-group waves whose groups have sizes never calibrated: three
               between calibrated sizes, three beyond the largest (up to 3x)
    """

    seed: int
    model: Spec
    slots: tuple
    calibration: tuple
    single: tuple
    check: tuple

    @property
    def packed(self):
        return self.model.packed

    def waves(self, which):
        return {"cal": self.calibration, "single": self.single, "check": self.check}[which]

    def describe(self):
        return f"{self.model.describe().replace(f'seed {self.seed}:', f'seed {self.seed} groups:', 1)} " \
               f"slots {','.join(self.slots)}"

    def describe_waves(self):
        def waves(which):
            return "; ".join(w.describe() for w in which)
        return f"calibrate {waves(self.calibration)}\n  single {waves(self.single)}\n  check {waves(self.check)}"


def _orders(rng, count, waves):
    """`waves` backward orders alternating forward and reversed, and for three
    groups some other permutation too."""
    forward, reverse = tuple(range(count)), tuple(reversed(range(count)))
    orders = []
    for index in range(waves):
        if count > 2 and index % 3 == 2:
            orders.append(rng.choice(((1, 0, 2), (0, 2, 1), (1, 2, 0), (2, 0, 1))))
        else:
            orders.append(forward if index % 2 == 0 else reverse)
    return orders


def _waiting_sizes(shapes, orders, count):
    """The group sizes that run their backward after another group's."""
    return {shape[g] for shape, order in zip(shapes, orders) for g in order[1:count]}


def _every_size_waits(shapes, orders, count):
    """The calibration recipe of the README: every group size waits for
    another group's backward at least once (a size that never waited is priced
    waiting with the conservative growth). Where the drawn orders leave a size
    out, the first other permutation (in a fixed list, so the draws after it
    are unchanged) of a wave that does not lose a waiting size puts it in."""
    sizes = {n for shape in shapes for n in shape[:count]}
    orders = list(orders)
    for index in range(len(orders)):
        if _waiting_sizes(shapes, orders, count) >= sizes:
            break
        for order in itertools.permutations(range(count)):
            trial = orders[:index] + [order] + orders[index + 1:]
            if _waiting_sizes(shapes, trial, count) > _waiting_sizes(shapes, orders, count):
                orders = trial
                break
    return tuple(orders)


def draw_groups(seed):
    """The multi-slot model and multi-group waves of `seed`: a stream of its own,
    so draw(seed) draws what it always drew."""
    rng = random.Random(f"groups {seed}")
    model = _draw_model(rng, layers=GROUP_LAYERS, widest=GROUP_WIDEST)
    slots = SLOT_NAMES[:rng.choice((2, 3))]
    count = len(slots)
    sizes = _calibration_sizes(rng)
    check_sizes = _check_sizes(rng, sizes)
    if model["attention"] == "packed":
        cal_lengths, check_lengths = _packings(rng, sizes, check_sizes)
    else:
        cal_lengths, check_lengths = [[n] for n in sizes], [[n] for n in check_sizes]
    packing = {n: tuple(lengths) for n, lengths in zip(sizes + check_sizes, cal_lengths + check_lengths)}
    low, middle, high = sizes
    inside = sorted(n for n in check_sizes if n < high)
    beyond = sorted(n for n in check_sizes if n > high)
    # Group sizes per wave (the first `count` of each): equal, then unequal as
    # a packer makes them (a short group next to a long one).
    cal_shapes = [(low,) * 3, (high,) * 3, (low, middle, high), (high, low, middle)]
    inside += [inside[-1]] * (3 - len(inside))  # _check_sizes gives 3 and 3; kept safe
    check_shapes = [(inside[0],) * 3, (inside[1], inside[2], inside[0]), (inside[0], beyond[2], inside[1]),
                    (beyond[1], beyond[0], inside[2]), (beyond[0],) * 3, (beyond[2], inside[1], beyond[1])]

    def waves(shapes, every_size_waits=False):
        orders = _orders(rng, count, len(shapes))
        if every_size_waits:
            orders = _every_size_waits(shapes, orders, count)
        return tuple(GroupWave(tuple((slot, packing[n]) for slot, n in zip(slots, shape[:count])), order)
                     for shape, order in zip(shapes, orders))

    single = tuple(GroupWave(((slot, packing[n]),), (0,)) for n in sizes for slot in slots)
    calibration = waves(cal_shapes, every_size_waits=True)
    check = waves(check_shapes)
    # A packed model follows the README's recipe for packed models too: groups
    # of one sequence (a middle size, and the packer's longest) and groups of
    # many short ones, after the drawn waves and in fixed orders (nothing
    # drawn, so the check waves stay as drawn), each packing waiting for
    # another group's backward once; and as one-group waves.
    recipe = ()
    if model["attention"] == "packed":
        recipe = tuple(tuple(lengths) for lengths in _recipe_packings(sizes, [packing[n] for n in sizes]))
    if recipe:
        one, many, longest = recipe
        calibration += tuple(GroupWave(tuple(zip(slots, (first, second, first)[:count])), tuple(range(count)))
                             for first, second in ((one, many), (many, one), (many, longest)))
        single += tuple(GroupWave(((slot, lengths),), (0,)) for lengths in recipe for slot in slots)
    return GroupSpec(seed=seed,
                     model=Spec(seed=seed, **model, calibration=tuple(tuple(packing[n]) for n in sizes) + recipe,
                                check=tuple(tuple(packing[n]) for n in check_sizes)),
                     slots=slots, calibration=calibration, single=single, check=check)


# ---- the model ------------------------------------------------------------------


def _frozen(*shape, scale=1.0):
    return nn.Parameter(torch.randn(*shape) * scale, requires_grad=False)


class Linear(nn.Module):
    """A frozen weight (no bias) and, when adapted, a trainable low-rank update.

    y = x Wᵀ + (x Aᵀ) Bᵀ · alpha/rank, with B starting at zero as LoRA does.
    """

    def __init__(self, in_features, out_features, rank=0):
        super().__init__()
        self.weight = _frozen(out_features, in_features, scale=in_features ** -0.5)
        self.lora_a = self.lora_b = None
        if rank:
            self.lora_a = nn.Parameter(torch.randn(rank, in_features) * in_features ** -0.5)
            self.lora_b = nn.Parameter(torch.zeros(out_features, rank))
            self.scale = 2.0  # alpha = 2 * rank

    def forward(self, x):
        y = F.linear(x, self.weight)
        if self.lora_a is not None:
            y = y + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale
        return y


class LayerNorm(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(hidden), requires_grad=False)

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) · weight, written out (torch 1.13 has no rms_norm)."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden), requires_grad=False)
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _norm(kind, hidden):
    return RMSNorm(hidden) if kind == "rms" else LayerNorm(hidden)


def causal_mask(length, device=None):
    """True where a query may not see a key (key after query)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu_(1)


class Attention(nn.Module):
    """Causal attention from matmul and softmax; the probabilities it saves grow
    with the square of each sequence's length.

    x: (tokens, hidden). With one length, the whole wave is one sequence; with
    several (packed), q, k and v are projected for the whole wave, then each
    sequence attends alone and the outputs are put back in order.
    """

    def __init__(self, spec):
        super().__init__()
        self.heads, self.kv_heads = spec.heads, spec.kv_heads
        self.head_dim = spec.hidden // spec.heads
        kv = self.kv_heads * self.head_dim

        def rank(name):
            return spec.rank if name in spec.adapters else 0

        self.q = Linear(spec.hidden, spec.hidden, rank("q"))
        self.k = Linear(spec.hidden, kv, rank("k"))
        self.v = Linear(spec.hidden, kv, rank("v"))
        self.o = Linear(spec.hidden, spec.hidden, rank("o"))

    def attend(self, q, k, v):
        """One sequence: q (heads, n, d), k and v (kv_heads, n, d) → (n, hidden)."""
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=0)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=0)
        n = q.shape[1]
        scores = torch.matmul(q, k.transpose(1, 2)) * self.head_dim ** -0.5
        scores = scores.masked_fill(causal_mask(n, q.device), float("-inf"))
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        return out.transpose(0, 1).reshape(n, self.heads * self.head_dim)

    def forward(self, x, lengths):
        tokens = x.shape[0]
        q = self.q(x).view(tokens, self.heads, self.head_dim).transpose(0, 1)
        k = self.k(x).view(tokens, self.kv_heads, self.head_dim).transpose(0, 1)
        v = self.v(x).view(tokens, self.kv_heads, self.head_dim).transpose(0, 1)
        if len(lengths) == 1:
            out = self.attend(q, k, v)
        else:
            pieces = zip(q.split(lengths, dim=1), k.split(lengths, dim=1), v.split(lengths, dim=1))
            out = torch.cat([self.attend(*piece) for piece in pieces], dim=0)
        return self.o(out)


class MLP(nn.Module):
    """down(GELU(up(x))) or, SwiGLU, down(SiLU(gate(x)) · up(x))."""

    def __init__(self, spec):
        super().__init__()

        def rank(name):
            return spec.rank if name in spec.adapters else 0

        self.swiglu = spec.mlp == "swiglu"
        self.gate = Linear(spec.hidden, spec.intermediate, rank("gate")) if self.swiglu else None
        self.up = Linear(spec.hidden, spec.intermediate, rank("up"))
        self.down = Linear(spec.intermediate, spec.hidden, rank("down"))

    def forward(self, x):
        if self.swiglu:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x)))


class Layer(nn.Module):
    """Pre-norm: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, spec):
        super().__init__()
        self.attention = None
        if spec.attention != "none":
            self.attention_norm = _norm(spec.norm, spec.hidden)
            self.attention = Attention(spec)
        self.mlp_norm = _norm(spec.norm, spec.hidden)
        self.mlp = MLP(spec)

    def forward(self, x, lengths):
        if self.attention is not None:
            x = x + self.attention(self.attention_norm(x), lengths)
        return x + self.mlp(self.mlp_norm(x))


class TiedHead(nn.Module):
    """The lm head that reads the embedding's own (frozen) weight."""

    def __init__(self, embedding):
        super().__init__()
        self.weight = embedding.weight

    def forward(self, x):
        return F.linear(x, self.weight)


class RandomDecoder(nn.Module):
    """embedding → layers (each checkpointed) → final norm → lm head → cross-entropy."""

    def __init__(self, spec):
        super().__init__()
        self.spec = spec
        self.embedding = nn.Embedding(spec.vocab, spec.hidden)
        nn.init.normal_(self.embedding.weight, std=spec.hidden ** -0.5)  # logits of about unit scale
        self.embedding.weight.requires_grad_(False)
        self.layers = nn.ModuleList(Layer(spec) for _ in range(spec.layers))
        self.final_norm = _norm(spec.norm, spec.hidden)
        self.lm_head = TiedHead(self.embedding) if spec.tied else Linear(spec.hidden, spec.vocab)
        self.loss = nn.CrossEntropyLoss()

    def head_modules(self):
        return {"embedding": self.embedding, "final_norm": self.final_norm,
                "lm_head": self.lm_head, "loss": self.loss}

    def adapter_parameters(self):
        return [p for p in self.parameters() if p.requires_grad]

    def forward(self, token_ids, targets, lengths):
        lengths = [int(n) for n in lengths]
        if sum(lengths) != token_ids.shape[0]:
            raise ValueError(f"sequence lengths {lengths} do not add up to {token_ids.shape[0]} tokens")
        x = self.embedding(token_ids)
        for layer in self.layers:
            x = checkpoint(layer, x, lengths, use_reentrant=False)
        return self.loss(self.lm_head(self.final_norm(x)), targets)


def build_model(spec):
    """The model of `spec`, its frozen weights drawn from the spec's seed."""
    torch.manual_seed(spec.seed)
    return RandomDecoder(spec)


def batch(spec, step, wave, lengths):
    """Deterministic token ids and next-token targets, sequence by sequence."""
    generator = torch.Generator().manual_seed(spec.seed * 1_000_003 + step * 1009 + wave)
    ids, targets = [], []
    for length in lengths:
        sequence = torch.randint(spec.vocab, (length + 1,), generator=generator)
        ids.append(sequence[:-1])
        targets.append(sequence[1:])
    return torch.cat(ids), torch.cat(targets)


def share_frozen(source, target):
    """Makes target's frozen tensors the very tensors of source (one base model)."""
    for (name, p), (other, q) in zip(source.named_parameters(), target.named_parameters()):
        assert name == other, (name, other)
        if not p.requires_grad:
            q.data = p.data


def build_slots(spec):
    """{slot: model} for a GroupSpec: one frozen base (the first slot's weights,
    shared), an adapter set of its own per slot, drawn from the seed."""
    first = build_model(spec.model)
    models = {spec.slots[0]: first}
    for index, slot in enumerate(spec.slots[1:], 1):
        model = copy.deepcopy(first)
        share_frozen(first, model)
        generator = torch.Generator().manual_seed(spec.seed * 101 + index)
        with torch.no_grad():
            for parameter in model.adapter_parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * parameter.shape[-1] ** -0.5)
        models[slot] = model
    return models
