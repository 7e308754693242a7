#!/usr/bin/python3
"""A Hugging Face decoder trained with PEFT LoRA and gradient checkpointing, in waves.

The model is built from a config (Llama- or Qwen2-style, random weights,
nothing downloaded); PEFT puts LoRA adapters on every attention and MLP
projection; `gradient_checkpointing_enable(use_reentrant=False)` gives the
full-recompute backward. Each step runs one wave per entry of --tokens, each a
packed sequence of --documents documents (position ids restart at every
document boundary, sequence_lengths in the wave payload), then AdamW over the
adapters and zero_grad(set_to_none=True). Waves whose token count has not run
before are cold, repeats are warm; only a step's first wave has pending
adapter gradients.

What the program saw goes to stdout, one line per wave:
    hf_lora wave {"step": .., "tokens": .., "cold": .., "max_allocated": ..,
                  "max_reserved": .., "device_used_peak": .., ...}
max_allocated / max_reserved are torch.cuda's peaks over the wave (reset at
its start; null under a pluggable allocator, which reports none), and
max_requested the peak of the bytes asked for (memory_stats'
requested_bytes.all.peak: before the caching allocator rounds each block up,
so the figure the allocator trace tracker's entries add up to);
device_used_peak is the largest total - free of cudaMemGetInfo sampled at every
layer's forward and recompute and after the backward.

--allocator picks how PyTorch's CUDA memory reaches the recorder:
    pluggable       peakscope.use_pluggable_allocator(): every tensor (allocated level)
    native          PyTorch's caching allocator: segments only (record with --level reserved)
    native-tensors  the same, with PyTorch's allocator trace tracker feeding every
                    tensor into the recorder (peakscope.trace_tracker; --level reserved)
    default         touch nothing (also what runs on the CPU)

Run it under the recorder, on a GPU:
    peakscope record -o hf.pstrace -- python3 workloads/torch/hf_lora.py --allocator pluggable
    peakscope record --level reserved -o hf-native.pstrace -- \\
        python3 workloads/torch/hf_lora.py --allocator native-tensors
Needs transformers and peft; without them it says so and exits 3.
"""

import argparse
import json
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
# The helper: python/ beside workloads/ in the GPU bundle, python/ at the top
# of the tree (this file is workloads/torch/hf_lora.py there).
for _candidate in (os.path.join(os.path.dirname(_HERE), "python"),
                   os.path.join(os.path.dirname(os.path.dirname(_HERE)), "python")):
    if os.path.isdir(os.path.join(_candidate, "peakscope")):
        sys.path.insert(0, _candidate)
        break

from wave_args import parse_tokens  # noqa: E402

EXIT_MISSING = 3  # a dependency is missing: nothing was run
ADAPTED = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["llama", "qwen2"], default="llama")
    parser.add_argument("--allocator", choices=["pluggable", "native", "native-tensors", "default"],
                        default="default")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--tokens", default="512,2048,8192",
                        help="comma-separated tokens of each wave in a step (default 512,2048,8192)")
    parser.add_argument("--documents", type=int, default=4, help="documents packed into each wave")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--intermediate", type=int, default=5632)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--rank", type=int, default=16, help="LoRA rank")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default=None,
                        help="weights and activations (default bfloat16 on CUDA, float32 on the CPU)")
    parser.add_argument("--slot", default="a", help="name of the adapter slot being trained")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args(argv)
    arguments.tokens = parse_tokens(parser, arguments.tokens)
    if arguments.steps < 1 or arguments.documents < 1:
        parser.error("--steps and --documents must be at least 1")
    return arguments


def import_dependencies():
    """torch, transformers, peft; or a message saying which is missing."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import peft  # noqa: F401
    except ImportError as error:
        return None, (f"hf_lora: needs torch, transformers and peft ({error}); "
                      "on the GPU machine they come with its python3")
    return (torch, transformers, peft), None


def document_lengths(tokens, documents):
    """Lengths of the packed documents of one wave, as even as the count allows."""
    documents = max(1, min(documents, tokens // 2))
    base, extra = divmod(tokens, documents)
    return [base + (1 if i < extra else 0) for i in range(documents)]


def build_model(arguments, torch, transformers, peft, device, dtype):
    common = dict(vocab_size=arguments.vocab, hidden_size=arguments.hidden,
                  intermediate_size=arguments.intermediate, num_hidden_layers=arguments.layers,
                  num_attention_heads=arguments.heads, num_key_value_heads=arguments.kv_heads,
                  max_position_embeddings=max(arguments.tokens), use_cache=False)
    if arguments.model == "llama":
        config, model_class = transformers.LlamaConfig(**common), transformers.LlamaForCausalLM
    else:
        config, model_class = transformers.Qwen2Config(**common), transformers.Qwen2ForCausalLM
    config._attn_implementation = "sdpa"
    torch.manual_seed(arguments.seed)
    with torch.device(device):
        model = model_class(config).to(dtype)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    lora = peft.LoraConfig(r=arguments.rank, lora_alpha=2 * arguments.rank, lora_dropout=0.0,
                           target_modules=ADAPTED, task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, lora)
    model.train()
    return model


def parts(model):
    """The decoder layers and the modules around them, through PEFT's wrapper."""
    causal = model.get_base_model()
    decoder = causal.model
    return decoder.layers, {"embedding": decoder.embed_tokens, "norm": decoder.norm, "lm_head": causal.lm_head}


