"""Shared by the Python tests: import paths, a tiny model, allocation attribution."""

import os
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _path in (os.path.join(REPO, "python"), os.path.join(REPO, "workloads", "torch")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

import lora_model  # noqa: E402

torch.set_num_threads(1)


def tiny_model(layers=3, checkpointing=True, seed=0, **sizes):
    """A LoRA decoder small enough that a step takes milliseconds."""
    torch.manual_seed(seed)
    config = dict(vocab=32, hidden=16, heads=2, intermediate=24, rank=4, attention_block=4)
    config.update(sizes)
    return lora_model.LoRADecoder(layers=layers, checkpointing=checkpointing, **config)


def tokens(count, vocab=32, seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(vocab, (count + 1,), generator=generator)
    return ids[:-1], ids[1:]


def _storage_key(tensor):
    return tensor.storage().data_ptr()


class AllocationSites(TorchDispatchMode):
    """Remembers, for every tensor storage an operator creates, which range was
    innermost on the creating thread (as the recording backend saw it).

    An operator output whose storage is none of its inputs' storages is a new
    allocation; views and in-place results share an input's storage and are
    skipped. The latest creation at an address wins, so for a tensor that is
    still alive `site_of` names the range of its own allocation.
    """

    def __init__(self, backend):
        super().__init__()
        self.backend = backend
        self.sites = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = {_storage_key(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor) and tensor.numel() > 0:
                key = _storage_key(tensor)
                if key not in inputs:
                    self.sites[key] = (self.backend.innermost(), threading.get_ident(), str(func))
        return out

    def site_of(self, tensor):
        """(innermost range, thread, operator) when `tensor`'s storage was created."""
        return self.sites.get(_storage_key(tensor))


def pushes(events, thread=None):
    return [name for t, op, name, _ in events if op == "push" and (thread is None or t == thread)]


def nesting(events):
    """[(thread, name, parent name or None)] for every push, in order."""
    stacks = {}
    result = []
    for thread, op, name, _ in events:
        stack = stacks.setdefault(thread, [])
        if op == "push":
            result.append((thread, name, stack[-1] if stack else None))
            stack.append(name)
        elif op == "pop":
            stack.pop()
    return result


def balanced(events):
    """True when every thread closed every range it opened, in order."""
    stacks = {}
    for thread, op, name, _ in events:
        stack = stacks.setdefault(thread, [])
        if op == "push":
            stack.append(name)
        elif op == "pop":
            if not stack or stack.pop() != name:
                return False
    return all(not s for s in stacks.values())
