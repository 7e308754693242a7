"""The training loop shared by workloads that accumulate gradients over waves.

Each step runs one wave per entry of `tokens` (cold the first time a token
count runs, warm after), then AdamW over `trainable` and
zero_grad(set_to_none=True); everything is annotated with peakscope.
"""

import torch

import peakscope


def parse_tokens(parser, text):
    """Comma-separated token counts of a step's waves; errors through `parser`."""
    try:
        tokens = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        parser.error(f"--tokens: expected comma-separated integers, got {text!r}")
    if not tokens or min(tokens) < 2:
        parser.error("--tokens: every wave needs at least 2 tokens")
    return tokens


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
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    peakscope.flush()
    for annotation in annotations:
        annotation.remove()
    return 0
