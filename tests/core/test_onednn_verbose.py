"""The oneDNN verbose parser on golden excerpts of each format: lines captured on the development machine
(torch 2.14.1, oneDNN v3.12, `onednn_verbose,v1,...`) and hand-written lines in the older formats."""

from pathlib import Path

import pytest

from orchestrator.core.profile import onednn_verbose as ov

DATA = Path(__file__).parent.parent / "data" / "onednn"
CONV = "mb2_ic3oc8_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1"


def _parse(name: str) -> list[ov.Execution]:
    executions, problems = ov.parse_lines((DATA / name).read_text().splitlines())
    assert problems == []
    return executions


def test_v1_captured_lines_use_the_header_and_skip_foreign_lines():
    ex = _parse("onednn_verbose_v1_captured.log")
    assert len(ex) == 13
    conv = [e for e in ex if e.kind == "convolution"]
    assert [(e.direction, e.dtype, e.layout) for e in conv] == [
        ("forward", "f32", "acdb"), ("backward_weights", "f32", "acdb"),
        ("forward", "bf16", "acdb"), ("backward_weights", "bf16", "acdb")]
    assert conv[0].implementation == "brg_conv_fwd:avx512_core"
    assert conv[0].time_ms == pytest.approx(0.0187988)
    assert conv[3].implementation == "jit_bf16:avx512_core_bf16"
    assert all(e.problem == CONV for e in conv)
    matmuls = [e for e in ex if e.kind == "matmul"]
    assert [m.problem for m in matmuls] == ["2x512:512x10", "2x10:10x512", "10x2:2x512"]
    assert {m.direction for m in matmuls} == {"undef"}   # oneDNN's matmul has no direction
    assert sum(e.kind == "reorder" for e in ex) == 6


def test_aggregate_by_kind_direction_implementation():
    totals = ov.aggregate(_parse("onednn_verbose_v1_captured.log"))
    mm = [t for t in totals if t.kind == "matmul"]
    assert len(mm) == 1 and mm[0].calls == 3 and mm[0].implementation == "brg_matmul:avx512_core_bf16"
    assert mm[0].time_ms == pytest.approx(0.00683594 + 0.00512695 + 0.00488281)
    assert sum(t.calls for t in totals) == 13
    assert [t.time_ms for t in totals] == sorted((t.time_ms for t in totals), reverse=True)


def test_dnnl_verbose_v2_header_and_directions():
    ex = _parse("dnnl_verbose_v2.log")
    assert [(e.kind, e.direction, e.time_ms) for e in ex] == [
        ("convolution", "forward", 0.25), ("convolution", "backward_data", 0.5),
        ("convolution", "backward_weights", 0.75), ("reorder", "undef", 0.125)]
    assert ex[0].dtype == "f32" and ex[0].layout == "aBcd16b"
    assert ex[1].dtype == "f32"   # diff_src_f32: the data type follows the last underscore
    by = ov.by_kind_direction(ex)
    assert by[("convolution", "backward_weights")] == 0.75


def test_mkldnn_verbose_without_header_uses_the_legacy_order():
    ex = _parse("mkldnn_verbose_v0.log")
    assert [(e.kind, e.direction, e.implementation, e.time_ms) for e in ex] == [
        ("convolution", "forward", "jit:avx512_common", 1.5), ("eltwise", "forward", "jit:avx512_common", 0.5),
        ("convolution", "backward_weights", "jit:avx512_common", 2.0)]
    assert ex[0].problem == "mb2_g1ic16oc32_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1"
    assert ex[0].dtype == "unknown"   # MKL-DNN 0.x printed formats only


def test_onednn_v3_exec_prefix_and_groups():
    ex = _parse("onednn_verbose_v3_exec.log")
    assert [(e.kind, e.problem) for e in ex] == [
        ("convolution", "mb4_g32ic64oc64_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1"), ("matmul", "64x128:128x32")]
    assert ex[0].implementation == "brg:avx512_core" and ex[0].time_ms == 0.4


