"""backends/wgpu/ffi_types.py: simple C type strings of wgpu-py's cffi bindings are built without
cffi's parser, and come out as the very C types the parser gives."""
import pytest
from wgnn.backends.wgpu import ffi_types

ffi = pytest.importorskip("wgpu.backends.wgpu_native").ffi
model = pytest.importorskip("cffi.model")

SIMPLE = ["WGPUBindGroupEntry *", "WGPUBindGroupEntry[]", "WGPUChainedStruct * ", "WGPUFeatureName[]",
          "WGPUAdapter[]", "WGPUBufferMapCallback", "WGPULimits", "char *", "uint8_t []", "void *", "intptr_t",
          "uint32_t[ ]"]
LEFT_TO_THE_PARSER = ["void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)", "const char *", "int[4]",
                      "WGPUNoSuchType *", "char **", "struct WGPUChainedStruct *"]


def c_type(tp):
    with ffi._lock:  # cffi builds C types with its lock held
        return ffi._get_cached_btype(tp)


def parsed(cdecl: str):
    """The C type cffi's own parser makes of cdecl."""
    return c_type(ffi._parser.parse_type(cdecl))


@pytest.mark.parametrize("cdecl", SIMPLE)
def test_simple_strings_give_the_parsers_c_type(cdecl):
    tp = ffi_types.simple_type(ffi._parser._declarations, model, cdecl)
    assert tp is not None
    assert c_type(tp) is parsed(cdecl)


@pytest.mark.parametrize("cdecl", LEFT_TO_THE_PARSER)
def test_other_strings_are_left_to_the_parser(cdecl):
    assert ffi_types.simple_type(ffi._parser._declarations, model, cdecl) is None


def test_installed_ffi_builds_simple_types_without_parsing(monkeypatch):
    from wgnn.backends.wgpu.context import _wgpu

    _wgpu()  # installs it, as the first GPU use does
    assert ffi_types.install(ffi)  # once only: a second call changes nothing
    cdecl = "WGPUTextureViewDescriptor *"
    expected = parsed(cdecl)
    monkeypatch.delitem(ffi._parsed_types, cdecl, raising=False)

    def no_parsing(text):
        raise AssertionError(f"cffi parsed {text!r}")

    monkeypatch.setattr(ffi._parser, "parse_type", no_parsing)
    assert ffi.typeof(cdecl) is expected
    assert ffi.new(cdecl).label.length == 0  # a zeroed descriptor of the real struct
    with pytest.raises(AssertionError, match="cffi parsed"):
        ffi.typeof("WGPUTextureViewDescriptor **")  # not simple: the parser's (here: refused)
