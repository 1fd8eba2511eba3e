"""ONNX ops that are functions of other ops: expanded into their bodies before conversion.

ONNX defines some ops as functions of other ops, in their schema (Attention, RotaryEmbedding,
Swish, SwiGLU, the window functions, CenterCropPad, the loss ops, ...), and a model may define
its own functions (model-local FunctionProtos, which exporters such as PyTorch's write). Where
wgnn has no converter of its own for such an op, each call is replaced by its body (the one ONNX
builds for that node: some bodies depend on its attributes and input types), round after round
(a body may call other functions: SwiGLU calls Swish), through onnx's inliner, and the converter
then sees the body's ops. Ops wgnn converts itself (LayerNormalization, Gelu, ...) stay calls: its own
kernels for them are faster than their bodies.
"""
from __future__ import annotations

import contextlib

from ....engine.errors import ConversionError

DEFAULT_DOMAINS = ("", "ai.onnx")
MAX_ROUNDS = 8  # nesting of function calls expanded; deeper nests are left to _check_supported
EXPAND_DOMAIN = "wgnn.expand"  # the model-local functions made of schema functions' bodies


def _graphs(graph_proto):
    """graph_proto and its subgraphs, depth first."""
    yield graph_proto
    for node in graph_proto.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g)
            for sub in attr.graphs:
                yield from _graphs(sub)


def _calls(graph_proto):
    """(domain, op_type) of every node in the graph and its subgraphs."""
    for graph in _graphs(graph_proto):
        for node in graph.node:
            yield node.domain, node.op_type


def schema_function(op_type: str, opset: int = 1 << 30) -> bool:
    """Whether ONNX defines op_type (default domain, as of opset: default the newest) as a
    function of other ops."""
    from onnx import defs

    try:
        schema = defs.get_schema(op_type, opset, "")
    except defs.SchemaError:
        return False
    return schema.has_function or schema.has_context_dependent_function


def expandable(proto, opset: int, converters) -> set[tuple[str, str]]:
    """The (domain, op_type) calls of proto that wgnn cannot convert but can expand: model-local
    functions, and ops whose ONNX schema (at the model's opset) is a function."""
    local = {(f.domain, f.name) for f in proto.functions}
    found = set()
    for domain, op_type in set(_calls(proto.graph)):
        if domain in DEFAULT_DOMAINS and op_type in converters:
            continue
        if (domain, op_type) in local or (domain in DEFAULT_DOMAINS and schema_function(op_type, opset)):
            found.add((domain, op_type))
    return found


def _set_default_attributes(graph_proto, calls, opset: int) -> None:
    """Write the schema's default of every attribute a call to a schema function leaves out: a
    body reads its attributes by reference (Constant value_int = periodic, Cast to = dtype), and
    the inliner drops a reference to an attribute the call does not set, leaving Constant without
    a value and Cast without `to`."""
    from onnx import defs

    for node in graph_proto.node:
        if (node.domain, node.op_type) in calls:
            given = {attr.name for attr in node.attribute}
            for name, attr in defs.get_schema(node.op_type, opset, "").attributes.items():
                if name not in given and attr.default_value.type:
                    node.attribute.append(attr.default_value)


def copy_fields(source, target, skip: str) -> None:
    """Set target's fields (a protobuf message) to source's, all but the one named skip."""
    for descriptor, value in source.ListFields():
        if descriptor.name == skip:
            continue
        field = getattr(target, descriptor.name)
        if hasattr(field, "extend"):
            field.extend(value)
        elif hasattr(field, "CopyFrom"):
            field.CopyFrom(value)
        else:
            setattr(target, descriptor.name, value)


def _known_types(light, initializers) -> dict:
    """TypeProto per value name, from the model's value infos and onnx's shape inference (on a
    copy of the weightless model, the initializers declared by type and shape only)."""
    import onnx

    typed = onnx.ModelProto()
    typed.CopyFrom(light)
    typed.graph.value_info.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                  for t in initializers)
    with contextlib.suppress(Exception):  # inference failed: what the model declares is all there is
        typed = onnx.shape_inference.infer_shapes(typed)
    return {vi.name: vi.type for graph in _graphs(typed.graph)
            for vi in (*graph.input, *graph.output, *graph.value_info) if vi.type.HasField("tensor_type")}


