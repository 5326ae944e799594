"""FLOPs and bytes of a primitive from its problem descriptor, and where it sits on the roofline.

Convolution (any direction: forward, backward-data and backward-weights do the same multiply-adds), as
oneDNN's benchdnn counts it (`prb_t::count_ops` in tests/benchdnn/conv/conv.cpp): only the taps that land
inside the input are work, a tap that falls in the padding multiplies a zero nobody computes:
    FLOPs = 2 · N · OC · (IC / G) · Σ over output positions of the kernel taps inside the input
which is 2 · N · OC · OH · OW · (IC / G) · KH · KW only without padding. The sum factors per spatial
dimension, so it costs Σ (O · K) steps, not Π.
Matmul (M×K times K×N, with optional batch dimensions B): FLOPs = 2 · B · M · N · K
Inner product (N × IC·spatial → N × OC): FLOPs = 2 · N · OC · IC · spatial

Bytes are the tensors each primitive must touch at least once (source, weights, destination) times their
element size: a lower bound on traffic, so the arithmetic intensity is an upper bound. A tensor broadcast
over a batch (a matmul's shared weights) is read once, not once per batch entry.

    >>> c = conv_problem("mb2_ic3oc8_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1")
    >>> conv_flops(c)    # 2·2·8·3 · 46·46 valid taps (16·9 = 144 per row less the 2 padded ones at each edge)
    203136

Pure: no torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "s8": 1, "u8": 1, "s32": 4, "f8_e5m2": 1, "f8_e4m3": 1}

_TOKEN = re.compile(r"([a-z]+)(\d+)")


@dataclass(frozen=True, slots=True)
class Conv:
    """A convolution problem; spatial dims ordered (depth, height, width), missing ones are 1."""

    mb: int
    groups: int
    ic: int
    oc: int
    in_spatial: tuple[int, int, int]
    out_spatial: tuple[int, int, int]
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dilation: tuple[int, int, int]   # oneDNN's convention: 0 means dense (torch's dilation 1)


@dataclass(frozen=True, slots=True)
class Matmul:
    batch: int       # batch entries of the product (the larger of the two sides' batches)
    m: int
    k: int
    n: int
    a_batch: int = 1  # batch entries each side really holds: 1 for a side broadcast over the batch
    b_batch: int = 1


@dataclass(frozen=True, slots=True)
class Cost:
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte (0 for pure data movement)."""
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass(frozen=True, slots=True)
class Tokens:
    """A descriptor's `name<number>` tokens (`mb2`, `ic3`, `kh3`, ...), the first of each name kept."""

    values: dict[str, int]

    @classmethod
    def parse(cls, desc: str) -> Tokens:
        values: dict[str, int] = {}
        for name, number in _TOKEN.findall(desc.replace("_", "")):
            values.setdefault(name, int(number))
        return cls(values)

    def has(self, *names: str) -> bool:
        return all(n in self.values for n in names)

    def dim(self, name: str, default: int) -> int:
        return self.values.get(name, default)

    def spatial(self, letter: str, default: int) -> tuple[int, int, int]:
        """(depth, height, width) of one letter: `i` input, `o` output, `k` kernel, `s` stride, ..."""
        return self.dim(f"{letter}d", default), self.dim(f"{letter}h", default), self.dim(f"{letter}w", default)


def conv_problem(desc: str) -> Conv:
    """Parse oneDNN's convolution descriptor, e.g. `mb2_g32ic128oc128_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1`.
    Absent dimensions take oneDNN's defaults (g1, stride 1, no dilation, no padding)."""
    t = Tokens.parse(desc)
    missing = [k for k in ("mb", "ic", "oc") if not t.has(k)]
    if missing or not any(t.has(k) for k in ("iw", "ih", "id")):
        raise ValueError(f"not a convolution descriptor: {desc!r} (missing {missing or 'spatial sizes'})")
    in_sp = t.spatial("i", 1)
    out_sp = (t.dim("od", in_sp[0]), t.dim("oh", in_sp[1]), t.dim("ow", in_sp[2]))
    return Conv(mb=t.dim("mb", 0), groups=t.dim("g", 1), ic=t.dim("ic", 0), oc=t.dim("oc", 0), in_spatial=in_sp,
                out_spatial=out_sp, kernel=t.spatial("k", 1), stride=t.spatial("s", 1), padding=t.spatial("p", 0),
                dilation=t.spatial("d", 0))


