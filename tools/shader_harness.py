"""Run one WGSL kernel without the engine: bind arrays to its declared bindings, fill the Params
uniform, dispatch, read the outputs back, compare them with a numpy reference and time the
dispatch. `wgnn shader` (tools/commands/shader.py) and `wgnn.shader.run` are thin layers on this.
"""
from __future__ import annotations

import math
import re
import time as _time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..backends.wgpu.loader import (
    PARAM_PATTERN,
    STORAGE,
    TEXTURE_IN,
    TEXTURE_OUT,
    UNIFORM,
    included_fragments,
    kernel_source,
)
from ..engine.errors import AdapterError, InputError, WgnnError
from .shader_reference import Comparison, call_reference, compare, load_reference, reference_path
from .shader_tensors import (
    DEFAULT_TOLERANCE,
    GpuTensors,
    TensorView,
    as_array,
    as_output_spec,
    pack_uniform,
    parse_params,
)
from .shader_wgsl import (
    Binding,
    ShaderCompileError,
    compile_report,
    evaluate,
    override_values,
    render,
    text_parameters,
    workgroup_size,
)

TIMESTAMP_CHUNK = 64  # timed passes per submission (a query set holds 2 timestamps per pass)
NC4HW4_FIRST_SLOT, NC4HW4_SLOTS = 4, 5  # the kernels' convention: accessor dims from params slot 4, 5 per tensor


@dataclass
class Timing:
    method: str  # "timestamp-query" (GPU time of the compute pass) or "wall" (submit + wait)
    samples_us: list[float]

    @property
    def median_us(self) -> float:
        return float(np.median(self.samples_us))

    @property
    def p90_us(self) -> float:
        return float(np.percentile(self.samples_us, 90))

    @property
    def min_us(self) -> float:
        return float(min(self.samples_us))

    def as_dict(self) -> dict:
        return {"method": self.method, "repeat": len(self.samples_us), "median_us": self.median_us,
                "p90_us": self.p90_us, "min_us": self.min_us, "samples_us": self.samples_us}


@dataclass
class ShaderResult:
    """What one run produced: outputs by name, comparisons with the reference, timing."""
    kernel: str
    adapter: dict
    outputs: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    bindings: list[Binding]
    params: list[int] | None
    dispatch: tuple[int, int, int]
    workgroup_size: tuple[int, int, int]
    errors: list[Comparison] = field(default_factory=list)
    reference: str | None = None
    tolerance: tuple[float, float] = (0.0, 0.0)  # rtol, atol
    timing: Timing | None = None
    sources: dict[str, str] = field(default_factory=dict)  # tensor -> where its data came from

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.errors)

    def as_dict(self) -> dict:
        from .cli import summarize

        return {
            "kernel": self.kernel, "adapter": self.adapter, "dispatch": list(self.dispatch),
            "workgroup_size": list(self.workgroup_size),
            "bindings": [{"binding": b.index, "name": b.name, "tensor": b.tensor, "kind": b.kind, "type": b.wgsl_type}
                         for b in self.bindings],
            "params": self.params,
            "inputs": [{**summarize(n, v), "source": self.sources.get(n, "")} for n, v in self.inputs.items()],
            "outputs": [summarize(n, v) for n, v in self.outputs.items()],
            "comparison": None if self.reference is None else {
                "reference": self.reference, "rtol": self.tolerance[0], "atol": self.tolerance[1], "ok": self.ok,
                "outputs": [c.as_dict() for c in self.errors]},
            "timing": None if self.timing is None else self.timing.as_dict(),
        }

    def __str__(self) -> str:
        from .shader_report import format_result

        return format_result(self)


# ------------------------------------------------------------------------------------ loading
def load_kernel(source: str | Path) -> tuple[str, str, Path | None]:
    """(name for messages, WGSL text, file path or None). A string with a newline or a `fn` is
    source; otherwise a path, tried as given and then under kernels_wgsl/."""
    if isinstance(source, str) and ("\n" in source or "fn " in source):
        return "<source>", source, None
    path = Path(source)
    if not path.is_file():
        from importlib import resources

        packaged = Path(str(resources.files("wgnn.kernels_wgsl").joinpath(str(source))))
        if not packaged.is_file():
            raise InputError(f"kernel file not found: {source}")
        path = packaged
    return str(source), path.read_text(), path


