"""Verification of models before use.

The Python flatbuffers package follows whatever offsets a buffer holds (it has no verifier), so a
corrupted or crafted .wgnn file could make it read garbage, loop or raise anything. Loading
therefore runs two passes, each raising ModelVerificationError (a ModelError) that names the object
at fault and, for structural problems, its byte offset:

1. verify_buffer(data): the flatbuffers structure against models/schema/wgnn.fbs, with the rules of
   the C++ flatbuffers Verifier: every uoffset points forward and inside the buffer, tables and
   vtables are aligned and in bounds, each field lies inside its table, vector lengths times
   element sizes fit, strings are NUL-terminated UTF-8, required fields exist, nesting is bounded
   and no offset is followed more often than the file could hold distinct objects.
2. verify_graph(graph): the decoded graph: dtypes, ranks and dims (no negative or absurd sizes),
   duplicate names, node inputs that nothing defines, cycles, attribute types against the op's
   definition, subgraphs (which may read their enclosing graphs' tensors).

Limits (absurd sizes, nesting) are a Limits dataclass, passable to the load functions.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from ..engine.dtypes import DTYPE_CODES
from ..engine.errors import ModelVerificationError, node_label

# flatbuffers offsets are 32-bit, and its own verifier refuses buffers of 2 GiB and more.
MAX_BUFFER_BYTES = 2 ** 31 - 1
FILE_IDENTIFIER = b"WGNN"

_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U16 = struct.Struct("<H").unpack_from


@dataclass(frozen=True)
class Limits:
    """What a model may declare before it is refused as absurd.

    Arguments:
        max_tensor_elements: elements of any stored or declared tensor (also the largest dim).
        max_rank: dims of any tensor (numpy's own limit is 64).
        max_depth: nesting of flatbuffers tables (a subgraph costs about 3 levels).
        max_objects: tables, vectors and strings followed in one file; None means one per 4 bytes
            of file, the most a file whose objects are not shared can hold.
    """

    max_tensor_elements: int = 2 ** 34
    max_rank: int = 64
    max_depth: int = 64
    max_objects: int | None = None


DEFAULT_LIMITS = Limits()


# ------------------------------------------------------------------------------ the schema
@dataclass(frozen=True)
class Field:
    """One field of a table in schema order (vtable slot 4 + 2 * index)."""

    name: str
    kind: str  # "scalar", "string", "vector" (of scalars), "strings", "table", "tables"
    size: int = 4  # bytes of a scalar, or of one element of a scalar vector
    table: str = ""
    required: bool = False


def _scalar(name: str, size: int) -> Field:
    return Field(name, "scalar", size)


def _string(name: str, required: bool = False) -> Field:
    return Field(name, "string", required=required)


# Mirrors models/schema/wgnn.fbs; tests/models/test_verify.py checks that the two agree.
SCHEMA: dict[str, tuple[Field, ...]] = {
    "Dim": (_scalar("value", 8), _string("symbol")),
    "ValueInfo": (_string("name", True), _scalar("dtype", 1), _scalar("has_shape", 1),
                  Field("shape", "tables", table="Dim")),
    "Tensor": (_string("name", True), _scalar("dtype", 1), Field("dims", "vector", 8), Field("data", "vector", 1)),
    "Attribute": (_string("name", True), _scalar("type", 1), _scalar("i", 8), _scalar("f", 8), _string("s"),
                  Field("ints", "vector", 8), Field("floats", "vector", 8), Field("strings", "strings"),
                  Field("tensor", "table", table="Tensor"), Field("graph", "table", table="Graph")),
    "Node": (_string("name"), _string("op_type", True), Field("inputs", "strings"), Field("outputs", "strings"),
             Field("attributes", "tables", table="Attribute")),
    "Graph": (_string("name"), Field("inputs", "tables", table="ValueInfo"),
              Field("outputs", "tables", table="ValueInfo"), Field("value_infos", "tables", table="ValueInfo"),
              Field("initializers", "tables", table="Tensor"), Field("nodes", "tables", table="Node")),
    "KeyValue": (_string("key", True), _string("value")),
    "Model": (_scalar("format_version", 4), _string("producer_name"), _string("producer_version"),
              _string("source"), Field("metadata", "tables", table="KeyValue"), Field("graph", "table", table="Graph")),
}
ROOT_TABLE = "Model"


def _where(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "file"


class _Walker:
    """Walks every object reachable from the root, bounds-checking before each read."""

    def __init__(self, data: bytes, origin: str, limits: Limits, marks: dict[str, list[int]] | None = None):
        self.data = data
        self.size = len(data)
        self.origin = origin
        self.limits = limits
        self.objects = 0
        self.budget = limits.max_objects if limits.max_objects is not None else self.size // 4 + 1
        self.marks = marks  # for the fuzzer: byte positions of offsets, lengths and vtables

    def fail(self, path: tuple, offset: int, what: str) -> ModelVerificationError:
        where = _where(path)
        return ModelVerificationError(f"{self.origin} is truncated or corrupted: {where} (byte {offset}): {what}",
                                      where=where, offset=offset)

    def mark(self, kind: str, pos: int) -> None:
        if self.marks is not None:
            self.marks.setdefault(kind, []).append(pos)

    def count(self, path: tuple, pos: int) -> None:
        self.objects += 1
        if self.objects > self.budget:
            raise self.fail(path, pos, f"more than {self.budget} objects reached: offsets are shared or point "
                                       "back into other objects (no wgnn writer produces this)")

    def uoffset(self, pos: int, path: tuple) -> int:
        """The target of the uoffset stored at pos (pos is in bounds and aligned)."""
        self.mark("uoffset", pos)
        offset = _U32(self.data, pos)[0]
        if offset == 0 or offset > MAX_BUFFER_BYTES:
            raise self.fail(path, pos, f"offset {offset} is not a valid forward offset")
        target = pos + offset
        if target >= self.size:
            raise self.fail(path, pos, f"offset {offset} points to byte {target}, past the end of the "
                                       f"{self.size}-byte file")
        return target

    def table_header(self, pos: int, path: tuple) -> tuple[int, int, int]:
        """(vtable position, vtable size, table size) of the table at pos, all in bounds."""
        if pos % 4 or pos + 4 > self.size:
            raise self.fail(path, pos, "table is misaligned or starts past the end of the file")
        self.mark("soffset", pos)
        vtable = pos - _I32(self.data, pos)[0]
        if vtable < 0 or vtable % 2 or vtable + 4 > self.size:
            raise self.fail(path, pos, f"vtable at byte {vtable} is misaligned or outside the file")
        self.mark("vtable", vtable)
        vsize, tsize = _U16(self.data, vtable)[0], _U16(self.data, vtable + 2)[0]
        if vsize < 4 or vsize % 2 or vtable + vsize > self.size:
            raise self.fail(path, pos, f"vtable at byte {vtable} has an invalid size {vsize}")
        if tsize < 4 or pos + tsize > self.size:
            raise self.fail(path, pos, f"table of {tsize} bytes does not fit in the file")
        return vtable, vsize, tsize

    def field_position(self, pos: int, header: tuple[int, int, int], index: int, field: Field,
                       path: tuple) -> int | None:
        """Byte position of field `index` of the table at pos, or None when it is absent."""
        vtable, vsize, tsize = header
        slot = 4 + 2 * index
        voffset = _U16(self.data, vtable + slot)[0] if slot + 2 <= vsize else 0
        if voffset == 0:
            if field.required:
                raise self.fail(path, pos, "required field is missing")
            return None
        inline = field.size if field.kind == "scalar" else 4
        where = pos + voffset
        if voffset < 4 or voffset + inline > tsize:
            raise self.fail(path, where, f"field at table offset {voffset} lies outside its {tsize}-byte table")
        if where % inline:
            raise self.fail(path, where, f"field is not aligned to {inline} bytes")
        return where

    def table(self, pos: int, name: str, path: tuple, depth: int) -> None:
        if depth > self.limits.max_depth:
            raise self.fail(path, pos, f"tables nest deeper than {self.limits.max_depth} levels")
        self.count(path, pos)
        header = self.table_header(pos, path)
        for index, field in enumerate(SCHEMA[name]):
            fpath = path + (field.name,)
            where = self.field_position(pos, header, index, field, fpath)
            if where is None or field.kind == "scalar":
                continue
            target = self.uoffset(where, fpath)
            if field.kind == "string":
                self.string(target, fpath)
            elif field.kind == "vector":
                self.vector(target, field.size, fpath)
            elif field.kind == "table":
                self.table(target, field.table, fpath, depth + 1)
            else:  # vectors of offsets: strings or tables
                for k in range(self.vector(target, 4, fpath)):
                    element = self.uoffset(target + 4 + 4 * k, fpath + (k,))
                    if field.kind == "strings":
                        self.string(element, fpath + (k,))
                    else:
                        self.table(element, field.table, fpath + (k,), depth + 1)

    def vector(self, pos: int, element_size: int, path: tuple) -> int:
        """Length of the vector at pos, after checking that all of it lies in the file."""
        self.count(path, pos)
        if pos % 4 or pos + 4 > self.size:
            raise self.fail(path, pos, "vector length is misaligned or past the end of the file")
        self.mark("length", pos)
        length = _U32(self.data, pos)[0]
        if length * element_size > self.size - pos - 4:
            raise self.fail(path, pos, f"vector of {length} elements ({length * element_size} bytes) runs past "
                                       f"the end of the {self.size}-byte file")
        return length

    def string(self, pos: int, path: tuple) -> None:
        length = self.vector(pos, 1, path)
        end = pos + 4 + length
        if end >= self.size or self.data[end] != 0:
            raise self.fail(path, pos, f"string of {length} bytes is not NUL-terminated inside the file")
        try:
            self.data[pos + 4:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(path, pos, f"string is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def _readable(data) -> bytes | bytearray:
    return data if isinstance(data, (bytes, bytearray)) else bytes(data)  # no copy of a file's bytes


def _check_header(data: bytes, origin: str) -> None:
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise ModelVerificationError(f"{origin} is not a .wgnn file (no WGNN identifier)", where="file", offset=4)
    if len(data) > MAX_BUFFER_BYTES:
        raise ModelVerificationError(f"{origin} is {len(data)} bytes; .wgnn files (flatbuffers) end at "
                                     f"{MAX_BUFFER_BYTES} bytes", where="file", offset=0)


def read_format_version(data: bytes, *, origin: str = "<bytes>") -> int:
    """The format_version field, read safely before the rest (a newer file may differ in layout)."""
    _check_header(data, origin)
    data = _readable(data)
    walker = _Walker(data, origin, DEFAULT_LIMITS)
    root = walker.uoffset(0, ("root",))
    header = walker.table_header(root, (ROOT_TABLE,))
    where = walker.field_position(root, header, 0, SCHEMA[ROOT_TABLE][0], (ROOT_TABLE, "format_version"))
    return 0 if where is None else _U32(data, where)[0]


def verify_buffer(data: bytes, *, origin: str = "<bytes>", limits: Limits | None = None) -> None:
    """Check a .wgnn file's flatbuffers structure; raise ModelVerificationError at the first fault."""
    _check_header(data, origin)
    walker = _Walker(_readable(data), origin, limits or DEFAULT_LIMITS)
    walker.table(walker.uoffset(0, ("root",)), ROOT_TABLE, (), 0)


def structure_positions(data: bytes) -> dict[str, list[int]]:
    """Byte positions of every uoffset, vector length, table soffset and vtable in a valid file:
    where a fuzzer's mutations hurt most."""
    marks: dict[str, list[int]] = {}
    walker = _Walker(_readable(data), "<bytes>", DEFAULT_LIMITS, marks)
    walker.table(walker.uoffset(0, ("root",)), ROOT_TABLE, (), 0)
    return marks


# --------------------------------------------------------------------------- the graph
def check_dims(dims, *, what: str, origin: str, limits: Limits, declared: bool = False) -> None:
    """Refuse negative, absurdly large and too many dims. Declared shapes (value infos) may hold
    symbolic dims (str) and -1 (unknown size)."""
    if len(dims) > limits.max_rank:
        raise ModelVerificationError(f"{origin}: {what} has rank {len(dims)}, more than the limit of "
                                     f"{limits.max_rank}", where=what)
    sizes = []
    for axis, d in enumerate(dims):
        if isinstance(d, str) and declared:
            continue
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise ModelVerificationError(f"{origin}: {what} has dim {axis} = {d!r}, not an integer", where=what)
        if d < (-1 if declared else 0):
            raise ModelVerificationError(f"{origin}: {what} has negative dim {axis} = {d} (shape {list(dims)})",
                                         where=what)
        if d > limits.max_tensor_elements:
            raise ModelVerificationError(f"{origin}: {what} has dim {axis} = {d}, past the limit of "
                                         f"{limits.max_tensor_elements} elements (shape {list(dims)})", where=what)
        if d >= 0:
            sizes.append(int(d))
    total = math.prod(sizes)
    if total > limits.max_tensor_elements:
        raise ModelVerificationError(f"{origin}: {what} has {total} elements (shape {list(dims)}), past the limit "
                                     f"of {limits.max_tensor_elements}", where=what)


_ATTR_TYPES = {
    "int": lambda v: isinstance(v, (int, np.integer)),
    "float": lambda v: isinstance(v, (int, float, np.integer, np.floating)),
    "string": lambda v: isinstance(v, str),
    "ints": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, np.integer)) for x in v),
    "floats": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, np.integer, np.floating))
                                                             for x in v),
    "strings": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    "tensor": lambda v: isinstance(v, np.ndarray),
    "graph": lambda v: type(v).__name__ == "Graph",
}


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    if type(value).__name__ == "Graph":
        return "a graph"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


