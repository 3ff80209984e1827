"""The CPU device behind CuPy (tests.support.cudasim): device arrays and CuPy's array functions."""

from __future__ import annotations

import contextlib
import operator

import numpy as np

from .core import BYTE_RATE, LAUNCH_S, _DataPointer, _Memory, _Op, device


class DeviceArray:
    """A CuPy array whose memory is host memory: ``data.ptr`` is what a kernel on this device dereferences."""

    __array_priority__ = 100

    def __init__(self, host: np.ndarray, memory: object) -> None:
        self._h, self._mem = host, memory

    # layout
    shape = property(lambda self: self._h.shape)
    strides = property(lambda self: self._h.strides)
    dtype = property(lambda self: self._h.dtype)
    ndim = property(lambda self: self._h.ndim)
    size = property(lambda self: self._h.size)
    nbytes = property(lambda self: self._h.nbytes)
    itemsize = property(lambda self: self._h.itemsize)
    data = property(lambda self: _DataPointer(self._h.ctypes.data, self._mem))
    T = property(lambda self: DeviceArray(self._h.T, self._mem))

    def __getitem__(self, key: object) -> DeviceArray:
        view = self._h[key]
        if not isinstance(view, np.ndarray):
            return _read(lambda: np.asarray(view))
        return DeviceArray(view, self._mem)

    def __len__(self) -> int:
        return len(self._h)

    def reshape(self, *shape: object) -> DeviceArray:
        view = self._h.reshape(*shape)
        return DeviceArray(view, self._mem) if np.shares_memory(view, self._h) else _read(lambda: view)

    def ravel(self) -> DeviceArray:
        return self.reshape(-1)

    # kernels on the current stream (capturable)
    def fill(self, value: object) -> None:
        host, n = self._h, self.nbytes
        _enqueue_kernel(lambda: host.fill(value), LAUNCH_S + n / BYTE_RATE, "fill")

    # synchronous: the host waits for the device, then reads (refused during a capture)
    def astype(self, dtype: object, copy: bool = True) -> DeviceArray:
        return _read(lambda: self._h.astype(dtype))

    def copy(self) -> DeviceArray:
        return _read(lambda: self._h.copy())

    def get(self) -> np.ndarray:
        _wait_current()
        return self._h.copy()

    def max(self, axis: object = None, keepdims: bool = False) -> DeviceArray:
        return _read(lambda: np.asarray(self._h.max(axis=axis, keepdims=keepdims)))

    def min(self) -> DeviceArray:
        return _read(lambda: np.asarray(self._h.min()))

    def sum(self) -> DeviceArray:
        return _read(lambda: np.asarray(self._h.sum()))

    def __float__(self) -> float:
        _wait_current()
        return float(self._h)

    def __int__(self) -> int:
        _wait_current()
        return int(self._h)

    def __bool__(self) -> bool:
        _wait_current()
        return bool(self._h)

    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly.")

    def __abs__(self) -> DeviceArray:
        return _read(lambda: np.abs(self._h))

    def __neg__(self) -> DeviceArray:
        return _read(lambda: -self._h)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr={self.data.ptr:#x})"


def _host(x: object) -> object:
    if isinstance(x, np.ndarray):
        raise TypeError("Unsupported type <class 'numpy.ndarray'>: a NumPy array next to a CuPy array")
    return x._h if isinstance(x, DeviceArray) else x


def _binary(name: str, reflected: bool = False):  # noqa: ANN202
    op = getattr(operator, name.replace("__r", "__", 1) if reflected else name)

    def method(self: DeviceArray, other: object) -> DeviceArray:
        other = _host(other)
        return _read(lambda: op(other, self._h) if reflected else op(self._h, other))

    return method


for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__matmul__"):
    setattr(DeviceArray, _name, _binary(_name))
for _name in ("__radd__", "__rsub__", "__rmul__", "__rtruediv__"):
    setattr(DeviceArray, _name, _binary(_name, reflected=True))


def _inplace(name: str):  # noqa: ANN202 - an elementwise kernel on the current stream, as CuPy's x += y
    op = getattr(operator, name)

    def method(self: DeviceArray, other: object) -> DeviceArray:
        host, value = self._h, _host(other)
        _enqueue_kernel(lambda: op(host, value), LAUNCH_S + 2 * self.nbytes / BYTE_RATE, name)
        return self

    return method


for _name in ("__iadd__", "__isub__", "__imul__"):
    setattr(DeviceArray, _name, _inplace(_name))


def _new(host: np.ndarray) -> DeviceArray:
    """A new device allocation holding a copy of ``host`` (C order)."""
    memory, raw = device().allocate(host.nbytes)
    out = raw.view(host.dtype).reshape(host.shape) if host.nbytes else np.empty(host.shape, host.dtype)
    out[...] = host
    return DeviceArray(out, memory)


def _wait_current() -> None:
    """A read of a result: CuPy's copy runs on the current stream, so the host waits for what that covers."""
    dev = device()
    dev.synchronize(dev.current[-1].covered())


def _read(compute) -> DeviceArray:  # noqa: ANN001
    """A synchronous operation on the current stream: the host waits for it (refused during a capture), then
    a new array."""
    _wait_current()
    return _new(np.asarray(compute(), order="C"))  # (ascontiguousarray would make a 0-d result 1-d)


def _enqueue_kernel(fn, duration: float, label: str, spin: bool = False) -> None:  # noqa: ANN001
    dev = device()
    dev.enqueue(dev.current[-1], _Op(fn, duration, label, spin=spin))


def asarray(x: object, dtype: object = None) -> DeviceArray:
    if isinstance(x, DeviceArray):
        return x if dtype is None or np.dtype(dtype) == x.dtype else x.astype(dtype)
    device().synchronize()  # cudaMemcpy from pageable host memory: synchronous
    return _new(np.asarray(x, dtype=dtype, order="C"))


def asnumpy(x: object) -> np.ndarray:
    return x.get() if isinstance(x, DeviceArray) else np.asarray(x)


def empty(shape: object, dtype: object = float) -> DeviceArray:
    memory, raw = device().allocate(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    host = raw.view(np.dtype(dtype)).reshape(shape) if raw.size else np.empty(shape, dtype)
    return DeviceArray(host, memory)


def full(shape: object, value: object, dtype: object = float) -> DeviceArray:
    out = empty(shape, dtype)
    out._h.fill(value)  # fresh memory: no queued work touches it
    return out


def zeros(shape: object, dtype: object = float) -> DeviceArray:
    return full(shape, 0, dtype)


def ones(shape: object, dtype: object = float) -> DeviceArray:
    return full(shape, 1, dtype)


def concatenate(arrays: object, axis: int = 0) -> DeviceArray:
    return _read(lambda: np.concatenate([_host(a) for a in arrays], axis=axis))


def norm(x: DeviceArray, *args: object, **kwargs: object) -> DeviceArray:
    return _read(lambda: np.asarray(np.linalg.norm(x._h, *args, **kwargs)))


class _Generator:
    def __init__(self, seed: object) -> None:
        self._rng = np.random.default_rng(seed)

    def random(self, size: object = None, dtype: object = np.float64) -> DeviceArray:
        return asarray(self._rng.random(size, dtype=dtype))


class ElementwiseKernel:
    """cupy.ElementwiseKernel: the operation, evaluated with NumPy on the operands' host memory, as a kernel
    on the current stream (capturable). Its parameters are ``T name`` lists; every output is passed in."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel", **_: object) -> None:
        self.inputs = [p.split()[-1] for p in in_params.split(",")]
        self.outputs = [p.split()[-1] for p in out_params.split(",")]
        self.code, self.name = compile(operation, name, "exec"), name

    def __call__(self, *args: object) -> None:
        if len(args) != len(self.inputs) + len(self.outputs):
            raise TypeError(f"{self.name}: every output must be given")
        values = [a._h if isinstance(a, DeviceArray) else a for a in args]
        outs = values[len(self.inputs):]

        def run() -> None:
            scope = dict(zip(self.inputs + self.outputs, values))
            exec(self.code, {}, scope)  # noqa: S102 - the harness's own operations
            for name, out in zip(self.outputs, outs):
                out[...] = scope[name]

        size = max(v.nbytes for v in values if isinstance(v, np.ndarray))
        _enqueue_kernel(run, LAUNCH_S + 3 * size / BYTE_RATE, self.name)


class _Pool:
    def free_all_blocks(self) -> None:
        pass

    def used_bytes(self) -> int:
        return device().used

    def total_bytes(self) -> int:
        return device().used


class PythonFunctionAllocator:
    """cupy.cuda.memory.PythonFunctionAllocator: malloc(size, device_id) -> address, free(address, device_id)."""

    def __init__(self, malloc, free) -> None:  # noqa: ANN001
        self._malloc, self._free = malloc, free

    def malloc(self, size: int) -> _Memory:
        ptr = self._malloc(size, 0)
        return _Memory(ptr, size, lambda: self._free(ptr, 0))


@contextlib.contextmanager
def using_allocator(allocator=None):  # noqa: ANN001, ANN201
    dev = device()
    before, dev.allocator = dev.allocator, allocator
    try:
        yield
    finally:
        dev.allocator = before
