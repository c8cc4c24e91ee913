"""The facts about GPUs that the analysis tools use, each with where it came from.

No silent fallback: an unknown name raises ``ValueError`` listing the known ones.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    name: str
    arch: str  # compute capability, "sm_90"
    sms: int
    l2_bytes: int
    smem_per_block: int  # largest dynamic shared memory one block may opt into
    smem_per_sm: int
    regs_per_sm: int  # 32-bit registers
    max_warps_per_sm: int
    max_threads_per_block: int
    source: str


GPUS: dict[str, GPU] = {
    "h200": GPU(
        name="NVIDIA H200", arch="sm_90", sms=132, l2_bytes=60 * 1024 * 1024,
        smem_per_block=232_448, smem_per_sm=233_472, regs_per_sm=65_536, max_warps_per_sm=64,
        max_threads_per_block=1024,
        source=("SMs and L2 measured 2026-10-28 with torch.cuda.get_device_properties on our H200 "
                "(60 MB L2); 232,448 bytes of shared memory per block: SPEC.md §4 (Triton's "
                "out-of-resources limit on the same machine); 228 KB per SM, registers, warps, "
                "threads: CUDA C++ Programming Guide, compute capability 9.0 table"),
    ),
    "rtx2070": GPU(
        name="NVIDIA GeForce RTX 2070", arch="sm_75", sms=36, l2_bytes=4 * 1024 * 1024,
        smem_per_block=65_536, smem_per_sm=65_536, regs_per_sm=65_536, max_warps_per_sm=32,
        max_threads_per_block=1024,
        source=("the spec's GPU (seeds/000): 36 SMs and 4 MB L2 from NVIDIA's Turing (TU106) "
                "specifications; 64 KB shared memory per block and per SM, registers, warps, "
                "threads: CUDA C++ Programming Guide, compute capability 7.5 table"),
    ),
}


def get_gpu(name: str) -> GPU:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise ValueError(f"gpu: unknown GPU {name!r}; known: {', '.join(sorted(GPUS))}") from None
