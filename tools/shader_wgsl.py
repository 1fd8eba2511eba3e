"""WGSL text for the shader harness (`wgnn shader`): {{NAME}} substitution with a map back to the
file's lines, the included fragments and the prelude appended as the loader appends them, binding /
override / workgroup-size declarations read from the source, and compiler messages turned into
`file:line:col` reports (in the kernel or in the appended file at fault) with the source line and a
caret.
"""
from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field

from ..backends.wgpu.loader import (
    PARAM_PATTERN,
    STORAGE,
    TEXTURE_IN,
    TEXTURE_OUT,
    UNIFORM,
    included_fragments,
    kernel_source,
)
from ..engine.errors import InputError, WgnnError

F16_DIRECTIVE = "enable f16; "  # put on line 1 so that the file's line numbers stay the compiled ones
SCALAR_BYTES = {"f32": 4, "f16": 2, "i32": 4, "u32": 4}

_BINDING = re.compile(
    r"(?P<attrs>(?:@\w+\s*(?:\([^)]*\))?\s*)+)var\s*(?:<(?P<space>[^>]*)>)?\s*(?P<name>\w+)\s*:\s*(?P<type>[^;]+);")
_OVERRIDE = re.compile(r"\boverride\s+(?P<name>\w+)\s*(?::\s*(?P<type>\w+))?\s*(?:=\s*(?P<value>[^;]+))?;")
_LOCATION = re.compile(r"┌─\s*(?P<file>\S*?):(?P<line>\d+):(?P<col>\d+)")
_HEADLINE = re.compile(r"(?:parsing error|validation error|[Ee]rror):\s*(?P<text>.+)")


class ShaderCompileError(WgnnError):
    """A kernel failed to compile. str() is the full report: `file:line:col: error: message`, the
    source line and a caret under the column; .file/.line/.column/.headline give the parts."""

    def __init__(self, report: str, *, file: str, line: int | None = None, column: int | None = None,
                 headline: str = ""):
        super().__init__(report)
        self.file, self.line, self.column, self.headline = file, line, column, headline


@dataclass
class Binding:
    """One @group(0) @binding(i) declaration of the kernel."""
    index: int
    name: str  # the WGSL variable
    kind: str  # loader kinds: storage, uniform, texture, storage_texture
    wgsl_type: str
    read_only: bool = False
    scalar: str = "f32"  # element scalar of a storage array (f32, f16, i32, u32)
    tensor: str = ""  # the harness tensor bound here (an NC4HW4 accessor's binding is NAME_b / NAME_t)

    @property
    def label(self) -> str:
        space = {STORAGE: "storage, read" if self.read_only else "storage, read_write", UNIFORM: "uniform"}
        return f"var<{space[self.kind]}> {self.wgsl_type}" if self.kind in space else self.wgsl_type


@dataclass
class Appended:
    """A file the loader appends after the kernel (an included fragment, the prelude), compiled."""
    file: str  # under kernels_wgsl/
    lines: list[str]  # the file's lines (before substitution)
    compiled_lines: list[str]
    origin: list[tuple[int, bool]]  # compiled line -> (file line, changed by substitution)


@dataclass
class Rendered:
    """A kernel's compiled text and how its lines map back to the file."""
    name: str
    code: str
    kernel_lines: list[str]  # the file's lines (before substitution)
    compiled_lines: list[str]  # the kernel part of `code`, line by line
    origin: list[tuple[int, bool]]  # compiled kernel line -> (file line, changed by substitution)
    first_line_shift: int = 0  # characters put in front of line 1 (the f16 directive)
    appended: list[Appended] = field(default_factory=list)  # after the kernel, in order: fragments, prelude
    bindings: list[Binding] = field(default_factory=list)
    overrides: dict[str, str | None] = field(default_factory=dict)  # name -> default expression


def strip_comments(text: str) -> str:
    """Comments blanked out (newlines kept, so positions stay valid for the regexes)."""
    def blank(match):
        return re.sub(r"[^\n]", " ", match.group(0))

    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.S)


