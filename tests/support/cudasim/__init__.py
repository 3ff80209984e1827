"""A CuPy-shaped CPU device, so that the cuda engine's own Python runs in CI (tests marked ``cudasim``).

The real ``cupy`` package is imported; ``install`` replaces, on its own modules, what needs a GPU:

- **Device memory.** Arrays (``DeviceArray``: shape, strides, dtype, ``data.ptr``) live in host memory, so an
  address is a host address that the emulator's kernels read and write. ``runtime.malloc``/``memGetInfo``
  account for a device of ``memory_bytes``; an allocation past it fails as CuPy's pool or the runtime does.
- **Modules and launches.** ``RawModule(path=...)`` reads the fatbin's PTX (``cuobjdump -ptx``) for each
  kernel's ``.entry`` signature. A launch marshals its arguments with CuPy's own ``CPointer``/``CScalar``, and
  the device copies each parameter at the byte width of its PTX type, as the driver does when it reads the
  kernelParams array. A scalar of another width is refused (the driver would silently read its first bytes:
  right for a small non-negative Python int on a little-endian host, garbage for a double passed to a float).
  The kernel runs on the emulator (strassenbench.fused.emu.entry).
- **Streams and events.** Work is queued per stream; the device runs it when the host waits, and only what the
  wait covers: a stream's synchronize (or a read of a result on it) what that stream's work depends on (the
  legacy default stream also every blocking stream's), an event's synchronize what the event depends on, a
  device synchronize everything. It runs in an order chosen among every order the streams and their event
  waits allow: random (seeded) or ``lifo`` (the latest enqueued first, which exposes any missing wait
  deterministically). A missing join therefore leaves work unrun, as on a GPU.
- **The queue behind a spinning kernel.** Behind the blocking kernel (kernels/blocking.cuh) still waiting for
  the host, at most ``queue_capacity`` operations can be pending (a graph launch is one). An enqueue past that
  blocks until the device gets through the queue: the spin runs first, and since the host that would release
  it is the one blocked, it waits out its timeout, exactly as on a GPU.
- **Faults.** A sticky error poisons the context: the blocking kernel reading a flag outside mapped host memory
  is an illegal address (700), an access the emulator finds misaligned is 716. From then on every runtime,
  stream, event, launch and cuBLAS wrapper call raises that error, and the C API's calls return
  CUBLAS_STATUS_EXECUTION_FAILED; queued work is lost. ``poison(status)`` does it directly.
- **Launch limits.** A launch past the grid's (2^31 - 1, 65,535, 65,535) or a block's (1,024 threads, 64 in z,
  the kernel's ``.maxntid``) limits, or with more shared memory than a block has (the kernel's static shared
  memory from ``cuobjdump -res-usage`` plus the dynamic), fails as the driver's cuLaunchKernel does
  (CUDA_ERROR_INVALID_VALUE).
- **Graphs.** Capture records the work of the capturing stream and of the streams that join it by waiting on one
  of its events. As CUDA does, end_capture refuses work that was not joined back (cudaErrorStreamCaptureUnjoined),
  and a synchronisation or an allocation during a capture fails (cudaErrorStreamCaptureUnsupported).
- **cuBLAS.** CuPy's wrapper (``cupy_backends.cuda.libs.cublas``) refuses a capturing stream exactly as CuPy 14
  does (``setStream`` raises NotImplementedError, CuPy issue 6290); the C-API stand-in that
  ``reference.array_ops.cublas_library`` returns computes on the host and can be captured. As the cuBLAS
  documentation says, ``cublasSetStream`` resets the handle's workspace to cuBLAS's own pool; a GEMM captured
  without a user workspace would allocate from that pool inside the graph and is refused here
  (CUBLAS_STATUS_NOT_SUPPORTED).
- **Time.** A virtual device clock in host seconds: an operation starts when the device reaches it, never before
  the host enqueued it, and lasts a modelled duration (``duration``). Events around a Python call therefore
  include the host's enqueue gaps; a graph replay, or a call queued behind the blocking kernel, does not.

Kernels and cuBLAS calls compute exactly what the GPU would (the emulator runs the CUDA sources; GEMM in the
working precision); timings are the model's and say nothing about any GPU.

From a shell, any command of the CLI runs on a CPU device: ``python -m tests.support.cudasim [OPTIONS] strassenbench
bench --engine cuda ...`` (``python -m tests.support.cudasim --help`` lists the options: queue capacity, order,
memory, an injected failure; each also from the environment).
"""

from __future__ import annotations

from .core import (  # noqa: F401
    BYTE_RATE,
    CUBLAS_EXECUTION_FAILED,
    CUBLAS_NOT_SUPPORTED,
    CpuDevice,
    CudaFault,
    ERR_ALLOCATION,
    ERR_CAPTURE_INVALIDATED,
    ERR_CAPTURE_ISOLATION,
    ERR_CAPTURE_UNJOINED,
    ERR_CAPTURE_UNMATCHED,
    ERR_CAPTURE_UNSUPPORTED,
    ERR_ILLEGAL_ADDRESS,
    ERR_INVALID_HANDLE,
    ERR_INVALID_VALUE,
    ERR_MISALIGNED_ADDRESS,
    ERR_NOT_READY,
    FLOP_RATE,
    LAUNCH_S,
    LaunchError,
    MAX_BLOCK,
    MAX_BLOCK_THREADS,
    MAX_GRID,
    MAX_SHARED,
    QUEUE_CAPACITY,
    _Capture,
    _DEVICE,
    _DRIVER_NAMES,
    _DataPointer,
    _Memory,
    _Op,
    _ancestors,
    _driver_error,
    _runtime_error,
    device,
)
from .streams import (  # noqa: F401
    Event,
    Graph,
    Stream,
    get_elapsed_time,
)
from .arrays import (  # noqa: F401
    DeviceArray,
    ElementwiseKernel,
    PythonFunctionAllocator,
    _Generator,
    _Pool,
    _binary,
    _enqueue_kernel,
    _host,
    _inplace,
    _new,
    _read,
    _wait_current,
    asarray,
    asnumpy,
    concatenate,
    empty,
    full,
    norm,
    ones,
    using_allocator,
    zeros,
)
from .runtime import (  # noqa: F401
    CudaDevice,
    KernelInfo,
    RawKernel,
    RawModule,
    _CTYPES,
    _ENTRY,
    _PARAM,
    _Runtime,
    _SHARED,
    _WIDTH,
    _block_kernel,
    _marshal,
    ptx_signatures,
)
from .cublas import (  # noqa: F401
    CublasLibrary,
    CublasWrapper,
    _CFunction,
    _column_major,
    _gemm_op,
)
from .install import (  # noqa: F401
    _Patches,
    install,
    main,
)
