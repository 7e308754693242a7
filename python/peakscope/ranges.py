"""Ranges, marks and waves on the calling thread.

The helper mirrors, per thread, the ranges it has opened. The mirror lets a
range that closes late (an autograd callback that never came, an exception in
a module's forward) be closed by whatever encloses it, so that the backend's
per-thread stack never drifts: closing an entry pops everything opened above
it on that thread first.
"""

import builtins
import contextlib
import json
import threading

from peakscope import backends

_builtin_range = builtins.range  # `range` below is the context manager

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


def _positive_int(value, what):
    """`value` as an int when it is a positive whole number (bools refused); else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
        raise ValueError(f"{what}: expected a positive integer, got {value!r}")
    return int(value)


def group(tokens, slot=None, sequence_lengths=None):
    """One gradient group of a wave: `{"tokens", "slot", "sequence_lengths"}`.

    A group is one slot's forward over its own share of the wave's tokens, then
    its own backward call. `slot` and `sequence_lengths` are left out when
    None; sequence lengths (a packed group) must add up to `tokens`.
    """
    entry = {"tokens": _positive_int(tokens, "group tokens")}
    if slot is not None:
        if not isinstance(slot, str):
            raise TypeError(f"group slot: expected a string, got {slot!r}")
        entry["slot"] = slot
    if sequence_lengths is not None:
        entry["sequence_lengths"] = _lengths(sequence_lengths, entry["tokens"], "group sequence_lengths",
                                             "the group's")
    return entry


def _lengths(value, tokens, what, whose):
    """Packed sequence lengths: positive integers that add up to `tokens`; else TypeError/ValueError."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{what}: expected a list of positive integers, got {value!r}")
    lengths = [_positive_int(n, what) for n in value]
    if not lengths or sum(lengths) != tokens:
        raise ValueError(f"{what} {lengths} add up to {sum(lengths)}, not to {whose} {tokens} tokens")
    return lengths


def _checked_group(value, index):
    """A group given as a dict (peakscope.group's or written by hand), checked and normalised."""
    if not isinstance(value, dict):
        raise TypeError(f"groups[{index}]: expected a dict like peakscope.group(...) returns, got {value!r}")
    unknown = set(value) - {"tokens", "slot", "sequence_lengths"}
    if unknown:
        raise ValueError(f"groups[{index}]: unknown field(s) {sorted(unknown)} "
                         f"(a group has tokens, slot, sequence_lengths)")
    if "tokens" not in value:
        raise ValueError(f"groups[{index}]: no tokens")
    try:
        return group(value["tokens"], value.get("slot"), value.get("sequence_lengths"))
    except (TypeError, ValueError) as error:
        raise type(error)(f"groups[{index}]: {error}") from None


def _backward_order(order, count):
    """`order` as a list of group indices: a permutation of range(count)."""
    if isinstance(order, (str, bytes)) or not hasattr(order, "__iter__"):
        raise TypeError(f"backward_order: expected a list of group indices, got {order!r}")
    indices = list(order)
    if any(isinstance(i, bool) or not isinstance(i, int) for i in indices) or \
            sorted(indices) != list(_builtin_range(count)):
        raise ValueError(f"backward_order {indices} is not a permutation of the {count} group indices "
                         f"0..{count - 1}")
    return indices


def wave_payload(tokens=None, slots=(), groups=1, cold=False, backward_order=None, **extra):
    """The payload of a `wave` mark, keys in the design's order.

    `groups` is a count (the old form: `groups` equal parts of `tokens`) or a
    list of groups (`peakscope.group(...)` dicts) in forward order. With a
    list, `tokens` defaults to the groups' sum and `slots` to their slots;
    `backward_order` (optional, either form) lists the groups' indices in the
    order their backward calls run. Keys: tokens, slots, groups, cold,
    backward_order (when given), then `extra`.
    """
    if isinstance(groups, bool):
        raise TypeError(f"groups: expected a count or a list of groups, got {groups!r}")
    # True or False (0 and 1, and numpy's booleans, too); not any truthy value.
    if not (isinstance(cold, bool) or (isinstance(cold, int) and cold in (0, 1)) or
            getattr(getattr(cold, "dtype", None), "kind", None) == "b"):
        raise TypeError(f"wave cold: expected True or False, got {cold!r}")
    cold = bool(cold)
    if isinstance(slots, (str, bytes)) or not hasattr(slots, "__iter__") or \
            not all(isinstance(s, str) for s in slots):
        raise TypeError(f"wave slots: expected a list of slot names, got {slots!r}")
    if isinstance(groups, (int, float)):
        count = _positive_int(groups, "groups")
        if tokens is None:
            raise TypeError("wave: tokens is required unless groups is a list of groups")
        payload = {"tokens": _positive_int(tokens, "wave tokens"), "slots": list(slots), "groups": count,
                   "cold": cold}
    elif isinstance(groups, (list, tuple)):
        entries = [_checked_group(g, i) for i, g in enumerate(groups)]
        if not entries:
            raise ValueError("groups: an empty list (a wave has at least one group)")
        count = len(entries)
        total = sum(g["tokens"] for g in entries)
        if tokens is not None and _positive_int(tokens, "wave tokens") != total:
            raise ValueError(f"wave tokens {tokens!r} disagree with its groups, which add up to {total} "
                             f"({'+'.join(str(g['tokens']) for g in entries)})")
        if slots:
            given = [str(s) for s in slots]
            named = [g.get("slot") for g in entries]
            if all(s is not None for s in named) and given != named:
                raise ValueError(f"wave slots {given} disagree with its groups' slots {named}")
        else:
            given = [g["slot"] for g in entries if "slot" in g]
        payload = {"tokens": total, "slots": given, "groups": entries, "cold": cold}
    else:
        raise TypeError(f"groups: expected a count or a list of groups, got {groups!r}")
    if backward_order is not None:
        payload["backward_order"] = _backward_order(backward_order, count)
    for key, value in extra.items():
        if key in payload:
            raise TypeError(f"wave payload field {key!r} given twice")
        payload[key] = value
    if "sequence_lengths" in payload:
        payload["sequence_lengths"] = _lengths(payload["sequence_lengths"], payload["tokens"],
                                               "wave sequence_lengths", "the wave's")
    return payload


@contextlib.contextmanager
def wave(tokens=None, slots=(), groups=1, cold=False, backward_order=None, **extra):
    """One micro-batch: a `wave` range and its payload mark, on this thread.

    Put the forward and the backward inside, not the optimizer step. `groups`
    is a count or a list of `peakscope.group(...)` (see wave_payload). Extra
    keyword arguments (e.g. children=[...] for a split wave) join the payload.
    Any range still open above the wave on this thread when it ends is closed
    with it. A bad payload raises before the range opens.
    """
    payload = json.dumps(wave_payload(tokens, slots, groups, cold, backward_order, **extra))
    # A wave's figures are what it alone allocated: one inside another mixes both.
    if any(e.kind == "wave" and not e.closed for e in _stack()):
        raise RuntimeError("wave: a wave is already open on this thread; waves run one at a time "
                           "(close the first before the next begins)")
    entry = open_entry("wave", "wave")
    try:
        backends.get_backend().mark("wave", payload)
        yield entry
    finally:
        close_entry(entry)
