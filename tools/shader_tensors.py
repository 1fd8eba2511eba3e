"""Data for the shader harness: input/output specs, random fills, the Params uniform, and the GPU
buffers and NC4HW4 textures bound to a kernel (uploads cast to the binding's declared element type,
downloads cast back to the requested dtype).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..backends.wgpu.loader import STORAGE, TEXTURE_IN, TEXTURE_OUT, UNIFORM
from ..engine.errors import InputError, WgnnError
from .shader_wgsl import Binding, evaluate

PARAM_SLOTS = 64  # the prelude's Params block: 64 i32
DEFAULT_TOLERANCE = {"f32": (1e-4, 1e-5), "f16": (1e-2, 1e-3)}  # (rtol, atol) by precision
SCALAR_DTYPE = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32}
# The array a binding's data is handed out as when no dtype is given: f16 values widen to float32.
DEFAULT_DTYPE = {"f32": "float32", "f16": "float32", "i32": "int32", "u32": "uint32"}
DTYPE_ALIASES = {"f32": "float32", "f16": "float16", "f64": "float64", "i32": "int32", "u32": "uint32",
                 "i64": "int64", "float": "float32", "int": "int32", "uint": "uint32"}
DTYPES = ("float32", "float16", "float64", "int32", "uint32", "int64", "bool")


class TensorView:
    """What params expressions may read of a tensor: NAME.size, NAME.shape[i], NAME.ndim,
    NAME.blocks (vec4 blocks of its NC4HW4 form: N * ceil(C / 4) * H * W for 4-D)."""

    def __init__(self, shape):
        self.shape = tuple(int(d) for d in shape)
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        if self.ndim == 4:
            n, c, h, w = self.shape
            self.blocks = n * -(-c // 4) * h * w
        else:
            self.blocks = -(-self.size // 4)


def parse_spec(text: str, what: str) -> tuple[tuple[int, ...], str | None]:
    """"1,3,8,8:float32" / "1x3x8x8" / ":int32" (a scalar) -> (shape, dtype or None)."""
    dims, _, dtype = text.partition(":")
    try:
        shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
    except ValueError:
        raise InputError(f"{what}: {text!r}: expected D0,D1,...[:DTYPE] (e.g. 1,3,8,8:float32)") from None
    if any(d < 0 for d in shape):
        raise InputError(f"{what}: {text!r}: dims must not be negative")
    return shape, (_dtype(dtype, what) if dtype.strip() else None)


def _dtype(name: str, what: str) -> str:
    name = DTYPE_ALIASES.get(name.strip(), name.strip())
    if name not in DTYPES:
        raise InputError(f"{what}: unknown dtype {name!r} (one of {', '.join(DTYPES)} or f32, f16, i32, u32)")
    return name


def _spec(tensor: str, value, what: str) -> tuple[tuple[int, ...], str | None]:
    if isinstance(value, str):
        return parse_spec(value, what)
    if isinstance(value, int):
        return (value,), None
    if isinstance(value, tuple | list) and len(value) == 2 and isinstance(value[1], str | type | np.dtype):
        shape = (value[0],) if isinstance(value[0], int) else tuple(value[0])
        return tuple(int(d) for d in shape), _dtype(np.dtype(value[1]).name, what)
    if isinstance(value, tuple | list) and all(isinstance(d, int) for d in value):
        return tuple(value), None
    raise InputError(f"{what} {tensor}: expected an array, a .npy path or a (shape, dtype) spec, not {value!r}")


def as_array(tensor: str, value, binding: Binding, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """An input's data and where it came from: an array, a .npy file, or a random fill of a spec
    (floats standard normal, int32 in [-8, 8), uint32 in [0, 16), bools 50/50)."""
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value), "array"
    if isinstance(value, Path) or (isinstance(value, str) and value.endswith(".npy")):
        path = Path(value)
        if not path.is_file():
            raise InputError(f"--input {tensor}: file not found: {path}")
        try:
            return np.load(path, allow_pickle=False), str(path)
        except (ValueError, OSError, EOFError) as exc:
            raise InputError(f"--input {tensor}: cannot read {path} as .npy: {exc}") from None
    shape, dtype = _spec(tensor, value, "--input")
    dtype = dtype or (DEFAULT_DTYPE[binding.scalar] if binding.kind == STORAGE else "float32")
    kind = np.dtype(dtype).kind
    if kind == "f":
        data = rng.standard_normal(shape).astype(dtype)
    elif kind == "b":
        data = rng.random(shape) < 0.5
    elif kind == "u":
        data = rng.integers(0, 16, shape).astype(dtype)
    else:
        data = rng.integers(-8, 8, shape).astype(dtype)
    return data, f"random {dtype}"


def as_output_spec(tensor: str, value, binding: Binding) -> tuple[tuple[int, ...], str, np.ndarray | None]:
    """(shape, dtype, initial contents or None = zeros) of an output."""
    if isinstance(value, np.ndarray):
        return value.shape, value.dtype.name, value
    shape, dtype = _spec(tensor, value, "--output")
    return shape, dtype or (DEFAULT_DTYPE[binding.scalar] if binding.kind == STORAGE else "float32"), None


def parse_params(params, views: dict[str, TensorView], nc4hw4_slots: dict[str, int], has_uniform: bool) -> list:
    """The 64 Params slots: given values (list from slot 0, or {slot: value}; ints, floats or
    expressions over tensor views) plus the dims of NC4HW4 tensors at their accessor slots."""
    from ..backends.wgpu.layout import accessor_params
    from ..engine.ops.base import TensorSpec

    given = dict(enumerate(params)) if isinstance(params, list | tuple) else dict(params or {})
    if given and not has_uniform:
        raise InputError("params given, but the kernel declares no `var<uniform> params: Params` binding")
    slots: list = [0] * PARAM_SLOTS
    for key, value in given.items():
        slot = int(key)
        if not 0 <= slot < PARAM_SLOTS:
            raise InputError(f"--param {key}: slots are 0..{PARAM_SLOTS - 1}")
        slots[slot] = value if isinstance(value, int | float) and not isinstance(value, bool) else \
            evaluate(str(value), dict(views), f"--param {slot}")
    for tensor, first in nc4hw4_slots.items():
        dims = accessor_params(TensorSpec(views[tensor].shape, "float32"))
        overlap = sorted(set(given) & set(range(first, first + len(dims))))
        if overlap:
            raise InputError(f"--param {overlap[0]} overlaps the NC4HW4 dims of {tensor} (slots {first}..."
                             f"{first + len(dims) - 1}, filled by the harness)")
        if first + len(dims) > PARAM_SLOTS:
            raise InputError(f"NC4HW4 {tensor}: slots {first}..{first + len(dims) - 1} exceed the Params block")
        slots[first:first + len(dims)] = dims
    return slots


def pack_uniform(slots: list) -> np.ndarray:
    """Slots as 64 i32: floats as their f32 bits, ints in i32 or u32 range (u32 as bits, for pu())."""
    out = np.zeros(PARAM_SLOTS, np.int32)
    for i, v in enumerate(slots):
        if isinstance(v, float):
            out[i] = np.float32(v).view(np.int32)
        elif -(2 ** 31) <= int(v) < 2 ** 32:
            out[i] = np.int64(v).astype(np.uint32).view(np.int32) if v >= 2 ** 31 else v
        else:
            raise InputError(f"params slot {i}: {v} does not fit 32 bits")
    return out


def to_scalar(tensor: str, array: np.ndarray, binding: Binding) -> np.ndarray:
    """The array as the binding's element type; kinds must agree, integers must fit."""
    target = SCALAR_DTYPE[binding.scalar]
    kind = array.dtype.kind
    if binding.scalar in ("f32", "f16"):
        if kind != "f":
            raise InputError(f"{tensor}: {array.dtype} data for binding {binding.index} "
                             f"({binding.wgsl_type}): pass floating-point data")
        return np.ascontiguousarray(array, dtype=target)
    if kind not in "iub":
        raise InputError(f"{tensor}: {array.dtype} data for binding {binding.index} ({binding.wgsl_type}): pass "
                         "integer or bool data")
    info = np.iinfo(target)
    if array.size and (int(array.min()) < info.min or int(array.max()) > info.max):
        raise InputError(f"{tensor}: values {int(array.min())}..{int(array.max())} do not fit {binding.scalar}")
    return np.ascontiguousarray(array, dtype=target)


