#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers: fuzz/corpus/npy_read/ and
fuzz/corpus/aclnn/. Run from anywhere; overwrites the files it names.

The aclnn seeds use the byte format decoded by fuzz/aclnn_fuzzer.cpp (see the
comment at its top): a header, one control byte per tensor (plus the bytes
it asks for), the phase-two byte, then one byte per element of every input
buffer."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------
# .npy seeds


def npy(descr, shape, payload, version=(1, 0), fortran=False, extra=b""):
    shape_txt = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_txt)
    len_bytes = 2 if version[0] == 1 else 4
    unpadded = 6 + 2 + len_bytes + len(d) + 1
    total = (unpadded + 63) // 64 * 64
    header = d + " " * (total - unpadded) + "\n"
    hl = struct.pack("<H" if len_bytes == 2 else "<I", len(header))
    return b"\x93NUMPY" + bytes(version) + hl + header.encode("latin-1") + payload + extra


def floats(fmt, values):
    return b"".join(struct.pack(fmt, v) for v in values)


NPY = {
    "f32_2x3_v1.npy": npy("<f4", (2, 3), floats("<f", [0, 1, -2.5, 3e38, float("inf"), float("nan")])),
    "f16_4_v2.npy": npy("<f2", (4,), floats("<e", [0, 1, -65504, 6e-8]), version=(2, 0)),
    "f64_scalar_v3.npy": npy("<f8", (), floats("<d", [1e-310]), version=(3, 0)),
    "f32_empty_0x5.npy": npy("<f4", (0, 5), b""),
    "f64_8dims.npy": npy("<f8", (1, 1, 1, 1, 1, 1, 1, 2), floats("<d", [1, 2])),
    "f32_grid_1x2x2x2.npy": npy("<f4", (1, 2, 2, 2), floats("<f", [-1, -1, 1, -1, -1, 1, 1, 1])),
    "bad_big_endian.npy": npy(">f4", (1,), floats(">f", [1])),
    "bad_fortran.npy": npy("<f4", (2, 2), floats("<f", [1, 2, 3, 4]), fortran=True),
    "bad_truncated.npy": npy("<f8", (3,), floats("<d", [1, 2])),
    "bad_int.npy": npy("<i4", (2,), struct.pack("<ii", 1, 2)),
    "bad_huge_shape.npy": npy("<f8", (1 << 40, 1 << 30), b""),
    # A volume and its grid, as the command-line tool reads them.
    "f32_volume_1x1x2x2x3.npy": npy("<f4", (1, 1, 2, 2, 3), floats("<f", range(12))),
    "f64_volume_grid_1x1x1x2x3.npy": npy("<f8", (1, 1, 1, 2, 3), floats("<d", [-1, 0, 1, 0.5, -0.5, 0.25])),
}

# ---------------------------------------------------------------------------
# aclnn seeds

F16, BF16, F32, F64 = 0, 1, 2, 3
BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
# decode_dim's table of hostile values, by index (a byte b >= 224 picks
# kHuge[b % 16]).
HUGE = {-1: 0, -2: 1, 7: 2, 16: 3, 65537: 4, 1 << 31: 5, (1 << 32) + 1: 6, 1 << 40: 7}


def dim(v):
    if 0 <= v < 7:
        return v
    idx = HUGE[v]
    return next(b for b in range(224, 256) if b % 16 == idx)


def flags(forward=False, align=False, raw=False, mask=None, mask3=False, threads=False):
    f = int(forward) | int(align) << 1 | int(raw) << 2 | int(threads) << 7
    if mask is not None:
        f |= 8 | int(mask[0]) << 4 | int(mask[1]) << 5
    if mask3:
        f |= 64
    return f


def grid_byte(v):
    """A byte decoding to the lattice value v in [-2, 2)."""
    b = int(round(v * 32)) + 64
    assert 0 <= b < 128 and (b - 64) / 32 == v
    return b


def value_byte(v):
    """A byte decoding to the input value v (a multiple of 1/16 in [-8, 8))."""
    return struct.pack("b", int(round(v * 16)))[0]


VOLUME = 4  # dtype byte bit: the 3-D operators


def case(fl, mode, pad, dtype, dims, tensors, phase2, values):
    """dims: (N, C, Hin, Win, Hout, Wout) for images; volumes (dtype | VOLUME)
    append (Din, Dout)."""
    assert len(dims) == (8 if dtype & VOLUME else 6)
    out = bytes([fl, mode, pad, dtype] + [dim(d) for d in dims])
    for t in tensors:
        out += bytes(t)
    return out + bytes([phase2]) + bytes(values)


