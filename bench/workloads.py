"""Named real workloads for bench/compare_torch.py: shapes, options and grids
of the grid_sample calls that models and tools make, each with where it comes
from. A plain data module: numpy only (no torch), so that the generated inputs
are the same bytes for every side that times them.

Each Workload gives N, C, Hin, Win, Hout, Wout, the grid kind (how the grid is
made, GRID_KINDS below), mode, padding, align_corners, dtype (f32, f64, f16,
bf16) and layout (nchw, or nhwc = channels-last memory for input, grad,
output and dx). make_inputs() draws input, grid and grad from a fixed seed.

Sizes are picked so that one backward call stays within tens of
milliseconds on a 2-core machine for the slowest side (torch 1.13), so the
whole suite runs in a few minutes.
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    name: str
    origin: str
    shape: tuple  # N, C, Hin, Win, Hout, Wout
    grid: str  # a key of GRID_KINDS
    mode: str = "bilinear"
    padding: str = "zeros"
    align_corners: bool = False
    dtype: str = "f32"
    layout: str = "nchw"

    def label(self):
        n, c, hi, wi, ho, wo = self.shape
        extra = "" if self.layout == "nchw" else f" {self.layout}"
        return (f"{self.name} ({n},{c},{hi}x{wi}->{ho}x{wo} {self.grid} {self.mode} {self.padding} "
                f"{str(self.align_corners).lower()} {self.dtype}{extra})")


WORKLOADS = [
    # -- The five named in the plan, shapes fixed.
    Workload("stn_digits", "spatial transformer network on 32x32 digits (MNIST/SVHN STN tutorials): "
             "affine_grid of a predicted theta, then grid_sample", (512, 1, 32, 32, 32, 32), "affine"),
    Workload("raft_corr_lookup", "RAFT-style optical flow: a 7x7 window (radius 3) of the correlation volume "
             "around each source pixel's flow target; one batch item per pixel of a 32x48 feature map",
             (4096, 1, 32, 48, 7, 7), "window", align_corners=True),
    Workload("registration_grey_768", "2-D image registration (VoxelMorph/airlab style): a grey 768x768 image "
             "warped by a smooth dense displacement, border padding", (1, 1, 768, 768, 768, 768), "smooth",
             padding="border", align_corners=True),
    Workload("registration_rgb_384", "registration / elastic warping of an RGB image pair, reflection padding",
             (2, 3, 384, 384, 384, 384), "smooth", padding="reflection"),
    Workload("feature_plane_points", "NeRF feature planes (TensoRF, EG3D tri-planes, K-planes): 131072 ray "
             "samples read from one 64-channel 256x256 plane, grid (1, 1, P, 2)",
             (1, 64, 256, 256, 1, 131072), "points"),
    # -- 1-3 channel registration and warping, 256^2 to 1024^2.
    Workload("voxelmorph_256", "VoxelMorph 2-D SpatialTransformer: a batch of grey 256x256 scans warped by a "
             "smooth field (its defaults: zeros padding, align_corners=True)", (8, 1, 256, 256, 256, 256),
             "smooth", align_corners=True),
    Workload("vecint_2d", "VoxelMorph's diffeomorphic integration (VecInt, scaling and squaring): a 2-channel "
             "velocity field warped by itself, 7 times per step, through the same SpatialTransformer (zeros, "
             "align_corners=True)", (8, 2, 256, 256, 256, 256), "smooth", align_corners=True),
    Workload("elastic_rgb_1024", "elastic-deformation augmentation of a 1-megapixel RGB photo",
             (1, 3, 1024, 1024, 1024, 1024), "smooth", padding="border"),
    # -- Many tiny images.
    Workload("cifar_stn", "spatial transformer in front of a CIFAR classifier: 32x32 RGB, batch 256",
             (256, 3, 32, 32, 32, 32), "affine"),
    Workload("augment_64", "random-affine augmentation (kornia-style warp_affine) of a batch of "
             "64x64 RGB crops, reflection padding", (128, 3, 64, 64, 64, 64), "affine",
             padding="reflection"),
    # -- Thousands of batch items, tiny outputs.
    Workload("raft_corr_lookup_9x9", "RAFT correlation pyramid, a coarse level (8x12) with radius 4: 9x9 "
             "windows, one batch item per pixel", (4096, 1, 8, 12, 9, 9), "window", align_corners=True),
    Workload("ram_glimpse", "recurrent visual attention (RAM/DRAW-style glimpses): an 8x8 patch around one "
             "location of each 28x28 digit", (4096, 1, 28, 28, 8, 8), "window"),
    # -- Point sampling.
    Workload("superpoint_descriptors", "SuperPoint/DISK keypoint descriptors: 1024 keypoints read from a "
             "256-channel 60x80 descriptor map (align_corners=True)", (1, 256, 60, 80, 1, 1024), "points",
             align_corners=True),
    Workload("tensorf_plane", "TensoRF density plane: 65536 samples from a 16-component 300x300 plane, grid "
             "(1, P, 1, 2) as TensoRF shapes it, align_corners=True", (1, 16, 300, 300, 65536, 1), "points",
             align_corners=True),
    # -- Down- and up-sampling (a resize expressed as a grid).
    Workload("downsample_2x", "2x down-scaling of RGB images with an identity grid (resize via grid_sample)",
             (8, 3, 512, 512, 256, 256), "resize", padding="border"),
    Workload("downsample_4x_bicubic", "4x bicubic down-scaling of a 1024x1024 RGB image",
             (2, 3, 1024, 1024, 256, 256), "resize", mode="bicubic", padding="border"),
    Workload("upsample_2x_bicubic", "2x bicubic up-scaling (super-resolution baselines), reflection padding",
             (2, 3, 192, 192, 384, 384), "resize", mode="bicubic", padding="reflection", align_corners=True),
    # -- Coordinates far beyond the image: border and reflection do the work.
    Workload("far_reflection", "zoomed-out augmentation (scale 2.5-4) with reflection padding: most samples "
             "fold back several times", (16, 3, 128, 128, 128, 128), "far_affine", padding="reflection",
             align_corners=True),
    Workload("far_border_bicubic", "bicubic with border padding on coordinates in [-4, 4] (tiling/"
             "out-of-frame sampling)", (8, 3, 128, 128, 128, 128), "far_uniform", mode="bicubic",
             padding="border"),
    Workload("far_reflection_nearest", "nearest with reflection padding on coordinates in [-4, 4] (label/"
             "mask warping in segmentation augmentation)", (8, 3, 256, 256, 256, 256), "far_uniform",
             mode="nearest", padding="reflection"),
    # -- Channels-last.
    Workload("flow_warp_nhwc", "video super-resolution feature alignment (BasicVSR flow_warp: zeros, "
             "align_corners=True) on a channels-last 64-channel feature map", (4, 64, 64, 64, 64, 64),
             "smooth", align_corners=True, layout="nhwc"),
    Workload("augment_rgb_nhwc", "random-affine augmentation of channels-last RGB images (a model trained "
             "in channels_last memory format)", (64, 3, 128, 128, 128, 128), "affine", padding="reflection",
             layout="nhwc"),
    # -- float64.
    Workload("registration_f64", "image registration in double precision (scientific/medical pipelines, "
             "gradcheck-style tests)", (1, 1, 512, 512, 512, 512), "smooth", padding="border",
             align_corners=True, dtype="f64"),
    # -- 16-bit floats.
    Workload("cifar_stn_bf16", "the CIFAR spatial transformer under CPU autocast (bfloat16)",
             (256, 3, 32, 32, 32, 32), "affine", dtype="bf16"),
    Workload("flow_warp_f16", "flow-based feature warping in float16 (mixed-precision video models)",
             (4, 32, 128, 128, 128, 128), "smooth", align_corners=True, dtype="f16"),
    # -- Uniformly random grids (the old benchmark's data): no locality at all.
    Workload("uniform_bilinear", "uniformly random grid in [-1.1, 1.1], the classic synthetic benchmark",
             (8, 16, 64, 64, 64, 64), "uniform"),
    Workload("uniform_bicubic", "uniformly random grid in [-1.1, 1.1], bicubic", (4, 8, 64, 64, 64, 64),
             "uniform", mode="bicubic"),
]

DTYPE_SIZES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}


def bytes_moved(w, op):
    """Bytes of every input and output once each, as `gridsampler bench`
    counts them: forward reads input and grid and writes the output; backward
    reads grad, input and grid and writes dx and dgrid."""
    n, c, hi, wi, ho, wo = w.shape
    x, g, y = n * c * hi * wi, n * ho * wo * 2, n * c * ho * wo
    count = x + g + y if op == "forward" else y + 2 * x + 2 * g
    return count * DTYPE_SIZES[w.dtype]


# ---------------------------------------------------------------------------
# Grids. Every generator returns float64 (N, Hout, Wout, 2), (x, y) order.

def base_coords(size, align_corners):
    """The normalised coordinates of a size-pixel axis as affine_grid makes
    them: pixel centres at -1 and 1 with align_corners, else the centres of
    size cells that tile [-1, 1] ((2i + 1) / size - 1)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
    return (2.0 * np.arange(size) + 1.0) / size - 1.0


