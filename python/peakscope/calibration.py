"""Prices from a calibration, by the C++ estimator itself.

    cal = peakscope.Calibration.load("cal.json")        # written by `peakscope calibrate`
    price = cal.price(2048, sequences=[1024, 1024], slots=["a"], cold=True)
    later = cal.price(2048, cold=peakscope.COLD_AFTER_FIRST_WAVE)  # a new shape, not the process's first wave
    price.required_bytes, price.components["workspace"], price.warnings
    admission = cal.admit(40 << 30, max_sequence_length=1024)
    admission.tokens, admission.price, admission.next_required_bytes

Every figure comes from estimator/predict.h through libpeakscope_estimator.so
(include/peakscope/estimator.h) and ctypes: nothing here prices. The
library is the `library` argument, else $PEAKSCOPE_ESTIMATOR_LIBRARY, else
the first there of <prefix>/lib for a package installed under <prefix>, the
repository's build/, <prefix>/lib of a `peakscope` on $PATH (locate.py); the
error when none is there lists every path tried.

A Calibration reuses its ctypes buffers from call to call (a lock keeps
threads sharing one object apart) and calls the library with the GIL held
(ctypes.PyDLL): a price takes a few microseconds.
"""

import ctypes
import operator
import os
import struct
import threading
from dataclasses import dataclass

from peakscope import locate

ENV_ESTIMATOR_LIBRARY = locate.ENV_ESTIMATOR_LIBRARY
LIBRARY_NAME = locate.ESTIMATOR_LIBRARY

PSC_OK = 0
PSC_BAD_INPUT = 2
EXTRAPOLATED_OUTSIDE = 1
EXTRAPOLATED_FEW_SIZES = 2
EXTRAPOLATED_WAITING = 4
EXTRAPOLATED_UNBOUNDED = 8
MOMENTS = (None, "head", "before_gradient", "after_gradient", "forward")  # psc_price.peak_moment, estimator's moment_name
COMPONENTS = ("output", "retained", "workspace", "input_gradient", "adapter_gradient", "moment", "transient")
MESSAGE_BYTES = 4096
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# cold=True prices a new shape as if it were the process's first wave (what a
# process keeps from its first executions on: library workspaces, modules);
# cold=COLD_AFTER_FIRST_WAVE prices a new shape in a process that has run a wave.
COLD_AFTER_FIRST_WAVE = "after_first_wave"
_COLD_LATER = 2  # include/peakscope/estimator.h PSC_COLD_AFTER_FIRST_WAVE


