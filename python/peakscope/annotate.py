"""Annotating a PyTorch model: forward, recompute and backward ranges per layer.

Every range is opened on the thread that executes the work, because backward
and recompute run on autograd's threads (on a GPU, one per device):

- forward/<layer> and recompute/<layer> come from forward pre-hooks and hooks
  on the layer module. A forward that starts while this thread is executing a
  backward is a recompute (activation checkpointing re-runs the layer there).
- backward/<layer> is opened by an identity autograd node attached to the
  layer's outputs (`_Begin`): autograd runs it as soon as the gradient of the
  layer's output is complete, before any of the layer's own backward nodes.
  It is closed by an identity node attached to the layer's inputs (`_End`),
  which autograd can run only after every node that consumed the inputs, that
  is after the whole backward of the layer, its parameter gradients and its
  input gradient included. When no input needs a gradient (the first layer
  after a frozen embedding) there is no such node; the range then closes after
  the AccumulateGrad of the last of the layer's trainable parameters that this
  backward will reach.
- Head modules get head/<name> in every phase; as a head's backward (or its
  recompute, when checkpointed) begins it leaves a mark, backward/head,
  which tells it from the head's forward.

Both identity nodes return aliases of their inputs (no allocation) and save
nothing, so checkpointing sees the same saved tensors in forward and recompute.
"""

import itertools
import threading
import warnings
import weakref

import torch

from peakscope import ranges

_LAYER_PHASES = ("forward", "recompute", "backward")
# The mark a head's backward leaves as it begins (analysis/range_names.h).
HEAD_BACKWARD_MARK = "backward/head"


class _Site:
    """One annotated module or callable: its range names and trainable parameters."""

    def __init__(self, label, names, parameters):
        self.label = label
        self.names = names              # phase -> range name
        self.head = names["backward"].startswith("head/")
        self._parameters = parameters   # callable returning the module's parameters
        self.shared = set()             # ids of parameters other sites also use
        self._accumulators = None       # (requires_grad fingerprint, [(key, node)])
        self.handles = []
        self.warned_output = False
        self.local = threading.local()  # per-thread stack of (entry, call) between hooks

    def trainable(self):
        return [p for p in self._parameters() if p.requires_grad and id(p) not in self.shared]

    def accumulators(self):
        """(key, AccumulateGrad node) of each trainable, unshared parameter.

        Holding the node keeps it the parameter's accumulator for every later
        graph (the parameter itself holds it weakly), so a post-hook registered
        once sees every accumulation.
        """
        params = self.trainable()
        fingerprint = tuple(id(p) for p in params)
        if self._accumulators is not None and self._accumulators[0] == fingerprint:
            return self._accumulators[1]
        if self._accumulators is not None:
            for _, _, handle in self._accumulators[1]:
                handle.remove()
        nodes = []
        with torch.enable_grad():
            for param in params:
                node = param.view_as(param).grad_fn.next_functions[0][0]
                key = next(_keys)
                handle = node.register_hook(_accumulated_hook(key))
                nodes.append((key, node, handle))
        self._accumulators = (fingerprint, nodes)
        return nodes

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []
        if self._accumulators is not None:
            for _, _, handle in self._accumulators[1]:
                handle.remove()
            self._accumulators = None


class _BackwardCall:
    """The backward range of one forward call of a site."""

    __slots__ = ("site", "entry", "end_by_node", "pending", "done")

    def __init__(self, site):
        self.site = site
        self.entry = None        # opened by _Begin.backward
        self.end_by_node = False  # an _End node sits on the inputs
        self.pending = set()      # accumulator keys still to run, when ending by them
        self.done = False         # ended, but could not be popped on its own thread yet


_keys = itertools.count()
_waiting_lock = threading.Lock()
_waiting = {}  # accumulator key -> [_BackwardCall] waiting for it


def _accumulated_hook(key):
    def hook(grad_inputs, grad_outputs):
        with _waiting_lock:
            calls = _waiting.pop(key, ())
            finished = []
            for call in calls:
                call.pending.discard(key)
                if not call.pending:
                    finished.append(call)
        for call in finished:
            _finish(call)
    return hook


def _finish(call):
    """Ends a call's backward range; pops it if this is the thread that opened it."""
    with _waiting_lock:
        for key in call.pending:
            waiting = _waiting.get(key)
            if waiting and call in waiting:
                waiting.remove(call)
        call.pending = set()
    entry = call.entry
    if entry is None or entry.closed:
        return
    if not ranges.close_entry(entry):
        # Wrong thread: the opening thread closes it when it next opens a
        # sibling backward range, or its enclosing range ends.
        call.done = True


def _closable_sibling(entry):
    return entry.kind == "backward" and entry.owner is not None and entry.owner.done