def affine_grid(theta, h, w, align_corners):
    """F.affine_grid for 2-D: each output pixel's base (x, y, 1) times
    theta[n] (2x3)."""
    xs, ys = base_coords(w, align_corners), base_coords(h, align_corners)
    base = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], np.ones((h, w))), axis=-1)  # (H, W, 3)
    return np.einsum("hwk,njk->nhwj", base, theta)


def random_theta(rng, n, scale_lo, scale_hi):
    """Rotation in +-0.1 rad, scale in [scale_lo, scale_hi], shift in +-0.05:
    the mild transforms a trained STN or an augmentation pipeline produces."""
    angle = rng.uniform(-0.1, 0.1, n)
    scale = rng.uniform(scale_lo, scale_hi, n)
    shift = rng.uniform(-0.05, 0.05, (n, 2))
    cos, sin = scale * np.cos(angle), scale * np.sin(angle)
    return np.stack([np.stack([cos, -sin, shift[:, 0]], -1), np.stack([sin, cos, shift[:, 1]], -1)], 1)


def upsample_bilinear(field, h, w):
    """(N, K, h0, w0) -> (N, K, h, w) by bilinear interpolation with
    half-pixel centres and clamped edges (F.interpolate's bilinear,
    align_corners=False)."""
    def axis(src, dst):
        pos = np.clip((np.arange(dst) + 0.5) * src / dst - 0.5, 0, src - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, src - 1)
        return lo, hi, pos - lo
    y0, y1, fy = axis(field.shape[2], h)
    x0, x1, fx = axis(field.shape[3], w)
    rows = field[:, :, y0, :] * (1 - fy)[:, None] + field[:, :, y1, :] * fy[:, None]
    return rows[:, :, :, x0] * (1 - fx) + rows[:, :, :, x1] * fx


