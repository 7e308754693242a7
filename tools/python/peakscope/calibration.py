"""Prices from a calibration, by the C++ estimator itself.

    cal = peakscope.Calibration.load("cal.json")        # written by `peakscope calibrate`
    price = cal.price(2048, sequences=[1024, 1024], slots=["a"], cold=True)
    price.required_bytes, price.components["workspace"], price.warnings
    admission = cal.admit(40 << 30, max_sequence_length=1024)
    admission.tokens, admission.price, admission.next_required_bytes

Every figure comes from estimator/predict.h through libpeakscope_estimator.so
(tools/capi/peakscope_estimator.h) and ctypes: nothing here prices. The
library is, in order: the `library` argument, $PEAKSCOPE_ESTIMATOR_LIBRARY,
build/libpeakscope_estimator.so of the repository this package sits in.

A Calibration reuses its ctypes buffers from call to call (a lock keeps
threads sharing one object apart) and calls the library with the GIL held
(ctypes.PyDLL): a price takes a few microseconds.
"""

import ctypes
import os
import struct
import threading
from dataclasses import dataclass

ENV_ESTIMATOR_LIBRARY = "PEAKSCOPE_ESTIMATOR_LIBRARY"
LIBRARY_NAME = "libpeakscope_estimator.so"
# tools/python/peakscope/ -> the repository's build/
DEFAULT_LIBRARY = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                                "build", LIBRARY_NAME))

PSC_OK = 0
PSC_BAD_INPUT = 2
EXTRAPOLATED_OUTSIDE = 1
EXTRAPOLATED_FEW_SIZES = 2
MOMENTS = (None, "head", "before_gradient", "after_gradient")  # psc_price.peak_moment, estimator's moment_name
COMPONENTS = ("output", "retained", "workspace", "input_gradient", "adapter_gradient", "moment", "transient")
MESSAGE_BYTES = 4096
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class CalibrationError(ValueError):
    """A calibration file or a request the estimator refuses; the message names the field."""


class EstimatorLibraryNotFound(OSError):
    """libpeakscope_estimator.so is not where it was looked for."""


@dataclass(frozen=True)
class Price:
    raw_bytes: int        # the unscaled sum: compare it with a measured peak
    required_bytes: int   # raw_bytes x the calibration's safety factor
    components: dict      # output, retained, workspace, input_gradient, adapter_gradient, moment, transient
    peak_layer: int       # the layer whose recompute holds the peak; -1: none, or the head
    peak_moment: str      # "head", "before_gradient", "after_gradient", or None
    warnings: list        # one line per kind of extrapolation
    extrapolated: bool    # some term priced outside its calibrated sizes, or from fewer than 3


@dataclass(frozen=True)
class Admission:
    tokens: int                # the largest width that fits the budget; 0: not one token
    price: Price               # the price at `tokens`; None when 0
    next_required_bytes: int   # required bytes one token wider; None when max_tokens was admitted
    search_prices: int         # exact prices the search evaluated


# ---- the C ABI (tools/capi/peakscope_estimator.h) -------------------------------

class _Request(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("tokens", ctypes.c_int64),
                ("sequence_lengths", ctypes.POINTER(ctypes.c_int64)), ("sequence_count", ctypes.c_size_t),
                ("slots", ctypes.c_char_p), ("cold", ctypes.c_int), ("gradients_exist", ctypes.c_int)]


class _Price(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t)] + [(name, ctypes.c_int64) for name in (
        "raw_bytes", "required_bytes") + COMPONENTS] + [
        ("peak_layer", ctypes.c_int32), ("peak_moment", ctypes.c_int32), ("extrapolated", ctypes.c_int32)]


class _Admission(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("admitted_tokens", ctypes.c_int64), ("search_prices", ctypes.c_int64),
                ("next_required_bytes", ctypes.c_int64), ("price", _Price)]


# One read of a whole psc_price: size, 9 int64, 3 int32.
_PRICE_LAYOUT = struct.Struct("=Q9q3i")
assert _PRICE_LAYOUT.size <= ctypes.sizeof(_Price)

_new = object.__new__
_libraries = {}
_libraries_lock = threading.Lock()


def library_path(library=None):
    """Where the estimator library is looked for (it may not exist)."""
    return library or os.environ.get(ENV_ESTIMATOR_LIBRARY) or DEFAULT_LIBRARY