def declared_binding_numbers(text: str) -> set[int]:
    return {int(m) for m in re.findall(r"@binding\s*\(\s*(\d+)\s*\)", strip_comments(text))}


def text_parameters(text: str) -> list[str]:
    """{{NAME}} text parameters in order of first appearance."""
    seen: list[str] = []
    for name in PARAM_PATTERN.findall(text):
        if name not in seen:
            seen.append(name)
    return seen


def substitute_lines(source: str, text: dict[str, str]) -> tuple[list[str], list[tuple[int, bool]]]:
    """{{NAME}}s substituted line by line: the compiled lines, and for each the file line it came
    from and whether substitution changed it."""
    compiled, origin = [], []
    for number, line in enumerate(source.split("\n"), 1):
        new = PARAM_PATTERN.sub(lambda m: str(text[m.group(1)]), line)
        for part in new.split("\n"):
            compiled.append(part)
            origin.append((number, new != line))
    return compiled, origin


def render(name: str, source: str, text: dict[str, str], *, f16: bool, prelude: bool) -> Rendered:
    """Substitute {{NAME}}s line by line (recording which file line each compiled line came from),
    put `enable f16;` on line 1 when asked and the source lacks it, append the included fragments
    (substituted alike) and the prelude."""
    fragments = {file: kernel_source(file) for file in included_fragments(name, source)}
    missing = [p for p in text_parameters("\n".join([source, *fragments.values()])) if p not in text]
    if missing:
        given = ", ".join(sorted(text)) or "none"
        hint = "; {{DECL_NAME}} text parameters take NC4HW4 accessors: pass --nc4hw4 NAME" \
            if any(m.startswith("DECL_") for m in missing) else ""
        raise InputError(f"{name} needs text parameter(s) {', '.join('{{' + m + '}}' for m in missing)} "
                         f"(pass --text NAME=VALUE{hint}); given: {given}")
    compiled, origin = substitute_lines(source, text)
    shift = 0
    if f16 and not re.search(r"^\s*enable\s+f16\s*;", strip_comments(source), re.M):
        compiled[0] = F16_DIRECTIVE + compiled[0]
        shift = len(F16_DIRECTIVE)
    appended = [Appended(file, body.split("\n"), *substitute_lines(body, text)) for file, body in fragments.items()]
    if prelude:
        body = kernel_source("prelude.wgsl")
        appended.append(Appended("prelude.wgsl", body.split("\n"), *substitute_lines(body, {})))
    code = "\n".join(compiled + [line for part in appended for line in part.compiled_lines])
    rendered = Rendered(name, code, source.split("\n"), compiled, origin, shift, appended)
    rendered.bindings = parse_bindings(name, "\n".join(compiled + [line for part in appended[:len(fragments)]
                                                                   for line in part.compiled_lines]))
    rendered.overrides = {m["name"]: m["value"] for m in _OVERRIDE.finditer(strip_comments(code))}
    return rendered


def parse_bindings(name: str, kernel: str) -> list[Binding]:
    """The kernel's resource declarations in binding order (group 0 only)."""
    bindings: dict[int, Binding] = {}
    for m in _BINDING.finditer(strip_comments(kernel)):
        attrs = dict(re.findall(r"@(\w+)\s*\(\s*(\d+)\s*\)", m["attrs"]))
        if "binding" not in attrs:
            continue
        index, var, space, wgsl_type = int(attrs["binding"]), m["name"], (m["space"] or "").replace(" ", ""), \
            " ".join(m["type"].split())
        if int(attrs.get("group", 0)) != 0:
            raise InputError(f"{name}: {var} is in @group({attrs['group']}); the harness binds group 0 only")
        if index in bindings:
            raise InputError(f"{name}: @binding({index}) is declared twice ({bindings[index].name} and {var})")
        bindings[index] = _classify(name, index, var, space, wgsl_type)
    return [bindings[i] for i in sorted(bindings)]


