"""Recurrent family on numpy: LSTM, GRU, RNN over precomputed input projections (engine/ops/rnn.py).

One Python loop over time steps; every step is vectorised over directions, batch and hidden units
(one batched matmul for the recurrent products of all gates). With sequence_lens, step s of a
direction reads time s (forward) or len - 1 - s (reverse) of each sequence; sequences that are
done keep their state and leave zeros in Y.
"""
from __future__ import annotations

import numpy as np

from ...engine.errors import InputError
from ...engine.ops.rnn import cell_activations
from .elementwise import _sigmoid
from .kernel import numpy_kernel

ACTIVATION_FUNCS = {
    "Sigmoid": lambda x, a, b: _sigmoid(x),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: np.where(x > a, x, 0),
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "Elu": lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Softplus": lambda x, a, b: np.logaddexp(x, 0),
}


class Cell:
    """Activation k of the cell applied to a [dirs, N, H] tensor (per direction when they differ),
    after the clip of its input."""

    def __init__(self, op_type: str, attrs: dict, dtype):
        self.funcs = cell_activations(op_type, attrs)
        self.clip = attrs["clip"]
        self.dtype = dtype

    def __call__(self, k: int, x: np.ndarray, clip: bool = True) -> np.ndarray:
        if clip and np.isfinite(self.clip):
            x = np.clip(x, -self.clip, self.clip)
        per_dir = [self.funcs[d][k] for d in range(len(self.funcs))]
        if all(f == per_dir[0] for f in per_dir):
            name, alpha, beta = per_dir[0]
            return ACTIVATION_FUNCS[name](x, self.dtype.type(alpha), self.dtype.type(beta)).astype(self.dtype)
        return np.stack([ACTIVATION_FUNCS[name](x[d], self.dtype.type(alpha), self.dtype.type(beta))
                         for d, (name, alpha, beta) in enumerate(per_dir)]).astype(self.dtype)


def _recurrence(ex, op_type, xw, r, b, lens, h0, c0=None, p=None):
    attrs = ex.attrs
    layout = attrs["layout"]
    work = np.promote_types(xw.dtype, np.float32)
    if layout == 1:  # everything runs in layout 0: projections [dirs, T, N, GH], states [dirs, N, H]
        xw = xw.transpose(0, 2, 1, 3)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    xw = xw.astype(work, copy=False)
    dirs, steps, batch, gh = xw.shape
    hidden = r.shape[2]
    if lens is None:
        lens = np.full(batch, steps, np.int64)
    lens = lens.astype(np.int64)
    if lens.size and (lens.min() < 0 or lens.max() > steps):
        raise InputError(f"{ex.step.label}: sequence_lens {lens.tolist()} must lie in [0, {steps}]")
    cell = Cell(op_type, attrs, work)
    rt = r.astype(work).transpose(0, 2, 1)  # [dirs, H, GH]: h @ rt is every gate's recurrent product
    bias = np.zeros((dirs, 2, gh), work) if b is None else b.astype(work).reshape(dirs, 2, gh)
    w_bias, r_bias = bias[:, None, 0], bias[:, None, 1]  # [dirs, 1, GH]
    h = np.zeros((dirs, batch, hidden), work) if h0 is None else h0.astype(work)
    c = np.zeros((dirs, batch, hidden), work) if c0 is None else c0.astype(work)
    peep = None if p is None else p.astype(work).reshape(dirs, 1, 3, hidden)
    reverse = np.array([attrs["direction"] == "reverse" or d == 1 for d in range(dirs)])[:, None]
    y = np.zeros((steps, dirs, batch, hidden), work)
    d_index, n_index = np.arange(dirs)[:, None], np.arange(batch)[None, :]
    for s in range(int(lens.max(initial=0))):
        valid = (s < lens)[None, :, None]  # the same steps are valid in both directions
        t = np.where(reverse, lens[None, :] - 1 - s, s).clip(0, steps - 1)  # [dirs, N]
        x_part = xw[d_index, t, n_index] + w_bias  # [dirs, N, GH]
        h_part = h @ rt
        if op_type == "LSTM":
            h_new, c_new = _lstm(cell, x_part, h_part + r_bias, c, peep, hidden, attrs["input_forget"])
            c = np.where(valid, c_new, c)
        elif op_type == "GRU":
            h_new = _gru(cell, x_part, h_part, r_bias, h, rt, hidden, attrs["linear_before_reset"])
        else:
            h_new = cell(0, x_part + h_part + r_bias)
        h = np.where(valid, h_new, h)
        live_d, live_n = np.nonzero(np.broadcast_to(valid[..., 0], (dirs, batch)))
        y[t[live_d, live_n], live_d, live_n] = h_new[live_d, live_n]
    done = (lens > 0)[None, :, None]  # onnxruntime: zero states for empty sequences
    h, c = np.where(done, h, 0), np.where(done, c, 0)
    if layout == 1:
        y, h, c = y.transpose(2, 0, 1, 3), h.transpose(1, 0, 2), c.transpose(1, 0, 2)
    outputs = (y, h, c) if op_type == "LSTM" else (y, h)
    return outputs[:len(ex.step.outputs)]  # cast to the output type by the caller


def _lstm(cell, x_part, h_part, c, peep, hidden, input_forget):
    pre = (x_part + h_part).reshape(*x_part.shape[:2], 4, hidden)  # gates i, o, f, c
    pi, po, pf = (0, 0, 0) if peep is None else (peep[:, :, 0], peep[:, :, 1], peep[:, :, 2])
    i = cell(0, pre[:, :, 0] + pi * c)
    f = 1 - i if input_forget else cell(0, pre[:, :, 2] + pf * c)
    c_new = f * c + i * cell(1, pre[:, :, 3])
    o = cell(0, pre[:, :, 1] + po * c_new)
    return o * cell(2, c_new, clip=False), c_new


def _gru(cell, x_part, h_part, r_bias, h, rt, hidden, linear_before_reset):
    x3 = x_part.reshape(*x_part.shape[:2], 3, hidden)  # gates z, r, h
    h3 = (h_part + r_bias).reshape(x3.shape)
    z = cell(0, x3[:, :, 0] + h3[:, :, 0])
    reset = cell(0, x3[:, :, 1] + h3[:, :, 1])
    if linear_before_reset:
        candidate = x3[:, :, 2] + reset * h3[:, :, 2]
    else:
        candidate = x3[:, :, 2] + (reset * h) @ rt[:, :, 2 * hidden:] + r_bias[:, :, 2 * hidden:]
    return (1 - z) * cell(1, candidate) + z * h


@numpy_kernel("RNN")
def rnn(ex, xw, r, b=None, lens=None, h0=None):
    return _recurrence(ex, "RNN", xw, r, b, lens, h0)


@numpy_kernel("GRU")
def gru(ex, xw, r, b=None, lens=None, h0=None):
    return _recurrence(ex, "GRU", xw, r, b, lens, h0)


@numpy_kernel("LSTM")
def lstm(ex, xw, r, b=None, lens=None, h0=None, c0=None, p=None):
    return _recurrence(ex, "LSTM", xw, r, b, lens, h0, c0, p)