class _GraphCheck:
    def __init__(self, origin: str, limits: Limits):
        from ..engine.ops import load_ops
        from ..engine.ops.base import OPS

        load_ops()
        self.ops = OPS
        self.origin = origin
        self.limits = limits

    def fail(self, where: str, what: str) -> ModelVerificationError:
        return ModelVerificationError(f"{self.origin}: {where} {what}", where=where)

    def tensor_value(self, value, what: str) -> None:
        if not isinstance(value, np.ndarray):
            raise self.fail(what, f"is {_describe(value)}, not a numpy array")
        if value.dtype.name not in DTYPE_CODES:
            raise self.fail(what, f"has element type {value.dtype}, which wgnn does not support")
        check_dims(value.shape, what=what, origin=self.origin, limits=self.limits)

    def info(self, info, what: str) -> None:
        if not info.name:
            raise self.fail(what, "has an empty name")
        if info.dtype is not None and info.dtype not in DTYPE_CODES:
            raise self.fail(f'{what} "{info.name}"', f"has unsupported element type {info.dtype!r}")
        if info.shape is not None:
            check_dims(info.shape, what=f'{what} "{info.name}"', origin=self.origin, limits=self.limits,
                       declared=True)

    def attribute(self, node, key: str, value, visible: set[str], path: str) -> None:
        label = f"{node_label(node)} attribute {key!r}"
        op = self.ops.get(node.op_type)
        spec = op.attrs.get(key) if op is not None else None
        if spec is not None and not _ATTR_TYPES[spec.type](value):
            raise self.fail(label, f"should be {spec.type}, got {_describe(value)}")
        if isinstance(value, np.ndarray):
            self.tensor_value(value, label)
        elif type(value).__name__ == "Graph":
            self.graph(value, f"{path} {label}", frozenset(visible))

    def graph(self, graph, path: str, outer: frozenset[str]) -> None:
        inputs: set[str] = set()
        for k, info in enumerate(graph.inputs):
            self.info(info, f"{path} input {k}")
            if info.name in inputs:
                raise self.fail(f'{path} input "{info.name}"', "is declared twice")
            inputs.add(info.name)
        for name, value in graph.initializers.items():
            what = f'{path} initializer "{name}"'
            if not name:
                raise self.fail(f"{path} initializer", "has an empty name")
            self.tensor_value(value, what)
            if name in inputs:
                raise self.fail(what, "has the name of a graph input")
        for info in graph.value_info.values():
            self.info(info, f"{path} value info")
        defined = inputs | set(graph.initializers)
        producer: dict[str, int] = {}
        for index, node in enumerate(graph.nodes):
            if not node.op_type:
                raise self.fail(f"{path} node {index}", "has no op type")
            for name in node.outputs:
                if not name:
                    continue
                if name in producer:
                    other = graph.nodes[producer[name]]
                    raise self.fail(node_label(node), f'writes tensor "{name}", which {node_label(other)} '
                                                      "also writes (duplicate output name)")
                if name in defined:
                    raise self.fail(node_label(node), f'writes tensor "{name}", which is already a graph '
                                                      "input or initializer")
                producer[name] = index
        visible = set(outer) | defined | set(producer)
        for node in graph.nodes:
            for name in node.inputs:
                if name and name not in visible:
                    raise self.fail(node_label(node), f'reads tensor "{name}", which no node, graph input, '
                                                      "initializer or enclosing graph defines")
            for key, value in node.attrs.items():
                self.attribute(node, key, value, visible, path)
        seen_outputs: set[str] = set()
        for k, info in enumerate(graph.outputs):
            self.info(info, f"{path} output {k}")
            if info.name in seen_outputs:
                raise self.fail(f'{path} output "{info.name}"', "is listed twice")
            seen_outputs.add(info.name)
            if info.name not in visible:
                raise self.fail(f'{path} output "{info.name}"', "is not produced by any node, input or initializer")
        self.acyclic(graph, producer, path)

    def acyclic(self, graph, producer: dict[str, int], path: str) -> None:
        """Kahn's algorithm over the node -> node edges; nodes left over sit on or behind a cycle."""
        nodes = graph.nodes
        waiting = [0] * len(nodes)
        readers: dict[int, list[int]] = {}
        for index, node in enumerate(nodes):
            for dep in {producer[n] for n in node.inputs if n in producer}:
                waiting[index] += 1
                readers.setdefault(dep, []).append(index)
        ready = [i for i, w in enumerate(waiting) if w == 0]
        done = 0
        while ready:
            index = ready.pop()
            done += 1
            for reader in readers.get(index, ()):
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    ready.append(reader)
        if done < len(nodes):
            stuck = [node_label(nodes[i]) for i, w in enumerate(waiting) if w][:4]
            raise self.fail(path, f"has a cycle: {len(nodes) - done} node(s) depend on their own outputs, "
                                  f"e.g. {', '.join(stuck)}")


def verify_graph(graph, *, origin: str = "<model>", limits: Limits | None = None,
                 outer_scope: frozenset[str] = frozenset()) -> None:
    """Check a decoded graph's consistency; raise ModelVerificationError naming the node or tensor.

    Arguments:
        graph: an engine.graph.Graph (from a .wgnn file, the converter or built by hand).
        origin: the file name used in messages.
        limits: size limits (default DEFAULT_LIMITS).
        outer_scope: tensor names an enclosing graph defines (for subgraphs).
    """
    _GraphCheck(origin, limits or DEFAULT_LIMITS).graph(graph, "graph", frozenset(outer_scope))
