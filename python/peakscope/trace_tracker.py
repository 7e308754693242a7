"""Tensor lifetimes under PyTorch's native caching allocator.

Under the native allocator the recorder's hooks see segments (cudaMalloc,
or cuMemCreate/cuMemMap with expandable segments), recorded at the reserved
level (``peakscope record --level reserved``). ``attach()`` adds the tensors
inside them: it builds trace_tracker.cpp against the installed torch (once per
torch version, cached), loads it, and registers it as an allocator trace
tracker (``c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker``),
which forwards every block handed out or freed to the recorder's
``psc_record_tensor_event``. The allocator behaves as before; the trace gains
an allocated level that the analysis reads instead of the segments.

    import peakscope.trace_tracker
    peakscope.trace_tracker.attach()    # after torch is imported, before training

Needs a CUDA build of torch 2.1 or newer, a C++ compiler ($CXX, default c++)
and the CUDA headers ($CUDA_HOME/include); raises TrackerUnavailable saying
which is missing. ``available()`` answers without building anything.
"""

import ctypes
import hashlib
import os
import subprocess
import sysconfig
import tempfile

from peakscope.cuda import preload_library_path

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_tracker.cpp")
RECORD_SYMBOL = "psc_record_tensor_event"
ENV_CACHE = "PEAKSCOPE_EXTENSION_DIR"

_loaded = None


class TrackerUnavailable(RuntimeError):
    """The trace tracker cannot run here; the message says why."""


def available():
    """(True, "") when attach() can work here, else (False, why)."""
    try:
        import torch
    except ImportError as error:
        return False, f"no torch ({error})"
    if not torch.cuda.is_available() or torch.version.cuda is None:
        return False, f"torch {torch.__version__} has no usable CUDA"
    memory = torch.cuda.memory
    if hasattr(memory, "get_allocator_backend") and memory.get_allocator_backend() != "native":
        return False, f"the allocator backend is {memory.get_allocator_backend()!r}, not the native caching allocator"
    if not _recorder_symbol():
        return False, f"the recorder ({RECORD_SYMBOL}) is not loaded in this process (run under peakscope record)"
    return True, ""


def _recorder_symbol():
    try:
        return getattr(ctypes.CDLL(None), RECORD_SYMBOL, None) is not None
    except OSError:
        return False


def _build_flags(torch):
    from torch.utils import cpp_extension

    try:
        includes = cpp_extension.include_paths(device_type="cuda")
    except TypeError:  # before PyTorch 2.6 the argument was cuda=True
        includes = cpp_extension.include_paths(cuda=True)
    cuda_home = os.environ.get("CUDA_HOME") or cpp_extension.CUDA_HOME or "/usr/local/cuda"
    includes = list(includes) + [os.path.join(cuda_home, "include"), sysconfig.get_paths()["include"]]
    libraries = cpp_extension.library_paths()
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    flags = ["-shared", "-fPIC", "-O2", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    flags += [f"-I{path}" for path in includes]
    flags += [f"-L{path}" for path in libraries] + [f"-Wl,-rpath,{path}" for path in libraries]
    return flags + ["-lc10_cuda", "-lc10", "-ldl"]


def build(cache_dir=None):
    """Compiles trace_tracker.cpp for this torch; returns the library's path."""
    import torch

    flags = _build_flags(torch)
    with open(SOURCE, "rb") as source:
        key = hashlib.sha256(source.read() + torch.__version__.encode() + " ".join(flags).encode()).hexdigest()[:16]
    cache_dir = cache_dir or os.environ.get(ENV_CACHE) or os.path.join(tempfile.gettempdir(), "peakscope-extensions")
    os.makedirs(cache_dir, exist_ok=True)
    library = os.path.join(cache_dir, f"trace_tracker-{key}.so")
    if os.path.exists(library):
        return library
    compiler = os.environ.get("CXX", "c++")
    last = None
    for standard in ("-std=c++20", "-std=c++17"):
        partial = library + f".{os.getpid()}.tmp"
        command = [compiler, standard, SOURCE, "-o", partial] + flags
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode == 0:
            os.replace(partial, library)
            return library
        last = result.stderr.strip().splitlines()[-12:]
    raise TrackerUnavailable("building the trace tracker failed:\n  " + "\n  ".join(last or ["(no output)"]))


def attach(cache_dir=None):
    """Registers the tracker with the native caching allocator; returns the library path."""
    global _loaded
    ok, why = available()
    if not ok:
        raise TrackerUnavailable(f"peakscope.trace_tracker: {why}")
    level = os.environ.get("PEAKSCOPE_LEVEL", "")
    if level != "reserved":
        raise TrackerUnavailable(
            "peakscope.trace_tracker: record with --level reserved (PEAKSCOPE_LEVEL=reserved), so the segments "
            f"stay apart from the tensors inside them (PEAKSCOPE_LEVEL is {level!r})")
    import torch

    torch.cuda.init()  # the tracker attaches to device allocators that exist
    path = build(cache_dir)
    library = ctypes.CDLL(path)
    library.psc_trace_tracker_attach.restype = ctypes.c_int
    library.psc_trace_tracker_forwarded.restype = ctypes.c_ulonglong
    status = library.psc_trace_tracker_attach()
    if status == 1:
        raise TrackerUnavailable(f"peakscope.trace_tracker: {RECORD_SYMBOL} not found (recorder {preload_library_path()})")
    if status != 0:
        raise TrackerUnavailable("peakscope.trace_tracker: PyTorch refused the tracker (not the native allocator?)")
    _loaded = library
    return path


def forwarded():
    """Events the tracker has handed to the recorder, 0 when not attached."""
    return int(_loaded.psc_trace_tracker_forwarded()) if _loaded is not None else 0
