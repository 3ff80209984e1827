"""The CPU device behind CuPy (tests.support.cudasim): the CUDA driver's C API that strassenbench calls itself
(strassenbench.fused.cuda.driver_library), cuTensorMapEncodeTiled.

It checks what the driver documents for a 2-D tiled map of the kinds the harness asks for (cuda.h,
cuTensorMapEncodeTiled) and writes the emulator's encoding of the map (kernels/instances.cuh
emu_tensor_map_encode) into the caller's 128 bytes, so that the kernels running on the emulator read it as the GPU's
TMA unit reads the driver's. CUDA_ERROR_INVALID_VALUE (1) for what the driver refuses, CUDA_SUCCESS (0) else.
"""

from __future__ import annotations

import ctypes

from .core import device

_ELEMENT_BYTES = {7: 4, 8: 8}  # CU_TENSOR_MAP_DATA_TYPE_FLOAT32, _FLOAT64
_SWIZZLE = {0: 0, 3: 128}  # CU_TENSOR_MAP_SWIZZLE_NONE, _128B: what the emulator lands
INVALID_VALUE = 1


class DriverLibrary:
    """The libcuda functions strassenbench.fused.cuda calls through ctypes, with the driver's arguments."""

    def __init__(self) -> None:
        self.encoded: list[tuple[int, int, int]] = []  # (address, rows, columns) of every map encoded

    def cuTensorMapEncodeTiled(self, tensor_map: int, data_type: int, rank: int, address: int, dims, strides,  # noqa: N802, ANN001
                               box, element_strides, interleave: int, swizzle: int, l2: int, oob: int) -> int:
        device().alive()
        itemsize = _ELEMENT_BYTES.get(data_type)
        if (itemsize is None or rank != 2 or tensor_map % 64 or interleave != 0 or swizzle not in _SWIZZLE
                or l2 not in range(4) or oob not in range(2) or any(element_strides[i] != 1 for i in range(2))):
            return INVALID_VALUE
        cols, rows, stride = int(dims[0]), int(dims[1]), int(strides[0])
        # The whole tensor must be device memory: the TMA unit reads it there.
        if rows == 0 or cols == 0 or not device().allocated(address, (rows - 1) * stride + cols * itemsize):
            return INVALID_VALUE
        from strassenbench.fused import emu

        encode = emu.tensor_map_encoder(emu.library("float32", "Small", level=0))  # every library has it
        why = ctypes.create_string_buffer(256)
        if encode(tensor_map, address, itemsize, cols, rows, stride, int(box[0]), int(box[1]), _SWIZZLE[swizzle],
                  why, len(why)):
            return INVALID_VALUE
        self.encoded.append((address, rows, cols))
        return 0
