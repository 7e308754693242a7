"""Where annotations go: NVTX, the peakscope C API, a recording list, or nowhere.

A backend has four operations, all per calling thread like nvtxRangePushA:
push(name), pop(), mark(name, payload) and flush(). The helper chooses one
once, on first use (see `resolve_backend`), unless `set_backend` chose first.
"""

import contextlib
import ctypes
import os
import sys
import threading
import warnings

# Environment variables the helper reads.
ENV_LIBRARY = "PEAKSCOPE_LIBRARY"   # path of libpeakscope_preload.so to load explicitly
ENV_BACKEND = "PEAKSCOPE_BACKEND"   # auto | nvtx | capi | none

SUPPORTED_API_VERSION = 1


class BackendUnavailable(RuntimeError):
    """A backend asked for by name cannot be used in this process."""


class Backend:
    """Interface. Subclasses must be safe to call from any thread."""

    name = "abstract"

    def push(self, name):
        raise NotImplementedError

    def pop(self):
        raise NotImplementedError

    def mark(self, name, payload=None):
        raise NotImplementedError

    def flush(self):
        pass


class NoopBackend(Backend):
    """Annotations cost one call and go nowhere."""

    name = "none"

    def push(self, name):
        pass

    def pop(self):
        pass

    def mark(self, name, payload=None):
        pass


class NvtxBackend(Backend):
    """NVTX through torch.cuda.nvtx (nvtxRangePushA / nvtxRangePop / nvtxMarkA).

    NVTX marks carry one string, so a mark with a payload is sent as the message
    "<name> <payload>": the name, one space, then the JSON text. The recorder's
    NVTX injection splits it at the first space.
    """

    name = "nvtx"

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            raise BackendUnavailable("NVTX backend needs CUDA, and torch.cuda.is_available() is false")
        self._nvtx = torch.cuda.nvtx

    def push(self, name):
        self._nvtx.range_push(name)

    def pop(self):
        self._nvtx.range_pop()

    def mark(self, name, payload=None):
        self._nvtx.mark(name if payload is None else name + " " + payload)


def _find_capi_library():
    """The loaded peakscope C API, or None.

    PEAKSCOPE_LIBRARY names a library to load; otherwise the process's global
    namespace is searched, which holds the symbols when the recorder is
    LD_PRELOADed.
    """
    path = os.environ.get(ENV_LIBRARY)
    if path:
        try:
            library = ctypes.CDLL(path)
        except OSError as error:
            raise BackendUnavailable(f"{ENV_LIBRARY}={path}: cannot load: {error}") from None
        if not hasattr(library, "psc_range_push"):
            raise BackendUnavailable(f"{ENV_LIBRARY}={path}: no psc_range_push symbol")
        return library
    library = ctypes.CDLL(None)
    return library if hasattr(library, "psc_range_push") else None


class CApiBackend(Backend):
    """The recorder's public C API (include/peakscope/peakscope.h) through ctypes."""

    name = "capi"

    def __init__(self, library=None):
        library = library if library is not None else _find_capi_library()
        if library is None:
            raise BackendUnavailable(
                "the peakscope C API is not loaded (run under `peakscope record`, "
                f"LD_PRELOAD libpeakscope_preload.so, or set {ENV_LIBRARY})")
        self._push = library.psc_range_push
        self._push.argtypes = [ctypes.c_char_p]
        self._push.restype = None
        self._pop = library.psc_range_pop
        self._pop.argtypes = []
        self._pop.restype = None
        self._mark = library.psc_mark
        self._mark.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self._mark.restype = None
        self._flush = getattr(library, "psc_flush", None)
        if self._flush is not None:
            self._flush.argtypes = []
            self._flush.restype = None
        self.api_version = None
        version = getattr(library, "psc_api_version", None)
        if version is not None:
            version.argtypes = []
            version.restype = ctypes.c_int
            self.api_version = version()
            if self.api_version != SUPPORTED_API_VERSION:
                warnings.warn(
                    f"peakscope: the recorder reports C API version {self.api_version}, "
                    f"this helper speaks version {SUPPORTED_API_VERSION}",
                    RuntimeWarning, stacklevel=2)
        # Range names repeat (a few per layer); encoding once keeps the ctypes
        # call the only cost per annotation.
        self._encoded = {}

    def _bytes(self, text):
        encoded = self._encoded.get(text)
        if encoded is None:
            encoded = text.encode("utf-8")
            if len(self._encoded) < 4096:
                self._encoded[text] = encoded
        return encoded

    def push(self, name):
        self._push(self._bytes(name))

    def pop(self):
        self._pop()

    def mark(self, name, payload=None):
        self._mark(self._bytes(name), None if payload is None else payload.encode("utf-8"))

    def flush(self):
        if self._flush is not None:
            self._flush()