def test_field_order_comes_from_the_header_not_from_positions():
    # A made-up future header that moves exec_time before the problem: the parser follows it.
    lines = ["onednn_verbose,v1,primitive,info,template:operation,engine,primitive,implementation,prop_kind,"
             "memory_descriptors,attributes,auxiliary,exec_time,problem_desc",
             "onednn_verbose,v1,primitive,exec,cpu,eltwise,jit:avx512_core,forward_training,src:f32::blocked:abcd::f0,"
             ",alg:eltwise_relu,0.3,2x8x4x4"]
    (e,), problems = ov.parse_lines(lines)
    assert problems == [] and e.kind == "eltwise"
    assert (e.problem, e.time_ms) == ("2x8x4x4", 0.3)


def test_timestamped_v1_lines_line_up_on_exec():
    lines = ["onednn_verbose,v1,primitive,info,template:timestamp,operation,engine,primitive,implementation,"
             "prop_kind,memory_descriptors,attributes,auxiliary,problem_desc,exec_time",
             "onednn_verbose,v1,1732233000123.5,primitive,exec,cpu,reorder,jit:uni,undef,src:f32::blocked:a::f0 "
             "dst:f32::blocked:a::f0,,,8,0.002"]
    (e,), problems = ov.parse_lines(lines)
    assert problems == [] and (e.kind, e.problem, e.time_ms) == ("reorder", "8", 0.002)


def test_unreadable_exec_lines_are_reported_not_fatal():
    lines = ["dnnl_verbose,exec,cpu,convolution,jit:avx2,forward_training,src_f32::blocked:abcd:f0,,alg:x,mb1,abc",
             "dnnl_verbose,exec,cpu,convolution",
             "dnnl_verbose,exec,cpu,reorder,jit:uni,undef,src_f32::blocked:a:f0,,,8,0.5"]
    executions, problems = ov.parse_lines(lines)
    assert [e.kind for e in executions] == ["reorder"]
    assert len(problems) == 2 and "line 1" in problems[0] and "exec_time 'abc'" in problems[0]
    assert "line 2" in problems[1]


def test_graph_component_lines_are_not_double_counted():
    lines = ["onednn_verbose,v1,graph,exec,cpu,100002,matmul_post_ops,MatMul,f32,,dnnl_backend,0.5",
             "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core,undef,src:f32::blocked:ab::f0,,,2x3:3x4,0.4"]
    executions, _ = ov.parse_lines(lines)
    assert [(e.kind, e.time_ms) for e in executions] == [("matmul", 0.4)]


def test_reorders_of_the_same_dims_into_different_formats_are_different_problems():
    shapes = [s for s in ov.by_shape(_parse("onednn_verbose_v1_captured.log"))
              if s.kind == "reorder" and s.problem == "8x3x3x3"]
    # acdb → Acdb16a (into the kernel's format) and Acdb16a → abcd (back) are two problems, not one.
    assert {(s.layout, s.dst_layout) for s in shapes} >= {("acdb", "Acdb16a"), ("Acdb16a", "abcd")}
    assert len({(s.layout, s.dst_layout, s.dtype, s.dst_dtype) for s in shapes}) == len(shapes)
    assert all(s.implementation == "jit:uni" for s in shapes)


def test_a_cast_reorder_keeps_its_destination_type():
    line = ("onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src:f32::blocked:abcd::f0 "
            "dst:bf16::blocked:Acdb16a::f0,attr-scratchpad:user,,256x256x3x3,0.5")
    (e,), _ = ov.parse_lines([line])
    assert (e.dtype, e.layout, e.dst_dtype, e.dst_layout) == ("f32", "abcd", "bf16", "Acdb16a")
    (s,) = ov.by_shape([e, e])
    assert (s.calls, s.time_ms, s.median_ms, s.dst_dtype) == (2, 1.0, 0.5, "bf16")
