"""strassenbench.fused.sass reads the scheduling control bits of Volta+ machine code: which instruction waits
for which load, and the main loop's per-slice figures."""

from __future__ import annotations

from strassenbench.fused.build import sass_counts
from strassenbench.fused.sass import mainloop_metrics, mma_macs, parse_sass


def control(wbar: int = 7, wait: int = 0, stall: int = 1) -> int:
    """The high word of an instruction: stall 41-44, yield 45, write scoreboard 46-48, read 49-51, wait 52-57."""
    return stall << 41 | 1 << 45 | wbar << 46 | 7 << 49 | wait << 52


def listing(function: str, program: list[tuple[str, int]]) -> str:
    lines = [f"        Function : {function}"]
    for i, (text, hi) in enumerate(program):
        lines.append(f"        /*{16 * i:04x}*/                   {text} ;    /* 0x{i:016x} */")
        lines.append(f"                                                     /* 0x{hi:016x} */")
    return "\n".join(lines)


def loop_program(ahead: int) -> list[tuple[str, int]]:
    """A k_S slice: a global load on scoreboard 2, `ahead` FFMAs, its use, a generic load used at once, a
    barrier, the backward branch."""
    body = [("@P0 LDG.E.128 R4, desc[UR4][R2.64]", control(wbar=2))]
    body += [("FFMA R10, R11, R12, R10", control())] * ahead
    body += [("STS.128 [R0], R4", control(wait=1 << 2)),
             ("LD.E R8, [R6.64]", control(wbar=3)),
             ("FADD R9, R8, R8", control(wait=1 << 3)),
             ("BAR.SYNC.DEFER_BLOCKING 0x0", control())]
    program = [("MOV R1, RZ", control())] + body
    program.append((f"@P1 BRA 0x{16:x}", control()))  # back to the load
    program.append(("EXIT", control()))
    return program


def test_control_bits_decoded() -> None:
    code = parse_sass(listing("k", loop_program(3)))["k"]
    load = code[1]
    assert load.opcode == "LDG.E.128" and load.predicated and load.write_barrier == 2 and load.wait_mask == 0
    use = next(ins for ins in code if ins.base == "STS")
    assert use.waits_on(2) and not use.waits_on(3) and use.write_barrier is None


def test_mainloop_metrics_per_slice() -> None:
    metrics = mainloop_metrics(parse_sass(listing("k", loop_program(250)))["k"])
    body = 1 + 250 + 4 + 1  # load, FFMAs, use, generic load, its use, barrier, branch
    assert metrics["loop_instructions"] == body and metrics["loop_barriers"] == 1
    assert metrics["loop_ffma_share"] == round(250 / body, 4)
    assert metrics["loop_global_loads"] == 2 and metrics["loop_generic_loads"] == 1
    assert metrics["load_use_distance"] == 0  # the generic load's use follows it at once


def test_mma_of_every_shape_counted_by_its_multiply_adds() -> None:
    """sm_80's DMMA.884 and TF32 HMMA, and sm_90's DMMA.16x8x16 (a lower-case x in the opcode): each mma's
    multiply-adds are m n k of its shape, so kernels issuing mma of different shapes compare by work; an unknown
    shape gives no figure rather than a wrong one."""
    assert [mma_macs(op) for op in ("DMMA.884", "HMMA.1684.F32.TF32", "HMMA.1688.F32.TF32", "DMMA.16x8x8",
                                    "DMMA.16x8x16")] == [256, 512, 1024, 1024, 2048]
    assert mma_macs("HMMA.F32") is None and mma_macs("DMMA") is None
    for opcode, macs in (("DMMA.884", 256), ("DMMA.16x8x16", 2048)):
        program = loop_program(0)
        program[2:2] = [(f"{opcode} R8, R12, R16, R8", control())] * 8
        code = parse_sass(listing("k", program))["k"]
        assert any(ins.opcode == opcode for ins in code)
        metrics = mainloop_metrics(code)
        assert metrics["loop_hmma"] == 8 and metrics["loop_mma_macs"] == 8 * macs


def test_the_main_loop_is_the_one_with_a_barrier() -> None:
    """A write-back loop after the main loop with more FFMAs but no barrier (a kernel writing 16 blocks of C)
    is not the main loop."""
    program = loop_program(250)[:-1]  # the main loop, without its EXIT
    start = len(program)
    program += [("LDG.E R20, desc[UR4][R22.64]", control(wbar=4))]
    program += [("FFMA R21, R20, R12, R21", control(wait=1 << 4))] + [("FFMA R10, R11, R12, R10", control())] * 399
    program += [(f"@P2 BRA 0x{16 * start:x}", control()), ("EXIT", control())]
    metrics = mainloop_metrics(parse_sass(listing("k", program))["k"])
    assert metrics["loop_barriers"] == 1 and metrics["loop_instructions"] == 1 + 250 + 4 + 1


def test_load_use_distance_follows_the_loop_around() -> None:
    """A load whose use is in the next iteration (a prefetch) counts the instructions around the back edge."""
    program = [("MOV R1, RZ", control()),
               ("FFMA R10, R11, R12, R10", control()),
               ("STS.128 [R0], R4", control(wait=1 << 2)),  # waits for last iteration's load
               ("FFMA R10, R11, R12, R10", control()),
               ("LDG.E.128 R4, desc[UR4][R2.64]", control(wbar=2)),
               ("FFMA R10, R11, R12, R10", control()),
               ("BAR.SYNC.DEFER_BLOCKING 0x0", control()),
               ("BRA 0x10", control()),
               ("EXIT", control())]
    metrics = mainloop_metrics(parse_sass(listing("k", program))["k"])
    assert metrics["load_use_distance"] == 4  # FFMA, BAR, BRA, then the first FFMA, before the STS


def test_no_loop_gives_empty_metrics() -> None:
    metrics = mainloop_metrics(parse_sass(listing("k", [("FFMA R1, R2, R3, R1", control()), ("EXIT", control())]))["k"])
    assert all(value is None for value in metrics.values())


def test_sass_counts() -> None:
    program = [("LDS.128 R4, [R2+0x10]", control()), ("LDS R8, [R2]", control()),
               ("@P0 LDG.E.128 R12, desc[UR4][R6.64]", control(wbar=1)), ("FFMA R1, R2, R3, R1", control()),
               ("STL [R1], R2", control())]
    counts = sass_counts(listing("k1", program) + "\n" + listing("k2", [("DFMA R2, R4, R6, R2", control())]))
    assert counts["k1"] == {"lds128": 1, "lds_other": 1, "ldg": 1, "ffma": 1, "local_mem_ops": 1}
    assert counts["k2"] == {"ffma": 1}
