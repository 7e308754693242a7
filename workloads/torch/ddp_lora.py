#!/usr/bin/python3
"""Data-parallel LoRA training on the CPU: one rank of a gloo process group.

Every rank holds the same LoRA decoder (lora_model.py: frozen base, adapters,
full-recompute checkpointing) and trains it on its own shard. Shards are
unequal on purpose: wave i of rank r has round(tokens[i] * (1 + skew * r))
tokens, so the last rank is the busiest by a known margin. Each step runs one
wave per --tokens entry, accumulating adapter gradients, then all-reduces them
once (one flat bucket, like DistributedDataParallel's) and runs AdamW and
zero_grad(set_to_none=True). Each rank's loss is weighted by its share of the
step's tokens over all ranks, so the summed gradient is the gradient of the
mean over every token of the step, whatever the shard sizes.

The process group comes from the environment, as torchrun or a scheduler sets
it: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK is read but the CPU
has no device to pick). Without WORLD_SIZE it runs as a group of one.

After each wave a rank prints one line starting "wave <index>". --die-at-wave K
makes this rank end itself in the middle of wave K (after its forward, before
its backward), by SIGKILL (--die-by kill: nothing is flushed, as with an OOM
kill) or os._exit(1) (--die-by exit). The other ranks then fail or block in the
step's all-reduce; the launcher stops them. torchrun stops them as soon as it
sees the rank gone, wherever they are: with --die-after-others the rank dies
only once every other rank has run the step's waves (each says so in the
process group's store), so what they recorded does not depend on that moment.

    build/peakscope record --host -o ddp.pstrace -- torchrun --redirects 1 --tee 1 --nproc_per_node 2 \\
        workloads/torch/ddp_lora.py --tokens 512,1024,768 --skew 0.5

(Debian's torchrun, PyTorch 1.13 on Python 3.11, fails with its default stdio
options; --redirects 1 --tee 1 sidesteps it: README, "Distributed runs".)
"""

import argparse
import os
import signal
import sys
import time
from datetime import timedelta

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python"))
sys.path.insert(0, _HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors  # noqa: E402

import peakscope  # noqa: E402
from accumulation import parse_tokens  # noqa: E402
from lora_model import LoRADecoder  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", "--waves", dest="tokens", default="512,1024,768",
                        help="comma-separated tokens of each wave of a step on rank 0 (default 512,1024,768)")
    parser.add_argument("--skew", type=float, default=0.5,
                        help="rank r's waves have tokens * (1 + skew * r) tokens (default 0.5)")
    parser.add_argument("--steps", type=int, default=1, help="optimizer steps (default 1)")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--intermediate", type=int, default=128)
    parser.add_argument("--rank", type=int, default=16, help="adapter rank (not the process rank)")
    parser.add_argument("--vocab", type=int, default=128)
    parser.add_argument("--attention-block", type=int, default=64, help="queries per attention block")
    parser.add_argument("--slot", default="a", help="name of the adapter slot being trained")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--die-at-wave", type=int, default=None, metavar="K",
                        help="end this rank in the middle of wave K (counted from 0 over all steps)")
    parser.add_argument("--die-rank", type=int, default=None, metavar="R",
                        help="with --die-at-wave: only rank R dies (default: the last rank)")
    parser.add_argument("--die-by", choices=("kill", "exit"), default="kill",
                        help="SIGKILL itself (default) or os._exit(1)")
    parser.add_argument("--die-after-others", action="store_true",
                        help="with --die-at-wave: die once every other rank has run the step's waves")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a collective may wait for the other ranks (default 60)")
    parser.add_argument("--no-annotate", action="store_true", help="run without peakscope ranges")
    arguments = parser.parse_args(argv)
    arguments.tokens = parse_tokens(parser, arguments.tokens)
    if arguments.steps < 1:
        parser.error("--steps must be at least 1")
    if arguments.skew < 0:
        parser.error("--skew must not be negative")
    if arguments.die_at_wave is not None and arguments.die_at_wave < 0:
        parser.error("--die-at-wave must not be negative")
    if arguments.die_after_others and arguments.die_at_wave is None:
        parser.error("--die-after-others goes with --die-at-wave")
    if arguments.timeout <= 0:
        parser.error("--timeout must be positive")
    return arguments


def shard_tokens(tokens, skew, rank):
    """Tokens of each wave on `rank`: the unequal shards the run is about."""
    return [max(2, round(t * (1 + skew * rank))) for t in tokens]


def step_tokens(arguments, world_size):
    """Tokens of one step over every rank: the denominator of the loss weights."""
    return sum(sum(shard_tokens(arguments.tokens, arguments.skew, r)) for r in range(world_size))


def environment_group():
    """(rank, world size) from the launcher's variables; (0, 1) without them."""
    if "WORLD_SIZE" not in os.environ:
        return 0, 1
    try:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        raise SystemExit("ddp_lora: RANK and WORLD_SIZE must both be set to integers")
    if not 0 <= rank < world_size:
        raise SystemExit(f"ddp_lora: RANK {rank} is outside WORLD_SIZE {world_size}")
    return rank, world_size


def build(arguments):
    torch.manual_seed(arguments.seed)  # the same weights on every rank
    model = LoRADecoder(vocab=arguments.vocab, hidden=arguments.hidden, layers=arguments.layers,
                        heads=arguments.heads, intermediate=arguments.intermediate,
                        rank=arguments.rank, attention_block=arguments.attention_block)
    optimizer = torch.optim.AdamW(model.adapter_parameters(), lr=1e-3)
    return model, optimizer


