"""oneDNN verbose logs: parse each primitive execution and aggregate time by kind × direction × kernel.

oneDNN prints one line per executed primitive when its verbose mode is on (`ONEDNN_VERBOSE=1`, or
`torch.backends.mkldnn.verbose(1)` around a region). The format changed across releases, so the field
order is read from the log's own header line where there is one:

    onednn_verbose,v1,primitive,info,template:operation,engine,primitive,implementation,prop_kind,...
    onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,forward_training,...,0.0148926

Older logs have `onednn_verbose,info,prim_template:...` / `onednn_verbose,exec,cpu,...`, or the legacy
prefixes `dnnl_verbose` (oneDNN 1.x–2.x) and `mkldnn_verbose` (MKL-DNN 0.x, no engine and no attributes
field, no header). Without a header the historical default order for the prefix is used.

    >>> log = ("dnnl_verbose,exec,cpu,convolution,jit:avx2,forward_training,src_f32::blocked:abcd:f0,,"
    ...        "alg:convolution_direct,mb2_ic3oc8_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1,0.5",)
    >>> parse_lines(log)[0][0].kind, parse_lines(log)[0][0].time_ms
    ('convolution', 0.5)

Pure: no torch, no files.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.core.json.jsonobject import JsonObject

PREFIXES = ("onednn_verbose", "dnnl_verbose", "mkldnn_verbose")
DTYPES = ("f32", "bf16", "f16", "f64", "s8", "u8", "s32", "f8_e5m2", "f8_e4m3")

# Field orders used when a log has no header line (the releases that printed none, or a truncated log).
_DNNL_ORDER = ("operation", "engine", "primitive", "implementation", "prop_kind", "memory_descriptors",
               "attributes", "auxiliary", "problem_desc", "exec_time")
_MKLDNN_ORDER = ("operation", "primitive", "implementation", "prop_kind", "memory_descriptors", "auxiliary",
                 "problem_desc", "exec_time")
DEFAULT_ORDER = {"onednn_verbose": _DNNL_ORDER, "dnnl_verbose": _DNNL_ORDER, "mkldnn_verbose": _MKLDNN_ORDER}

# prop_kind as printed → the direction reported. Reorders and matmuls have no direction (`undef`).
_DIRECTIONS = {"forward_training": "forward", "forward_inference": "forward", "forward_scoring": "forward",
               "forward": "forward", "backward_data": "backward_data", "backward_weights": "backward_weights",
               "backward_bias": "backward_weights", "backward": "backward"}


def dtype_of(descriptor: str) -> str:
    """Data type of a memory descriptor ('f32', 'bf16', ...), from either spelling: `src:bf16::blocked:...`
    (oneDNN >= 3.0) or `src_f32::blocked:...` (older); MKL-DNN 0.x printed only formats (`fsrc:nChw8c`),
    so 'unknown' there."""
    name, _, rest = descriptor.partition(":")
    after = rest.split(":", 1)[0]
    if after in DTYPES:
        return after
    tail = name.rsplit("_", 1)[-1]
    return tail if tail in DTYPES else "unknown"


def layout_of(descriptor: str) -> str:
    """A memory descriptor's format tag: `acdb` is channels-last, `abcd` plain NCHW, `AcdB64a2b` blocked."""
    parts = [p for p in descriptor.split(":") if p]
    if "blocked" in parts and parts.index("blocked") + 1 < len(parts):
        return parts[parts.index("blocked") + 1]
    return parts[-1] if parts else ""


def _destination(descriptors: list[str]) -> str:
    """The `dst` descriptor (`dst:...` or `dst_f32...`), else the last one printed."""
    for d in descriptors:
        if d.split(":", 1)[0] in ("dst", "dst_" + dtype_of(d)):
            return d
    return descriptors[-1] if descriptors else ""


