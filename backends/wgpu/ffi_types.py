"""Faster C type lookups for wgpu-py's cffi bindings.

wgpu-py builds every descriptor with `ffi.new("WGPUSomething *")`. cffi (in the ABI mode wgpu-py
uses) turns each new type string into a type by running its C parser over a source that declares
every typedef name of wgpu.h (~440 lines), ~21 ms per string on this machine; the result is cached
per process. A process's first session parses ~47 such strings: about 1.1 s of its cold start on
lavapipe (3.5 s in all), more than the pipeline compiles once those run on threads.

Nearly all of those strings are a declared name, a pointer to one, or an open array of one
("WGPUBindGroupEntry[]", "uint8_t *"), and the parser already holds the name's type: this module
builds those types directly (cffi's own type model, the same objects its parser would build, so
the same C types come out) and leaves every other string (function types, qualifiers, sized
arrays) to cffi's parser. It uses cffi's internals (the FFI's parsed-type cache and declarations,
`cffi.model`); anything unexpected there turns it off and cffi parses as before.
"""
from __future__ import annotations

import logging
import re

log = logging.getLogger("wgnn.wgpu")

# A type name, optionally followed by one "*" or "[]", spaces anywhere between.
SIMPLE_TYPE = re.compile(r"\s*(\w+)\s*(\*|\[\s*\])?\s*")


def simple_type(declarations: dict, model, cdecl: str):
    """cffi's model type of cdecl when it is a declared or primitive name, a pointer to one, or an
    open array of one; None for anything else (left to cffi's parser)."""
    match = SIMPLE_TYPE.fullmatch(cdecl)
    if match is None:
        return None
    name, suffix = match.groups()
    declared = declarations.get("typedef " + name)
    if declared is not None:
        item, quals = declared
    elif name == "void":
        item, quals = model.void_type, 0
    elif name in model.PrimitiveType.ALL_PRIMITIVE_TYPES:
        item, quals = model.PrimitiveType(name), 0
    else:
        return None
    if isinstance(item, model.RawFunctionType):
        return None  # cffi makes a function pointer of these: its parser's business
    if suffix is None:
        return item
    if suffix == "*":
        return model.PointerType(item, quals)
    return model.ArrayType(item, None)


def install_for_wgpu() -> bool:
    """install() on wgpu-py's FFI, where this wgpu-py has one where expected."""
    try:
        from wgpu.backends.wgpu_native import ffi
    except ImportError as exc:
        log.debug("wgpu-py's FFI is not where expected (%s): C types are parsed as usual", exc)
        return False
    return install(ffi)


def install(ffi) -> bool:
    """Make `ffi` build simple type strings without its parser (once per FFI); whether it does."""
    if getattr(ffi, "_wgnn_simple_types", False):
        return True
    try:
        from cffi import model

        declarations, parsed, build = ffi._parser._declarations, ffi._parsed_types, ffi._get_cached_btype
        parse = ffi._typeof_locked
    except (ImportError, AttributeError) as exc:
        log.debug("cffi's type internals are not as expected (%s): C types are parsed as usual", exc)
        return False

    def typeof_locked(cdecl):  # cffi calls this with the FFI's lock held, on a cache miss
        if isinstance(cdecl, str):
            try:
                tp = simple_type(declarations, model, cdecl)
            except Exception:  # an internals change: let cffi's parser decide
                tp = None
            if tp is not None:
                result = parsed[cdecl] = (build(tp), tp.is_raw_function)
                return result
        return parse(cdecl)

    ffi._typeof_locked = typeof_locked
    ffi._wgnn_simple_types = True
    return True