def batch(arguments, rank, step, wave, tokens):
    """Deterministic token ids and next-token targets for one wave of one rank."""
    generator = torch.Generator().manual_seed(
        arguments.seed * 1_000_003 + rank * 100_003 + step * 1009 + wave)
    ids = torch.randint(arguments.vocab, (tokens + 1,), generator=generator)
    return ids[:-1], ids[1:]


def all_reduce_gradients(parameters):
    """Sums the adapter gradients over the ranks through one flat bucket."""
    gradients = [p.grad for p in parameters]
    bucket = _flatten_dense_tensors(gradients)
    dist.all_reduce(bucket)
    for gradient, reduced in zip(gradients, _unflatten_dense_tensors(bucket, gradients)):
        gradient.copy_(reduced)
    del bucket


def adapters_in_sync(parameters, world_size):
    """Whether every rank ended with the same adapters (a checksum per rank)."""
    if world_size == 1:
        return True
    checksum = torch.stack([p.detach().double().sum() for p in parameters]).sum().reshape(1)
    gathered = [torch.zeros_like(checksum) for _ in range(world_size)]
    dist.all_gather(gathered, checksum)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def waves_done_key(step, rank):
    return f"ddp_lora/waves-done/{step}/{rank}"


def wait_for_the_others(step, rank, world_size, timeout):
    """Until every other rank has said it ran the waves of `step` (--die-after-others)."""
    others = [waves_done_key(step, r) for r in range(world_size) if r != rank]
    if others:
        dist.distributed_c10d._get_default_store().wait(others, timedelta(seconds=timeout))


def die(how):
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(1)


def run(arguments, rank, world_size, out=sys.stdout):
    torch.set_num_threads(arguments.threads)
    torch.use_deterministic_algorithms(True)
    model, optimizer = build(arguments)
    trainable = model.adapter_parameters()
    if world_size > 1:
        for parameter in trainable:  # as DistributedDataParallel does at construction
            dist.broadcast(parameter.data, 0)
    annotations = []
    if not arguments.no_annotate:
        annotations.append(peakscope.annotate(model, layers=model.layers, head_modules=model.head_modules()))
        annotations.append(peakscope.annotate_optimizer(optimizer))
    dying = arguments.die_at_wave is not None and rank == (
        arguments.die_rank if arguments.die_rank is not None else world_size - 1)
    shard = shard_tokens(arguments.tokens, arguments.skew, rank)
    everyone = step_tokens(arguments, world_size)
    seen = set()
    waves = []
    started = time.perf_counter()
    for step in range(arguments.steps):
        for index, tokens in enumerate(shard):
            cold = tokens not in seen
            seen.add(tokens)
            ids, targets = batch(arguments, rank, step, index, tokens)
            wave_started = time.perf_counter()
            with peakscope.wave(tokens=tokens, slots=[arguments.slot], groups=1, cold=cold):
                loss = model(ids, targets)
                if dying and len(waves) == arguments.die_at_wave:
                    if arguments.die_after_others:
                        wait_for_the_others(step, rank, world_size, arguments.timeout)
                    print(f"rank {rank} dies in wave {len(waves)} ({arguments.die_by})", file=out, flush=True)
                    die(arguments.die_by)
                (loss * (tokens / everyone)).backward()
            seconds = time.perf_counter() - wave_started
            print(f"wave {len(waves)} step {step} tokens {tokens} cold {'yes' if cold else 'no'} "
                  f"loss {float(loss):.4f} seconds {seconds:.3f}", file=out, flush=True)
            waves.append((step, tokens, cold, float(loss), seconds))
            del loss
        if world_size > 1 and arguments.die_after_others and not dying:
            dist.distributed_c10d._get_default_store().set(waves_done_key(step, rank), "1")
        if world_size > 1:
            all_reduce_gradients(trainable)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    elapsed = time.perf_counter() - started
    peakscope.flush()
    for annotation in annotations:
        annotation.remove()
    in_sync = adapters_in_sync(trainable, world_size)
    print(f"ddp_lora: rank {rank} of {world_size}, {len(waves)} waves of {shard} tokens in "
          f"{arguments.steps} steps, {elapsed:.2f} s; {arguments.layers} layers, hidden {arguments.hidden}, "
          f"adapter rank {arguments.rank}; annotations: "
          f"{'off' if arguments.no_annotate else peakscope.get_backend().name}; "
          f"adapters in sync: {'yes' if in_sync else 'NO'}", file=out, flush=True)
    return waves, in_sync


def main(argv=None):
    arguments = parse_arguments(argv)
    rank, world_size = environment_group()
    if arguments.die_rank is not None and not 0 <= arguments.die_rank < world_size:
        raise SystemExit(f"ddp_lora: --die-rank {arguments.die_rank} is not one of ranks 0..{world_size - 1}")
    if world_size > 1:
        if not dist.is_available() or not dist.is_gloo_available():
            raise SystemExit("ddp_lora: this torch has no torch.distributed gloo backend")
        dist.init_process_group("gloo", rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=arguments.timeout))
    try:
        _, in_sync = run(arguments, rank, world_size)
    finally:
        if world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()
    return 0 if in_sync else 1


if __name__ == "__main__":
    sys.exit(main())