class DeviceSampler:
    """The largest total - free cudaMemGetInfo saw since the last reset."""

    def __init__(self, torch, cuda):
        self.torch, self.cuda, self.peak = torch, cuda, None

    def reset(self):
        self.peak = None
        self.sample()

    def sample(self, *_):
        if not self.cuda:
            return
        free, total = self.torch.cuda.mem_get_info()
        self.peak = max(self.peak or 0, total - free)


def torch_peaks(torch, cuda):
    """max_memory_allocated, max_memory_reserved and the peak of the requested
    bytes (requested_bytes.all.peak: the sizes asked for, before the caching
    allocator rounds them up; what its trace entries carry)."""
    def stat(function):
        try:
            value = function()
        except Exception:  # a pluggable allocator reports none
            return None
        return value or None
    if not cuda:
        return None, None, None
    return (stat(torch.cuda.max_memory_allocated), stat(torch.cuda.max_memory_reserved),
            stat(lambda: torch.cuda.memory_stats().get("requested_bytes.all.peak")))


def run(arguments, modules, out=sys.stdout):
    torch, transformers, peft = modules
    import peakscope

    cuda = (arguments.device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    device = "cuda" if cuda else "cpu"
    if arguments.allocator != "default" and not cuda:
        raise SystemExit(f"hf_lora: --allocator {arguments.allocator} needs CUDA")
    if arguments.allocator == "pluggable":
        peakscope.use_pluggable_allocator()  # before anything allocates CUDA memory
    tracker = None
    if arguments.allocator == "native-tensors":
        from peakscope import trace_tracker
        try:
            tracker = trace_tracker.attach()
            print(f"hf_lora: trace tracker attached ({os.path.basename(tracker)})", file=out)
        except trace_tracker.TrackerUnavailable as error:  # the segments still tell something
            print(f"hf_lora: trace tracker unavailable, segments only: {error}", file=out)
    dtype = getattr(torch, arguments.dtype or ("bfloat16" if cuda else "float32"))
    started = time.perf_counter()
    model = build_model(arguments, torch, transformers, peft, device, dtype)
    layers, heads = parts(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    sampler = DeviceSampler(torch, cuda)
    hooks = [layer.register_forward_hook(sampler.sample) for layer in layers]
    annotations = [peakscope.annotate(model, layers=layers, head_modules=heads),
                   peakscope.annotate_optimizer(optimizer)]
    print(f"hf_lora: {arguments.model}, {arguments.layers} layers, hidden {arguments.hidden}, heads "
          f"{arguments.heads}/{arguments.kv_heads}, intermediate {arguments.intermediate}, vocab {arguments.vocab}, "
          f"LoRA rank {arguments.rank} on {' '.join(ADAPTED)}, {dtype}, {device}, allocator {arguments.allocator}; "
          f"{sum(p.numel() for p in trainable)} trainable parameters; built in "
          f"{time.perf_counter() - started:.1f} s", file=out, flush=True)
    generator = torch.Generator().manual_seed(arguments.seed)
    seen = set()
    waves = []
    for step in range(arguments.steps):
        for index, tokens in enumerate(arguments.tokens):
            cold = tokens not in seen
            seen.add(tokens)
            lengths = document_lengths(tokens, arguments.documents)
            ids = torch.randint(arguments.vocab, (1, tokens), generator=generator).to(device)
            positions = torch.cat([torch.arange(n) for n in lengths]).unsqueeze(0).to(device)
            if cuda:
                torch.cuda.synchronize()
                try:
                    torch.cuda.reset_peak_memory_stats()
                except RuntimeError:  # a pluggable allocator keeps no peak to reset
                    pass
            sampler.reset()
            wave_started = time.perf_counter()
            with peakscope.wave(tokens=tokens, slots=[arguments.slot], groups=1, cold=cold,
                                sequence_lengths=lengths):
                loss = model(input_ids=ids, position_ids=positions, labels=ids).loss
                loss.backward()
                if cuda:
                    torch.cuda.synchronize()
                sampler.sample()
            allocated, reserved, requested = torch_peaks(torch, cuda)
            wave = {"step": step, "index": index, "tokens": tokens, "cold": cold, "pending_gradients": index == 0,
                    "sequence_lengths": lengths, "max_allocated": allocated, "max_reserved": reserved,
                    "max_requested": requested,
                    "device_used_peak": sampler.peak, "loss": round(float(loss), 4),
                    "seconds": round(time.perf_counter() - wave_started, 3)}
            waves.append(wave)
            print("hf_lora wave " + json.dumps(wave), file=out, flush=True)
            del loss
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    peakscope.flush()
    for hook in hooks:
        hook.remove()
    for annotation in annotations:
        annotation.remove()
    if tracker is not None:
        from peakscope import trace_tracker
        print(f"hf_lora: trace tracker forwarded {trace_tracker.forwarded()} events", file=out)
    print(f"hf_lora: {len(waves)} waves in {arguments.steps} steps, {time.perf_counter() - started:.1f} s",
          file=out, flush=True)
    return waves


def main(argv=None):
    arguments = parse_arguments(argv)
    modules, missing = import_dependencies()
    if missing:
        print(missing, file=sys.stderr)
        return EXIT_MISSING
    run(arguments, modules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