def _file_key(path):
    """What says a file was rewritten: its modification time, size and inode (a rename
    over it gives a new inode); None when it cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class CalibrationError(ValueError):
    """A calibration file or a request the estimator refuses; the message names the field."""


class EstimatorLibraryNotFound(OSError):
    """libpeakscope_estimator.so is not where it was looked for; the message lists where."""


@dataclass(frozen=True)
class Price:
    raw_bytes: int        # the unscaled sum: compare it with a measured peak
    required_bytes: int   # raw_bytes x the calibration's safety factor
    components: dict      # output, retained, workspace, input_gradient, adapter_gradient, moment, waiting, transient
    peak_layer: int       # the layer whose recompute holds the peak; -1: none, or the head
    peak_moment: str      # "head", "before_gradient", "after_gradient", "forward", or None
    warnings: list        # one line per kind of extrapolation
    extrapolated: bool    # some term priced outside its calibrated sizes, or from fewer than 3, or a wave
                          # that no calibration wave bounds (one sequence shorter than any calibrated)


@dataclass(frozen=True)
class Admission:
    tokens: int                # the largest width that fits the budget; 0: not one token
    price: Price               # the price at `tokens`; None when 0
    next_required_bytes: int   # required bytes one token wider; None when max_tokens was admitted
    search_prices: int         # exact prices the search evaluated
    group_tokens: list = None  # with groups: each group's tokens of the admitted wave


# ---- the C ABI (include/peakscope/estimator.h) -------------------------------

class _Request(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("tokens", ctypes.c_int64),
                ("sequence_lengths", ctypes.POINTER(ctypes.c_int64)), ("sequence_count", ctypes.c_size_t),
                ("slots", ctypes.c_char_p), ("cold", ctypes.c_int), ("gradients_exist", ctypes.c_int),
                # version 2: each group's own size
                ("group_tokens", ctypes.POINTER(ctypes.c_int64)), ("group_count", ctypes.c_size_t),
                ("group_sequence_lengths", ctypes.POINTER(ctypes.c_int64)),
                ("group_sequence_counts", ctypes.POINTER(ctypes.c_size_t)),
                # version 3: the groups' backward order
                ("backward_order", ctypes.POINTER(ctypes.c_int32)), ("backward_order_count", ctypes.c_size_t)]


class _Price(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t)] + [(name, ctypes.c_int64) for name in (
        "raw_bytes", "required_bytes") + COMPONENTS] + [
        ("peak_layer", ctypes.c_int32), ("peak_moment", ctypes.c_int32), ("extrapolated", ctypes.c_int32),
        ("waiting", ctypes.c_int64)]  # version 2


class _Admission(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("admitted_tokens", ctypes.c_int64), ("search_prices", ctypes.c_int64),
                ("next_required_bytes", ctypes.c_int64), ("price", _Price)]


# One read of a whole psc_price: size, 9 int64, 3 int32, (padding) the waiting int64.
_PRICE_LAYOUT = struct.Struct("=Q9q3i4xq")
assert _PRICE_LAYOUT.size <= ctypes.sizeof(_Price)

_new = object.__new__
_libraries = {}
_libraries_lock = threading.Lock()


def library_path(library=None):
    """The estimator library: `library` as given (it may not exist), else the one
    locate.py finds; EstimatorLibraryNotFound lists every path tried."""
    if library:
        return library
    try:
        return locate.estimator_library()
    except locate.NotFound as e:
        raise EstimatorLibraryNotFound(str(e)) from None


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
        lib.psc_calibration_group_split.argtypes = [ctypes.POINTER(_Request), ctypes.c_int64,
                                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                                    ctypes.c_char_p, ctypes.c_size_t]
        lib.psc_calibration_group_split.restype = ctypes.c_int
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


def _whole(name, value):
    """`value` as an int: an int, a float without a fraction, or anything numpy-like with
    __index__; a fraction, a string or a bool is refused, naming the field."""
    if value.__class__ is int:
        return _int64(name, value)
    if isinstance(value, float) and value.is_integer():
        return _int64(name, int(value))
    if not isinstance(value, bool):
        try:
            return _int64(name, operator.index(value))
        except TypeError:
            pass
    raise CalibrationError(f"{name}: {value!r} is not a whole number")


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

    _file_key = None  # the file as it was read: (mtime, size, inode), for reload()

    @classmethod
    def load(cls, path, library=None):
        """Reads a calibration written by `peakscope calibrate`. Raises CalibrationError
        naming the file and the field (unreadable, not JSON, a field missing or wrong)."""
        lib = _load_library(library)
        key = _file_key(path)  # before the read: a rewrite during it is read again by reload()
        error = ctypes.create_string_buffer(MESSAGE_BYTES)
        handle = lib.psc_calibration_load(os.fsencode(path), error, MESSAGE_BYTES)
        if not handle:
            raise CalibrationError(error.value.decode("utf-8", "replace"))
        calibration = cls(lib, handle, os.fspath(path))
        calibration._file_key = key
        return calibration

    def reload(self):
        """Reads the file again if it changed since it was read (`peakscope calibrate
        --follow` rewrites it, whole, as a run's waves end); returns True when it did.
        A trainer's admission loop calls it before pricing its next wave. When the new
        file cannot be read, CalibrationError is raised and the calibration read before
        stays in use."""
        key = _file_key(self.path)
        if key is not None and key == self._file_key:
            return False
        error = ctypes.create_string_buffer(MESSAGE_BYTES)
        handle = self._lib.psc_calibration_load(os.fsencode(self.path), error, MESSAGE_BYTES)
        if not handle:
            raise CalibrationError(error.value.decode("utf-8", "replace"))
        with self._lock:
            old, self._handle = self._handle, handle
            self._file_key = key
        if old is not None and old.value:
            self._lib.psc_calibration_free(old)
        return True

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
        request.cold = (_COLD_LATER if cold == COLD_AFTER_FIRST_WAVE else 1) if cold else 0
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
            layer, peak_moment, flags, waiting = _PRICE_LAYOUT.unpack_from(out)
        # A frozen dataclass's __init__ sets each field through object.__setattr__;
        # filling the new instance's __dict__ at once is the same object, in a third of the time.
        price = _new(Price)
        price.__dict__.update(
            raw_bytes=raw, required_bytes=required,
            components={"output": output, "retained": retained, "workspace": workspace,
                        "input_gradient": input_gradient, "adapter_gradient": adapter_gradient, "moment": moment,
                        "waiting": waiting, "transient": transient},
            peak_layer=layer, peak_moment=MOMENTS[peak_moment],
            warnings=self._message.value.decode("utf-8", "replace").split("\n") if flags else [],
            extrapolated=flags != 0)
        return price

    def price(self, tokens=None, sequences=None, slots=None, cold=False, gradients_exist=False, groups=None,
              backward_order=None):
        """The price of one wave of `tokens` tokens: packed into `sequences` (lengths adding
        up to tokens; None: one sequence), training `slots` in forward order (None: the
        calibration's only slot), one gradient group each, equal parts. Or with `groups`
        (each {"tokens", "slot", "sequence_lengths"}, as peakscope.group() makes them, in
        forward order): each group at its own size; `tokens`, if given, their sum; and
        `backward_order`, the groups' indices in the order their backwards run when the
        trainer fixes it (None: priced in the worst order).
        Raises CalibrationError naming the field it refuses."""
        if groups is not None:
            if sequences is not None or slots is not None:
                raise CalibrationError("groups: give each group's sequences and slot in its group")
            with self._lock:
                return self._with_groups(groups, tokens or 0, cold, gradients_exist,
                                         lambda: self._price_call(self._handle_value(), self._request_ref,
                                                                  self._out_ref, self._message, self._message_size),
                                         lambda: self._price_of(self._out), backward_order)
        if backward_order is not None:
            raise CalibrationError("backward_order: give the groups it orders (groups=[...])")
        if tokens is None:
            raise CalibrationError("tokens: required (or give groups)")
        with self._lock:
            return self._price(tokens, sequences, slots, cold, gradients_exist)

    def _with_groups(self, groups, tokens, cold, gradients_exist, call, result, backward_order=None):
        """Runs `call` with the request holding `groups` (and their backward order), then puts
        the request back as it was."""
        sizes, slots, lengths, counts = [], [], [], []
        for i, group in enumerate(groups):
            if not isinstance(group, dict) or "tokens" not in group:
                raise CalibrationError(f"groups[{i}]: expected a dict with tokens (peakscope.group())")
            sizes.append(_whole(f"groups[{i}].tokens", group["tokens"]))
            slot = group.get("slot")
            slots.append("" if slot is None else str(slot))
            seq = list(group.get("sequence_lengths") or [])
            lengths.extend(_whole(f"groups[{i}].sequence_lengths[{k}]", v) for k, v in enumerate(seq))
            counts.append(len(seq))
        if not sizes:
            raise CalibrationError("groups: empty")
        request = self._request
        token_array = (ctypes.c_int64 * len(sizes))(*sizes)
        length_array = (ctypes.c_int64 * max(1, len(lengths)))(*lengths)
        count_array = (ctypes.c_size_t * len(counts))(*counts)
        saved = (request.tokens, request.sequence_lengths, request.sequence_count)
        request.tokens = _whole("tokens", tokens)
        request.sequence_lengths = None
        request.sequence_count = 0
        self._sequences = None
        self._set_shape(slots if any(slots) else None, cold, gradients_exist)
        request.group_tokens = token_array
        request.group_count = len(sizes)
        request.group_sequence_lengths = length_array
        request.group_sequence_counts = count_array
        if backward_order is not None:
            order = [_whole(f"backward_order[{k}]", i) for k, i in enumerate(backward_order)]
            if any(not -2**31 <= i < 2**31 for i in order):
                raise CalibrationError("backward_order: each entry must be a group's index")
            order_array = (ctypes.c_int32 * max(1, len(order)))(*order)
            request.backward_order = order_array
            request.backward_order_count = len(order)
        try:
            rc = call()
            if rc != PSC_OK:
                raise self._failure(rc)
            return result()
        finally:
            request.group_tokens = None
            request.group_count = 0
            request.group_sequence_lengths = None
            request.group_sequence_counts = None
            request.backward_order = None
            request.backward_order_count = 0
            request.tokens, request.sequence_lengths, request.sequence_count = saved[0], None, 0

    def _price(self, tokens, sequences, slots, cold, gradients_exist):
        request = self._request
        if tokens.__class__ is not int or not INT64_MIN <= tokens <= INT64_MAX:
            tokens = _whole("tokens", tokens)
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
            request.cold = (_COLD_LATER if cold == COLD_AFTER_FIRST_WAVE else 1) if cold else 0
            request.gradients_exist = 1 if gradients_exist else 0
        else:
            self._set_shape(slots, cold, gradients_exist)
        rc = self._price_call(self._handle_value(), self._request_ref, self._out_ref, self._message, self._message_size)
        if rc != PSC_OK:
            raise self._failure(rc)
        return self._price_of(self._out)

    def admit(self, budget_bytes, slots=None, cold=False, gradients_exist=False, max_tokens=1 << 20,
              max_sequence_length=0, groups=None, backward_order=None):
        """The largest wave (1..max_tokens tokens) whose required bytes fit `budget_bytes`,
        packed into sequences of at most `max_sequence_length` tokens (0: one sequence).
        With `groups` (each {"tokens", "slot"}), the groups' tokens are relative shares of
        the wave: the admission's group_tokens say how the admitted wave splits; with
        `backward_order`, every width is priced in that order of the groups' backwards."""
        budget_bytes = _whole("budget_bytes", budget_bytes)
        max_tokens = _whole("max_tokens", max_tokens)
        max_sequence_length = _whole("max_sequence_length", max_sequence_length)
        if groups is not None:
            if slots is not None:
                raise CalibrationError("groups: give each group's slot in its group")
            with self._lock:
                return self._with_groups(groups, 0, cold, gradients_exist,
                                         lambda: self._admit_call(self._handle_value(), self._request_ref, budget_bytes,
                                                                  max_tokens, max_sequence_length,
                                                                  self._admission_ref, self._message, MESSAGE_BYTES),
                                         self._admission_with_split, backward_order)
        if backward_order is not None:
            raise CalibrationError("backward_order: give the groups it orders (groups=[...])")
        with self._lock:
            self._set_shape(slots, cold, gradients_exist)
            rc = self._admit_call(self._handle_value(), self._request_ref, budget_bytes, max_tokens,
                                  max_sequence_length, self._admission_ref, self._message, MESSAGE_BYTES)
            if rc != PSC_OK:
                raise self._failure(rc)
            return self._admission_of()

    def _admission_of(self, group_tokens=None):
        a = self._admission
        return Admission(tokens=a.admitted_tokens,
                         price=self._price_of(a.price) if a.admitted_tokens > 0 else None,
                         next_required_bytes=None if a.next_required_bytes < 0 else a.next_required_bytes,
                         search_prices=a.search_prices, group_tokens=group_tokens)

    def _admission_with_split(self):
        """The admission, with how its wave splits between the request's groups."""
        tokens = self._admission.admitted_tokens
        if tokens <= 0:
            return self._admission_of([])
        count = self._request.group_count
        out = (ctypes.c_int64 * count)()
        rc = self._lib.psc_calibration_group_split(self._request_ref, tokens, out, count, self._message, MESSAGE_BYTES)
        if rc != PSC_OK:
            raise self._failure(rc)
        return self._admission_of(list(out))