def _load_library(library=None):
    path = library_path(library)
    with _libraries_lock:
        lib = _libraries.get(path)
        if lib is not None:
            return lib
        if not os.path.exists(path):
            raise EstimatorLibraryNotFound(
                f"{path}: no such file: build it with `make` in the repository "
                f"(or name the library with ${ENV_ESTIMATOR_LIBRARY} or library=)")
        try:
            lib = ctypes.PyDLL(path)  # the GIL stays held: calls are short
        except OSError as e:
            raise EstimatorLibraryNotFound(f"{path}: cannot load: {e}") from e
        lib.psc_calibration_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.psc_calibration_load.restype = ctypes.c_void_p
        lib.psc_calibration_free.argtypes = [ctypes.c_void_p]
        lib.psc_calibration_free.restype = None
        lib.psc_calibration_price.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Request), ctypes.POINTER(_Price),
                                              ctypes.c_char_p, ctypes.c_size_t]
        lib.psc_calibration_price.restype = ctypes.c_int
        lib.psc_calibration_admit.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Request), ctypes.c_int64,
                                              ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(_Admission),
                                              ctypes.c_char_p, ctypes.c_size_t]
        lib.psc_calibration_admit.restype = ctypes.c_int
        _libraries[path] = lib
        return lib


def _int64(name, value):
    if not INT64_MIN <= value <= INT64_MAX:
        raise CalibrationError(f"{name}: {value} does not fit in 64 bits")
    return value