# ------------------------------------------------------------------------------------ running
def run(source: str | Path, inputs: dict | None = None, outputs: dict | None = None, params=None,
        constants: dict | None = None, text: dict | None = None, dispatch: tuple[int, ...] | None = None,
        adapter: str | int | None = None, reference=None, time: bool = False, repeat: int = 10, *,
        nc4hw4=(), prelude: str = "buffer", precision: str = "f32", per_invocation: int | str = 1, entry: str = "main",
        seed: int = 0, rtol: float | None = None, atol: float | None = None) -> ShaderResult:
    """Run the kernel `source` (a .wgsl path, or WGSL text) once on `adapter` and return its outputs.

    inputs: name -> array, .npy path, or a (shape, dtype) / "D0,D1:dtype" spec filled randomly
    (seeded by `seed`); outputs: name -> (shape, dtype) spec (zero-filled) or an array (its
    contents initialise the buffer). Names are the kernel's binding variables. params: list (slot
    0 on) or {slot: value} for the Params uniform; values are ints, floats (stored as f32 bits) or
    expressions like "y.size // 4". constants: override constants; text: {{NAME}} substitutions.
    nc4hw4: tensor names (or {name: params slot}) whose {{DECL_NAME}} gets the NC4HW4 accessor for
    storage `prelude` ("buffer" or "texture"; "none" also skips the prelude). dispatch: workgroup
    counts, else one invocation per `per_invocation` array elements of the first output (a number,
    or an expression over the kernel's override constants, e.g. "PER" for `override PER = 4u;`).
    reference: a function or "module:function" called with the inputs by name; time: measure
    `repeat` dispatches (GPU timestamps when the adapter has them).
    """
    from ..backends.wgpu.context import adapters as adapter_list
    from ..backends.wgpu.context import get_context

    if prelude not in ("buffer", "texture", "none"):
        raise InputError(f"prelude must be buffer, texture or none, not {prelude!r}")
    if precision not in ("f32", "f16"):
        raise InputError(f"precision must be f32 or f16, not {precision!r}")
    name, code, _ = load_kernel(source)
    context = get_context(adapter)
    info = context.info
    f16 = precision == "f16" or "enable f16" in code
    if f16 and "shader-f16" not in context.features:
        raise AdapterError(f"{context.name} has no shader-f16 feature: f16 kernels cannot run there (features: "
                           f"{', '.join(sorted(context.features)) or 'none'})")
    inputs, outputs = dict(inputs or {}), dict(outputs or {})
    both = sorted(set(inputs) & set(outputs))
    if both:
        raise InputError(f"{both} given as both input and output (a kernel that updates a buffer in place "
                         "takes it as an output with initial contents)")
    nc4 = _nc4hw4_layout(name, code, nc4hw4, set(outputs), prelude)
    # ACC, the conv kernels' sums type, is f32 as in the engine unless fp16-arith asks for f16.
    texts = {"FLOAT": "f16" if f16 else "f32", "ACC": "f32",
             **{f"DECL_{t.upper()}": decl for t, (_, _, decl) in nc4.items()}}
    clash = sorted(set(texts) & set(text or {}) - {"FLOAT", "ACC"})
    if clash:
        raise InputError(f"--text {clash} would replace the NC4HW4 accessor declarations --nc4hw4 generates")
    given = {k: str(v) for k, v in (text or {}).items()}
    # A value may use the harness's own text parameters (e.g. --text T={{FLOAT}}), one level deep.
    texts.update({k: PARAM_PATTERN.sub(lambda m: texts.get(m.group(1), m.group(0)), v) for k, v in given.items()})
    rendered = render(name, code, texts, f16=f16, prelude=prelude != "none")
    bindings = _bind_tensors(rendered, nc4, set(inputs), set(outputs))
    by_tensor = {b.tensor: b for b in bindings if b.kind != UNIFORM}
    packed = set(nc4) | {b.tensor for b in bindings if b.kind in (TEXTURE_IN, TEXTURE_OUT)}  # NC4HW4 data

    rng = np.random.default_rng(seed)
    arrays, sources = {}, {}
    for tensor, value in inputs.items():
        arrays[tensor], sources[tensor] = as_array(tensor, value, by_tensor[tensor], rng)
    out_specs = {t: as_output_spec(t, v, by_tensor[t]) for t, v in outputs.items()}
    for tensor in packed:
        shape = arrays[tensor].shape if tensor in arrays else out_specs[tensor][0]
        if len(shape) != 4:
            raise InputError(f"NC4HW4 tensor {tensor}: NC4HW4 tensors are 4-D (N, C, H, W), not {list(shape)}")
    views = {t: TensorView(a.shape) for t, a in arrays.items()} | {t: TensorView(s) for t, (s, _, _) in
                                                                    out_specs.items()}
    uniform = next((b for b in bindings if b.kind == UNIFORM), None)
    slots = parse_params(params, views, {t: slot for t, (slot, _, _) in nc4.items()}, uniform is not None)
    consts = {}
    for key, value in (constants or {}).items():
        if key not in rendered.overrides:
            raise InputError(f"--const {key}: the kernel declares no override {key!r} "
                             f"(its overrides: {', '.join(rendered.overrides) or 'none'})")
        consts[key] = evaluate(str(value), {}, f"--const {key}")
    wg = workgroup_size(rendered, entry, consts)
    limits = context.limits
    writes = [b for b in bindings if b.tensor in outputs]
    if not writes:
        raise InputError(f"{name}: no output given (pass --output NAME:SHAPE[:DTYPE] for one of "
                         f"{[b.tensor for b in bindings if b.kind != UNIFORM]})")
    if isinstance(per_invocation, str):  # an expression, e.g. the name of an override the kernel declares
        per_invocation = int(evaluate(per_invocation, override_values(rendered, consts), "--per-invocation"))
    groups = _groups(dispatch, writes[0], views[writes[0].tensor], writes[0].tensor in packed, wg, per_invocation,
                     limits.get("max-compute-workgroups-per-dimension", 65535))

    pipeline, layout = _compile(context, rendered, bindings, consts, entry)
    with context.lock:
        gpu = GpuTensors(context, label=name)
        for b in bindings:
            if b.kind == UNIFORM:
                gpu.uniform(b, pack_uniform(slots))
            elif b.tensor in arrays:
                arrays[b.tensor] = gpu.upload(b, arrays[b.tensor], b.tensor in packed)
            else:
                gpu.allocate(b, *out_specs[b.tensor], b.tensor in packed)
        bind_group = gpu.bind_group(layout, bindings)
        encoder = context.device.create_command_encoder()
        _encode(encoder, pipeline, bind_group, groups)
        _submit(context, encoder)
        results = {b.tensor: gpu.download(b) for b in writes}

        default = DEFAULT_TOLERANCE["f16" if f16 else "f32"]
        rtol, atol = rtol if rtol is not None else default[0], atol if atol is not None else default[1]
        result = ShaderResult(name, {"index": info.index, "name": info.name, "backend": info.backend,
                                     "adapters": len(adapter_list())},
                              results, arrays, bindings, None if uniform is None else slots, groups, wg,
                              tolerance=(rtol, atol), sources=sources)
        if reference is not None:
            fn = load_reference(reference)[0] if isinstance(reference, str) else reference
            result.reference = reference if isinstance(reference, str) else getattr(fn, "__name__", "reference")
            # outputs given with initial contents (kernels updating a buffer in place) are passed too
            initial = {t: spec[2] for t, spec in out_specs.items() if spec[2] is not None}
            expected = call_reference(fn, {**arrays, **initial}, result.params, [b.tensor for b in writes])
            result.errors = [compare(t, results[t], expected[t], rtol, atol) for t in results if t in expected]
        if time:
            result.timing = _time_dispatch(context, pipeline, bind_group, groups, max(int(repeat), 1),
                                           lambda: gpu.wait(writes[0]))
    return result


