"""Module annotation: names, nesting, threads, and where gradients are allocated.

Allocation attribution is checked empirically: a dispatch mode notes which
range was innermost on the executing thread when each tensor storage was
created, and the adapter gradients and layer input gradients that survive the
backward are looked up there.
"""

import threading
import unittest

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from tests.python import support
from tests.python.support import AllocationSites, balanced, nesting, pushes
import peakscope

LAYERS = 3


def head_backward(names):
    """The backward's pushes: from the second head/loss (the first is the forward's) on."""
    return names[names.index("head/loss", names.index("head/loss") + 1):]


class AnnotatedModelCase(unittest.TestCase):
    def setUp(self):
        self.recording = peakscope.set_backend("recording")
        self.annotations = []

    def tearDown(self):
        for annotation in self.annotations:
            annotation.remove()
        peakscope.set_backend("none")

    def annotated(self, model, **options):
        annotation = peakscope.annotate(model, layers=model.layers, head_modules=model.head_modules(),
                                        **options)
        self.annotations.append(annotation)
        return annotation

    def capture_input_gradients(self, model):
        """Layer index -> where the gradient of that layer's input was allocated."""
        found = {}

        def capture(index):
            def on_gradient(grad):
                found[index] = self.sites.site_of(grad)

            def pre_hook(module, args):
                if peakscope.in_backward() or not args[0].requires_grad:
                    return  # a recompute: its graph is thrown away
                args[0].register_hook(on_gradient)
            return pre_hook

        for index, layer in enumerate(model.layers):
            self.annotations.append(layer.register_forward_pre_hook(capture(index)))
        return found