@dataclass(frozen=True, slots=True)
class Execution:
    """One primitive execution from the log."""

    kind: str               # convolution, matmul, reorder, eltwise, ...
    direction: str          # forward | backward_data | backward_weights | backward | undef
    implementation: str     # the kernel that ran, e.g. brg_conv_fwd:avx512_core_bf16
    src: str                # the first memory descriptor, e.g. src:bf16::blocked:acdb::f0
    problem: str            # the problem descriptor, e.g. mb2_ic3oc8_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1
    time_ms: float
    dst: str = ""           # the destination descriptor (a reorder's target type and format)

    @property
    def dtype(self) -> str:
        """Data type of the first tensor ('f32', 'bf16', ...; 'unknown' in MKL-DNN 0.x logs)."""
        return dtype_of(self.src)

    @property
    def layout(self) -> str:
        """The source tensor's format tag: `acdb` is channels-last, `abcd` plain NCHW."""
        return layout_of(self.src)

    @property
    def dst_dtype(self) -> str:
        return dtype_of(self.dst) if self.dst else self.dtype

    @property
    def dst_layout(self) -> str:
        return layout_of(self.dst) if self.dst else self.layout


@dataclass(frozen=True, slots=True)
class ShapeTotal(JsonObject):
    """Aggregate of one distinct problem (kind × direction × descriptor × source and destination data type
    and layout: two reorders of the same dims into different formats are different problems). A record: a
    rank's result keeps it as JSON (results written before a field existed lack it: its default)."""

    kind: str = ""
    direction: str = ""
    problem: str = ""
    dtype: str = ""
    layout: str = ""
    calls: int = 0
    time_ms: float = 0.0
    dst_dtype: str = ""
    dst_layout: str = ""
    implementation: str = ""   # the kernel(s) oneDNN ran for it, most calls first, joined by " | "
    median_ms: float = 0.0     # median time of one call: robust to the odd slow call a busy machine causes
    min_ms: float = 0.0        # fastest call: the kernel's own time, least disturbed by other processes

    @property
    def key(self) -> tuple[str, str, str, str, str, str, str]:
        """The problem's identity, as shape_key gives it for an execution."""
        return self.kind, self.direction, self.problem, self.dtype, self.layout, self.dst_dtype, self.dst_layout


@dataclass(frozen=True, slots=True)
class KindTotal(JsonObject):
    """Aggregate of one primitive kind × direction × implementation over the log."""

    kind: str = ""
    direction: str = ""
    implementation: str = ""
    calls: int = 0
    time_ms: float = 0.0

    @property
    def label(self) -> str:
        """'kind direction', or the kind alone for kinds without a direction (reorder, matmul)."""
        return self.kind if self.direction == "undef" else f"{self.kind} {self.direction}"


def _split_prefix(line: str) -> tuple[str, list[str]] | None:
    fields = line.strip().split(",")
    if not fields or fields[0] not in PREFIXES:
        return None
    return fields[0], fields[1:]


