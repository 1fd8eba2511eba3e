"""Kernel loader: .wgsl sources from kernels_wgsl/, shared fragments, a shared prelude, text
parameters ({{NAME}}), WGSL override constants, explicit bind group layouts, and a pipeline cache
per device.

A kernel names the fragments it shares with other kernels on lines of their own,
`// include: conv/dwpw_stage.wgsl`; a fragment may include others, and each file comes in once.
Fragments, then the prelude, are appended after the kernel (WGSL declarations are
order-independent), so line numbers in compiler messages are the kernel file's own.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ...engine.errors import WgnnError
from .tuning import tuned_constants

PARAM_PATTERN = re.compile(r"\{\{(\w+)\}\}")
INCLUDE_PATTERN = re.compile(r"^[ \t]*//[ \t]*include:[ \t]*(\S+)[ \t]*$", re.M)
# Binding kinds of a kernel, in binding order: tensors in buffers are read_write storage (one
# arena buffer may back several bindings of one dispatch), NC4HW4 textures are read as sampled
# 2-D array textures and written as rgba32float storage textures, parameters are a uniform block.
STORAGE, UNIFORM, TEXTURE_IN, TEXTURE_OUT = "storage", "uniform", "texture", "storage_texture"
TEXTURE_OUT_HALF = "storage_texture_half"  # rgba16float (precision fp16)


class KernelCompileError(WgnnError):
    """A WGSL kernel failed to compile; the message names the file and shows the compiler's."""


@cache
def kernel_source(path: str) -> str:
    """Source of kernels_wgsl/<path>, e.g. "elementwise/unary.wgsl"."""
    try:
        return resources.files("wgnn.kernels_wgsl").joinpath(path).read_text()
    except FileNotFoundError:
        raise WgnnError(f"kernel file kernels_wgsl/{path} not found "
                        "(is the package installed with its .wgsl data?)") from None


def included_fragments(path: str, source: str | None = None) -> list[str]:
    """The fragments kernels_wgsl/<path> includes, theirs after each, every file once, in order of
    first mention (never the kernel itself). `source`: the kernel's text, where it is not a
    packaged file (the shader harness's)."""
    order: list[str] = []

    def visit(name: str, text: str) -> None:
        for fragment in INCLUDE_PATTERN.findall(text):
            if fragment == path or fragment in order:
                continue
            if not fragment.endswith(".wgsl"):
                raise WgnnError(f"{name} includes {fragment!r}: fragments are .wgsl files under kernels_wgsl/")
            try:
                fragment_text = kernel_source(fragment)
            except WgnnError as exc:
                raise WgnnError(f"{name} includes {fragment}: {exc}") from None
            order.append(fragment)
            visit(fragment, fragment_text)

    visit(path, kernel_source(path) if source is None else source)
    return order


def substitute_params(name: str, text: str, params: dict[str, str]) -> str:
    def substitute(match):
        key = match.group(1)
        if key not in params:
            raise WgnnError(f"kernel {name} needs parameter {{{{{key}}}}}; given {sorted(params)}")
        return str(params[key])

    return PARAM_PATTERN.sub(substitute, text)


def render(path: str, params: dict[str, str]) -> str:
    """Kernel text with {{NAME}} parameters replaced, its fragments and the prelude appended."""
    parts = [substitute_params(path, kernel_source(path), params)]
    parts += [substitute_params(fragment, kernel_source(fragment), params) for fragment in included_fragments(path)]
    code = "\n".join(parts) + "\n" + kernel_source("prelude.wgsl")
    if re.search(r"\bf16\b", code):
        # The directive must come first; on the first line it keeps the file's line numbers.
        code = "enable f16; " + code
    return code


@dataclass
class Kernel:
    pipeline: object
    layout: object
    bindings: tuple[str, ...]
    path: str
    workgroup: int = 64  # its WG override constant: dispatch grids count workgroups of this size


class PipelineCache:
    """Compiled pipelines keyed by (source hash, entry point, constants, bindings)."""

    def __init__(self, context):
        self.context = context
        self.pipelines: dict[tuple, Kernel] = {}
        self.compiled = 0  # pipelines created (tests assert resize creates none)

    def get(self, path: str, bindings: tuple[str, ...], *, params: dict[str, str] | None = None,
            constants: dict[str, float] | None = None, entry: str = "main") -> Kernel:
        code = render(path, params or {})
        constants = tuned_constants(self.context, path, constants)  # a tuned WG where wgnn tune measured one
        key = (hashlib.sha1(code.encode()).hexdigest(), entry, tuple(sorted((constants or {}).items())), bindings)
        kernel = self.pipelines.get(key)
        if kernel is None:
            kernel = self._compile(path, code, bindings, constants or {}, entry)
            self.pipelines[key] = kernel
        return kernel

    def _compile(self, path, code, bindings, constants, entry) -> Kernel:
        wgpu = self.context.wgpu
        device = self.context.device
        entries = []
        for index, kind in enumerate(bindings):
            layout_entry = {"binding": index, "visibility": wgpu.ShaderStage.COMPUTE}
            if kind == TEXTURE_IN:
                layout_entry["texture"] = {"sample_type": wgpu.TextureSampleType.unfilterable_float,
                                    "view_dimension": wgpu.TextureViewDimension.d2_array}
            elif kind in (TEXTURE_OUT, TEXTURE_OUT_HALF):
                texture_format = wgpu.TextureFormat.rgba16float if kind == TEXTURE_OUT_HALF else \
                    wgpu.TextureFormat.rgba32float
                layout_entry["storage_texture"] = {"access": wgpu.StorageTextureAccess.write_only,
                                            "format": texture_format,
                                            "view_dimension": wgpu.TextureViewDimension.d2_array}
            else:
                kind_type = wgpu.BufferBindingType.uniform if kind == UNIFORM else wgpu.BufferBindingType.storage
                layout_entry["buffer"] = {"type": kind_type}
            entries.append(layout_entry)
        try:
            module = device.create_shader_module(code=code, label=path)
            layout = device.create_bind_group_layout(entries=entries)
            pipeline = device.create_compute_pipeline(
                layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": module, "entry_point": entry, "constants": constants})
        except Exception as exc:
            raise KernelCompileError(f"kernels_wgsl/{path} failed to compile on {self.context.name}:\n{exc}") from None
        self.compiled += 1
        return Kernel(pipeline, layout, bindings, path, int(constants.get("WG", 64)))


def pipeline_cache(context) -> PipelineCache:
    cache = context.pipelines.get("cache")
    if cache is None:
        cache = context.pipelines["cache"] = PipelineCache(context)
    return cache
