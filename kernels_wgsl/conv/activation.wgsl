// The conv kernels' fused activation: {{ACT}}, a WGSL expression of v, alpha and beta, applied to
// one value (act) or to the 4 channels of a slice (act4). Included by every conv kernel that fuses
// an activation, directly or through conv/finish.wgsl.

fn act(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{ACT}};
}

fn act4(v: vec4<f32>, alpha: f32, beta: f32) -> vec4<f32> {
    return vec4<f32>(act(v.x, alpha, beta), act(v.y, alpha, beta), act(v.z, alpha, beta), act(v.w, alpha, beta));
}
