"""Ranges, marks and waves on the calling thread.

The helper mirrors, per thread, the ranges it has opened. The mirror lets a
range that closes late (an autograd callback that never came, an exception in
a module's forward) be closed by whatever encloses it, so that the backend's
per-thread stack never drifts: closing an entry pops everything opened above
it on that thread first.
"""

import contextlib
import json
import threading

from peakscope import backends

_local = threading.local()


class Entry:
    """One open range on one thread. `kind` is the phase the helper opened it for."""

    __slots__ = ("name", "kind", "thread", "closed", "owner")

    def __init__(self, name, kind, thread, owner=None):
        self.name = name
        self.kind = kind
        self.thread = thread
        self.closed = False
        self.owner = owner  # what will close it, for ranges closed by autograd

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"Entry({self.name!r}, {self.kind!r}, {state})"


def _stack():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def open_stack():
    """The entries open on the calling thread, outermost first (a copy)."""
    return list(_stack())


def open_entry(name, kind=None, owner=None):
    """Pushes `name` on the calling thread and returns its entry."""
    entry = Entry(name, kind, threading.get_ident(), owner)
    backends.get_backend().push(name)
    _stack().append(entry)
    return entry


def close_entry(entry):
    """Closes `entry` and anything still open above it; False when it cannot.

    A range can only be popped on the thread that pushed it: from another
    thread, or once closed, this does nothing and returns False.
    """
    if entry.closed or entry.thread != threading.get_ident():
        return False
    stack = _stack()
    if not any(e is entry for e in stack):
        return False
    backend = backends.get_backend()
    while True:
        top = stack.pop()
        top.closed = True
        backend.pop()
        if top is entry:
            return True


def close_top_if(predicate):
    """Closes innermost entries while `predicate(entry)` holds; returns how many."""
    stack = _stack()
    closed = 0
    while stack and predicate(stack[-1]):
        close_entry(stack[-1])
        closed += 1
    return closed


def push(name):
    """Opens a range on the calling thread (nvtxRangePushA)."""
    open_entry(name)


def pop():
    """Closes the innermost range the helper opened on the calling thread."""
    stack = _stack()
    if stack:
        close_entry(stack[-1])


@contextlib.contextmanager
def range(name):  # noqa: A001 - mirrors nvtx.range
    """`with peakscope.range("head/loss"): ...` — a range around a block."""
    entry = open_entry(name)
    try:
        yield entry
    finally:
        close_entry(entry)


def _payload_text(payload):
    if payload is None or isinstance(payload, str):
        return payload
    return json.dumps(payload)


def mark(name, payload=None):
    """An instant event; `payload` is None, a JSON string, or JSON-able data."""
    backends.get_backend().mark(name, _payload_text(payload))


def flush():
    """Asks the backend to write what it holds (the C API's psc_flush)."""
    backends.get_backend().flush()


def wave_payload(tokens, slots=(), groups=1, cold=False, **extra):
    """The payload of a `wave` mark, keys in the design's order."""
    payload = {"tokens": int(tokens), "slots": [str(s) for s in slots],
               "groups": int(groups), "cold": bool(cold)}
    for key, value in extra.items():
        if key in payload:
            raise TypeError(f"wave payload field {key!r} given twice")
        payload[key] = value
    return payload


@contextlib.contextmanager
def wave(tokens, slots=(), groups=1, cold=False, **extra):
    """One micro-batch: a `wave` range and its payload mark, on this thread.

    Put the forward and the backward inside, not the optimizer step. Extra
    keyword arguments (e.g. children=[...] for a split wave) join the payload.
    Any range still open above the wave on this thread when it ends is closed
    with it.
    """
    payload = json.dumps(wave_payload(tokens, slots, groups, cold, **extra))
    entry = open_entry("wave", "wave")
    try:
        backends.get_backend().mark("wave", payload)
        yield entry
    finally:
        close_entry(entry)