def _nc4hw4_layout(name: str, code: str, nc4hw4, written: set[str], prelude: str) -> dict[str, tuple]:
    """NC4HW4 tensors -> (params slot, binding, accessor declaration). Their {{DECL_NAME}}
    text parameters take the binding numbers the kernel and its fragments leave free, in order of
    appearance (the kernel's first, then the fragments' in the order they are appended)."""
    from ..backends.wgpu.layout import BUFFER, NC4HW4, TEXTURE, Placement, nc4hw4_text
    from .shader_wgsl import declared_binding_numbers

    wanted = dict(nc4hw4) if isinstance(nc4hw4, dict) else dict.fromkeys(nc4hw4)
    if not wanted:
        return {}
    code = "\n".join([code, *(kernel_source(file) for file in included_fragments(name, code))])
    order = [p[5:].lower() for p in text_parameters(code) if p.startswith("DECL_")]
    missing = [t for t in wanted if t.lower() not in order]
    if missing:
        raise InputError(f"--nc4hw4 {missing[0]}: {name} has no {{{{DECL_{missing[0].upper()}}}}} text parameter "
                         "for its accessor declaration")
    taken = declared_binding_numbers(code)
    free = (i for i in range(len(taken) + len(order) + 1) if i not in taken)
    storage = TEXTURE if prelude == "texture" else BUFFER
    layout = {}
    by_lower = {t.lower(): t for t in wanted}
    for position, lower in enumerate(order):
        binding = next(free)
        if lower not in by_lower:
            continue
        tensor = by_lower[lower]
        slot = wanted[tensor] if wanted[tensor] is not None else NC4HW4_FIRST_SLOT + NC4HW4_SLOTS * position
        decl = nc4hw4_text(tensor, binding, int(slot), Placement(NC4HW4, storage), write=tensor in written)
        layout[tensor] = (int(slot), binding, decl)
    return layout