def _arm_accumulator_end(call):
    """Makes the last of the site's reached AccumulateGrad nodes end the call."""
    keys = set()
    for key, node, _ in call.site.accumulators():
        try:
            if torch._C._will_engine_execute_node(node):
                keys.add(key)
        except (RuntimeError, AttributeError):
            return False  # autograd.grad() or a torch without the query
    if not keys:
        return False
    with _waiting_lock:
        call.pending = keys
        for key in keys:
            _waiting.setdefault(key, []).append(call)
    return True


def _begin_backward(call):
    ranges.close_top_if(_closable_sibling)
    if call.site.head:
        # A head's range has one name in its forward and its backward; the
        # mark says where its backward begins (what a group's forward left
        # is then complete: what it holds while another group's backward runs).
        ranges.mark(HEAD_BACKWARD_MARK)
    call.entry = ranges.open_entry(call.site.names["backward"], "backward", owner=call)
    # A backstop for every way the end can be missed (an exception, a graph cut
    # short by autograd.grad): the graph task's end closes the range.
    torch.autograd.Variable._execution_engine.queue_callback(lambda: _finish(call))
    if not call.end_by_node and not _arm_accumulator_end(call):
        call.done = True  # closes at the next sibling or at the graph's end


class _Begin(torch.autograd.Function):
    """Identity on a site's outputs; its backward opens the site's backward range."""

    @staticmethod
    def forward(ctx, call, *tensors):
        ctx.call = call
        ctx.set_materialize_grads(False)
        # detach() aliases the storage and is not an autograd view, so callers
        # may still modify the result in place.
        return tuple(t.detach() for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        _begin_backward(ctx.call)
        return (None,) + grads


class _End(torch.autograd.Function):
    """Identity on a site's inputs; its backward closes the site's backward range."""

    @staticmethod
    def forward(ctx, call, *tensors):
        ctx.call = call
        ctx.set_materialize_grads(False)
        return tuple(t.detach() for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        _finish(ctx.call)
        return (None,) + grads


def _needs_grad(value):
    return isinstance(value, torch.Tensor) and value.requires_grad and value.is_floating_point()


def _in_backward_probe():
    probe = getattr(_in_backward_probe, "node", None)
    if probe is None:
        with torch.enable_grad():
            leaf = torch.zeros((), requires_grad=True)
            probe = _in_backward_probe.node = leaf.view_as(leaf).grad_fn
            _in_backward_probe.leaf = leaf
    return probe


def in_backward():
    """Whether the calling thread is executing an autograd backward right now."""
    current_task = getattr(torch._C, "_current_graph_task_id", None)
    if current_task is not None:
        return current_task() != -1
    will_execute = getattr(torch._C, "_will_engine_execute_node", None)
    if will_execute is not None:
        try:
            will_execute(_in_backward_probe())
            return True
        except RuntimeError:  # "should only be called during the backward pass"
            return False
    return any(e.kind == "backward" for e in ranges.open_stack())


def _replace(values, indices, replacements):
    values = list(values)
    for index, replacement in zip(indices, replacements):
        values[index] = replacement
    return values


def _before(site, args):
    """Opens the forward (or recompute) range; attaches _End to the inputs."""
    phase = "recompute" if in_backward() else "forward"
    if phase == "recompute" and site.head:
        # A checkpointed head runs again inside the backward, before its own
        # backward range can open: the backward had begun.
        ranges.mark(HEAD_BACKWARD_MARK)
    entry = ranges.open_entry(site.names[phase], phase)
    call = None
    if torch.is_grad_enabled():
        call = _BackwardCall(site)
        indices = [i for i, a in enumerate(args) if _needs_grad(a)]
        if indices:
            call.end_by_node = True
            wrapped = _End.apply(call, *[args[i] for i in indices])
            args = tuple(_replace(args, indices, wrapped))
    stack = getattr(site.local, "calls", None)
    if stack is None:
        stack = site.local.calls = []
    stack.append((entry, call))
    return args


def _after(site, output):
    """Closes the forward range; attaches _Begin to the outputs."""
    stack = getattr(site.local, "calls", None)
    if not stack:
        return output  # the hooks were added while this forward was running
    entry, call = stack.pop()
    ranges.close_entry(entry)
    if call is None:
        return output
    if isinstance(output, torch.Tensor):
        return _Begin.apply(call, output)[0] if _needs_grad(output) else output
    if isinstance(output, (tuple, list)):
        indices = [i for i, o in enumerate(output) if _needs_grad(o)]
        if not indices:
            return output
        values = _replace(output, indices, _Begin.apply(call, *[output[i] for i in indices]))
        if isinstance(output, list):
            return values
        return type(output)(*values) if hasattr(output, "_fields") else tuple(values)
    if not site.warned_output:
        site.warned_output = True
        warnings.warn(f"peakscope: {site.label} returns {type(output).__name__}; "
                      "its backward range needs a tensor, tuple or list output",
                      RuntimeWarning, stacklevel=3)
    return output


def _layer_names(index):
    return {phase: f"{phase}/layer.{index}" for phase in _LAYER_PHASES}


def _head_names(name):
    return {phase: f"head/{name}" for phase in _LAYER_PHASES}


_annotated_lock = threading.Lock()
_annotated = weakref.WeakSet()  # modules some Annotation has hooked and not removed


class Annotation:
    """What `annotate` attached; `remove()` takes it all off again."""

    def __init__(self):
        self.sites = []
        self._modules = []

    def _add_module(self, module, label, names):
        with _annotated_lock:
            if module in _annotated:
                raise ValueError(f"peakscope: {label} ({type(module).__name__}) is already annotated")
            _annotated.add(module)
        self._modules.append(module)
        site = _Site(label, names, module.parameters)
        site.handles.append(module.register_forward_pre_hook(lambda m, args: _before(site, args)))
        site.handles.append(module.register_forward_hook(lambda m, args, out: _after(site, out)))
        self.sites.append(site)
        return site

    def _mark_shared(self):
        """Parameters used by several sites end none of them (see _Site.trainable)."""
        owners = {}
        for site, module in zip(self.sites, self._modules):
            for param in module.parameters():
                owners.setdefault(id(param), set()).add(id(site))
        shared = {pid for pid, sites in owners.items() if len(sites) > 1}
        for site in self.sites:
            site.shared = shared

    def remove(self):
        for site in self.sites:
            site.remove()
        with _annotated_lock:
            for module in self._modules:
                _annotated.discard(module)
        self.sites = []
        self._modules = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _default_layers(model):
    for path in ("layers", "model.layers", "transformer.h", "blocks"):
        owner = model
        for part in path.split("."):
            owner = getattr(owner, part, None)
        if owner is not None:
            return owner
    raise ValueError("peakscope.annotate: pass layers=...; the model has no "
                     "'layers', 'model.layers', 'transformer.h' or 'blocks'")


def annotate(model=None, layers=None, head_modules=None, layer_offset=0):
    """Annotates decoder layers and head modules; returns an Annotation.

    layers: the decoder layers in order (default: model.layers or a usual
    equivalent); layer i is named layer.<i + layer_offset> (an offset suits a
    pipeline stage). head_modules: {"embedding": module, "lm_head": module, ...},
    each named head/<key>. Hidden states must reach a layer as positional
    arguments: on torch 1.13 forward pre-hooks do not see keyword arguments.
    """
    if layers is None:
        if model is None:
            raise ValueError("peakscope.annotate: give a model or layers")
        layers = _default_layers(model)
    annotation = Annotation()
    try:
        for index, layer in enumerate(layers):
            annotation._add_module(layer, f"layer.{index + layer_offset}",
                                   _layer_names(index + layer_offset))
        for name, module in (head_modules or {}).items():
            annotation._add_module(module, f"head/{name}", _head_names(name))
    except BaseException:
        annotation.remove()
        raise
    annotation._mark_shared()
    return annotation


def wrap(function, head=None, layer=None):
    """A callable annotated like a module: `loss_fn = peakscope.wrap(F.cross_entropy, head="loss")`."""
    if (head is None) == (layer is None):
        raise ValueError("peakscope.wrap: give exactly one of head= or layer=")
    names = _head_names(head) if head is not None else _layer_names(layer)
    label = f"head/{head}" if head is not None else f"layer.{layer}"
    site = _Site(label, names, lambda: iter(()))

    def annotated(*args, **kwargs):
        args = _before(site, args)
        try:
            output = function(*args, **kwargs)
        except BaseException:
            entry, _ = site.local.calls.pop()
            ranges.close_entry(entry)
            raise
        return _after(site, output)

    annotated.__wrapped__ = function
    return annotated


class OptimizerAnnotation:
    """Ranges around an optimizer's step and zero_grad; `remove()` undoes them."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self._saved = {}
        for method, name in (("step", "optimizer/step"), ("zero_grad", "optimizer/zero_grad")):
            self._saved[method] = optimizer.__dict__.get(method)
            setattr(optimizer, method, self._ranged(getattr(optimizer, method), name))

    @staticmethod
    def _ranged(bound, name):
        def annotated(*args, **kwargs):
            with ranges.range(name):
                return bound(*args, **kwargs)
        annotated.__wrapped__ = bound
        return annotated

    def remove(self):
        for method, previous in self._saved.items():
            if previous is None:
                self.optimizer.__dict__.pop(method, None)
            else:
                setattr(self.optimizer, method, previous)
        self._saved = {}


def annotate_optimizer(optimizer):
    """Puts optimizer/step and optimizer/zero_grad ranges around those calls."""
    return OptimizerAnnotation(optimizer)
