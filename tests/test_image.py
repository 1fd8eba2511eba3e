"""wgnn.image: the numpy twin's conventions (against ONNX Resize and hand-computed pixels), the GPU
kernel against the numpy twin on every adapter, input checks, and pipelines compiled once."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import test_backends as backends_under_test
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from wgnn.backends.wgpu.layout import pack_nc4hw4

import wgnn
from wgnn import image

GPUS = [b for b in backends_under_test() if b.startswith("wgpu")]
needs_gpu = pytest.mark.skipif(not GPUS, reason="no GPU adapter (install mesa-vulkan-drivers)")
IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
rng = np.random.default_rng(0)


def pixels(*shape) -> np.ndarray:
    return rng.integers(0, 256, shape, dtype=np.uint8)


def onnx_resize(x: np.ndarray, size: tuple[int, int], mode: str) -> np.ndarray:
    """ONNX Resize (half_pixel; nearest rounds ties up) of a float NCHW tensor, by onnx.reference."""
    attrs = {"mode": mode, "coordinate_transformation_mode": "half_pixel"}
    if mode == "nearest":
        attrs["nearest_mode"] = "round_prefer_ceil"
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("sizes", TensorProto.INT64, [4], [*x.shape[:2], *size])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


# ------------------------------------------------------------------------ conventions (numpy)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize(("shape", "size"), [((2, 7, 9), (4, 5)), ((1, 5, 3), (11, 8)), ((3, 6, 6), (6, 6)),
                                             ((1, 1, 5), (3, 2)), ((2, 13, 17), (13, 5))])
def test_resize_is_onnx_resize_half_pixel(mode, shape, size):
    images = pixels(*shape, 3)
    got = image.preprocess(images, size=size, resize=mode, scale=1.0, provider="numpy")
    want = onnx_resize(images.transpose(0, 3, 1, 2).astype(np.float32), size, "linear" if mode == "bilinear"
                       else "nearest")
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-4)


def test_same_size_is_the_normalised_image():
    images = pixels(2, 5, 7, 3)
    got = image.preprocess(images, mean=0.5, std=0.25, provider="numpy")
    np.testing.assert_allclose(got, (images.transpose(0, 3, 1, 2) / 255 - 0.5) / 0.25, rtol=1e-6, atol=1e-6)


def test_colour_conversions_by_hand():
    px = np.array([[[10, 100, 200, 50]]], np.uint8)  # one pixel, 4 channels
    rgba = {"source": "rgba", "scale": 1.0, "provider": "numpy"}
    assert image.preprocess(px, target="rgb", **rgba).ravel().tolist() == [10, 100, 200]
    assert image.preprocess(px, target="bgr", **rgba).ravel().tolist() == [200, 100, 10]
    np.testing.assert_allclose(image.preprocess(px, target="gray", **rgba).ravel(),
                               [0.299 * 10 + 0.587 * 100 + 0.114 * 200], rtol=1e-6)
    np.testing.assert_allclose(image.preprocess(px, source="bgra", target="gray", scale=1.0, provider="numpy").ravel(),
                               [0.299 * 200 + 0.587 * 100 + 0.114 * 10], rtol=1e-6)
    gray = image.preprocess(np.array([[7]], np.uint8), source="gray", target="bgr", scale=1.0, provider="numpy")
    assert gray.shape == (1, 3, 1, 1) and gray.ravel().tolist() == [7, 7, 7]


def test_integer_translation_shifts_with_a_zero_border():
    images = pixels(2, 6, 7, 1)
    # output (x, y) samples source (x + 2, y - 1)
    got = image.preprocess(images, source="gray", target="gray", size=(6, 7), affine=[[1, 0, 2], [0, 1, -1]],
                           scale=1.0, provider="numpy")[:, 0]
    want = np.zeros((2, 6, 7))
    want[:, 1:, :5] = images[:, :5, 2:, 0]
    np.testing.assert_array_equal(got, want)
    replicate = image.preprocess(images, source="gray", target="gray", size=(6, 7), affine=[[1, 0, 2], [0, 1, -1]],
                                 border="replicate", scale=1.0, provider="numpy")[:, 0]
    np.testing.assert_array_equal(replicate[:, 0, :5], images[:, 0, 2:, 0])
    np.testing.assert_array_equal(replicate[:, 1:, 6], images[:, :5, 6, 0])


def test_bilinear_blends_towards_the_border_value():
    images = np.full((1, 2, 2, 1), 200, np.uint8)
    # Half a pixel left of the image: half the weight on the black border.
    got = image.preprocess(images, source="gray", target="gray", size=(1, 1), affine=[[1, 0, -0.5], [0, 1, 0]],
                           scale=1.0, provider="numpy")
    assert got.ravel().tolist() == [100.0]


def test_invert_affine():
    forward = np.array([[0.5, -0.8, 3.0], [0.8, 0.5, -2.0]])
    back = image.invert_affine(forward)
    point = np.array([4.0, 7.0, 1.0])
    np.testing.assert_allclose(back @ np.append(forward @ point, 1.0), point[:2])
    with pytest.raises(wgnn.InputError, match="singular"):
        image.invert_affine([[1, 2, 0], [2, 4, 0]])


def test_layouts_and_shapes():
    images = pixels(2, 5, 6, 3)
    nchw = image.preprocess(images, size=(3, 5), provider="numpy")
    assert nchw.shape == (2, 3, 3, 5) and nchw.dtype == np.float32
    nhwc = image.preprocess(images, size=(3, 5), layout="nhwc", provider="numpy")
    np.testing.assert_array_equal(nhwc, nchw.transpose(0, 2, 3, 1))
    packed = image.preprocess(images, size=(3, 5), layout="nc4hw4", provider="numpy")
    np.testing.assert_array_equal(packed, pack_nc4hw4(nchw))
    assert image.preprocess(images[0], provider="numpy").shape == (1, 3, 5, 6)  # one [H, W, C] image
    assert image.preprocess(images[0, :, :, 0], source="gray", target="gray", provider="numpy").shape == (1, 1, 5, 6)
    assert image.preprocess(images[:0], size=(3, 4), provider="numpy").shape == (0, 3, 3, 4)


@pytest.mark.parametrize(("images", "options", "message"), [
    (np.zeros((4, 4, 3), np.float32), {}, "uint8"),
    (np.zeros((4, 4, 3), np.uint8), {"source": "rgba"}, "4 channel"),
    (np.zeros((2, 4, 4, 3, 1), np.uint8), {}, "[N, H, W, C]"),
    (np.zeros((4, 4, 3), np.uint8), {"affine": np.eye(2, 3)}, "size="),
    (np.zeros((4, 4, 3), np.uint8), {"mean": (0.1, 0.2)}, "mean has 2 values"),
    (np.zeros((4, 4, 3), np.uint8), {"std": 0}, "std must not be 0"),
    (np.zeros((4, 4, 3), np.uint8), {"layout": "chw"}, "layout='chw'"),
    (np.zeros((4, 4, 3), np.uint8), {"target": "rgba"}, "target='rgba'"),
    (np.zeros((4, 4, 3), np.uint8), {"size": (0, 3)}, "size is (height, width)"),
    (np.zeros((4, 4, 3), np.uint8), {"size": (2, 2), "affine": [[1e9, 0, 0], [0, 1, 0]]}, "coordinates reach"),
])
def test_bad_input_is_an_input_error(images, options, message):
    with pytest.raises(wgnn.InputError) as info:
        image.preprocess(images, provider="numpy", **options)
    assert message in str(info.value)


# ------------------------------------------------------------------------------ GPU vs numpy
CASES = {
    "downscale odd sizes": (pixels(3, 13, 17, 3), dict(size=(5, 7), **IMAGENET)),
    "upscale": (pixels(2, 5, 3, 3), dict(size=(11, 9), source="bgr", **IMAGENET)),
    "nearest down": (pixels(2, 15, 11, 4), {"size": (4, 6), "source": "rgba", "resize": "nearest"}),
    "nearest up": (pixels(1, 3, 5, 1), {"size": (10, 13), "source": "gray", "target": "gray", "resize": "nearest"}),
    "same size": (pixels(4, 8, 8, 1), {"source": "gray", "target": "gray", "mean": 0.305, "std": 0.376}),
    "rotation, constant border": (pixels(2, 9, 12, 3), {
        "size": (11, 10), "affine": [[0.7, -0.6, 4.0], [0.6, 0.7, -3.0]], "mean": 0.5, "std": 0.2}),
    "warp, replicate border": (pixels(2, 9, 12, 3), {
        "size": (7, 13), "affine": [[1.3, 0.25, -2.5], [-0.4, 0.9, 1.75]], "border": "replicate", "target": "bgr"}),
    "warp, nearest": (pixels(3, 10, 10, 4), {
        "size": (9, 9), "affine": [[0.75, 0.5, -1.0], [-0.5, 0.75, 4.0]], "source": "bgra", "resize": "nearest"}),
    "nearest, exact ties": (pixels(2, 8, 12, 3), {"size": (4, 6), "resize": "nearest"}),
    "nearest rotation": (pixels(2, 9, 12, 1), {
        "size": (11, 10), "affine": [[0.7, -0.6, 4.1], [0.6, 0.7, -3.3]], "source": "gray", "resize": "nearest"}),
    "far outside": (pixels(1, 4, 4, 3), {"size": (3, 5), "affine": [[1, 0, 5000.0], [0, 1, -3000.0]]}),
    "nhwc": (pixels(2, 7, 5, 3), dict(size=(6, 5), layout="nhwc", **IMAGENET)),
    "nc4hw4": (pixels(2, 7, 5, 3), {"size": (6, 5), "layout": "nc4hw4", "target": "gray"}),
    "many workgroups": (pixels(3, 41, 37, 3), dict(size=(48, 45), **IMAGENET)),
}


def assert_gpu_matches_numpy(images, options, backend):
    want = image.preprocess(images, provider="numpy", **options)
    got = image.preprocess(images, provider="wgpu", adapter=int(backend.split(":")[1]), **options)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, err_msg=backend)


@needs_gpu
@pytest.mark.parametrize("backend", GPUS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_matches_numpy(case, backend):
    images, options = CASES[case]
    assert_gpu_matches_numpy(images, options, backend)


@needs_gpu
@pytest.mark.parametrize("backend", GPUS)
def test_gpu_every_colour_conversion(backend):
    for source, channels in (("rgb", 3), ("bgr", 3), ("rgba", 4), ("bgra", 4), ("gray", 1)):
        images = pixels(2, 5, 7, channels)
        for target in image.TARGETS:
            options = {"size": (4, 9), "source": source, "target": target, "mean": 0.4, "std": 0.3}
            assert_gpu_matches_numpy(images, options, backend)


@needs_gpu
@pytest.mark.parametrize("backend", GPUS)
def test_gpu_single_image_and_empty_batch(backend):
    adapter = int(backend.split(":")[1])
    one = pixels(6, 5, 3)
    np.testing.assert_allclose(image.preprocess(one, size=(4, 4), adapter=adapter),
                               image.preprocess(one, size=(4, 4), provider="numpy"), atol=1e-5)
    assert image.preprocess(one[None][:0], size=(4, 4), adapter=adapter).shape == (0, 3, 4, 4)


@needs_gpu
@pytest.mark.parametrize("backend", GPUS)
def test_processor_compiles_once(backend):
    from wgnn.backends.wgpu.loader import pipeline_cache

    processor = image.ImageProcessor(size=(6, 6), adapter=int(backend.split(":")[1]), **IMAGENET)
    first = pixels(2, 9, 9, 3)
    processor(first)
    cache = pipeline_cache(processor._runner.context)
    compiled = cache.compiled
    for batch in (pixels(5, 9, 9, 3), pixels(1, 20, 3, 3), first, pixels(3, 4, 4, 3)):  # bigger, smaller, again
        np.testing.assert_allclose(processor(batch), image.preprocess(batch, size=(6, 6), provider="numpy",
                                                                      **IMAGENET), atol=1e-5)
    other = image.ImageProcessor(size=(2, 3), resize="nearest", source="gray", target="gray",
                                 adapter=int(backend.split(":")[1]))
    other(pixels(1, 5, 5, 1))
    assert cache.compiled == compiled, "image preprocessing compiled a pipeline after its first call"
    assert processor.device_name == processor._runner.context.name