def grid_affine(rng, w):
    n, _, _, _, ho, wo = w.shape
    return affine_grid(random_theta(rng, n, 0.9, 0.9), ho, wo, w.align_corners)


def grid_far_affine(rng, w):
    # Scale 2.5-4: the output covers [-4, 4] of the input, mostly outside it.
    n, _, _, _, ho, wo = w.shape
    return affine_grid(random_theta(rng, n, 2.5, 4.0), ho, wo, w.align_corners)


def grid_resize(rng, w):
    # The identity transform at the output size: a plain resize.
    n, _, _, _, ho, wo = w.shape
    theta = np.broadcast_to(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (n, 2, 3))
    return affine_grid(theta, ho, wo, w.align_corners)


def grid_smooth(rng, w):
    # Identity plus a displacement that varies over ~16 pixels: what a
    # registration network or an elastic augmentation produces.
    n, _, _, _, ho, wo = w.shape
    theta = np.broadcast_to(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (n, 2, 3))
    field = rng.standard_normal((n, 2, max(1, ho // 16), max(1, wo // 16))) * 0.05
    return affine_grid(theta, ho, wo, w.align_corners) + upsample_bilinear(field, ho, wo).transpose(0, 2, 3, 1)


def grid_window(rng, w):
    # A k x k lattice, spacing 0.04, around one random centre per batch item.
    n, _, _, _, ho, wo = w.shape
    centre = rng.uniform(-1.0, 1.0, (n, 1, 1, 2))
    dx = (np.arange(wo) - (wo - 1) / 2) * 0.04
    dy = (np.arange(ho) - (ho - 1) / 2) * 0.04
    offsets = np.stack(np.broadcast_arrays(dx[None, :], dy[:, None]), axis=-1)  # (Hout, Wout, 2)
    return centre + offsets[None]


def grid_points(rng, w):
    n, _, _, _, ho, wo = w.shape
    return rng.uniform(-1.0, 1.0, (n, ho, wo, 2))


def grid_uniform(rng, w):
    n, _, _, _, ho, wo = w.shape
    return rng.uniform(-1.1, 1.1, (n, ho, wo, 2))


def grid_far_uniform(rng, w):
    n, _, _, _, ho, wo = w.shape
    return rng.uniform(-4.0, 4.0, (n, ho, wo, 2))


GRID_KINDS = {
    "affine": grid_affine,
    "far_affine": grid_far_affine,
    "resize": grid_resize,
    "smooth": grid_smooth,
    "window": grid_window,
    "points": grid_points,
    "uniform": grid_uniform,
    "far_uniform": grid_far_uniform,
}


def round_to_bf16(a):
    """float32 values rounded (to nearest even) to ones bfloat16 holds, so
    that every side's conversion to bfloat16 is exact."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def file_dtype(dtype):
    """The .npy dtype a workload's files are stored in (.npy has no
    bfloat16: bf16 data is stored as float32 holding bfloat16 values)."""
    return {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64}[dtype]


def make_inputs(w, seed=1):
    """input (N, C, Hin, Win), grid (N, Hout, Wout, 2), grad (N, C, Hout,
    Wout) as C-order arrays of file_dtype(w.dtype); input and grad uniform in
    [-1, 1]."""
    n, c, hi, wi, ho, wo = w.shape
    rng = np.random.default_rng(seed)
    grid = GRID_KINDS[w.grid](rng, w)
    assert grid.shape == (n, ho, wo, 2), (w.name, grid.shape)
    arrays = {"input": rng.uniform(-1, 1, (n, c, hi, wi)), "grid": grid, "grad": rng.uniform(-1, 1, (n, c, ho, wo))}
    for k, a in arrays.items():
        a = np.ascontiguousarray(a, dtype=file_dtype(w.dtype))
        arrays[k] = round_to_bf16(a) if w.dtype == "bf16" else a
    return arrays


# ---------------------------------------------------------------------------
# Volumes (5-D grid_sample): the cases of the volumes issue. Shapes are
# (N, C, Din, Hin, Win, Dout, Hout, Wout); grids (N, Dout, Hout, Wout, 3) in
# (x, y, z) order; layout ncdhw or ndhwc (channels_last_3d for input, grad,
# output and dx).

@dataclass(frozen=True)
class VolumeWorkload:
    name: str
    origin: str
    shape: tuple  # N, C, Din, Hin, Win, Dout, Hout, Wout
    grid: str  # a key of VOLUME_GRID_KINDS
    mode: str = "bilinear"
    padding: str = "zeros"
    align_corners: bool = False
    dtype: str = "f32"
    layout: str = "ncdhw"

    def label(self):
        n, c, di, hi, wi, do, ho, wo = self.shape
        extra = "" if self.layout == "ncdhw" else f" {self.layout}"
        return (f"{self.name} ({n},{c},{di}x{hi}x{wi}->{do}x{ho}x{wo} {self.grid} {self.mode} {self.padding} "
                f"{str(self.align_corners).lower()} {self.dtype}{extra})")


VOLUME_WORKLOADS = [
    VolumeWorkload("registration_volume_128", "3-D registration (VoxelMorph SpatialTransformer, MONAI Warp): one "
                   "grey 128^3 volume warped by a smooth displacement (identity plus a (1, 3, 8, 8, 8) normal "
                   "field x 0.05 upsampled trilinearly)", (1, 1, 128, 128, 128, 128, 128, 128), "smooth",
                   padding="border", align_corners=True),
    VolumeWorkload("vecint_volume", "VoxelMorph's 3-D diffeomorphic integration (VecInt, scaling and squaring "
                   "at half resolution): a 3-channel velocity field warped by itself (zeros, align_corners=True)",
                   (1, 3, 80, 96, 112, 80, 96, 112), "smooth", align_corners=True),
    VolumeWorkload("features_16ch", "volumetric feature warping (3-D U-Net / video feature alignment): "
                   "16 channels, 64^3, zeros padding", (2, 16, 64, 64, 64, 64, 64, 64), "smooth"),
    VolumeWorkload("labels_nearest", "label-map warping with nearest (segmentation augmentation)",
                   (4, 8, 48, 48, 48, 48, 48, 48), "smooth", mode="nearest"),
    VolumeWorkload("tricubic_4ch", "tricubic resampling (MONAI's bicubic mode on volumes)",
                   (1, 4, 48, 48, 48, 48, 48, 48), "smooth", mode="bicubic", padding="border", align_corners=True),
    VolumeWorkload("registration_f64", "3-D registration in double precision, 3 channels",
                   (1, 3, 64, 64, 64, 64, 64, 64), "smooth", padding="border", align_corners=True, dtype="f64"),
    VolumeWorkload("features_ndhwc", "16-channel features in channels_last_3d memory",
                   (2, 16, 48, 48, 48, 48, 48, 48), "smooth", layout="ndhwc"),
]


def volume_bytes_moved(w, op):
    """bytes_moved for volumes (grids of 3 components)."""
    n, c, di, hi, wi, do, ho, wo = w.shape
    x, g, y = n * c * di * hi * wi, n * do * ho * wo * 3, n * c * do * ho * wo
    count = x + g + y if op == "forward" else y + 2 * x + 2 * g
    return count * DTYPE_SIZES[w.dtype]


def upsample_trilinear(field, d, h, w):
    """(N, K, d0, h0, w0) -> (N, K, d, h, w), trilinear with half-voxel
    centres and clamped edges (F.interpolate's trilinear, align_corners=False)."""
    def axis(src, dst):
        pos = np.clip((np.arange(dst) + 0.5) * src / dst - 0.5, 0, src - 1)
        lo = np.floor(pos).astype(np.int64)
        return lo, np.minimum(lo + 1, src - 1), pos - lo
    z0, z1, fz = axis(field.shape[2], d)
    y0, y1, fy = axis(field.shape[3], h)
    x0, x1, fx = axis(field.shape[4], w)
    f = field[:, :, z0] * (1 - fz)[:, None, None] + field[:, :, z1] * fz[:, None, None]
    f = f[:, :, :, y0] * (1 - fy)[:, None] + f[:, :, :, y1] * fy[:, None]
    return f[..., x0] * (1 - fx) + f[..., x1] * fx


def identity_grid_3d(n, d, h, w, align_corners):
    xs, ys, zs = (base_coords(s, align_corners) for s in (w, h, d))
    g = np.stack(np.broadcast_arrays(xs[None, None, :], ys[None, :, None], zs[:, None, None]), axis=-1)
    return np.broadcast_to(g, (n, d, h, w, 3))


def grid_smooth_3d(rng, w):
    n, _, _, _, _, do, ho, wo = w.shape
    field = rng.standard_normal((n, 3, 8, 8, 8)) * 0.05
    return identity_grid_3d(n, do, ho, wo, w.align_corners) + upsample_trilinear(field, do, ho, wo).transpose(
        0, 2, 3, 4, 1)


def grid_uniform_3d(rng, w):
    n, _, _, _, _, do, ho, wo = w.shape
    return rng.uniform(-1.1, 1.1, (n, do, ho, wo, 3))


VOLUME_GRID_KINDS = {"smooth": grid_smooth_3d, "uniform": grid_uniform_3d}


def make_volume_inputs(w, seed=1):
    """input (N, C, Din, Hin, Win), grid (N, Dout, Hout, Wout, 3), grad (N, C,
    Dout, Hout, Wout) as C-order arrays of file_dtype(w.dtype)."""
    n, c, di, hi, wi, do, ho, wo = w.shape
    rng = np.random.default_rng(seed)
    grid = VOLUME_GRID_KINDS[w.grid](rng, w)
    arrays = {"input": rng.uniform(-1, 1, (n, c, di, hi, wi)), "grid": grid,
              "grad": rng.uniform(-1, 1, (n, c, do, ho, wo))}
    for k, a in arrays.items():
        a = np.ascontiguousarray(a, dtype=file_dtype(w.dtype))
        arrays[k] = round_to_bf16(a) if w.dtype == "bf16" else a
    return arrays


if __name__ == "__main__":
    for w in WORKLOADS + VOLUME_WORKLOADS:
        print(f"{w.label()}\n    {w.origin}")