def lattice(count, seed):
    vals = [(-1.1 + 2.2 * ((i * 7 + seed) % 23) / 22) for i in range(count)]
    return [grid_byte(round(v * 32) / 32) for v in vals]


def plain(count, seed):
    return [value_byte(((i * 5 + seed) % 31 - 15) / 8) for i in range(count)]


def backward_values(n, c, hin, win, hout, wout, seed=1):
    return plain(n * c * hout * wout, seed) + plain(n * c * hin * win, seed + 1) + lattice(n * hout * wout * 2, seed)


def backward_values_3d(n, c, hin, win, hout, wout, din, dout, seed=1):
    """gradOutput, input and grid of a volume call (dims in case()'s order)."""
    pout, pin = dout * hout * wout, din * hin * win
    return plain(n * c * pout, seed) + plain(n * c * pin, seed + 1) + lattice(n * pout * 3, seed)


ACLNN = {}
d = (1, 2, 4, 5, 3, 3)
ACLNN["bwd_f32_bilinear_zeros"] = case(flags(), BILINEAR, ZEROS, F32, d, [[0]] * 5, 0, backward_values(*d))
d = (2, 3, 5, 4, 2, 3)
ACLNN["bwd_f16_bicubic_reflection_align_channels_last_dx_only"] = case(
    flags(align=True, mask=(True, False)), BICUBIC, REFLECTION, F16, d,
    [[0], [1, 5], [0], [1, 5], [0]], 0, backward_values(*d, seed=3))
d = (1, 1, 3, 3, 2, 4)
hard = [128 + i for i in (0, 2, 3, 4, 5, 14, 16, 17, 18, 19, 26, 29, 49, 50, 51, 52)]
ACLNN["fwd_f64_nearest_border_hard_grid"] = case(
    flags(forward=True), NEAREST, BORDER, F64, d, [[0], [0], [0]], 0, plain(9, 2) + hard)
d = (1, 2, 3, 4, 2, 2)
neg = [2, 24, 12, 4, 0xFF]  # explicit strides (24, 12, 4, -1)
ACLNN["bwd_bf16_bilinear_border_negative_strides"] = case(
    flags(), BILINEAR, BORDER, BF16, d, [[0], neg, [0], neg, [0]], 0, backward_values(*d, seed=5))
d = (1, 2, 3, 3, 2, 2)
ACLNN["bwd_dx_aliases_input"] = case(
    flags(), BILINEAR, ZEROS, F32, d, [[0], [0], [0], [64, 64], [0]], 0, backward_values(*d))
ACLNN["bwd_unknown_mode"] = case(flags(), 200, ZEROS, F32, d, [[0]] * 5, 0, backward_values(*d))
d = (1, 2, 3, 3, 2, 2)
ACLNN["fwd_null_strides_reflection"] = case(
    flags(forward=True, align=True), BILINEAR, REFLECTION, F32, d, [[3], [3], [3]], 0,
    plain(18, 4) + lattice(8, 2))
d = (2, 2, 3, 4, 3, 2)
ACLNN["bwd_f16_short_workspace_then_reuse"] = case(
    flags(), BICUBIC, BORDER, F16, d, [[0]] * 5, 2 | 16, backward_values(*d))
d = (0, 2, 3, 4, 3, 2)
ACLNN["bwd_empty_batch"] = case(flags(), BILINEAR, ZEROS, F32, d, [[0]] * 5, 0, [])
d = (1, 1, 2, 2, 2, 2)
ACLNN["bwd_raw_values_nearest"] = case(
    flags(raw=True, mask=(False, True)), NEAREST, REFLECTION, F32, d, [[0]] * 5, 4,
    list(range(256))[::7])
d = (1, 3, 4, 4, 3, 3)
ACLNN["bwd_f64_bicubic_zeros_threads_created_stream"] = case(
    flags(threads=True), BICUBIC, ZEROS, F64, d, [[0]] * 5, 4, backward_values(*d, seed=9))
d = (1, 2, 3, 3, 2, 2)
ACLNN["bwd_dgrid_overlaps_dx"] = case(
    flags(), BILINEAR, ZEROS, F32, d, [[0], [0], [0], [0], [64, 67]], 0, backward_values(*d))