def _bind_tensors(rendered, nc4: dict, inputs: set[str], outputs: set[str]) -> list[Binding]:
    """Name each binding's tensor and check every binding has data and every tensor a binding."""
    by_binding = {binding: tensor for tensor, (_, binding, _) in nc4.items()}
    bindings = rendered.bindings
    for b in bindings:
        b.tensor = by_binding.get(b.index, b.name)
    for b in bindings:
        if b.kind == UNIFORM:
            if b.wgsl_type != "Params":
                raise InputError(f"{rendered.name}: uniform {b.name}: {b.wgsl_type}: the harness fills only the "
                                 "Params uniform (64 i32 slots, prelude.wgsl)")
            continue
        if b.tensor not in inputs | outputs:
            listing = ", ".join(f"{x.index}: {x.tensor} ({x.label})" for x in bindings)
            raise InputError(f"{rendered.name}: binding {b.index} ({b.tensor}) has no data: pass --input "
                             f"{b.tensor}=FILE.npy / --input {b.tensor}:SHAPE[:DTYPE] or --output {b.tensor}:SHAPE"
                             f"[:DTYPE] (bindings: {listing})")
        if (b.kind == TEXTURE_IN and b.tensor not in inputs) or (b.kind == TEXTURE_OUT and b.tensor not in outputs):
            role = "an input" if b.kind == TEXTURE_IN else "an output"
            raise InputError(f"{rendered.name}: binding {b.index} ({b.tensor}: {b.wgsl_type}) must be {role}")
    bound = {b.tensor for b in bindings}
    unknown = sorted((inputs | outputs) - bound)
    if unknown:
        raise InputError(f"{rendered.name} declares no binding for {unknown}; its bindings: "
                         + ", ".join(f"{b.index}: {b.tensor}" for b in bindings))
    if any(b.kind == STORAGE and b.read_only and b.tensor in outputs for b in bindings):
        ro = next(b for b in bindings if b.kind == STORAGE and b.read_only and b.tensor in outputs)
        raise InputError(f"{rendered.name}: output {ro.tensor} is declared read-only ({ro.label})")
    return bindings


