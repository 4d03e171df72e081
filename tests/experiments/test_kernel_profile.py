"""The kernel profile's trace summary (experiments.kernel_profile): device kernels by kind and
name, busy time as a union over streams, host lines listed but not counted as kernels."""

import gzip
import json

import pytest

from experiments.kernel_profile import kind_of, load_trace, summarise


def _trace() -> dict:
    meta = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 1, "tid": 10, "name": "thread_name", "args": {"name": "python"}},
        {"ph": "M", "pid": 2, "tid": 20, "name": "thread_name", "args": {"name": "Stream #1"}},
        {"ph": "M", "pid": 2, "tid": 21, "name": "thread_name", "args": {"name": "Stream #2"}},
        {"ph": "M", "pid": 2, "tid": 22, "name": "thread_name", "args": {"name": "XLA Ops"}},
    ]
    x = [  # µs; the two streams overlap on [15, 20)
        (1, 10, "PjitFunction(epoch)", 0, 100),
        (2, 20, "sm90_xmma_gemm_f32f32_tf32", 0, 10),
        (2, 20, "loop_add_fusion", 10, 10),
        (2, 21, "input_reduce_fusion", 15, 15),
        (2, 20, "sm90_xmma_gemm_f32f32_tf32", 40, 10),
        (2, 22, "fusion.12", 0, 50),  # an annotation line, not a kernel
    ]
    return {"traceEvents": meta + [{"ph": "X", "pid": p, "tid": t, "name": n, "ts": ts,
                                    "dur": d} for p, t, n, ts, d in x]}


def test_kernels_by_kind_and_busy_time_as_a_union():
    out = summarise(_trace(), steps=2)
    assert out["kernels"] == 4 and out["kernels_per_step"] == 2
    assert out["kernel_seconds"] == pytest.approx(45e-6)
    assert out["device_busy_seconds"] == pytest.approx(40e-6)  # [0, 30) ∪ [40, 50)
    assert out["device_span_seconds"] == pytest.approx(50e-6)
    assert out["busy_us_per_step"] == pytest.approx(20.0)
    assert out["by_kind"]["matmul"] == {"count": 2, "seconds": pytest.approx(20e-6),
                                        "share": pytest.approx(20 / 45)}
    assert out["by_kind"]["reduction"]["count"] == 1
    assert out["by_kind"]["elementwise fusion"]["seconds"] == pytest.approx(10e-6)
    assert out["top"][0] == {"name": "sm90_xmma_gemm_f32f32_tf32", "kind": "matmul",
                             "count": 2, "seconds": pytest.approx(20e-6)}
    lines = {(r["process"], r["thread"]): r["events"] for r in out["lines"]}
    assert lines == {("/host:CPU", "python"): 1, ("/device:GPU:0", "Stream #1"): 3,
                     ("/device:GPU:0", "Stream #2"): 1, ("/device:GPU:0", "XLA Ops"): 1}


def test_a_host_only_trace_has_no_kernels():
    trace = _trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["pid"] == 1]
    out = summarise(trace, steps=1)
    assert out["kernels"] == 0 and out["device_busy_seconds"] == 0.0 and out["by_kind"] == {}


@pytest.mark.parametrize("name, kind", [
    ("cutlass_80_tensorop_s1688gemm", "matmul"), ("loop_gather_fusion", "gather/scatter"),
    ("dynamic_update_slice_fusion", "gather/scatter"), ("wrapped_transpose", "copy/transpose"),
    ("Memcpy DtoD", "copy/transpose"), ("loop_multiply_fusion", "elementwise fusion"),
    ("something_else", "other")])
def test_kernel_kinds(name, kind):
    assert kind_of(name) == kind


def test_load_trace_reads_the_newest_perfetto_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no perfetto_trace"):
        load_trace(tmp_path)
    run = tmp_path / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    with gzip.open(run / "perfetto_trace.json.gz", "wt") as fh:
        json.dump(_trace(), fh)
    assert summarise(load_trace(tmp_path), 1)["kernels"] == 4