def _template(rest: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """(component, field order) from a header line, or None. The component is what precedes `info` in v1
    logs (`primitive`, `graph`); older headers (`info,prim_template:...`) describe primitives."""
    for i, token in enumerate(rest):
        for marker in ("template:", "prim_template:"):
            if token.startswith(marker):
                order = (token[len(marker):], *rest[i + 1:])
                before = [t for t in rest[:i] if t not in ("v1", "info")]
                component = before[-1] if before else "primitive"
                return component, tuple(order)
    return None


@dataclass(frozen=True, slots=True)
class ExecLine:
    """The fields of one exec line this module reads, by the template's names (absent ones: their default)."""

    primitive: str = "unknown"
    implementation: str = ""
    prop_kind: str = "undef"
    memory_descriptors: str = ""
    problem_desc: str = ""
    exec_time: str | None = None


_LINE_FIELDS = frozenset(ExecLine.__dataclass_fields__)


def _exec_fields(rest: list[str], order: tuple[str, ...]) -> ExecLine | None:
    """Map an exec line's fields onto the template: the template's `operation` lines up with the line's
    `exec` token (anything printed before it, a version tag or a component, is skipped); the time is the
    last field whatever the count, since a descriptor may in principle contain the separator."""
    if "exec" not in rest[:4] or "operation" not in order:
        return None
    start = rest.index("exec") - order.index("operation")
    if start < 0:
        return None
    tokens = rest[start:]
    if len(tokens) < len(order):
        return None
    fields = dict(zip(order[:-1], tokens[:len(order) - 1]))
    fields[order[-1]] = tokens[-1]
    return ExecLine(**{k: v for k, v in fields.items() if k in _LINE_FIELDS})


def _component(rest: list[str]) -> str:
    """`primitive` unless a v1 line names another component (`graph`) before `exec`."""
    head = rest[:rest.index("exec")] if "exec" in rest[:4] else []
    named = [t for t in head if t not in ("v1",) and not t.replace(".", "").isdigit()]
    return named[-1] if named else "primitive"


def parse_lines(lines: Iterable[str]) -> tuple[list[Execution], list[str]]:
    """(executions, problems). Lines that are not oneDNN's are ignored (a rank's log mixes both); a
    oneDNN exec line that cannot be read is reported, not fatal."""
    primitive_order: tuple[str, ...] | None = None     # the log's template of a primitive's exec line
    executions: list[Execution] = []
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        split = _split_prefix(line)
        if split is None:
            continue
        prefix, rest = split
        header = _template(rest)
        if header is not None:
            if header[0] == "primitive":   # the other components' (graph) lines are skipped below
                primitive_order = header[1]
            continue
        if "exec" not in rest[:4]:
            continue   # info lines: version, ISA, runtime; create lines (ONEDNN_VERBOSE=profile_create)
        component = _component(rest)
        if component != "primitive":
            continue   # graph partitions: their primitives are logged as well, counting both would double
        order = primitive_order if primitive_order is not None else DEFAULT_ORDER[prefix]
        line_fields = _exec_fields(rest, order)
        if line_fields is None:
            problems.append(f"line {number}: {len(rest) + 1} fields do not match the template {','.join(order)}")
            continue
        try:
            time_ms = float(line_fields.exec_time or "")
        except ValueError:
            problems.append(f"line {number}: exec_time {line_fields.exec_time!r} is not a number")
            continue
        descriptors = line_fields.memory_descriptors.split(" ")
        executions.append(Execution(
            kind=line_fields.primitive, direction=_DIRECTIONS.get(line_fields.prop_kind, "undef"),
            implementation=line_fields.implementation, src=descriptors[0],
            problem=line_fields.problem_desc, time_ms=time_ms,
            dst=_destination(descriptors[1:]) if len(descriptors) > 1 else ""))
    return executions, problems


def aggregate(executions: Iterable[Execution]) -> list[KindTotal]:
    """Calls and time by kind × direction × implementation, largest time first."""
    totals: dict[tuple[str, str, str], list[float]] = {}
    for e in executions:
        entry = totals.setdefault((e.kind, e.direction, e.implementation), [0, 0.0])
        entry[0] += 1
        entry[1] += e.time_ms
    out = [KindTotal(k, d, i, int(c), t) for (k, d, i), (c, t) in totals.items()]
    return sorted(out, key=lambda t: (-t.time_ms, t.kind, t.direction, t.implementation))


def by_kind_direction(executions: Iterable[Execution]) -> dict[tuple[str, str], float]:
    """Time (ms) by kind × direction, implementations merged: the stacked bar's segments."""
    out: defaultdict[tuple[str, str], float] = defaultdict(float)
    for e in executions:
        out[(e.kind, e.direction)] += e.time_ms
    return dict(out)


def shape_key(e: Execution) -> tuple[str, str, str, str, str, str, str]:
    """What makes two executions the same problem: the key of `by_shape` and of the replay's match."""
    return e.kind, e.direction, e.problem, e.dtype, e.layout, e.dst_dtype, e.dst_layout


def by_shape(executions: Iterable[Execution]) -> list[ShapeTotal]:
    """Calls and time per distinct problem, largest time first: what the roofline and the replay use."""
    groups: dict[tuple[str, ...], list[Execution]] = {}
    for e in executions:
        groups.setdefault(shape_key(e), []).append(e)
    out = []
    for key, runs in groups.items():
        kind, direction, problem, dtype, layout, dst_dtype, dst_layout = key
        impls = Counter(e.implementation for e in runs)
        times = sorted(e.time_ms for e in runs)
        out.append(ShapeTotal(kind, direction, problem, dtype, layout, calls=len(runs),
                              time_ms=sum(times), dst_dtype=dst_dtype, dst_layout=dst_layout,
                              implementation=" | ".join(sorted(impls, key=lambda i: (-impls[i], i))),
                              median_ms=_median(times), min_ms=times[0] if times else 0.0))
    return sorted(out, key=lambda t: (-t.time_ms, t.kind, t.problem, t.layout, t.dst_layout))


def _median(sorted_values: list[float]) -> float:
    n = len(sorted_values)
    return (sorted_values[(n - 1) // 2] + sorted_values[n // 2]) / 2 if n else 0.0
