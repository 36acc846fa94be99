"""bench.run's report rewrites only its generated part of docs/benchmarks.md: the notes and the
other sections (the dedup figures, written by hand) stay."""

from bench.run import GENERATED_END, GENERATED_START, write_report

ROWS = [("recall p95, subject-scoped (HTTP)", "12.0 ms", "3.0 ms", "4.0×", "< 20 ms")]
META = {"date": "2026-12-01", "command": "python -m bench.run", "machine": "2 cores", "records": 1_094_000, "load": "1.0"}


def test_a_report_without_markers_keeps_every_later_section(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text("# Benchmarks\n\nRun on 2026-11-29.\n\n| old | table |\n\n## Dedup proposals\n\nKept by hand.\n")
    write_report(path, ROWS, META)
    text = path.read_text()
    assert text.startswith("# Benchmarks\n\n" + GENERATED_START)
    assert "| recall p95, subject-scoped (HTTP) | 12.0 ms | 3.0 ms | 4.0× | < 20 ms |" in text
    assert "Run on 2026-11-29" not in text and "| old | table |" not in text
    assert text.endswith(GENERATED_END + "\n\n## Dedup proposals\n\nKept by hand.\n")


def test_a_second_report_replaces_only_the_part_between_the_markers(tmp_path):
    path = tmp_path / "benchmarks.md"
    write_report(path, ROWS, META)
    path.write_text(path.read_text() + "\n## Reading the figures\n\nNotes.\n\n## Dedup proposals\n\nKept.\n")
    write_report(path, [("writes/s", "600/s", "5000/s", "8.3×", "≥ 500/s")], {**META, "date": "2026-12-02"})
    text = path.read_text()
    assert text.count(GENERATED_START) == 1 and "Run on 2026-12-02" in text and "2026-12-01" not in text
    assert "| writes/s | 600/s |" in text and "recall p95" not in text
    assert text.endswith("## Reading the figures\n\nNotes.\n\n## Dedup proposals\n\nKept.\n")