def _classify(name: str, index: int, var: str, space: str, wgsl_type: str) -> Binding:
    if space.startswith("storage"):
        scalar = re.findall(r"\b(f32|f16|i32|u32)\b", wgsl_type)
        if not wgsl_type.startswith("array<") or not scalar:
            raise InputError(f"{name}: binding {index} ({var}: {wgsl_type}): the harness binds storage arrays of "
                             "f32/f16/i32/u32 scalars or vectors only")
        return Binding(index, var, STORAGE, wgsl_type, read_only=space.split(",")[-1] == "read" or space == "storage",
                       scalar=scalar[-1], tensor=var)
    if space == "uniform":
        return Binding(index, var, UNIFORM, wgsl_type, tensor=var)
    if wgsl_type.startswith("texture_2d_array<"):
        return Binding(index, var, TEXTURE_IN, wgsl_type, tensor=var)
    if wgsl_type.startswith("texture_storage_2d_array<") and "rgba32float" in wgsl_type:
        return Binding(index, var, TEXTURE_OUT, wgsl_type, tensor=var)
    raise InputError(f"{name}: binding {index} ({var}: {wgsl_type}) is not supported by the harness (storage arrays, "
                     "the params uniform, and NC4HW4 2-D array textures are)")


# ------------------------------------------------------------------------------ small expressions
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def evaluate(expression: str, names: dict[str, object], what: str) -> int | float:
    """Arithmetic on numbers and names (e.g. "y.size // 4", "x.shape[1]", "0.5", "64u"): WGSL
    literal suffixes (u, i, f) are accepted; no calls, no other Python."""
    text = re.sub(r"\b(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)[uif]\b", r"\1", expression.strip())
    if text in ("true", "false"):
        return int(text == "true")

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.Attribute) and node.attr in ("size", "ndim", "shape", "blocks"):
            return getattr(value(node.value), node.attr)
        if isinstance(node, ast.Subscript):
            return value(node.value)[value(node.slice)]
        raise InputError(f"{what}: cannot evaluate {ast.unparse(node)!r} (numbers, + - * / // % **, and tensor "
                         f"properties NAME.size, NAME.shape[i], NAME.ndim, NAME.blocks; names: {sorted(names)})")

    try:
        result = value(ast.parse(text, mode="eval").body)
    except SyntaxError:
        raise InputError(f"{what}: {expression!r} is not a number or an expression") from None
    except (IndexError, TypeError, ZeroDivisionError, AttributeError) as exc:
        raise InputError(f"{what}: {expression!r}: {exc}") from None
    if not isinstance(result, int | float):
        raise InputError(f"{what}: {expression!r} is not a number")
    return result


def override_values(rendered: Rendered, constants: dict[str, float]) -> dict[str, object]:
    """Override constants: --const values, else the declarations' defaults."""
    names: dict[str, object] = dict(constants)
    for name, default in rendered.overrides.items():
        if name not in names and default is not None:
            names[name] = evaluate(default, names, f"override {name}")
    return names


def workgroup_size(rendered: Rendered, entry: str, constants: dict[str, float]) -> tuple[int, int, int]:
    """The entry point's @workgroup_size, with override constants resolved (--const values first,
    then the overrides' defaults)."""
    code = strip_comments(rendered.code)
    m = re.search(r"@workgroup_size\s*\(([^)]*)\)\s*(?:@\w+(?:\([^)]*\))?\s*)*fn\s+" + re.escape(entry) + r"\s*\(",
                  code)
    if m is None:
        raise InputError(f"{rendered.name}: no compute entry point `fn {entry}` with @workgroup_size")
    names = override_values(rendered, constants)
    dims = []
    for part in (p for p in m.group(1).split(",") if p.strip()):
        try:
            dims.append(int(evaluate(part, names, "@workgroup_size")))
        except InputError:
            raise InputError(f"{rendered.name}: @workgroup_size({m.group(1).strip()}) needs a value for "
                             f"{part.strip()!r}: pass --const {part.strip()}=N") from None
    return tuple((dims + [1, 1])[:3])