def _localize(light, schema_calls, opset: int, types: dict, origin: str) -> None:
    """Make every call of a schema function in light a call of a model-local function of its own:
    the body ONNX builds for that node (a context-dependent one from the node's attributes and
    input types). onnx's inliner asks for the types of absent optional inputs when it builds
    such bodies itself (Attention with nonpad_kv_seqlen only), so the bodies are built here."""
    import onnx
    from onnx import defs

    for graph in _graphs(light.graph):
        for node in graph.node:
            if (node.domain, node.op_type) not in schema_calls:
                continue
            schema = defs.get_schema(node.op_type, opset, "")
            if schema.has_context_dependent_function and not all(name in types for name in node.input if name):
                # A builder handed an input of unknown type may crash (SequenceMap's, with a
                # sequence): left as it is, _check_supported names the op.
                continue
            # The newest body at or before the model's opset (RotaryEmbedding's is of 23 in a model of 24).
            dependent = schema.has_context_dependent_function
            versions = schema.context_dependent_function_opset_versions if dependent else schema.function_opset_versions
            version = max((v for v in versions if v <= opset), default=opset)
            try:
                if dependent:
                    inputs = [types.get(name, onnx.TypeProto()).SerializeToString() for name in node.input]
                    body = schema.get_context_dependent_function_with_opset_version(version, node.SerializeToString(),
                                                                                     inputs)
                else:
                    body = schema.get_function_with_opset_version(version)
            except Exception as exc:  # the C++ builders raise plain exceptions
                raise ConversionError(f'{origin}: {node.op_type} node "{node.name}": building the ops ONNX '
                                      f"defines it by failed: {exc}") from exc
            if not body:
                continue  # no body at this opset: _check_supported names the op
            function = onnx.FunctionProto()
            function.ParseFromString(body)
            # A body kept from an older opset (Swish's of 24, called by SwiGLU's at 28) is read at
            # the model's: the inliner refuses mixed versions, and ONNX keeps ops' meaning across
            # versions where it keeps a body.
            for imported in function.opset_import:
                if imported.domain in DEFAULT_DOMAINS:
                    imported.version = opset
            function.domain, function.name = EXPAND_DOMAIN, f"{node.op_type}.{len(light.functions)}"
            light.functions.append(function)
            node.domain, node.op_type = function.domain, function.name
    if not any(o.domain == EXPAND_DOMAIN for o in light.opset_import):
        light.opset_import.append(onnx.helper.make_opsetid(EXPAND_DOMAIN, 1))


def expand_functions(proto, opset: int, converters, origin: str) -> None:
    """Replace, in proto, every expandable call by its body (onnx.inliner), nested calls too. The
    inliner works on a copy without the top-level initializers (the weights are not copied);
    the expanded nodes then replace proto's own."""
    import onnx
    from onnx import inliner

    light = onnx.ModelProto()
    copy_fields(proto, light, skip="graph")
    copy_fields(proto.graph, light.graph, skip="initializer")
    for _ in range(MAX_ROUNDS):
        calls = expandable(light, opset, converters)
        if not calls:
            break
        local = {(f.domain, f.name) for f in light.functions}
        if calls - local:
            for graph in _graphs(light.graph):
                _set_default_attributes(graph, calls - local, opset)
            _localize(light, calls - local, opset, _known_types(light, proto.graph.initializer), origin)
        inlined = expandable(light, opset, converters) & {(f.domain, f.name) for f in light.functions}
        if not inlined:
            break  # no body for them at this opset: _check_supported names them
        try:
            light = inliner.inline_selected_functions(light, sorted(inlined))
        except Exception as exc:  # the C++ inliner raises plain exceptions
            listed = ", ".join(sorted({op.split(".")[0] for _, op in inlined}))
            raise ConversionError(f"{origin}: expanding {listed} into the ops ONNX defines them by failed: "
                                  f"{exc}") from exc
    for field in ("node", "value_info"):
        proto.graph.ClearField(field)
        getattr(proto.graph, field).extend(getattr(light.graph, field))
    proto.ClearField("functions")
    proto.functions.extend(f for f in light.functions if f.domain != EXPAND_DOMAIN)
