"""The postmortem of a big incident stays small, and costs no more memory than the analysis it reports.

    python benchmarks/bench_postmortem.py [--ranks 8] [--ops 1000000] [--out benchmarks/results/postmortem.md]

On a generated incident (benchmarks/generate.py: one extra collective mid-way, so half the job runs misaligned and
the window alternates pairing kinds tens of thousands of times), runs `diff --json` (the baseline) and
`postmortem` as child processes and reports the report's sizes and both peak RSS. Targets: report.md under 64 KiB
and report.html under 512 KiB whatever the incident's size; the postmortem's peak RSS at most 1.3x the peak of
`diff --json` on the same evidence, measured in the same run; every pairing run in OUT/pairings.parquet.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import incident  # noqa: E402
from run_all import DIFF, measure  # noqa: E402

POSTMORTEM = [sys.executable, "-m", "ncclforensics.cli", "postmortem"]
MD_LIMIT, HTML_LIMIT, RSS_RATIO = 64 << 10, 512 << 10, 1.3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, help="also write the result as Markdown here")
    args = parser.parse_args()
    folder, _ = incident("nccl", args.ranks, args.ops)
    diff = measure([*DIFF, "--full-window", str(folder)], "diff --json --full-window")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "pm"
        post = measure([*POSTMORTEM, str(folder), "--out", str(report)], "postmortem")
        sizes = {p.name: p.stat().st_size for p in report.iterdir()}
        import polars as pl

        runs = pl.read_parquet(report / "pairings.parquet").height
    expected = json.loads(diff["stdout"])["window"]["pairing_runs"]
    ratio = post["maxrss_mib"] / diff["maxrss_mib"]
    checks = {
        f"report.md <= {MD_LIMIT >> 10} KiB": sizes["report.md"] <= MD_LIMIT,
        f"report.html <= {HTML_LIMIT >> 10} KiB": sizes["report.html"] <= HTML_LIMIT,
        f"postmortem peak RSS <= {RSS_RATIO}x diff --json's": ratio <= RSS_RATIO,
        "pairings.parquet holds every run": runs == expected,
    }
    lines = [
        f"# postmortem of {args.ranks} x {args.ops:,} COLL lines ({expected:,} pairing runs)", "",
        "| | value |", "|---|---|",
        f"| `diff --json --full-window` | {diff['wall_s']:.1f} s, {diff['maxrss_mib']:.0f} MiB, "
        f"{len(diff['stdout']):,} bytes |",
        f"| `postmortem` | {post['wall_s']:.1f} s, {post['maxrss_mib']:.0f} MiB ({ratio:.2f}x diff's) |",
        *(f"| `{name}` | {size:,} bytes |" for name, size in sorted(sizes.items())), "",
        *(f"- {'met' if ok else 'NOT MET'}: {what}" for what, ok in checks.items()),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