# ------------------------------------------------------------------------------ compile errors
def compile_report(rendered: Rendered, message: str, *, adapter: str = "") -> ShaderCompileError:
    """wgpu/naga's message as `file:line:col: error: ...` followed by naga's annotated snippet with
    the file's line numbers (lines changed by {{...}} substitution shown before and after)."""
    headline_match = _HEADLINE.search(message)
    headline = headline_match["text"].strip() if headline_match else ""
    location = _LOCATION.search(message)
    where = f" (on {adapter})" if adapter else ""
    if location is None:  # no source position (e.g. a pipeline or override-constant error)
        lines = [ln.strip() for ln in message.splitlines() if ln.strip() and not ln.strip().startswith(("In wgpu",
                 "Caused by", "Validation Error"))]
        headline = headline or (lines[-1] if lines else message.strip())
        return ShaderCompileError(f"{rendered.name}: error{where}: {headline}", file=rendered.name, headline=headline)
    file, file_line, file_col, _, _ = _map_position(rendered, int(location["line"]), int(location["col"]))
    snippet = _snippet(rendered, message[location.end():])
    out = [f"{file}:{file_line}:{file_col}: error{where}: {headline or 'compile error'}", *snippet]
    return ShaderCompileError("\n".join(out), file=file, line=file_line, column=file_col, headline=headline)


def _snippet(rendered: Rendered, text: str) -> list[str]:
    """naga's source snippet (numbered lines, caret lines under them, `= note` lines) re-numbered
    to the file; a line {{...}} substitution changed is shown as written and as compiled."""
    rows: list[tuple[str, str]] = []  # (gutter, text)
    shift = 0  # characters of the f16 directive to drop from the last source line and its carets
    for raw in text.splitlines():
        numbered = re.match(r"^\s*(\d+)\s*│ ?(.*)$", raw)
        plain = re.match(r"^\s*│ ?(.*)$", raw)
        note = re.match(r"^\s*= (.*)$", raw)
        if numbered:
            line, body = int(numbered.group(1)), numbered.group(2)
            _, file_line, _, _, changed = _map_position(rendered, line, 1)
            shift = rendered.first_line_shift if line == 1 and body.startswith(F16_DIRECTIVE) else 0
            part, _ = _appended_part(rendered, line)
            number = str(file_line) if part is None else f"{part.file}:{file_line}"
            if changed:
                rows.append((number, (rendered.kernel_lines if part is None else part.lines)[file_line - 1]))
                rows.append(("", "after {{...}} substitution:"))
            rows.append((number, body[shift:]))
        elif plain and plain.group(1).strip():
            body = plain.group(1)
            rows.append(("", body[shift:] if body[:shift].strip() == "" else body))
        elif note:
            rows.append(("", "= " + note.group(1).strip()))
    width = max([len(g) for g, _ in rows] + [4])
    return [f"{g:>{width}} | {t}".rstrip() for g, t in rows]


def _appended_part(rendered: Rendered, line: int) -> tuple[Appended | None, int]:
    """The appended file compiled line `line` (1-based) is in and the compiled lines before it;
    (None, 0) where the line is the kernel's."""
    first = len(rendered.compiled_lines)
    for part in rendered.appended:
        if first < line <= first + len(part.compiled_lines):
            return part, first
        first += len(part.compiled_lines)
    return None, 0


def _map_position(rendered: Rendered, line: int, col: int) -> tuple[str, int, int, str, bool]:
    """Compiled (line, col) -> (file, line, col, text to show, whether substitution changed it)."""
    part, first = _appended_part(rendered, line)
    if part is not None:
        file_line, changed = part.origin[line - first - 1]
        text = part.compiled_lines[line - first - 1] if changed else part.lines[file_line - 1]
        return f"{part.file} (appended by the loader)", file_line, col, text, changed
    if line > len(rendered.compiled_lines):  # past the end of everything
        return rendered.name, line, col, "", False
    file_line, changed = rendered.origin[line - 1]
    compiled = rendered.compiled_lines[line - 1]
    if line == 1 and rendered.first_line_shift:
        compiled = compiled[rendered.first_line_shift:]
        col = max(col - rendered.first_line_shift, 1)
    if changed:
        return rendered.name, file_line, col, compiled, True
    return rendered.name, file_line, col, rendered.kernel_lines[file_line - 1], False
