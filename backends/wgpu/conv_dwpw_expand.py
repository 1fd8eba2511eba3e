"""ConvDwPwExpand on the GPU: ConvDwPw and the next block's 1x1 expand conv in one dispatch on
NC4HW4 feature maps (kernels_wgsl/conv/dwpw_expand_nc4hw4.wgsl): a dispatch (~70 us of fixed time
on lavapipe at small images) is saved, and the block output is neither read back nor, unless
another node reads it, written.

Each invocation computes, as ConvDwPw's kernel does (backends/wgpu/conv_dwpw.py), every project
slice of a block of output pixels, then loops over the expand slices, each the project results
times its 4x4 weight blocks. The block is picked from the output's size as for ConvDwPw
(conv_dwpw.dispatch_block; the expand weights are read once per invocation too, so they count
with the others). The project and expand weights are packed once into one buffer (a uniform one
where they fit, conv_paths.weights_binding), so the kernel binds at most 7 storage
buffers. fp16-arith as ConvDwPw: 16-bit products, 32-bit sums.
"""
from __future__ import annotations

import numpy as np

from ...engine.ops.conv_dwpw import B_DW, B_PW, RESIDUAL, W_DW, W_PW, dw_geometry
from ...engine.ops.conv_dwpw_expand import B_EX, W_EX, keeps_block
from ..base import Step
from .backend import GpuExecution, gpu_kernel
from .conv import ceil_div, infer_context, known, pack_channels, pack_depthwise_weights
from .conv_dwpw import (
    BlockShape,
    ConvDwPwGpu,
    activation_expression,
    dispatch_block,
    has_input,
    pack_pointwise_weights,
    value_or_zeros,
)

KERNEL = "conv/dwpw_expand_nc4hw4.wgsl"
MAX_EXPAND_SLICES = 64  # the converter's limit (256 channels); the kernel loops over any count


def pack_expand_weights(w: np.ndarray) -> np.ndarray:
    """(C_ex, C_p, 1, 1) -> (C_ex4, C_p4, 4, 4): per expand slice e and project slice o the 4x4
    matrix's columns (project lane j), each a vec4 over e's 4 channels; padding is zero."""
    return np.ascontiguousarray(pack_pointwise_weights(w).transpose(1, 0, 2, 3))


@gpu_kernel("ConvDwPwExpand")
class ConvDwPwExpandGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        reason = ConvDwPwGpu.unsupported_reason(step)
        if reason:
            return reason
        if not all(known(step, i) for i in (W_EX, B_EX)):
            return "weights and biases must be known at resize (they are repacked)"
        channels = step.input_specs[W_EX].shape[0]
        if ceil_div(channels, 4) > MAX_EXPAND_SLICES:
            return f"{channels} expand channels: the GPU kernel computes at most {4 * MAX_EXPAND_SLICES}"
        return activation_expression(step, "ex_activation")[1]

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("nc4hw4",)

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        return (0, RESIDUAL)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return ceil_div(step.input_specs[0].shape[1], 4) + 8 + ceil_div(step.input_specs[W_EX].shape[0], 4)

    def prepare(self) -> None:
        from .conv_paths import weights_binding
        from .elementwise import feature_map_text
        from .layout import accessor_params, arithmetic

        step = self.step
        x, y = step.input_specs[0], step.output_specs[0]
        n, cex, oh, ow = y.shape
        cout = step.input_specs[W_PW].shape[0]
        c4s, o4s, e4s = ceil_div(x.shape[1], 4), ceil_div(cout, 4), ceil_div(cex, 4)
        strides, _, begin, _ = dw_geometry(infer_context(step))
        half = arithmetic(self.backend) == "f16"
        w_ex = step.input_values[W_EX]

        def pack_both(w_pw: np.ndarray) -> np.ndarray:
            # The expand weights follow the project weights: the kernel's index runs on into them.
            return np.concatenate([pack_pointwise_weights(w_pw).reshape(-1, 4),
                                   pack_expand_weights(w_ex).reshape(-1, 4)])

        wd, wd_decl = weights_binding(self, "dw_weights", step.input_values[W_DW], pack_depthwise_weights, half=half,
                                      binding=1, var="wd", broadcast=True)
        wp, wp_decl = weights_binding(self, "pw_ex_weights", step.input_values[W_PW], pack_both, half=half,
                                      binding=2, var="wp", broadcast=True)
        channels = x.shape[1]
        biases = self.packed_constant("biases_ex", step.input_values[W_DW], lambda _: np.concatenate(
            [pack_channels(value_or_zeros(step, B_DW, channels)), pack_channels(value_or_zeros(step, B_PW, cout)),
             pack_channels(value_or_zeros(step, B_EX, cex))]))
        residual = step.inputs[RESIDUAL] if has_input(step, RESIDUAL) else step.inputs[0]
        r = step.input_specs[RESIDUAL] if has_input(step, RESIDUAL) else x
        keeps = keeps_block(step.node)
        z_spec = step.output_specs[1] if keeps else y
        attrs = step.attrs
        params = [0, 0, 0, c4s, o4s, 0, *begin,
                  float(attrs["dw_activation_alpha"]), float(attrs["dw_activation_beta"]),
                  float(attrs["activation_alpha"]), float(attrs["activation_beta"]), 0, e4s,
                  float(attrs["ex_activation_alpha"]), float(attrs["ex_activation_beta"]),
                  *accessor_params(x), *accessor_params(y), *accessor_params(r), *accessor_params(z_spec)]
        names = {"x": (step.inputs[0], 0, 16, False), "y": (step.outputs[0], 4, 21, True),
                 "r": (residual, 5, 26, False)}
        if keeps:
            names["z"] = (step.outputs[1], 6, 31, True)
        text = feature_map_text(self, names, half=half)
        z = step.outputs[1] if keeps else biases
        if not keeps:  # the bias buffer bound again, never written: store_z does nothing
            text["DECL_Z"] = ("@group(0) @binding(6) var<storage, read_write> z_unused: array<vec4<f32>>;\n"
                              f"fn store_z(n: i32, c4: i32, y: i32, x: i32, v: vec4<{text['FLOAT']}>) {{\n}}")
        text.update(ACC="f32", WD_DECL=wd_decl, WP_DECL=wp_decl,
                    DW_ACT=activation_expression(step, "dw_activation")[0],
                    ACT=activation_expression(step, "activation")[0],
                    EX_ACT=activation_expression(step, "ex_activation")[0])
        shape = BlockShape(n, oh, ow, strides[0], c4s, o4s, e4s, stores=e4s + o4s * keeps,
                           residual=has_input(step, RESIDUAL), uniform="var<uniform>" in wp_decl)
        self.block = dispatch_block(self, KERNEL, [step.inputs[0], wd, wp, biases, step.outputs[0], residual, z],
                                    params, text, shape)
