"""Image preprocessing: uint8 images -> a model's float input tensor, on the GPU or with numpy.

    x = wgnn.image.preprocess(frames, size=(224, 224), source="bgr", target="rgb",
                              mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    prep = wgnn.image.ImageProcessor(size=(8, 8), source="gray", target="gray")  # pipelines once
    x = prep(images)                                                          # [N, C, 8, 8] float32

Images are uint8, channels last: one [H, W, C] (or [H, W] for gray) or a batch [N, H, W, C].
Channel orders (source): "rgb", "bgr", "rgba", "bgra", "gray"; targets: "rgb", "bgr", "gray".
Every step happens in one pass per output pixel, in this order:

1. Sampling position. Pixel centres sit at integer coordinates (x right, y down). An output pixel
   (x, y) samples the source at (sx, sy) = M @ (x, y, 1) with a 2x3 matrix M mapping output to
   source coordinates: the `affine` argument as given (invert_affine turns a source->output
   matrix around), or for a plain resize the half-pixel mapping of ONNX Resize's "half_pixel" mode,
   sx = (x + 0.5) * W_in / W_out - 0.5 (same for y).
2. Filter (`resize`): "bilinear" weighs the 4 pixels around (sx, sy) by (1 - fx, fx) x (1 - fy, fy)
   with x0 = floor(sx), fx = sx - x0 (no antialiasing when shrinking, like OpenCV's INTER_LINEAR);
   "nearest" takes the pixel whose centre is nearest, ties to the higher index: floor(sx + 0.5)
   (PIL's nearest; ONNX Resize half_pixel with round_prefer_ceil).
3. Pixels outside the source (`border`): "replicate" clamps to the edge (ONNX Resize's behaviour),
   "constant" reads 0 (black) for each tap outside. Default: replicate for a resize, constant for
   an affine warp.
4. Colour conversion on the filtered values (no rounding in between): channel permutations;
   alpha is dropped; gray = 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601); gray -> colour repeats.
5. Normalisation per target channel: (value * scale - mean) / std, scale 1/255 by default.
6. Layout: "nchw" [N, C, h, w], "nhwc" [N, h, w, C], or "nc4hw4" [N, C4, h, w, 4] with zero padding
   lanes (backends/wgpu/layout.pack_nc4hw4). A single image gives N = 1.

Float32 arithmetic is defined so both providers agree: the host tabulates the terms of sx, sy per
output column and row in float64, rounds them to float32, and both the shader and the numpy twin add
them in float32 (one addition, exactly rounded everywhere), so nearest picks and bilinear fractions
are identical; the remaining float32 differences are in the weighted sums (~1e-7 relative).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .engine.errors import InputError

SOURCES = {"rgb": "RGB", "bgr": "BGR", "rgba": "RGBA", "bgra": "BGRA", "gray": "Y"}
TARGETS = {"rgb": "RGB", "bgr": "BGR", "gray": "Y"}
GRAY_WEIGHTS = {"R": 0.299, "G": 0.587, "B": 0.114}  # ITU-R BT.601, as OpenCV's RGB2GRAY
RESIZE_MODES = ("bilinear", "nearest")
BORDERS = ("replicate", "constant")
LAYOUTS = ("nchw", "nhwc", "nc4hw4")
PROVIDERS = ("wgpu", "numpy")
MAX_COORDINATE = 1 << 22  # |table values|: keeps float32 pixel indices exact and int conversions safe


@dataclass(frozen=True)
class ImagePlan:
    """Everything a provider needs for one input shape; built by ImageProcessor.plan()."""

    batch: int
    in_h: int
    in_w: int
    in_c: int
    out_h: int
    out_w: int
    out_c: int  # target channels
    lanes: int  # channels written per pixel (4 for nc4hw4: padding lanes are written as 0)
    nearest: bool
    constant_border: bool
    # Sampling terms, float32: [sx per column (w), sy per column (w), sx per row (h), sy per row (h)];
    # sx = table[x] + table[2w + y], sy = table[w + x] + table[2w + h + y].
    table: np.ndarray
    colour: np.ndarray  # (out_c, in_c) float64: target channel k = colour[k] . source channels
    scale: float
    mean: np.ndarray  # (out_c,) float64
    std: np.ndarray  # (out_c,) float64
    layout: str
    out_shape: tuple[int, ...]
    out_strides: tuple[int, int, int, int]  # elements per step of n, channel, y, x in the output

    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """Colour conversion and normalisation folded: out[k] = G[k] . v + bias[k], as (lanes x 4)
        float32 G and (lanes,) bias, zero rows for padding lanes (what the GPU kernel applies)."""
        g = np.zeros((self.lanes, 4), np.float64)
        bias = np.zeros(self.lanes, np.float64)
        g[:self.out_c, :self.in_c] = self.colour * (self.scale / self.std)[:, None]
        bias[:self.out_c] = -self.mean / self.std
        return g.astype(np.float32), bias.astype(np.float32)


def colour_matrix(source: str, target: str) -> np.ndarray:
    """(target channels, source channels) weights of the colour conversion."""
    src, dst = SOURCES[source], TARGETS[target]
    m = np.zeros((len(dst), len(src)), np.float64)
    for k, letter in enumerate(dst):
        if letter in src:
            m[k, src.index(letter)] = 1.0
        elif letter == "Y":
            for colour, weight in GRAY_WEIGHTS.items():
                m[k, src.index(colour)] = weight
        else:  # a colour channel from a gray source
            m[k, src.index("Y")] = 1.0
    return m


def invert_affine(matrix) -> np.ndarray:
    """The inverse of a 2x3 affine matrix (e.g. a source -> output map, as cv2.warpAffine takes
    by default, into the output -> source map `affine` expects)."""
    m = np.asarray(matrix, np.float64)
    if m.shape != (2, 3):
        raise InputError(f"an affine matrix is 2x3, got shape {m.shape}")
    full = np.vstack([m, [0.0, 0.0, 1.0]])
    if abs(np.linalg.det(full)) < 1e-12:
        raise InputError("the affine matrix is singular and has no inverse")
    return np.linalg.inv(full)[:2]


def _channel_values(name: str, value, channels: int) -> np.ndarray:
    array = np.asarray(value, np.float64).reshape(-1)
    if array.size == 1:
        array = np.repeat(array, channels)
    if array.size != channels:
        raise InputError(f"{name} has {array.size} values; the target has {channels} channel(s): give 1 or "
                         f"{channels}")
    if not np.all(np.isfinite(array)):
        raise InputError(f"{name} must be finite, got {array.tolist()}")
    return array


def _choice(name: str, value: str, options: Sequence[str]) -> str:
    if value not in options:
        raise InputError(f"{name}={value!r}: expected one of {', '.join(options)}")
    return value


class ImageProcessor:
    """Preprocessing options fixed once; call it on uint8 images (see the module doc).

    Plans (sampling tables, parameters) are cached per input shape and the GPU pipeline is compiled
    once per device, so repeated calls compile nothing, whatever the input size.

    Arguments:
        size: output (height, width); default the input's size (required with `affine`).
        source, target: channel orders of the input images and of the model's input.
        mean, std: per target channel (or one value for all); scale multiplies the raw 0..255
            values first (default 1/255).
        resize: "bilinear" or "nearest" (the filter, for resizes and warps alike).
        affine: 2x3 matrix mapping output pixel coordinates to source coordinates.
        border: "replicate" or "constant" (0); default replicate, constant with `affine`.
        layout: "nchw", "nhwc" or "nc4hw4".
        provider: "wgpu" (the GPU) or "numpy"; adapter: GPU choice, as wgnn.Config's.
    """

    def __init__(self, *, size: tuple[int, int] | None = None, source: str = "rgb", target: str = "rgb",
                 mean=0.0, std=1.0, scale: float = 1.0 / 255.0, resize: str = "bilinear", affine=None,
                 border: str | None = None, layout: str = "nchw", provider: str = "wgpu", adapter=None):
        self.source = _choice("source", source, tuple(SOURCES))
        self.target = _choice("target", target, tuple(TARGETS))
        self.resize = _choice("resize", resize, RESIZE_MODES)
        self.layout = _choice("layout", layout, LAYOUTS)
        self.provider = _choice("provider", provider, PROVIDERS)
        self.border = _choice("border", border or ("constant" if affine is not None else "replicate"), BORDERS)
        channels = len(TARGETS[self.target])
        self.mean = _channel_values("mean", mean, channels)
        self.std = _channel_values("std", std, channels)
        if np.any(self.std == 0):
            raise InputError(f"std must not be 0, got {self.std.tolist()}")
        if not np.isfinite(scale):
            raise InputError(f"scale must be finite, got {scale}")
        self.scale = float(scale)
        if size is not None:
            size = tuple(int(s) for s in size)
            if len(size) != 2 or min(size) < 1:
                raise InputError(f"size is (height, width) with both >= 1, got {size}")
        self.size = size
        self.affine = None
        if affine is not None:
            self.affine = np.asarray(affine, np.float64)
            if self.affine.shape != (2, 3) or not np.all(np.isfinite(self.affine)):
                raise InputError(f"affine is a finite 2x3 matrix (output -> source coordinates), got "
                                 f"{self.affine.shape if self.affine.shape != (2, 3) else self.affine.tolist()}")
            if size is None:
                raise InputError("an affine warp needs size=(height, width) of the output")
        self.colour = colour_matrix(self.source, self.target)
        self.adapter = adapter
        self._plans: dict[tuple[int, ...], ImagePlan] = {}
        self._runner = None

    def batch_shape(self, images: np.ndarray) -> tuple[int, int, int, int]:
        """(N, H, W, C) of the images, checked against the source channel order."""
        channels = len(SOURCES[self.source])
        shape = images.shape
        if images.ndim == 2 and channels == 1:
            shape = (1, *shape, 1)
        elif images.ndim == 3:
            shape = (1, *shape)
        elif images.ndim != 4:
            raise InputError(f"images are [H, W, C] or [N, H, W, C] uint8 arrays, got shape {list(images.shape)}")
        if shape[3] != channels:
            raise InputError(f"source={self.source!r} images have {channels} channel(s) last, got shape "
                             f"{list(images.shape)}")
        if shape[1] < 1 or shape[2] < 1:
            raise InputError(f"images must have at least one pixel, got shape {list(images.shape)}")
        return shape

    def plan(self, shape: tuple[int, int, int, int]) -> ImagePlan:
        """The plan for a batch of shape (N, H, W, C); cached."""
        plan = self._plans.get(shape)
        if plan is None:
            plan = self._plans[shape] = self._make_plan(*shape)
        return plan

    def _make_plan(self, n: int, h: int, w: int, c: int) -> ImagePlan:
        out_h, out_w = self.size or (h, w)
        if self.affine is not None:
            (a, b, cx), (d, e, cy) = self.affine
        else:  # half-pixel resize: sx = (x + 0.5) * w / out_w - 0.5
            a, b, d, e = w / out_w, 0.0, 0.0, h / out_h
            cx, cy = 0.5 * a - 0.5, 0.5 * e - 0.5
        half = 0.5 if self.resize == "nearest" else 0.0  # nearest = floor(s + 0.5), folded into the table
        xs, ys = np.arange(out_w, dtype=np.float64), np.arange(out_h, dtype=np.float64)
        table = np.concatenate([a * xs + cx + half, d * xs, b * ys, e * ys + cy + half])
        if table.size and np.abs(table).max() >= MAX_COORDINATE:
            raise InputError(f"the sampling coordinates reach {np.abs(table).max():.3g} pixels; the affine warp "
                             f"must keep them below {MAX_COORDINATE}")
        out_c = len(TARGETS[self.target])
        lanes = 4 if self.layout == "nc4hw4" else out_c
        if self.layout == "nchw":
            out_shape, strides = (n, out_c, out_h, out_w), (out_c * out_h * out_w, out_h * out_w, out_w, 1)
        elif self.layout == "nhwc":
            out_shape, strides = (n, out_h, out_w, out_c), (out_h * out_w * out_c, 1, out_w * out_c, out_c)
        else:
            out_shape, strides = (n, 1, out_h, out_w, 4), (out_h * out_w * 4, 1, out_w * 4, 4)
        return ImagePlan(batch=n, in_h=h, in_w=w, in_c=c, out_h=out_h, out_w=out_w, out_c=out_c, lanes=lanes,
                         nearest=self.resize == "nearest", constant_border=self.border == "constant",
                         table=table.astype(np.float32), colour=self.colour, scale=self.scale, mean=self.mean,
                         std=self.std, layout=self.layout, out_shape=out_shape, out_strides=strides)

    def __call__(self, images) -> np.ndarray:
        images = np.asarray(images)
        if images.dtype != np.uint8:
            raise InputError(f"images must be uint8 (0..255), got {images.dtype}")
        shape = self.batch_shape(images)
        plan = self.plan(shape)
        images = np.ascontiguousarray(images.reshape(shape))
        if plan.batch == 0:
            return np.zeros(plan.out_shape, np.float32)
        if self.provider == "numpy":
            from .backends.numpy.image import preprocess_numpy

            return preprocess_numpy(plan, images)
        if self._runner is None:
            from .backends.wgpu.image import GpuImageRunner

            self._runner = GpuImageRunner(self.adapter)
        return self._runner.run(plan, images)

    @property
    def device_name(self) -> str | None:
        """The GPU adapter the processor runs on (after its first GPU call), else None."""
        return self._runner.context.name if self._runner is not None else None


def preprocess(images, **options) -> np.ndarray:
    """uint8 images -> float32 model input; options as ImageProcessor's. For repeated calls keep an
    ImageProcessor instead (it caches plans and buffers)."""
    return ImageProcessor(**options)(images)


__all__ = ["ImagePlan", "ImageProcessor", "colour_matrix", "invert_affine", "preprocess"]