def valid_taps(outputs: int, inputs: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Σ over output positions o of the taps k with 0 ≤ o·stride − padding + k·(dilation + 1) < inputs:
    one spatial dimension of benchdnn's count_ops loop (dilation in oneDNN's convention, 0 = dense).

        >>> valid_taps(outputs=1, inputs=1, kernel=3, stride=1, padding=1, dilation=0)   # 2 of 3 taps pad
        1
    """
    total = 0
    for o in range(outputs):
        first = o * stride - padding
        total += sum(1 for k in range(kernel) if 0 <= first + k * (dilation + 1) < inputs)
    return total


def conv_flops(c: Conv, deconvolution: bool = False) -> int:
    """benchdnn's count: 2 · N · OC · IC/G · taps inside the input. A deconvolution is the transposed
    problem, so benchdnn walks its input positions and checks against its output (the same swap here)."""
    out_sp, in_sp = (c.in_spatial, c.out_spatial) if deconvolution else (c.out_spatial, c.in_spatial)
    taps = math.prod(valid_taps(o, i, k, s, p, d) for o, i, k, s, p, d in
                     zip(out_sp, in_sp, c.kernel, c.stride, c.padding, c.dilation))
    return 2 * c.mb * c.oc * (c.ic // c.groups) * taps


def conv_cost(c: Conv, element_bytes: int, deconvolution: bool = False) -> Cost:
    elements = (c.mb * c.ic * math.prod(c.in_spatial) + c.oc * (c.ic // c.groups) * math.prod(c.kernel)
                + c.mb * c.oc * math.prod(c.out_spatial))
    return Cost(float(conv_flops(c, deconvolution)), float(elements * element_bytes))


def matmul_problem(desc: str) -> Matmul:
    """Parse oneDNN's matmul descriptor `[B×]M×K:[B×]K×N` (e.g. `2x512:512x10`, `4x2x3:4x3x5`; the
    batch dims of the two sides may broadcast, the larger is taken)."""
    sides = desc.split(":")
    if len(sides) < 2:
        raise ValueError(f"not a matmul descriptor: {desc!r} (expected AxK:KxN)")
    try:
        a = [int(x) for x in sides[0].split("x")]
        b = [int(x) for x in sides[1].split("x")]
    except ValueError:
        raise ValueError(f"not a matmul descriptor: {desc!r} (runtime dimensions are not resolved)") from None
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        raise ValueError(f"not a matmul descriptor: {desc!r} (inner dimensions {a[-1:]} and {b[-2:-1]} differ)")
    a_batch, b_batch = math.prod(a[:-2]), math.prod(b[:-2])
    return Matmul(batch=max(a_batch, b_batch), m=a[-2], k=a[-1], n=b[-1], a_batch=a_batch, b_batch=b_batch)


def matmul_cost(mm: Matmul, element_bytes: int) -> Cost:
    """Each side's bytes by its own batch: weights shared by every batch entry (`4x3x5:1x5x7`) are read
    once, as the kernel reads them, not once per entry."""
    flops = 2 * mm.batch * mm.m * mm.n * mm.k
    elements = mm.a_batch * mm.m * mm.k + mm.b_batch * mm.k * mm.n + mm.batch * mm.m * mm.n
    return Cost(float(flops), float(elements * element_bytes))


def inner_product_cost(desc: str, element_bytes: int) -> Cost:
    """`mb2ic512oc10` or `mb2ic64ih7iw7oc10`: N × (IC·spatial) times (IC·spatial) × OC."""
    t = _last_tokens(desc)
    if not t.has("mb", "ic", "oc"):
        raise ValueError(f"not an inner-product descriptor: {desc!r}")
    k = t.dim("ic", 0) * math.prod(t.spatial("i", 1))
    return matmul_cost(Matmul(1, t.dim("mb", 0), k, t.dim("oc", 0)), element_bytes)


def elements_of(desc: str) -> int:
    """Elements of a plain `AxBxC` shape (eltwise, reorder, binary, softmax) or of a `mbNicC[id][ih][iw]`
    descriptor (batch/layer normalization): the tensor the primitive streams through."""
    if re.fullmatch(r"\d+(x\d+)*", desc):
        return math.prod(int(x) for x in desc.split("x"))
    t = _last_tokens(desc)
    if t.has("mb", "ic"):
        return t.dim("mb", 0) * t.dim("ic", 0) * math.prod(t.spatial("i", 1))
    raise ValueError(f"no tensor size in descriptor {desc!r}")


def _last_tokens(desc: str) -> Tokens:
    """Tokens with the last of each name kept (how the inner-product and normalization readers always read)."""
    return Tokens({name: int(n) for name, n in _TOKEN.findall(desc.replace("_", ""))})


def _element_bytes(dtype: str, default: int) -> int:
    """Bytes of one element of a oneDNN data type; `default` for a type not listed."""
    return ELEMENT_BYTES.get(dtype, default)


def primitive_cost(kind: str, desc: str, dtype: str, dst_dtype: str | None = None) -> Cost | None:
    """FLOPs and bytes for a primitive, or None when the kind has no model here (pooling, concat, ...).
    Streaming kinds (eltwise, binary, normalization) do about one FLOP per element and read and write each
    element once. A reorder does no arithmetic and reads its source in `dtype` and writes its destination
    in `dst_dtype` (f32 → bf16 moves 4 + 2 bytes per element, not 4 + 4)."""
    size = _element_bytes(dtype, 4)
    dst_size = _element_bytes(dst_dtype or dtype, size)
    try:
        if kind in ("convolution", "deconvolution"):
            return conv_cost(conv_problem(desc), size, deconvolution=kind == "deconvolution")
        if kind == "matmul":
            return matmul_cost(matmul_problem(desc.split(",")[0]), size)
        if kind == "inner_product":
            return inner_product_cost(desc, size)
        if kind in ("eltwise", "reorder", "binary", "batch_normalization", "layer_normalization", "softmax"):
            n = elements_of(desc.split(" ")[0].split(":")[0])
            if kind == "reorder":
                return Cost(0.0, float(n * (size + dst_size)))
            return Cost(float(n), float(2 * n * size))
    except ValueError:
        return None
    return None


def attainable_gflops(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """The roofline: min(peak, intensity × bandwidth). Intensity in FLOP/byte, bandwidth in GB/s."""
    if peak_gflops <= 0 or bandwidth_gbs <= 0:
        raise ValueError(f"peak_gflops({peak_gflops}) and bandwidth_gbs({bandwidth_gbs}) must be > 0")
    return min(peak_gflops, intensity * bandwidth_gbs)


def ridge_point(peak_gflops: float, bandwidth_gbs: float) -> float:
    """The intensity (FLOP/byte) above which a kernel can be compute-bound on these cores."""
    return peak_gflops / bandwidth_gbs