# Volumes: the 3-D operators (dims N, C, Hin, Win, Hout, Wout, Din, Dout).
d = (1, 2, 4, 5, 3, 2, 3, 2)
ACLNN["bwd3d_f32_trilinear_zeros"] = case(flags(), BILINEAR, ZEROS, F32 | VOLUME, d, [[0]] * 5, 0,
                                          backward_values_3d(*d))
d = (2, 3, 3, 4, 2, 3, 2, 2)
ACLNN["bwd3d_f16_tricubic_reflection_align_ndhwc_dx_only"] = case(
    flags(align=True, mask=(True, False)), BICUBIC, REFLECTION, F16 | VOLUME, d,
    [[0], [1, 1], [0], [1, 1], [0]], 0, backward_values_3d(*d, seed=3))
d = (1, 1, 3, 3, 2, 2, 2, 2)
ACLNN["fwd3d_f64_nearest_border_hard_grid"] = case(
    flags(forward=True), NEAREST, BORDER, F64 | VOLUME, d, [[0], [0], [0]], 0, plain(18, 2) + hard + hard[:8])
d = (1, 2, 3, 4, 2, 2, 2, 2)
neg5 = [2, 72, 24, 12, 4, 0xFF]  # explicit strides (72, 24, 12, 4, -1)
ACLNN["bwd3d_bf16_trilinear_border_negative_strides"] = case(
    flags(), BILINEAR, BORDER, BF16 | VOLUME, d, [[0], neg5, [0], neg5, [0]], 0, backward_values_3d(*d, seed=5))
d = (2, 2, 3, 4, 3, 2, 2, 2)
ACLNN["bwd3d_f16_tricubic_short_workspace_then_reuse"] = case(
    flags(), BICUBIC, BORDER, F16 | VOLUME, d, [[0]] * 5, 2 | 16, backward_values_3d(*d))
d = (1, 2, 3, 3, 2, 2, 3, 0)
ACLNN["bwd3d_empty_output_depth"] = case(flags(), BILINEAR, ZEROS, F32 | VOLUME, d, [[0]] * 5, 0, [])
d = (1, 2, 3, 3, 2, 2, 2, 2)
ACLNN["bwd3d_executor_to_2d_operator"] = case(flags(), BILINEAR, ZEROS, F32 | VOLUME, d, [[0]] * 5, 64,
                                              backward_values_3d(*d))
ACLNN["bwd3d_grid_last_dim_2"] = case(flags(), BILINEAR, ZEROS, F32 | VOLUME, d,
                                      [[0], [0], [4, 4, 2], [0], [0]], 0, backward_values_3d(*d))
ACLNN["fwd3d_rank4_output"] = case(flags(forward=True), BILINEAR, ZEROS, F32 | VOLUME, d, [[0], [0], [8, 4]], 0,
                                   plain(36, 1) + lattice(24, 1))
d = (1, 3, 4, 4, 3, 3, 2, 2)
ACLNN["bwd3d_f64_trilinear_reflection_threads_created_stream"] = case(
    flags(threads=True), BILINEAR, REFLECTION, F64 | VOLUME, d, [[0]] * 5, 4, backward_values_3d(*d, seed=9))


# Inputs that once failed, written by hand (the fuzzer's own findings are
# committed as it saved them, under fuzz/regressions/<name>/ too).
REGRESSIONS = {}
d = (1, 2, 3, 3, 2, 2)
# A grid dtype code of 100 (aclDataType's C++ range is [-32, 31]).
REGRESSIONS["dtype_code_outside_enum_range"] = case(
    flags(), BILINEAR, ZEROS, F32, d, [[0], [0], [16, 140], [0], [0]], 0, backward_values(*d))
# A grid format code of 29 (aclFormat's C++ range is [-4, 3]).
REGRESSIONS["format_code_outside_enum_range"] = case(
    flags(), BILINEAR, ZEROS, F32, d, [[0], [0], [32, 192], [0], [0]], 0, backward_values(*d))


def main():
    folder = os.path.join(HERE, "regressions", "aclnn")
    os.makedirs(folder, exist_ok=True)
    for name, data in REGRESSIONS.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    for sub, files in (("npy_read", NPY), ("aclnn", ACLNN)):
        folder = os.path.join(HERE, "corpus", sub)
        os.makedirs(folder, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        print("%s: %d files in %s" % (sub, len(files), folder))


if __name__ == "__main__":
    main()
