"""The training loop shared by workloads that accumulate gradients over waves.

Each step runs one wave per entry of `tokens` (cold the first time a token
count runs, warm after), then AdamW over `trainable` and
zero_grad(set_to_none=True); everything is annotated with peakscope.
"""

import torch

import peakscope
from wave_args import parse_tokens, workload_parser  # noqa: F401  (the workloads import them from here)


def end_step(optimizer):
    """An optimizer step's end: AdamW's step, then zero_grad(set_to_none=True)."""
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def end_run(annotations):
    """Writes what is buffered and takes the annotations off again."""
    peakscope.flush()
    for annotation in annotations:
        annotation.remove()


def train_accumulating(model, trainable, steps, tokens, seed, vocab=128):
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    annotations = [peakscope.annotate(model, layers=model.layers, head_modules=model.head_modules()),
                   peakscope.annotate_optimizer(optimizer)]
    generator = torch.Generator().manual_seed(seed)
    seen = set()
    for step in range(steps):
        for count in tokens:
            cold = count not in seen
            seen.add(count)
            ids = torch.randint(vocab, (count + 1,), generator=generator)
            with peakscope.wave(tokens=count, slots=["a"], groups=1, cold=cold):
                loss = model(ids[:-1], ids[1:])
                loss.backward()
            print(f"step {step} tokens {count} cold {cold}: loss {float(loss):.3f}")
            del loss
        end_step(optimizer)
    end_run(annotations)
    return 0
