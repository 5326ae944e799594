"""FLOPs and bytes of a primitive from its problem descriptor, and where it sits on the roofline.

Convolution (any direction: forward, backward-data and backward-weights do the same multiply-adds):
    FLOPs = 2 · N · OC · OH · OW · (IC / G) · KH · KW        (· OD · KD in 3-D)
Matmul (M×K times K×N, with optional batch dimensions B): FLOPs = 2 · B · M · N · K
Inner product (N × IC·spatial → N × OC): FLOPs = 2 · N · OC · IC · spatial

Bytes are the tensors each primitive must touch at least once (source, weights, destination) times the
element size: a lower bound on traffic, so the arithmetic intensity is an upper bound.

    >>> c = conv_problem("mb2_ic3oc8_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1")
    >>> conv_flops(c)
    221184

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
    batch: int
    m: int
    k: int
    n: int


@dataclass(frozen=True, slots=True)
class Cost:
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte (0 for pure data movement)."""
        return self.flops / self.bytes if self.bytes else 0.0


def conv_problem(desc: str) -> Conv:
    """Parse oneDNN's convolution descriptor, e.g. `mb2_g32ic128oc128_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1`.
    Absent dimensions take oneDNN's defaults (g1, stride 1, no dilation, no padding)."""
    values: dict[str, int] = {}
    for name, number in _TOKEN.findall(desc.replace("_", "")):
        values.setdefault(name, int(number))
    missing = [k for k in ("mb", "ic", "oc") if k not in values]
    if missing or not any(k in values for k in ("iw", "ih", "id")):
        raise ValueError(f"not a convolution descriptor: {desc!r} (missing {missing or 'spatial sizes'})")

    def dims(letter: str, default: int) -> tuple[int, int, int]:
        return (values.get(f"{letter}d", default), values.get(f"{letter}h", default), values.get(f"{letter}w", default))

    in_sp = (values.get("id", 1), values.get("ih", 1), values.get("iw", 1))
    out_sp = (values.get("od", in_sp[0]), values.get("oh", in_sp[1]), values.get("ow", in_sp[2]))
    return Conv(mb=values["mb"], groups=values.get("g", 1), ic=values["ic"], oc=values["oc"], in_spatial=in_sp,
                out_spatial=out_sp, kernel=dims("k", 1), stride=dims("s", 1), padding=dims("p", 0),
                dilation=dims("d", 0))


def conv_flops(c: Conv) -> int:
    return 2 * c.mb * c.oc * math.prod(c.out_spatial) * (c.ic // c.groups) * math.prod(c.kernel)


def conv_cost(c: Conv, element_bytes: int) -> Cost:
    elements = (c.mb * c.ic * math.prod(c.in_spatial) + c.oc * (c.ic // c.groups) * math.prod(c.kernel)
                + c.mb * c.oc * math.prod(c.out_spatial))
    return Cost(float(conv_flops(c)), float(elements * element_bytes))


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
    batch = max(math.prod(a[:-2]), math.prod(b[:-2]))
    return Matmul(batch=batch, m=a[-2], k=a[-1], n=b[-1])


def matmul_cost(mm: Matmul, element_bytes: int) -> Cost:
    flops = 2 * mm.batch * mm.m * mm.n * mm.k
    elements = mm.batch * (mm.m * mm.k + mm.k * mm.n + mm.m * mm.n)
    return Cost(float(flops), float(elements * element_bytes))


def inner_product_cost(desc: str, element_bytes: int) -> Cost:
    """`mb2ic512oc10` or `mb2ic64ih7iw7oc10`: N × (IC·spatial) times (IC·spatial) × OC."""
    values = {name: int(n) for name, n in _TOKEN.findall(desc.replace("_", ""))}
    if not all(k in values for k in ("mb", "ic", "oc")):
        raise ValueError(f"not an inner-product descriptor: {desc!r}")
    k = values["ic"] * values.get("id", 1) * values.get("ih", 1) * values.get("iw", 1)
    return matmul_cost(Matmul(1, values["mb"], k, values["oc"]), element_bytes)


def elements_of(desc: str) -> int:
    """Elements of a plain `AxBxC` shape (eltwise, reorder, binary, softmax) or of a `mbNicC[id][ih][iw]`
    descriptor (batch/layer normalization): the tensor the primitive streams through."""
    if re.fullmatch(r"\d+(x\d+)*", desc):
        return math.prod(int(x) for x in desc.split("x"))
    values = {name: int(n) for name, n in _TOKEN.findall(desc.replace("_", ""))}
    if "mb" in values and "ic" in values:
        return values["mb"] * values["ic"] * values.get("id", 1) * values.get("ih", 1) * values.get("iw", 1)
    raise ValueError(f"no tensor size in descriptor {desc!r}")


def primitive_cost(kind: str, desc: str, dtype: str) -> Cost | None:
    """FLOPs and bytes for a primitive, or None when the kind has no model here (pooling, concat, ...).
    Streaming kinds (eltwise, reorder, binary, normalization) do about one FLOP per element and read and
    write each element once."""
    size = ELEMENT_BYTES.get(dtype, 4)
    try:
        if kind in ("convolution", "deconvolution"):
            return conv_cost(conv_problem(desc), size)
        if kind == "matmul":
            return matmul_cost(matmul_problem(desc.split(",")[0]), size)
        if kind == "inner_product":
            return inner_product_cost(desc, size)
        if kind in ("eltwise", "reorder", "binary", "batch_normalization", "layer_normalization", "softmax"):
            n = elements_of(desc.split(" ")[0].split(":")[0])
            return Cost(float(n if kind != "reorder" else 0), float(2 * n * size))
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
