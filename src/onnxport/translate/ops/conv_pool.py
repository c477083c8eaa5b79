"""Convolution and pooling."""

from __future__ import annotations

import math
import re

import numpy as np
import onnx_ir as ir

from onnxport.translate.ops._helpers import (cast, rank, reduce, reshape_to_sizes, result_read,
                                             shape_list, squeeze, unsqueeze)
from onnxport.translate.registry import translates


def _tuple(value, n):
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


def _conv(g, x, weight, bias, stride, padding, dilation, groups, transposed=False,
          output_padding=0):
    spatial = rank(weight) - 2
    attrs = dict(
        strides_i=_tuple(stride, spatial),
        dilations_i=_tuple(dilation, spatial),
        group_i=groups,
    )
    if padding == "valid":
        attrs["pads_i"] = [0] * (2 * spatial)
    elif padding == "same":
        kernel = list(weight.shape)[2:]
        if not all(isinstance(k, int) for k in kernel):
            attrs["auto_pad_s"] = "SAME_UPPER"
        else:
            # Explicit pads, as torch computes them (the odd one at the end): ONNX Runtime
            # rejects auto_pad SAME with dilation.
            total = [d * (k - 1) for d, k in zip(attrs["dilations_i"], kernel)]
            attrs["pads_i"] = [t // 2 for t in total] + [t - t // 2 for t in total]
    else:
        pads = _tuple(padding, spatial)
        attrs["pads_i"] = pads + pads
    if transposed:
        output_padding = _tuple(output_padding, spatial)
        strides = attrs["strides_i"]
        if any(o >= s for o, s in zip(output_padding, strides)) and "pads_i" in attrs:
            return _conv_transpose_wide_output_padding(g, x, weight, bias, attrs, output_padding)
        if any(output_padding):
            attrs["output_padding_i"] = output_padding
        return g.op("ConvTranspose", x, weight, bias, **attrs)
    return g.op("Conv", x, weight, bias, **attrs)


def _conv_transpose_wide_output_padding(g, x, weight, bias, attrs, output_padding):
    """ConvTranspose whose output_padding is not below its stride (torch allows up to the
    dilation; ONNX Runtime rejects it): the full transposed convolution, zero-extended at the
    end where output_padding passes the padding, cropped to torch's window, then the bias."""
    spatial = len(output_padding)
    pads = attrs.pop("pads_i")[:spatial]
    full = g.op("ConvTranspose", x, weight, **attrs)
    extend = [max(0, o - p) for o, p in zip(output_padding, pads)]
    if any(extend):
        full = g.op("Pad", full, g.const([0] * (spatial + 2) + [0, 0] + extend, ir.DataType.INT64))
    # torch's output along each axis is full[p : len - (p - o)] (the end past the full output
    # being the zeros just added).
    starts = list(pads)
    ends = [-(p - o) if p > o else 2**63 - 1 for p, o in zip(pads, output_padding)]
    axes = list(range(2, 2 + spatial))
    out = g.op("Slice", full, g.const(starts, ir.DataType.INT64), g.const(ends, ir.DataType.INT64),
               g.const(axes, ir.DataType.INT64))
    if bias is not None:
        out = g.op("Add", out, g.op("Reshape", bias, g.const([-1] + [1] * spatial)))
    return out


def _batched(g, x, spatial, function):
    """Run ``function`` on ``x`` with a batch axis added when torch was given an unbatched input."""
    if rank(x) == spatial + 1:
        return squeeze(g, function(unsqueeze(g, x, [0])), [0])
    return function(x)


@translates("aten::conv1d", "aten::conv2d", "aten::conv3d")
def conv(g, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor"""
    return _batched(g, input, rank(weight) - 2,
                    lambda x: _conv(g, x, weight, bias, stride, padding, dilation, groups))


@translates("aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d")
def conv_transpose(g, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                   dilation=1):
    """conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] output_padding=0, SymInt groups=1, SymInt[2] dilation=1) -> Tensor"""
    return _batched(g, input, rank(weight) - 2, lambda x: _conv(
        g, x, weight, bias, stride, padding, dilation, groups, True, output_padding))


@translates("aten::convolution", "aten::_convolution")
def convolution(g, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups, *_):
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    return _conv(g, input, weight, bias, stride, padding, dilation, groups, transposed,
                 output_padding)


def _spatial_rank(g) -> int:
    """1, 2 or 3, read from the op name (``max_pool2d`` -> 2)."""
    return int(re.search(r"(\d)d", g.provenance.aten).group(1))


def _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode, dilation=None):
    kernel = _tuple(kernel_size, spatial)
    strides = _tuple(stride, spatial) if stride else kernel
    pads = _tuple(padding, spatial)
    attrs = dict(kernel_shape_i=kernel, strides_i=strides, pads_i=pads + pads,
                 ceil_mode_i=int(ceil_mode))
    if dilation is not None and any(d != 1 for d in _tuple(dilation, spatial)):
        attrs["dilations_i"] = _tuple(dilation, spatial)
    return attrs


def _floor_when_torch_drops(g, x, attrs, spatial):
    """ceil_mode=0 where torch's output sizes are floor mode's: torch drops the last window of
    ceil mode when it starts in the end padding, and then (the padding being under the
    kernel) has exactly floor mode's windows. ONNX's and ONNX Runtime's shape inference keep
    that window, so the plain floor mode makes a file every reader sizes alike.

    With a dynamic axis ceil mode stays; a static axis whose window torch drops then has its
    end padding cut to where floor mode's last window ends, so that ceil mode finds no window
    past it there and the declared size is the one ONNX infers (that window reads none of the
    padding cut, so every value, an average's divisor too, stays torch's)."""
    if not attrs["ceil_mode_i"]:
        return attrs
    expected = g.expected[0] if isinstance(g.expected, (tuple, list)) else g.expected
    sizes = list(x.shape)[-spatial:]
    out_sizes = list(expected.shape)[-spatial:] if expected is not None else []
    if len(out_sizes) != spatial:
        return attrs
    dilations = attrs.get("dilations_i", [1] * spatial)
    pads = attrs["pads_i"]
    ends, all_floor = list(pads[spatial:]), True
    for axis, (n, o, k, s, d, p, q) in enumerate(zip(
            sizes, out_sizes, attrs["kernel_shape_i"], attrs["strides_i"], dilations,
            pads[:spatial], pads[spatial:])):
        if not (isinstance(n, int) and isinstance(o, int)):
            all_floor = False
            continue
        span = n + p + q - d * (k - 1) - 1  # where the last whole window may start
        if span // s + 1 != o:
            all_floor = False
        elif span % s <= q:
            ends[axis] = q - span % s
    if all_floor:
        return dict(attrs, ceil_mode_i=0)
    return dict(attrs, pads_i=list(pads[:spatial]) + ends)


def _cut_to_torch(g, out, x, attrs, spatial):
    """Ceil mode kept (some axis is dynamic): on a static axis where torch drops the last
    window (it starts in the end padding) and ONNX's shape inference counts it, slice to
    torch's size, so that the sizes the file states agree with ONNX's own inference (ONNX
    Runtime's kernels drop that window already: then the Slice takes everything)."""
    if not attrs["ceil_mode_i"]:
        return out
    expected = g.expected[0] if isinstance(g.expected, (tuple, list)) else g.expected
    if expected is None:
        return out
    sizes, out_sizes = list(x.shape)[-spatial:], list(expected.shape)[-spatial:]
    dilations = attrs.get("dilations_i", [1] * spatial)
    pads = attrs["pads_i"]
    axes, ends = [], []
    for axis, (n, o, k, s, d, p, q) in enumerate(zip(
            sizes, out_sizes, attrs["kernel_shape_i"], attrs["strides_i"], dilations,
            pads[:spatial], pads[spatial:])):
        if isinstance(n, int) and isinstance(o, int) and \
                -(-(n + p + q - d * (k - 1) - 1) // s) + 1 != o:
            axes.append(axis - spatial)
            ends.append(o)
    if not axes:
        return out
    return g.op("Slice", out, g.const([0] * len(axes)), g.const(ends), g.const(axes))


@translates("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d")
def max_pool(g, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor"""
    spatial = _spatial_rank(g)
    attrs = _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode, dilation)
    attrs = _floor_when_torch_drops(g, self, attrs, spatial)
    out = _batched(g, self, spatial, lambda x: g.op("MaxPool", x, **attrs))
    return _cut_to_torch(g, out, self, attrs, spatial)


@translates("aten::max_pool2d_with_indices", "aten::max_pool1d_with_indices",
            "aten::max_pool3d_with_indices")
def max_pool_with_indices(g, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""
    spatial = _spatial_rank(g)
    attrs = _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode, dilation)
    attrs = _floor_when_torch_drops(g, self, attrs, spatial)

    def pool(x):
        values, indices = g.op("MaxPool", x, outputs=2, **attrs)
        return values, _plane_indices(g, self, indices, spatial)

    if rank(self) == spatial + 1:
        values, indices = pool(unsqueeze(g, self, [0]))
        values, indices = squeeze(g, values, [0]), squeeze(g, indices, [0])
    else:
        values, indices = pool(self)
    return tuple(_cut_to_torch(g, v, self, attrs, spatial) for v in (values, indices))


def _plane_indices(g, x, indices, spatial):
    """ONNX MaxPool's indices count over the whole (N, C, ...) tensor; torch's count within
    each (n, c) plane: the remainder by the plane's size (``x`` is the pooled input)."""
    dims = list(x.shape)[-spatial:]
    if all(isinstance(d, int) for d in dims):
        plane = g.const(math.prod(dims), ir.DataType.INT64)
    else:
        shape = g.op("Shape", x, start_i=-spatial) if g.opset >= 15 else g.op(
            "Slice", g.op("Shape", x), g.const([-spatial]), g.const([2**62]))
        plane = reduce(g, "ReduceProd", shape, None, False)
    return g.op("Mod", indices, plane)


@translates("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d")
def avg_pool(g, self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    spatial = _spatial_rank(g)
    if divisor_override is not None:
        return _batched(g, self, spatial, lambda x: _sum_pool(
            g, x, kernel_size, stride, padding, spatial, divisor_override, ceil_mode))
    attrs = _floor_when_torch_drops(
        g, self, _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode), spatial)
    if any(_tuple(padding, spatial)):
        attrs["count_include_pad_i"] = int(count_include_pad)
    out = _batched(g, self, spatial, lambda x: g.op("AveragePool", x, **attrs))
    return _cut_to_torch(g, out, self, attrs, spatial)


def _sum_pool(g, x, kernel_size, stride, padding, spatial, divisor, ceil_mode=False):
    """Window sums divided by ``divisor`` (avg_pool's divisor_override): zero-pad explicitly so
    that every window torch makes is whole, then a full-window average times the window size."""
    kernel = _tuple(kernel_size, spatial)
    strides = _tuple(stride, spatial) if stride else kernel
    pads = _tuple(padding, spatial)
    sizes = list(x.shape)[-spatial:]
    out_sizes = list(g.expected.shape)[-spatial:]
    if not all(isinstance(d, int) for d in sizes + out_sizes):
        if ceil_mode:
            raise NotImplementedError(
                "avg_pool with divisor_override and ceil_mode=True over dynamic spatial sizes "
                "is not translated: keep those axes static, or use ceil_mode=False")
        # Floor mode: every window ends within the padded input, which is padded as torch pads.
        sizes = out_sizes = None
        ends = pads
    else:
        # The last window may hang past the padded input in ceil mode: pad up to its end.
        ends = [max(p, (o - 1) * s + k - (n + p)) for n, o, s, k, p in
                zip(sizes, out_sizes, strides, kernel, pads)]
    padded = x
    if any(pads) or any(ends):
        padded = g.op("Pad", x, g.const([0, 0] + pads + [0, 0] + ends, ir.DataType.INT64))
    if x.dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                   ir.DataType.BFLOAT16):
        average = g.op("AveragePool", padded, kernel_shape_i=kernel, strides_i=strides)
        out = g.op("Mul", average, g.const(math.prod(kernel) / divisor, x.dtype))
    else:
        # Integers: the exact window sum, then torch's truncating integer division.
        average = g.op("AveragePool", g.op("Cast", padded, to_i=int(ir.DataType.FLOAT)),
                       kernel_shape_i=kernel, strides_i=strides)
        total = g.op("Round", g.op("Mul", average, g.const(float(math.prod(kernel)),
                                                           ir.DataType.FLOAT)))
        out = g.op("Div", g.op("Cast", total, to_i=int(x.dtype)), g.const(divisor, x.dtype))
    # Windows that start in the end padding are not windows for torch.
    expected_full = sizes and [(n + p + e - k) // s + 1 for n, p, e, k, s in
                               zip(sizes, pads, ends, kernel, strides)]
    if expected_full != out_sizes:
        out = g.op("Slice", out, g.const([0] * spatial), g.const(out_sizes),
                   g.const(list(range(2, 2 + spatial))))
    return out


def _adaptive(g, self, output_size, onnx_op, global_op, with_indices=False):
    """Adaptive pooling: global, whole windows, or (static sizes) torch's overlapping windows."""
    spatial = _spatial_rank(g)
    in_spatial = list(self.shape)[-spatial:]
    # A None in output_size keeps that input size (as does the input's own size, read at run
    # time: torch's F.adaptive_avg_pool2d puts x.size(2) in place of the None).
    out = [i if o is None or isinstance(o, ir.Value) and o.meta.get("dim") == i else o
           for o, i in zip(_tuple(output_size, spatial), in_spatial)]
    if any(isinstance(o, ir.Value) for o in out):
        raise NotImplementedError(
            f"adaptive pooling to sizes computed at run time ({out}) is not translated: give "
            "the output size as numbers, or None to keep an input size")
    static = all(isinstance(i, int) for i in in_spatial)
    if static and all(i % o == 0 for i, o in zip(in_spatial, out)):
        kernel = [i // o for i, o in zip(in_spatial, out)]
        if not with_indices:
            if all(o == 1 for o in out):
                return _batched(g, self, spatial, lambda x: g.op(global_op, x))
            return _batched(g, self, spatial, lambda x: g.op(
                onnx_op, x, kernel_shape_i=kernel, strides_i=kernel))

        def pool(x):
            values, indices = g.op("MaxPool", x, kernel_shape_i=kernel, strides_i=kernel,
                                   outputs=2)
            return values, _plane_indices(g, self, indices, spatial)

        if rank(self) == spatial + 1:
            values, indices = pool(unsqueeze(g, self, [0]))
            return squeeze(g, values, [0]), squeeze(g, indices, [0])
        return pool(self)
    if all(o == 1 for o in out):
        result = _batched(g, self, spatial, lambda x: g.op(global_op, x))
        return (result, None) if with_indices else result
    if not static and with_indices and not result_read(g, 1):  # (the indices)
        result = _adaptive_windows(g, self, in_spatial, out, "ReduceMax")
        return result, None
    if not static and with_indices:
        raise NotImplementedError(
            f"the indices of adaptive max pooling from sizes known only at run time "
            f"{in_spatial} to {out} are not translated (the pooled values are)")
    result = _adaptive_windows(g, self, in_spatial, out,
                               "ReduceMean" if onnx_op == "AveragePool" else "ReduceMax")
    if with_indices:
        return result, _adaptive_max_indices(g, self, in_spatial, out)
    return result


def _adaptive_windows(g, x, in_spatial, out, reduce_op):
    """torch's adaptive windows [floor(i*n/o), ceil((i+1)*n/o)) one axis at a time (a mean or
    max over a box is the same taken axis by axis): a Slice and a reduction per window."""
    r = rank(x)
    first = r - len(in_spatial)
    for k, (n, o) in enumerate(zip(in_spatial, out)):
        if n == o:
            continue
        axis = first + k
        if not isinstance(n, int):  # the bounds computed from the size at run time
            n = g.op("Slice", g.op("Shape", x), g.const([axis]), g.const([axis + 1]))
        pieces = []
        for i in range(o):
            start, end = _window(n, o, i) if isinstance(n, int) else _run_time_window(g, n, o, i)
            if isinstance(start, int):
                start, end = g.const([start]), g.const([end])
            window = g.op("Slice", x, start, end, g.const([axis]))
            pieces.append(reduce(g, reduce_op, window, [axis], True))
        x = pieces[0] if len(pieces) == 1 else g.op("Concat", *pieces, axis_i=axis)
    return x


def _window(n, o, i):
    return (i * n) // o, -((-(i + 1) * n) // o)


def _run_time_window(g, n, o, i):
    """:func:`_window` of a size ``n`` known at run time ([1] int64): floor(i * n / o) and
    ceil((i + 1) * n / o), sizes being nonnegative."""
    start = g.op("Div", g.op("Mul", n, g.const([i])), g.const([o]))
    end = g.op("Div", g.op("Add", g.op("Mul", n, g.const([i + 1])), g.const([o - 1])),
               g.const([o]))
    return start, end


def _adaptive_max_indices(g, x, in_spatial, out):
    """torch's indices (within each plane) of the maxima of overlapping adaptive windows: per
    output cell, ArgMax over the flattened box (first maximum in row-major order, as torch)
    turned into a plane index. Unused, these nodes are removed by the clean-up passes."""
    import itertools

    spatial = len(in_spatial)
    lead = rank(x) - spatial
    axes = g.const(list(range(lead, lead + spatial)))
    plane_strides = [math.prod(in_spatial[k + 1:]) for k in range(spatial)]
    cells = []
    for cell in itertools.product(*(range(o) for o in out)):
        bounds = [_window(n, o, i) for n, o, i in zip(in_spatial, out, cell)]
        box = g.op("Slice", x, g.const([b[0] for b in bounds]), g.const([b[1] for b in bounds]),
                   axes)
        flat = g.op("Reshape", box, g.const([0] * lead + [-1]))
        local = g.op("ArgMax", flat, axis_i=-1, keepdims_i=1)
        sizes = [end - start for start, end in bounds]
        index = None
        for k in range(spatial):
            # coordinate k within the box = local // prod(sizes[k+1:]) % sizes[k]
            coordinate = g.op("Div", local, g.const(math.prod(sizes[k + 1:]), ir.DataType.INT64))
            coordinate = g.op("Mod", coordinate, g.const(sizes[k], ir.DataType.INT64))
            term = g.op("Mul", g.op("Add", coordinate, g.const(bounds[k][0], ir.DataType.INT64)),
                        g.const(plane_strides[k], ir.DataType.INT64))
            index = term if index is None else g.op("Add", index, term)
        cells.append(index)
    joined = cells[0] if len(cells) == 1 else g.op("Concat", *cells, axis_i=-1)
    return g.op("Reshape", joined, g.const([0] * lead + list(out)))


@translates("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
            "aten::_adaptive_avg_pool2d")
def adaptive_avg_pool(g, self, output_size):
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return _adaptive(g, self, output_size, "AveragePool", "GlobalAveragePool")


@translates("aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d")
def adaptive_max_pool(g, self, output_size):
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)"""
    # The aten op always returns (values, indices), used or not.
    with_indices = isinstance(g.expected, (tuple, list))
    return _adaptive(g, self, output_size, "MaxPool", "GlobalMaxPool", with_indices)


@translates("aten::fractional_max_pool2d", "aten::fractional_max_pool3d")
def fractional_max_pool(g, self, kernel_size, output_size, random_samples):
    """fractional_max_pool2d(Tensor self, int[2] kernel_size, int[2] output_size, Tensor random_samples) -> (Tensor, Tensor)

    torch's windows: along an axis of size n pooled by k to m, output i starts at
    int((i + u) * alpha) - int(u * alpha) with alpha = (n - k) / (m - 1) in the input's
    float type and u the (batch, channel)'s sample, the last at n - k. The windows' flat
    positions gather the values; their max, and its first position in scan order, come out.
    (F.fractional_max_pool draws the samples with torch.rand, which is random in the graph
    too; given as _random_samples, the output is torch's exactly.)"""
    spatial = len(kernel_size)
    unbatched = rank(self) == spatial + 1
    x = unsqueeze(g, self, [0]) if unbatched else self
    static = g.static_shape(self)
    if static is None:
        raise NotImplementedError("fractional_max_pool over dynamic sizes")
    sizes = static[-spatial:]
    dtype = x.dtype
    samples = random_samples if random_samples.dtype == dtype else \
        g.op("Cast", random_samples, to_i=int(dtype))
    float_type = {ir.DataType.FLOAT: np.float32, ir.DataType.DOUBLE: np.float64,
                  ir.DataType.FLOAT16: np.float16}.get(dtype, np.float32)
    positions = None
    stride = 1
    for d in reversed(range(spatial)):
        n, k, m = sizes[d], int(kernel_size[d]), int(output_size[d])
        u = g.op("Gather", samples, g.const(d), axis_i=2)  # [N, C]
        u = unsqueeze(g, u, [2])
        last = g.const(np.full((1, 1, 1), n - k, np.int64))
        if m > 1:
            alpha = float_type(n - k) / float_type(m - 1)
            steps = g.const(np.arange(m - 1).astype(float_type).reshape(1, 1, -1))
            scaled = g.op("Cast", g.op("Mul", g.op("Add", steps, u), g.const(alpha, dtype)),
                          to_i=int(ir.DataType.INT64))
            base = g.op("Cast", g.op("Mul", u, g.const(alpha, dtype)),
                        to_i=int(ir.DataType.INT64))
            starts = g.op("Concat", g.op("Sub", scaled, base),
                          g.op("Expand", last, g.op("Shape", base)), axis_i=2)
        else:
            starts = g.op("Expand", last, g.op("Shape", u))
        # [N, C, m, k] positions along this axis, placed on its own output and window axes.
        along = g.op("Add", unsqueeze(g, starts, [3]), g.const(np.arange(k).reshape(1, 1, 1, -1)))
        shape = [0, 0] + [1] * (2 * spatial)
        shape[2 + d], shape[2 + spatial + d] = m, k
        along = g.op("Reshape", along, g.const(shape))
        along = g.op("Mul", along, g.const(stride)) if stride != 1 else along
        positions = along if positions is None else g.op("Add", positions, along)
        stride *= n
    window = int(np.prod([int(k) for k in kernel_size]))
    target = [0, 0] + [int(m) for m in output_size] + [window]
    positions = g.op("Reshape", positions, g.const(target))
    flat = g.op("Reshape", x, g.const([0, 0, -1]))
    values = g.op("GatherElements", flat, g.op("Reshape", positions, g.const([0, 0, -1])),
                  axis_i=2)
    values = g.op("Reshape", values, g.const(target))
    out = reduce(g, "ReduceMax", values, [-1], keepdims=False)
    first = g.op("ArgMax", values, axis_i=-1, keepdims_i=1)
    indices = squeeze(g, g.op("GatherElements", positions, first, axis_i=-1), [-1])
    if unbatched:
        out, indices = squeeze(g, out, [0]), squeeze(g, indices, [0])
    return out, indices


@translates("aten::conv_tbc")
def conv_tbc(g, self, weight, bias, pad=0):
    """conv_tbc(Tensor self, Tensor weight, Tensor bias, int pad=0) -> Tensor

    A 1-d convolution of a [time, batch, channels] input with a [width, in, out] weight: Conv
    between transposes to and from [batch, channels, time]."""
    x = g.op("Transpose", self, perm_i=[1, 2, 0])
    w = g.op("Transpose", weight, perm_i=[2, 1, 0])
    out = g.op("Conv", x, w, bias, pads_i=[pad, pad])
    return g.op("Transpose", out, perm_i=[2, 0, 1])


@translates("aten::max_unpool2d", "aten::max_unpool3d")
def max_unpool(g, self, indices, output_size, stride=None, padding=None):
    """max_unpool3d(Tensor self, Tensor indices, SymInt[3] output_size, int[3] stride, int[3] padding) -> Tensor

    (max_unpool2d takes self, indices and output_size.) Each value written at its index within
    its plane of ``output_size`` (max_pool's indices), zeros elsewhere: a scatter into the
    flattened planes."""
    from onnxport.translate.ops.shape import size_of

    spatial = len(output_size)
    lead = rank(self) - spatial
    leading = [size_of(g, self, axis) for axis in range(lead)]
    planes = g.op("Concat", *leading, g.const([-1]), axis_i=0)
    flat_values = g.op("Reshape", self, planes)
    flat_indices = g.op("Reshape", cast(g, indices, ir.DataType.INT64), planes)
    sizes = list(output_size)
    out_shape = g.op("Concat", *leading, shape_list(g, sizes), axis_i=0)
    plane = g.const([math.prod(sizes)]) if all(isinstance(s, int) for s in sizes) else \
        g.op("ReduceProd", shape_list(g, sizes), keepdims_i=1)
    zeros = g.op("Expand", g.const(0, self.dtype), g.op("Concat", *leading, plane, axis_i=0))
    scattered = g.op("ScatterElements", zeros, flat_indices, flat_values, axis_i=lead)
    return reshape_to_sizes(g, scattered, out_shape)