class SequenceTest(AnnotatedModelCase):
    def run_wave(self, model, token_count=6):
        ids, targets = support.tokens(token_count)
        with peakscope.wave(tokens=token_count, slots=["a"], groups=1, cold=True):
            model(ids, targets).backward()

    def test_forward_recompute_backward_sequence(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        self.run_wave(model)
        forward = ["wave", "head/embedding"] + [f"forward/layer.{i}" for i in range(LAYERS)] + \
            ["head/final_norm", "head/lm_head", "head/loss"]
        backward = ["head/loss", "head/lm_head", "head/final_norm"]
        for i in reversed(range(LAYERS)):
            backward += [f"backward/layer.{i}", f"recompute/layer.{i}"]
        self.assertEqual(pushes(self.recording.events), forward + backward)
        self.assertTrue(balanced(self.recording.events))

    def test_each_head_backward_begins_with_the_mark_and_no_forward_has_it(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        self.run_wave(model)
        ops = [(op, name) for _, op, name, _ in self.recording.events if op in ("push", "mark")]
        marks = [i for i, (op, name) in enumerate(ops) if op == "mark" and name == "backward/head"]
        # One before each of the three head ranges the backward opens, each
        # right before it; none while the forward runs its head twice over.
        self.assertEqual(len(marks), 3)
        self.assertEqual([ops[i + 1] for i in marks],
                         [("push", "head/loss"), ("push", "head/lm_head"), ("push", "head/final_norm")])
        last_forward_head = ops.index(("push", "head/loss"))
        self.assertGreater(marks[0], last_forward_head)

    def test_recompute_nests_in_its_own_layers_backward_and_nothing_else_nests(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        self.run_wave(model)
        for _, name, parent in nesting(self.recording.events):
            if name.startswith("recompute/"):
                self.assertEqual(parent, name.replace("recompute/", "backward/"))
            elif name != "wave":
                self.assertEqual(parent, "wave", name)

    def test_without_checkpointing_there_is_no_recompute(self):
        model = support.tiny_model(LAYERS, checkpointing=False)
        self.annotated(model)
        self.run_wave(model)
        names = head_backward(pushes(self.recording.events))
        self.assertEqual(names, ["head/loss", "head/lm_head", "head/final_norm"] +
                         [f"backward/layer.{i}" for i in reversed(range(LAYERS))])
        self.assertTrue(balanced(self.recording.events))

    def test_reentrant_checkpoint_recomputes_before_each_backward(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        ids, targets = support.tokens(6)
        with peakscope.wave(tokens=6):
            # Reentrant checkpointing needs an input that requires grad.
            x = model.embedding(ids).requires_grad_()
            for layer in model.layers:
                x = checkpoint(layer, x, use_reentrant=True)
            model.loss(model.lm_head(model.final_norm(x)), targets).backward()
        tail = pushes(self.recording.events)[-2 * LAYERS:]
        expected = []
        for i in reversed(range(LAYERS)):
            expected += [f"recompute/layer.{i}", f"backward/layer.{i}"]
        self.assertEqual(tail, expected)
        self.assertTrue(balanced(self.recording.events))
        self.assertTrue(all(p.grad is not None for p in model.adapter_parameters()))

    def test_a_checkpointed_heads_recompute_begins_with_the_mark(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        ids, targets = support.tokens(6)
        with peakscope.wave(tokens=6):
            x = model.embedding(ids)
            for layer in model.layers:
                x = checkpoint(layer, x, use_reentrant=False)
            head = lambda h: model.loss(model.lm_head(model.final_norm(h)), targets)  # noqa: E731
            checkpoint(head, x, use_reentrant=True).backward()
        ops = [(op, name) for _, op, name, _ in self.recording.events if op in ("push", "mark")]
        first = ops.index(("mark", "backward/head"))
        # The head ran in the forward without a mark; in the backward its
        # recompute comes first, the mark before it.
        self.assertIn(("push", "head/final_norm"), ops[:first])
        self.assertEqual(ops[first + 1], ("push", "head/final_norm"))
        self.assertNotIn(("mark", "backward/head"), ops[:first])

    def test_layer_offset_names_a_pipeline_stage(self):
        model = support.tiny_model(2)
        self.annotated(model, layer_offset=10)
        self.run_wave(model)
        self.assertIn("forward/layer.11", pushes(self.recording.events))
        self.assertIn("backward/layer.10", pushes(self.recording.events))
        self.assertNotIn("forward/layer.0", pushes(self.recording.events))

    def test_backward_ranges_go_to_the_thread_that_runs_the_backward(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        ids, targets = support.tokens(6)
        loss = model(ids, targets)
        worker = threading.Thread(target=loss.backward)
        worker.start()
        worker.join()
        main = threading.get_ident()
        self.assertEqual([n for n in pushes(self.recording.events, main) if not n.startswith("head/")],
                         [f"forward/layer.{i}" for i in range(LAYERS)])
        on_worker = pushes(self.recording.events, worker.ident)
        self.assertIn("backward/layer.0", on_worker)
        self.assertIn("recompute/layer.0", on_worker)
        self.assertTrue(balanced(self.recording.events))

    def test_autograd_grad_keeps_stacks_balanced(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        ids, targets = support.tokens(6)
        with peakscope.wave(tokens=6):
            grads = torch.autograd.grad(model(ids, targets), model.adapter_parameters())
        self.assertEqual(len(grads), len(model.adapter_parameters()))
        self.assertIn("backward/layer.0", pushes(self.recording.events))
        self.assertTrue(balanced(self.recording.events))
        self.assertTrue(all(p.grad is None for p in model.adapter_parameters()))

    def test_two_waves_accumulating_gradients(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        self.run_wave(model, 6)
        first = list(self.recording.events)
        self.run_wave(model, 6)
        second = self.recording.events[len(first):]
        self.assertEqual(pushes(second), pushes(first))
        self.assertTrue(balanced(self.recording.events))

    def test_remove_stops_annotating(self):
        model = support.tiny_model(LAYERS)
        annotation = self.annotated(model)
        annotation.remove()
        ids, targets = support.tokens(6)
        model(ids, targets).backward()
        self.assertEqual(self.recording.events, [])

    def test_annotating_twice_is_refused(self):
        model = support.tiny_model(2)
        self.annotated(model)
        with self.assertRaises(ValueError):
            peakscope.annotate(layers=[model.layers[0]])

    def test_in_backward(self):
        seen = []

        class Probe(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                seen.append(peakscope.in_backward())
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                seen.append(peakscope.in_backward())
                return grad

        Probe.apply(torch.ones(2, requires_grad=True)).sum().backward()
        self.assertEqual(seen, [False, True])
        self.assertFalse(peakscope.in_backward())


class AllocationTest(AnnotatedModelCase):
    """Gradients are allocated while their layer's backward range is innermost."""

    def run_wave_under_sites(self, model):
        ids, targets = support.tokens(6)
        self.sites = AllocationSites(self.recording)
        with self.sites:
            with peakscope.wave(tokens=6):
                model(ids, targets).backward()

    def check_adapter_gradients(self, model):
        for index, layer in enumerate(model.layers):
            for name, param in layer.named_parameters():
                if param.requires_grad:
                    self.assertIsNotNone(param.grad, name)
                    self.assertEqual(self.sites.site_of(param.grad)[0], f"backward/layer.{index}",
                                     f"layer {index} {name}")

    def test_adapter_and_input_gradients_under_their_layer(self):
        model = support.tiny_model(LAYERS)
        self.annotated(model)
        inputs = self.capture_input_gradients(model)
        self.run_wave_under_sites(model)
        self.check_adapter_gradients(model)
        # Layer 0's input comes from a frozen embedding: it has no gradient.
        self.assertEqual(sorted(inputs), list(range(1, LAYERS)))
        for index, site in inputs.items():
            self.assertEqual(site[0], f"backward/layer.{index}")
        self.assertTrue(balanced(self.recording.events))

    def test_without_checkpointing(self):
        model = support.tiny_model(LAYERS, checkpointing=False)
        self.annotated(model)
        self.run_wave_under_sites(model)
        self.check_adapter_gradients(model)

    def test_trainable_embedding(self):
        model = support.tiny_model(LAYERS)
        model.embedding.weight.requires_grad_(True)
        self.annotated(model)
        inputs = self.capture_input_gradients(model)
        self.run_wave_under_sites(model)
        self.check_adapter_gradients(model)
        self.assertEqual(sorted(inputs), list(range(LAYERS)))
        self.assertEqual(inputs[0][0], "backward/layer.0")
        self.assertEqual(self.sites.site_of(model.embedding.weight.grad)[0], "head/embedding")
        backward = head_backward(pushes(self.recording.events))
        self.assertEqual(backward[-1], "head/embedding")
        self.assertEqual(dict((n, p) for _, n, p in nesting(self.recording.events))["head/embedding"], "wave")

    def test_a_layer_without_input_gradient_closes_after_its_last_adapter_gradient(self):
        """Work that autograd runs after layer 0 must not be charged to layer 0."""
        model = support.tiny_model(1)
        self.annotated(model)
        later = torch.nn.Parameter(torch.ones(64))
        self.sites = AllocationSites(self.recording)
        ids, targets = support.tokens(6)
        with self.sites:
            with peakscope.wave(tokens=6):
                # Created before the layer, so autograd reaches it after the layer's backward.
                penalty = (later * torch.arange(64.0)).sum()
                (model(ids, targets) + penalty).backward()
        self.check_adapter_gradients(model)
        self.assertEqual(self.sites.site_of(later.grad)[0], "wave")
        self.assertTrue(balanced(self.recording.events))


class OptimizerTest(AnnotatedModelCase):
    def test_step_and_zero_grad_ranges_outside_the_wave(self):
        model = support.tiny_model(2)
        self.annotated(model)
        optimizer = torch.optim.AdamW(model.adapter_parameters())
        annotation = peakscope.annotate_optimizer(optimizer)
        ids, targets = support.tokens(5)
        sites = AllocationSites(self.recording)
        with sites:
            with peakscope.wave(tokens=5):
                model(ids, targets).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        names = pushes(self.recording.events)
        self.assertEqual(names[-2:], ["optimizer/step", "optimizer/zero_grad"])
        parents = {n: p for _, n, p in nesting(self.recording.events)}
        self.assertIsNone(parents["optimizer/step"])
        self.assertIsNone(parents["optimizer/zero_grad"])
        self.assertTrue(all(p.grad is None for p in model.adapter_parameters()))
        state = optimizer.state[model.adapter_parameters()[0]]
        self.assertEqual(sites.site_of(state["exp_avg"])[0], "optimizer/step")
        annotation.remove()
        self.assertNotIn("step", optimizer.__dict__)
        self.recording.clear()
        optimizer.step()
        self.assertEqual(self.recording.events, [])


class BehaviourTest(AnnotatedModelCase):
    def gradients(self, annotate):
        model = support.tiny_model(LAYERS, seed=3)
        if annotate:
            self.annotated(model)
        ids, targets = support.tokens(7)
        loss = model(ids, targets)
        loss.backward()
        return float(loss), [p.grad.clone() for p in model.adapter_parameters()]

    def test_annotation_changes_no_result(self):
        plain_loss, plain = self.gradients(annotate=False)
        loss, annotated = self.gradients(annotate=True)
        self.assertEqual(loss, plain_loss)
        self.assertEqual(len(plain), len(annotated))
        for a, b in zip(plain, annotated):
            self.assertTrue(torch.equal(a, b))
        self.assertTrue(any(g.abs().sum() > 0 for g in annotated))

    def test_layer_output_may_be_modified_in_place(self):
        model = support.tiny_model(1)
        self.annotated(model)
        x = torch.randn(4, 16, requires_grad=True)
        out = model.layers[0](x)
        out.mul_(2)
        out.sum().backward()
        self.assertIsNotNone(x.grad)
        self.assertTrue(balanced(self.recording.events))

    def test_tuple_outputs(self):
        class Pair(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.linear(x), None

        layers = [Pair(), Pair()]
        self.annotations.append(peakscope.annotate(layers=layers))
        x = torch.randn(3, 4, requires_grad=True)
        y, nothing = layers[1](layers[0](x)[0])
        self.assertIsNone(nothing)
        y.sum().backward()
        self.assertEqual(pushes(self.recording.events),
                         ["forward/layer.0", "forward/layer.1", "backward/layer.1", "backward/layer.0"])
        self.assertTrue(balanced(self.recording.events))

    def test_wrapped_function(self):
        loss_fn = peakscope.wrap(F.cross_entropy, head="loss")
        logits = torch.randn(5, 7, requires_grad=True)
        targets = torch.arange(5)
        sites = AllocationSites(self.recording)
        with sites:
            loss_fn(logits, targets).backward()
        self.assertEqual(pushes(self.recording.events), ["head/loss", "head/loss"])
        self.assertEqual(sites.site_of(logits.grad)[0], "head/loss")
        with self.assertRaises(Exception):
            loss_fn(logits, torch.arange(9))
        self.assertTrue(balanced(self.recording.events))
        with self.assertRaises(ValueError):
            peakscope.wrap(F.relu)


if __name__ == "__main__":
    unittest.main()