class RecordingBackend(Backend):
    """Keeps every annotation in memory, for tests and for inspection.

    `events` holds (thread_id, op, name, payload) tuples in call order, op being
    "push", "pop" or "mark" (a pop's name is the name of the range it closed).
    `innermost()` answers what the calling thread has open right now, the
    question the trace analysis asks for every allocation.
    """

    name = "recording"

    def __init__(self):
        self._lock = threading.Lock()
        self._stacks = {}
        self.events = []

    def push(self, name):
        thread = threading.get_ident()
        with self._lock:
            self._stacks.setdefault(thread, []).append(name)
            self.events.append((thread, "push", name, None))

    def pop(self):
        thread = threading.get_ident()
        with self._lock:
            stack = self._stacks.get(thread)
            if not stack:
                raise AssertionError("pop with no range open on thread %d" % thread)
            self.events.append((thread, "pop", stack.pop(), None))

    def mark(self, name, payload=None):
        with self._lock:
            self.events.append((threading.get_ident(), "mark", name, payload))

    def stack(self, thread=None):
        """The ranges open on a thread (the caller's by default), outermost first."""
        thread = threading.get_ident() if thread is None else thread
        with self._lock:
            return list(self._stacks.get(thread, ()))

    def innermost(self, thread=None):
        stack = self.stack(thread)
        return stack[-1] if stack else None

    def clear(self):
        with self._lock:
            self._stacks.clear()
            self.events = []


_lock = threading.Lock()
_backend = None


def _auto_backend():
    """NVTX when CUDA is available, else the C API, else a no-op that says so."""
    try:
        import torch

        if torch.cuda.is_available():
            return NvtxBackend()
    except ImportError:
        pass
    try:
        return CApiBackend()
    except BackendUnavailable as reason:
        warnings.warn(f"peakscope: annotations are disabled: {reason}", RuntimeWarning,
                      stacklevel=_user_stacklevel())
        return NoopBackend()


def _user_stacklevel():
    """The warnings stacklevel of the first caller outside this package and its helpers."""
    package = os.path.dirname(os.path.abspath(__file__))
    helpers = (package, contextlib.__file__)
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(helpers):
        frame, level = frame.f_back, level + 1
    return level  # 1 is the function that calls warnings.warn


_BY_NAME = {"nvtx": NvtxBackend, "capi": CApiBackend, "none": NoopBackend,
            "recording": RecordingBackend}


def _make(choice):
    if choice == "auto":
        return _auto_backend()
    factory = _BY_NAME.get(choice)
    if factory is None:
        raise ValueError(f"unknown peakscope backend {choice!r}; "
                         f"choose one of auto, {', '.join(sorted(_BY_NAME))}")
    return factory()


def set_backend(choice="auto"):
    """Chooses where annotations go; returns the backend now in use.

    `choice` is a Backend instance or one of "auto", "nvtx", "capi", "none",
    "recording"; None forgets the choice, so the next annotation chooses again
    (PEAKSCOPE_BACKEND, else automatically). Naming a backend that cannot work
    here raises BackendUnavailable. Switch between steps: a range is popped on
    whatever backend is current when it closes.
    """
    global _backend
    if choice is None:
        with _lock:
            _backend = None
        return None
    backend = choice if isinstance(choice, Backend) else _make(choice)
    with _lock:
        _backend = backend
    return backend


def get_backend():
    """The backend in use, choosing one on first call (PEAKSCOPE_BACKEND or auto)."""
    global _backend
    backend = _backend
    if backend is not None:
        return backend
    with _lock:
        if _backend is None:
            _backend = _make(os.environ.get(ENV_BACKEND, "auto").strip().lower() or "auto")
        return _backend
