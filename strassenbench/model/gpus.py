"""GPU parameters of the performance model (paper, Sec. s:volta and figure tab:notation).

tau_flop = 2 flop/FMA x cores/SM x SMs x boost clock              (Sec. s:volta, footnotes 1-2)
tau_gmop = DRAM bandwidth x (1 + read-only cache factor 0.2)       (Sec. s:blocking_choose, footnote)
tau_smop = SMs x 32 banks x 4 B x boost clock                      (Sec. s:blocking_choose, footnote)
tau_l2   = L2 bytes per clock x boost clock                        (beyond the paper: strassenbench.model.memory)

and, beyond the paper, the dense TF32 and FP64 tensor-core peaks (NVIDIA's published figures for the built-in
GPUs; for a queried one, flops per SM and clock of its compute capability x SMs x boost clock), and the share of
the TF32 peak that Ampere's warp-level mma.sync reaches on the architecture (MMA_SYNC_TF32_SHARE).

All four are in units per second (flop/s, B/s). The V100 entry carries the paper's published values.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..device import hardware_figures, query_device
from ..families import MODES
from ..occupancy import ARCHS, ArchLimits

__all__ = ["GPUSpec", "SPECS", "get_gpu", "spec_from_attributes"]

# The L2's read bandwidth in bytes per clock, by architecture: NVIDIA's A100 whitepaper (2020) gives 5,120 for
# the A100 and 2,048 for the V100; NVIDIA publishes none for Hopper, so sm_90 takes the A100's (an assumption;
# strassenbench.model.memory)
L2_BYTES_PER_CLOCK = {"sm_70": 2048, "sm_80": 5120, "sm_90": 5120}
# The share of the dense TF32 peak that Ampere's warp-level mma.sync (the TF32 family's kernels) reaches, by
# architecture: all of it up to sm_80; on Hopper the full rate is the warpgroup wgmma's, and mma.sync issues at
# about half of it. An assumption, from public microbenchmarks of Hopper's tensor cores; this project's H100 and
# H200 data agree: CUTLASS's 3xTF32 SGEMM (mma.sync) at 62-67 TFLOPS is 186-200 TFLOPS of TF32 products, 0.38-0.40
# of the 494.7 TFLOPS peak at a power-capped clock (data/<gpu>/square.csv).
MMA_SYNC_TF32_SHARE = {"sm_90": 0.5}
READ_ONLY_CACHE_FACTOR = 0.2  # the paper's footnote: texture/read-only cache adds 20% to DRAM bandwidth
SMEM_BANKS = 32
SMEM_BANK_BYTES = 4


@dataclass(frozen=True)
class GPUSpec:
    name: str
    arch: str
    sm_count: int
    fp32_cores_per_sm: int
    fp64_cores_per_sm: int
    boost_clock_hz: float
    dram_bandwidth: float  # B/s
    source: str
    tau_smop_published: float | None = None  # a value the paper printed, used instead of the formula
    tf32_flops: float = 0.0  # dense TF32 tensor-core peak, flop/s (0: no TF32 tensor cores)
    fp64_tensor_flops: float = 0.0  # dense FP64 tensor-core (DMMA) peak, flop/s (0: none)

    @property
    def limits(self) -> ArchLimits:
        return ARCHS[self.arch]

    def tau_flop(self, dtype: str = "float32") -> float:
        cores = self.fp32_cores_per_sm if dtype == "float32" else self.fp64_cores_per_sm
        return 2.0 * cores * self.sm_count * self.boost_clock_hz

    def tau_tensor(self, mode: str) -> float:
        """The tensor cores' rate of the mode's useful flops: the TF32 rate of mma.sync (tf32_mma_sync_flops), a
        third of it for 3xTF32 (three products per product), the FP64 tensor peak for dmma, wgmma's the dense TF32
        peak; 0 without such tensor cores (or wgmma off sm_90)."""
        run = MODES[mode]  # the family's peak (Family.peak), per product of the mode (Mode.products)
        if not run.kernel_family.builds_for(self.arch):  # wgmma: sm_90a's only
            return 0.0
        return getattr(self, run.kernel_family.peak, 0.0) / run.products

    @property
    def tf32_mma_sync_flops(self) -> float:
        """The TF32 rate of warp-level mma.sync on this GPU: the dense TF32 peak x MMA_SYNC_TF32_SHARE."""
        return self.tf32_flops * MMA_SYNC_TF32_SHARE.get(self.arch, 1.0)

    @property
    def tau_gmop(self) -> float:
        return self.dram_bandwidth * (1.0 + READ_ONLY_CACHE_FACTOR)

    @property
    def tau_l2(self) -> float:
        """The L2's read bandwidth (B/s), this project's term: strassenbench.model.memory."""
        return L2_BYTES_PER_CLOCK[self.arch] * self.boost_clock_hz

    @property
    def tau_smop(self) -> float:
        if self.tau_smop_published is not None:
            return self.tau_smop_published
        return self.sm_count * SMEM_BANKS * SMEM_BANK_BYTES * self.boost_clock_hz


SPECS: dict[str, GPUSpec] = {
    # Tesla V100 SXM2 16 GB, the paper's GPU (Sec. s:volta): 80 SMs x 64 FP32 / 32 FP64 cores, 1.53 GHz boost,
    # 900 GB/s HBM2. tau_smop: the paper prints 15.30 TMOPS for 80 x 32 x 4 B x 1530 MHz = 15.67e12 B/s, i.e.
    # the same product in units of 1024 GB/s; we keep the printed value so the model reproduces its bounds.
    "V100": GPUSpec(
        "Tesla V100 SXM2 16GB", "sm_70", 80, 64, 32, 1.53e9, 900e9,
        "paper Sec. s:volta; NVIDIA Tesla V100 GPU Architecture whitepaper (2017)",
        tau_smop_published=15.30e12,
    ),
    # A100 SXM4 80 GB: 108 SMs x 64 FP32 / 32 FP64 cores, 1410 MHz boost (19.5 TFLOPS FP32, 9.7 FP64 non-tensor,
    # 19.5 FP64 tensor),
    # HBM2e 2,039 GB/s. NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020) and A100 datasheet (2021).
    "A100": GPUSpec(
        "A100 SXM4 80GB", "sm_80", 108, 64, 32, 1.41e9, 2039e9,
        "NVIDIA A100 architecture whitepaper (2020); A100 80GB datasheet",
        tf32_flops=156e12, fp64_tensor_flops=19.5e12,
    ),
    # H100 SXM5 80 GB: 132 SMs x 128 FP32 / 64 FP64 cores, 1980 MHz boost (67 TFLOPS FP32, 34 FP64 non-tensor,
    # 67 FP64 tensor),
    # HBM3 3.35 TB/s. NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022) and H100 datasheet.
    "H100": GPUSpec(
        "H100 SXM5 80GB", "sm_90", 132, 128, 64, 1.98e9, 3350e9,
        "NVIDIA H100 architecture whitepaper (2022); H100 SXM5 datasheet",
        tf32_flops=494.7e12, fp64_tensor_flops=66.9e12,
    ),
    # H200 SXM 141 GB: the H100 SXM's GH100 (132 SMs, 1980 MHz boost, the same FP32, FP64 and tensor-core peaks)
    # with 141 GB of HBM3e at 4.8 TB/s. NVIDIA H200 Tensor Core GPU datasheet (2024).
    "H200": GPUSpec(
        "H200 SXM 141GB", "sm_90", 132, 128, 64, 1.98e9, 4800e9,
        "NVIDIA H200 datasheet (2024); the rest as the H100 SXM5",
        tf32_flops=494.7e12, fp64_tensor_flops=66.9e12,
    ),
}


def spec_from_attributes(attrs: dict[str, int | float | str]) -> GPUSpec:
    """A spec from a device's attributes (the keys strassenbench.device.query_device reads; its
    hardware_figures: cores per SM by compute capability, DRAM bandwidth from the memory clock and bus)."""
    return GPUSpec(**hardware_figures(attrs))


def get_gpu(name: str) -> GPUSpec:
    """A built-in spec (V100, A100, H100, H200) or ``device`` for the visible GPU."""
    if name == "device":
        return GPUSpec(**query_device())
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"unknown GPU '{name}' (choose from {', '.join(SPECS)}, device)") from None

