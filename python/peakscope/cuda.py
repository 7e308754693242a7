"""How PyTorch's CUDA memory reaches the recorder.

Three ways, by what they show (docs/cuda.md has the details):

* ``use_pluggable_allocator()`` — every tensor is one stream-ordered
  cudaMallocAsync / cudaFreeAsync made by the recorder's own entry points
  (``psc_torch_malloc`` / ``psc_torch_free``): tensor lifetimes, the
  "allocated" level. Must run before the first CUDA allocation.
* ``PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`` — PyTorch's own
  stream-ordered backend; each tensor is a cudaMallocAsync the runtime hooks
  record. Also the allocated level; nothing to call.
* the native caching allocator (the default) — the recorder sees its segments
  (cudaMalloc, or cuMemCreate/cuMemMap with expandable_segments), not tensors:
  record with ``peakscope record --level reserved``.
"""

import os

from peakscope.backends import ENV_LIBRARY

LIBRARY_NAME = "libpeakscope_preload.so"
MALLOC_SYMBOL = "psc_torch_malloc"
FREE_SYMBOL = "psc_torch_free"


def preload_library_path(maps="/proc/self/maps"):
    """The recorder library this process loaded, or None.

    $PEAKSCOPE_LIBRARY wins; otherwise the mapping of libpeakscope_preload.so
    (present under ``peakscope record`` or LD_PRELOAD).
    """
    explicit = os.environ.get(ENV_LIBRARY)
    if explicit:
        return explicit
    try:
        with open(maps, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields = line.rstrip("\n").split(None, 5)  # address perms offset dev inode [path]
                if len(fields) == 6 and fields[5].endswith("/" + LIBRARY_NAME):
                    return fields[5]
    except OSError:
        return None
    return None


def use_pluggable_allocator(library=None):
    """Routes every PyTorch CUDA tensor through the recorder's pluggable allocator.

    Call it before anything allocates CUDA memory (first thing in the script):
    PyTorch cannot swap an allocator that has already allocated. Returns the
    torch.cuda.memory.CUDAPluggableAllocator now in use.

    The allocator is stream-ordered cudaMallocAsync on the device's default
    pool (release threshold raised like PyTorch's cudaMallocAsync backend), so
    the trace holds each tensor's lifetime and, at range boundaries, the pool's
    reserved bytes. torch.cuda.memory_allocated() and friends report nothing
    under a pluggable allocator; the trace does.
    """
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("peakscope.use_pluggable_allocator() needs CUDA; torch.cuda.is_available() is false")
    memory = torch.cuda.memory
    if not hasattr(memory, "CUDAPluggableAllocator") or not hasattr(memory, "change_current_allocator"):
        raise RuntimeError(f"peakscope.use_pluggable_allocator() needs PyTorch 2.0 or newer (this is "
                           f"{torch.__version__}); use PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync instead")
    path = library or preload_library_path()
    if path is None:
        raise RuntimeError(
            f"peakscope.use_pluggable_allocator(): {LIBRARY_NAME} is not loaded in this process "
            f"(run under `peakscope record`, or set {ENV_LIBRARY} to its path)")
    allocator = memory.CUDAPluggableAllocator(path, MALLOC_SYMBOL, FREE_SYMBOL)
    try:
        memory.change_current_allocator(allocator)
    except RuntimeError as error:
        raise RuntimeError(
            "peakscope.use_pluggable_allocator() must run before the first CUDA allocation "
            f"(PyTorch said: {error}); alternatively set PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "
            "before starting Python") from error
    return allocator