class Calibration:
    """A cal.json loaded into the C++ estimator. Use `Calibration.load(path)`."""

    def __init__(self, lib, handle, path):
        self._lib = lib
        self._handle = ctypes.c_void_p(handle)
        self.path = path
        # The hot call: a function object of its own without argtypes, every
        # argument a ctypes object built here of exactly the C type (no
        # conversion per call; psc_calibration_price keeps argtypes for others).
        self._price_call = lib["psc_calibration_price"]
        self._price_call.restype = ctypes.c_int
        self._message_size = ctypes.c_size_t(MESSAGE_BYTES)
        self._admit_call = lib.psc_calibration_admit
        self._request = _Request(size=ctypes.sizeof(_Request))
        self._request_ref = ctypes.pointer(self._request)
        self._out = _Price(size=ctypes.sizeof(_Price))
        self._out_ref = ctypes.pointer(self._out)
        self._admission = _Admission(size=ctypes.sizeof(_Admission))
        self._admission.price.size = ctypes.sizeof(_Price)
        self._admission_ref = ctypes.pointer(self._admission)
        self._message = ctypes.create_string_buffer(MESSAGE_BYTES)
        self._lock = threading.Lock()
        self._slots_key = None     # the last slots given, as a tuple
        self._sequences = None     # keeps the last ctypes array alive

    @classmethod
    def load(cls, path, library=None):
        """Reads a calibration written by `peakscope calibrate`. Raises CalibrationError
        naming the file and the field (unreadable, not JSON, a field missing or wrong)."""
        lib = _load_library(library)
        error = ctypes.create_string_buffer(MESSAGE_BYTES)
        handle = lib.psc_calibration_load(os.fsencode(path), error, MESSAGE_BYTES)
        if not handle:
            raise CalibrationError(error.value.decode("utf-8", "replace"))
        return cls(lib, handle, os.fspath(path))

    def close(self):
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is not None and handle.value:
                self._lib.psc_calibration_free(handle)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Calibration({self.path!r})"

    # ---- requests ------------------------------------------------------------------

    def _set_shape(self, slots, cold, gradients_exist):
        request = self._request
        if slots is None:
            if self._slots_key is not None:
                request.slots = None
                self._slots_key = None
        else:
            key = (slots,) if isinstance(slots, str) else tuple(slots)
            if key != self._slots_key:
                for i, slot in enumerate(key):
                    if not isinstance(slot, str):
                        raise CalibrationError(f"slots[{i}]: {slot!r} is not a slot name")
                    if not slot:
                        raise CalibrationError(f"slots[{i}]: an empty slot name")
                    if "," in slot:
                        raise CalibrationError(f"slots[{i}]: \"{slot}\" holds a comma, which the estimator's "
                                               "interface reserves")
                request.slots = ",".join(key).encode("utf-8")
                self._slots_key = key
        request.cold = 1 if cold else 0
        request.gradients_exist = 1 if gradients_exist else 0

    def _handle_value(self):
        if self._handle is None:
            raise CalibrationError(f"{self.path}: closed")
        return self._handle

    def _failure(self, rc):
        text = self._message.value.decode("utf-8", "replace")
        if rc == PSC_BAD_INPUT:
            return CalibrationError(text)
        return RuntimeError(f"peakscope estimator: {text}")

    def _price_of(self, out):
        _, raw, required, output, retained, workspace, input_gradient, adapter_gradient, moment, transient, \
            layer, peak_moment, flags = _PRICE_LAYOUT.unpack_from(out)
        # A frozen dataclass's __init__ sets each field through object.__setattr__;
        # filling the new instance's __dict__ at once is the same object, in a third of the time.
        price = _new(Price)
        price.__dict__.update(
            raw_bytes=raw, required_bytes=required,
            components={"output": output, "retained": retained, "workspace": workspace,
                        "input_gradient": input_gradient, "adapter_gradient": adapter_gradient, "moment": moment,
                        "transient": transient},
            peak_layer=layer, peak_moment=MOMENTS[peak_moment],
            warnings=self._message.value.decode("utf-8", "replace").split("\n") if flags else [],
            extrapolated=flags != 0)
        return price

    def price(self, tokens, sequences=None, slots=None, cold=False, gradients_exist=False):
        """The price of one wave of `tokens` tokens: packed into `sequences` (lengths adding
        up to tokens; None: one sequence), training `slots` in forward order (None: the
        calibration's only slot). Raises CalibrationError naming the field it refuses."""
        with self._lock:
            return self._price(tokens, sequences, slots, cold, gradients_exist)

    def _price(self, tokens, sequences, slots, cold, gradients_exist):
        request = self._request
        if tokens.__class__ is not int or not INT64_MIN <= tokens <= INT64_MAX:
            tokens = _int64("tokens", int(tokens))
        request.tokens = tokens
        if sequences is None:
            if self._sequences is not None:
                request.sequence_lengths = None
                request.sequence_count = 0
                self._sequences = None
        else:
            lengths = sequences if sequences.__class__ is list else list(sequences)
            if lengths and (max(lengths) > INT64_MAX or min(lengths) < INT64_MIN):
                for i, v in enumerate(lengths):
                    _int64(f"sequences[{i}]", v)
            array = (ctypes.c_int64 * len(lengths))(*lengths)  # TypeError for what is not an integer
            request.sequence_lengths = array  # the field keeps the array alive
            request.sequence_count = len(lengths)
            self._sequences = array
        if slots is None and self._slots_key is None:
            request.cold = 1 if cold else 0
            request.gradients_exist = 1 if gradients_exist else 0
        else:
            self._set_shape(slots, cold, gradients_exist)
        rc = self._price_call(self._handle_value(), self._request_ref, self._out_ref, self._message, self._message_size)
        if rc != PSC_OK:
            raise self._failure(rc)
        return self._price_of(self._out)

    def admit(self, budget_bytes, slots=None, cold=False, gradients_exist=False, max_tokens=1 << 20,
              max_sequence_length=0):
        """The largest wave (1..max_tokens tokens) whose required bytes fit `budget_bytes`,
        packed into sequences of at most `max_sequence_length` tokens (0: one sequence)."""
        budget_bytes = _int64("budget_bytes", int(budget_bytes))
        max_tokens = _int64("max_tokens", int(max_tokens))
        max_sequence_length = _int64("max_sequence_length", int(max_sequence_length))
        with self._lock:
            self._set_shape(slots, cold, gradients_exist)
            rc = self._admit_call(self._handle_value(), self._request_ref, budget_bytes, max_tokens,
                                  max_sequence_length, self._admission_ref, self._message, MESSAGE_BYTES)
            if rc != PSC_OK:
                raise self._failure(rc)
            a = self._admission
            return Admission(tokens=a.admitted_tokens,
                             price=self._price_of(a.price) if a.admitted_tokens > 0 else None,
                             next_required_bytes=None if a.next_required_bytes < 0 else a.next_required_bytes,
                             search_prices=a.search_prices)
