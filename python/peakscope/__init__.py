"""peakscope's Python helper: names what a PyTorch training step is doing.

    import peakscope
    peakscope.annotate(model, layers=model.layers,
                       head_modules={"embedding": model.embed, "lm_head": model.lm_head})
    peakscope.annotate_optimizer(optimizer)
    with peakscope.wave(tokens=2047, slots=["a"], groups=1, cold=True):
        loss = model(batch)
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

Ranges follow the design's convention (forward/layer.<i>, recompute/layer.<i>,
backward/layer.<i>, head/<name>, optimizer/step, optimizer/zero_grad, wave) and
go through NVTX when CUDA is available, the peakscope C API otherwise, and
nowhere (with one warning) when neither is there. See docs/python.md.

On a GPU, `peakscope.use_pluggable_allocator()` (first thing in the script)
makes every tensor's lifetime visible to the recorder; docs/cuda.md.
"""

from peakscope.backends import (Backend, BackendUnavailable, CApiBackend, NoopBackend,
                                NvtxBackend, RecordingBackend, get_backend, set_backend)
from peakscope.ranges import flush, group, mark, pop, push, range, wave, wave_payload
from peakscope.cuda import preload_library_path, use_pluggable_allocator
from peakscope.calibration import COLD_AFTER_FIRST_WAVE, Calibration, CalibrationError

# The annotation helpers need torch; pricing from a calibration does not:
# without torch, `peakscope.Calibration` works and the helpers say why not.
try:
    from peakscope.annotate import (Annotation, OptimizerAnnotation, annotate, annotate_optimizer,
                                    in_backward, wrap)
except ImportError as _missing:
    _WHY = _missing

    def __getattr__(name):
        if name in ("Annotation", "OptimizerAnnotation", "annotate", "annotate_optimizer", "in_backward", "wrap"):
            raise ImportError(f"peakscope.{name} needs PyTorch: {_WHY}")
        raise AttributeError(f"module 'peakscope' has no attribute {name!r}")

__all__ = [
    "Annotation", "Backend", "BackendUnavailable", "CApiBackend", "COLD_AFTER_FIRST_WAVE", "Calibration",
    "CalibrationError",
    "NoopBackend", "NvtxBackend",
    "OptimizerAnnotation", "RecordingBackend", "annotate", "annotate_optimizer", "flush",
    "get_backend", "group", "in_backward", "mark", "pop", "push", "preload_library_path", "range",
    "set_backend", "use_pluggable_allocator", "wave", "wave_payload", "wrap",
]
