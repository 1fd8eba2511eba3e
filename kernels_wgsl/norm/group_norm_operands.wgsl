// The operands of the GroupNorm and InstanceNorm kernels on f32 rows (included by group_norm.wgsl,
// instance_norm.wgsl and group_norm_workgroup.wgsl): X, scale, bias, Y and the params.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;