def _padded(data: bytes, size: int) -> bytes:
    return data + b"\0" * (size - len(data))


class GpuTensors:
    """The buffers and textures of one kernel run, by binding index."""

    def __init__(self, context, label: str):
        self.context, self.device, self.wgpu, self.label = context, context.device, context.wgpu, label
        self.resources: dict[int, object] = {}  # binding -> bind group resource
        self.objects: dict[int, tuple] = {}  # binding -> (buffer or texture, shape, dtype, packed)

    def _buffer(self, nbytes: int, name: str, usage=None):
        usage = usage or (self.wgpu.BufferUsage.STORAGE | self.wgpu.BufferUsage.COPY_SRC
                          | self.wgpu.BufferUsage.COPY_DST)
        try:
            return self.device.create_buffer(size=max(16, -(-nbytes // 16) * 16), usage=usage, label=name)
        except Exception as exc:
            raise WgnnError(f"could not allocate {nbytes} bytes for {name} on {self.context.name}: {exc}") from None

    def _texture(self, shape, name: str):
        from ..backends.wgpu.layout import texture_extent
        from ..engine.ops.base import TensorSpec

        usage = (self.wgpu.TextureUsage.TEXTURE_BINDING | self.wgpu.TextureUsage.STORAGE_BINDING
                 | self.wgpu.TextureUsage.COPY_SRC | self.wgpu.TextureUsage.COPY_DST)
        extent = texture_extent(TensorSpec(tuple(shape), "float32"))
        texture = self.device.create_texture(size=extent, format="rgba32float", usage=usage, dimension="2d",
                                             label=name)
        return texture, extent

    def uniform(self, binding: Binding, data: np.ndarray) -> None:
        buffer = self._buffer(data.nbytes, "params", self.wgpu.BufferUsage.UNIFORM | self.wgpu.BufferUsage.COPY_DST)
        self.device.queue.write_buffer(buffer, 0, data.tobytes())
        self.resources[binding.index] = {"buffer": buffer, "offset": 0, "size": buffer.size}

    def upload(self, binding: Binding, array: np.ndarray, packed: bool) -> np.ndarray:
        """Put an input on the GPU; returns the data as the kernel sees it (e.g. rounded to f16),
        in the input's dtype, for the reference."""
        return self._place(binding, array, array.shape, array.dtype.name, packed)

    def allocate(self, binding: Binding, shape, dtype: str, initial: np.ndarray | None, packed: bool) -> None:
        data = initial if initial is not None else np.zeros(shape, dtype)
        self._place(binding, data, tuple(shape), dtype, packed)

    def _place(self, binding: Binding, array: np.ndarray, shape, dtype: str, packed: bool) -> np.ndarray:
        from ..backends.wgpu.layout import pack_nc4hw4

        name = binding.tensor
        if packed:
            if array.dtype.kind != "f":
                raise InputError(f"NC4HW4 tensor {name} must be floating-point, not {array.dtype}")
            array = np.asarray(array, np.float32)
            blocks = pack_nc4hw4(array)
            if binding.kind in (TEXTURE_IN, TEXTURE_OUT):
                texture, (width, height, layers) = self._texture(shape, name)
                data = np.zeros((layers, height, width, 4), np.float32)  # a spare layer stays zero
                data.reshape(-1)[:blocks.size] = blocks.reshape(-1)
                if data.size:
                    self.device.queue.write_texture({"texture": texture, "origin": (0, 0, 0)}, data.tobytes(),
                                                    {"offset": 0, "bytes_per_row": width * 16,
                                                     "rows_per_image": height}, (width, height, layers))
                self.resources[binding.index] = texture.create_view(dimension="2d-array")
                self.objects[binding.index] = (texture, shape, dtype, True)
                return array.astype(dtype)
            raw = blocks.tobytes()
            seen = array
        else:
            data = to_scalar(name, np.asarray(array), binding)
            raw = data.tobytes()
            seen = data.astype(np.asarray(array).dtype if np.asarray(array).dtype.kind != "b" else bool)
        size = max(4, -(-len(raw) // 4) * 4)
        buffer = self._buffer(size, name)
        self.device.queue.write_buffer(buffer, 0, _padded(raw, size))
        self.resources[binding.index] = {"buffer": buffer, "offset": 0, "size": size}
        self.objects[binding.index] = (buffer, shape, dtype, packed)
        return seen.reshape(shape)

    def bind_group(self, layout, bindings: list[Binding]):
        entries = [{"binding": b.index, "resource": self.resources[b.index]} for b in bindings]
        try:
            return self.device.create_bind_group(layout=layout, entries=entries)
        except Exception as exc:
            raise WgnnError(f"{self.label}: could not bind the kernel's resources: {exc}") from None

    def download(self, binding: Binding) -> np.ndarray:
        from ..backends.wgpu.layout import unpack_nc4hw4

        resource, shape, dtype, packed = self.objects[binding.index]
        size = math.prod(shape)
        if size == 0:
            return np.zeros(shape, dtype)
        queue = self.device.queue
        if binding.kind == TEXTURE_OUT or binding.kind == TEXTURE_IN:
            width, height, layers = resource.size
            raw = queue.read_texture({"texture": resource, "origin": (0, 0, 0)},
                                     {"offset": 0, "bytes_per_row": width * 16, "rows_per_image": height},
                                     (width, height, layers))
            return unpack_nc4hw4(np.frombuffer(raw, np.float32, count=TensorView(shape).blocks * 4),
                                 shape).astype(dtype)
        raw = queue.read_buffer(resource, 0, self.resources[binding.index]["size"])
        if packed:
            return unpack_nc4hw4(np.frombuffer(raw, np.float32, count=TensorView(shape).blocks * 4),
                                 shape).astype(dtype)
        values = np.frombuffer(raw, SCALAR_DTYPE[binding.scalar], count=size)
        return (values != 0 if dtype == "bool" else values.astype(dtype)).reshape(shape)

    def wait(self, binding: Binding) -> None:
        """Block until the GPU has written `binding` (a 4-byte read of it)."""
        resource = self.objects[binding.index][0]
        if binding.kind == STORAGE:
            self.device.queue.read_buffer(resource, 0, 4)
        elif binding.kind != UNIFORM:
            self.device.queue.read_texture({"texture": resource, "origin": (0, 0, 0)},
                                           {"offset": 0, "bytes_per_row": 16, "rows_per_image": 1}, (1, 1, 1))
