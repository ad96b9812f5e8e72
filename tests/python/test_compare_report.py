"""tools/bench/compare.py without a GPU: the benchmark protocol's FLOP count, the standard suite,
the report.json row schema and the Markdown report (ratio column, n/a reasons, kernel ladder)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench"))

import compare  # noqa: E402

ROW_KEYS = {"impl", "pass", "dtype", "B", "Hq", "Hkv", "Sq", "Sk", "Dqk", "Dv", "causal", "window", "ms", "tflops",
            "max_err", "note"}


def test_flops_follow_the_protocol():
    dense = compare.Config("d128", B=4, Sq=1024, Sk=1024, Hq=32, Hkv=8, Dqk=128, Dv=64)
    assert dense.flops() == 2 * 4 * 32 * 1024 * 1024 * (128 + 64)
    causal = compare.Config("d128", B=4, Sq=1024, Sk=1024, causal=True)
    assert causal.flops() == compare.Config("d128", B=4, Sq=1024, Sk=1024).flops() / 2
    varlen = compare.Config("v", Hq=2, Dqk=8, Dv=8, causal=True, varlen=[3, 5])
    assert varlen.flops() == 2 * 2 * (3 * 3 / 2 + 5 * 5 / 2) * 16


def test_standard_suite_covers_the_design_rows():
    suite = compare.standard_suite()
    families = {c.family for c in suite}
    assert {"d128-fp16", "d128-bf16-causal", "d64-fp16", "d256-fp16-causal", "d512-fp16", "d192x128-bf16-causal",
            "gqa32x8-bf16", "varlen-bf16-causal"} <= families
    d128 = [c for c in suite if c.family == "d128-fp16"]
    assert [c.Sq for c in d128] == [1024, 2048, 4096, 8192, 16384] and all(c.B == 4 and c.Hq == 32 for c in d128)
    assert all(c.B * c.Sq == 16384 and c.Hq * c.Dqk == 2048 for c in suite if c.family.startswith(("d64", "d256")))
    assert len(compare.quick_suite()) < len(suite)


def test_rows_have_the_stable_schema():
    cfg = compare.Config("d128-fp16", B=1, Sq=64, Sk=64)
    row = compare.row_for(cfg, "sdpa-flash", ms=2.0, err=1e-3)
    assert ROW_KEYS <= set(row)
    assert row["pass"] == "fwd" and row["tflops"] == cfg.flops() / 2e-3 / 1e12
    missing = compare.row_for(cfg, "flashcore-sm90", note="not built")
    assert missing["ms"] is None and missing["tflops"] is None and missing["max_err"] is None


def test_markdown_report_ratio_na_reasons_and_ladder(tmp_path):
    cfg = compare.Config("d128-fp16", B=1, Sq=1024, Sk=1024)
    per_tflops = cfg.flops() / 1e12 * 1e3  # ms that gives 1 TFLOPS
    rows = [compare.row_for(cfg, "flashcore-naive", ms=per_tflops / 10, err=1e-4),
            compare.row_for(cfg, "flashcore-sm80", ms=per_tflops / 100, err=2e-4),
            compare.row_for(cfg, "flashcore-sm90", note="the sm90 path is not part of this build"),
            compare.row_for(cfg, "sdpa-flash", ms=per_tflops / 300, err=1e-4)]
    report = dict(device="dev", date="today", commit="abc", command="compare.py", torch="x", rows=rows)
    path = tmp_path / "report.md"
    impls = ["flashcore-sm90", "flashcore-sm80", "flashcore-naive", "sdpa-flash"]
    compare.write_markdown(report, str(path), impls)
    text = path.read_text()
    assert "| n/a [1] | 100.0 | 10.0 | 300.0 | 0.33 (flashcore-sm80 / sdpa-flash) |" in text
    assert "1. flashcore-sm90: the sm90 path is not part of this build" in text
    assert "| 10.0 | 100.0 [10.0x base, 10.00x prev] | n/a | 300.0 (sdpa-flash) [30.0x base, 3.00x prev] |" in text
    assert "Steady state" not in text
    report["warmup_seconds"] = 1.5
    compare.write_markdown(report, str(path), impls)
    assert "Steady state: each measurement follows 1.5 s of the same call" in path.read_text()


def test_merge_concatenates_rows_and_refuses_mixed_commits():
    cfg = compare.Config("d128-fp16", B=1, Sq=64, Sk=64)
    first = dict(device="dev", date="d1", commit="abc", command="compare.py --family a",
                 rows=[compare.row_for(cfg, "sdpa-flash", ms=1.0)])
    second = dict(device="dev", date="d2", commit="abc", command="compare.py --family b",
                  rows=[compare.row_for(cfg, "sdpa-cudnn", ms=2.0)])
    merged = compare.merge_reports([first, second])
    assert [r["impl"] for r in merged["rows"]] == ["sdpa-flash", "sdpa-cudnn"]
    assert merged["date"] == "d2" and merged["command"] == "compare.py --family a ; compare.py --family b"
    try:
        compare.merge_reports([first, dict(second, commit="def")])
    except ValueError as err:
        assert "commit" in str(err)
    else:
        raise AssertionError("reports of different commits were merged")