def _groups(dispatch, first_output: Binding, view: TensorView, nc4: bool, wg: tuple[int, int, int],
            per_invocation: int, max_groups: int) -> tuple[int, int, int]:
    """Explicit workgroup counts, or enough 1-D groups for one invocation per `per_invocation`
    array elements of the first output (NC4HW4: vec4 blocks); 2-D past the per-dimension limit
    (kernels read their index with linear_id)."""
    if dispatch is not None:
        counts = tuple(int(d) for d in dispatch) + (1,) * (3 - len(tuple(dispatch)))
        if len(counts) != 3 or min(counts) < 0 or max(counts) > max_groups:
            raise InputError(f"--dispatch {','.join(map(str, dispatch))}: 1 to 3 counts in 0..{max_groups}")
        return counts
    if first_output.kind == STORAGE and not nc4:
        width = re.search(r"vec(\d)", first_output.wgsl_type)
        elements = -(-view.size // (int(width.group(1)) if width else 1))
    else:  # NC4HW4 buffer or texture: one vec4 block per element
        elements = view.blocks
    invocations = -(-elements // max(int(per_invocation), 1))
    groups = -(-invocations // math.prod(wg))
    if groups <= max_groups:
        return (groups, 1, 1)
    rows = -(-groups // max_groups)
    if rows > max_groups:
        raise InputError(f"{invocations} invocations exceed the adapter's dispatch limits")
    return (max_groups, rows, 1)


def _compile(context, rendered, bindings: list[Binding], constants: dict, entry: str):
    """Pipeline with an explicit layout of every declared binding; errors as file:line reports."""
    wgpu, device = context.wgpu, context.device
    entries = []
    for b in bindings:
        entry_ = {"binding": b.index, "visibility": wgpu.ShaderStage.COMPUTE}
        if b.kind == TEXTURE_IN:
            entry_["texture"] = {"sample_type": wgpu.TextureSampleType.unfilterable_float,
                                 "view_dimension": wgpu.TextureViewDimension.d2_array}
        elif b.kind == TEXTURE_OUT:
            entry_["storage_texture"] = {"access": wgpu.StorageTextureAccess.write_only,
                                         "format": wgpu.TextureFormat.rgba32float,
                                         "view_dimension": wgpu.TextureViewDimension.d2_array}
        elif b.kind == UNIFORM:
            entry_["buffer"] = {"type": wgpu.BufferBindingType.uniform}
        else:
            entry_["buffer"] = {"type": wgpu.BufferBindingType.read_only_storage if b.read_only
                                else wgpu.BufferBindingType.storage}
        entries.append(entry_)
    try:
        module = device.create_shader_module(code=rendered.code, label=Path(rendered.name).name)
    except Exception as exc:
        raise compile_report(rendered, str(exc), adapter=context.name) from None
    try:
        layout = device.create_bind_group_layout(entries=entries)
        pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
            compute={"module": module, "entry_point": entry, "constants": constants})
    except Exception as exc:
        raise compile_report(rendered, str(exc), adapter=context.name) from None
    return pipeline, layout


def _encode(encoder, pipeline, bind_group, groups, timestamp_writes=None) -> None:
    compute = encoder.begin_compute_pass(timestamp_writes=timestamp_writes)
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, bind_group)
    compute.dispatch_workgroups(*groups)
    compute.end()


def _submit(context, encoder) -> None:
    try:
        context.queue.submit([encoder.finish()])
    except Exception as exc:
        raise WgnnError(f"GPU submission failed on {context.name}: {exc}") from None


def _time_dispatch(context, pipeline, bind_group, groups, repeat: int, wait) -> Timing:
    """GPU time of `repeat` compute passes (one dispatch each) from timestamp queries, else the
    wall time of submit + wait per dispatch."""
    device, wgpu = context.device, context.wgpu
    if "timestamp-query" not in context.features:
        samples = []
        for _ in range(repeat):
            encoder = device.create_command_encoder()
            _encode(encoder, pipeline, bind_group, groups)
            start = _time.perf_counter()
            _submit(context, encoder)
            wait()
            samples.append((_time.perf_counter() - start) * 1e6)
        return Timing("wall", samples)
    from ..backends.wgpu.profiler import timestamp_period

    period = timestamp_period(context)
    samples = []
    for done in range(0, repeat, TIMESTAMP_CHUNK):
        count = min(TIMESTAMP_CHUNK, repeat - done)
        queries = device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * count)
        resolved = device.create_buffer(size=16 * count, usage=wgpu.BufferUsage.QUERY_RESOLVE
                                        | wgpu.BufferUsage.COPY_SRC)
        encoder = device.create_command_encoder()
        for i in range(count):
            _encode(encoder, pipeline, bind_group, groups, {"query_set": queries, "beginning_of_pass_write_index":
                                                            2 * i, "end_of_pass_write_index": 2 * i + 1})
        encoder.resolve_query_set(queries, 0, 2 * count, resolved, 0)
        _submit(context, encoder)
        ticks = np.frombuffer(device.queue.read_buffer(resolved), np.uint64).reshape(count, 2).astype(np.int64)
        samples += [float(t) * period / 1e3 for t in ticks[:, 1] - ticks[:, 0]]
    return Timing("timestamp-query", samples)


__all__ = ["Comparison", "ShaderCompileError", "ShaderResult", "Timing", "call_reference", "compare",
           "load_kernel", "load_reference", "reference_path", "run"]
