"""The report's figures drawn in worker processes: the same report, and no caller's script
run again in a worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rl_trader.report.figures import Figures, start_workers
from rl_trader.report.writer import write_report
from tests.report.test_writer import make_fake_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pool():
    workers = start_workers(2)
    yield workers
    workers.shutdown()


def test_a_report_drawn_by_workers_is_the_one_drawn_here(tmp_path, pool):
    run = make_fake_run(tmp_path / "run")
    here = write_report(run).read_bytes()
    assert write_report(run, pool).read_bytes() == here
    assert here.count(b"data:image/png;base64,iVBOR") >= 8  # every figure a PNG, none a token


def test_figures_without_a_pool_draw_at_once_and_with_one_fill_placeholders(pool):
    assert Figures()(str.upper, "png") == "PNG"
    figures = Figures(pool)
    token = figures(str.upper, "png")
    assert token != "PNG" and figures.fill(f"<{token}>") == "<PNG>" and not figures.pending


def test_no_pool_below_two_workers():
    assert start_workers(1) is None and start_workers(0) is None


def test_workers_do_not_run_the_callers_script_again(tmp_path):
    """A spawned worker would run an unguarded main script again (here: append a line);
    started with an empty __main__, the script runs once."""
    marks = tmp_path / "marks"
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        from rl_trader.report.figures import start_workers
        with open({str(marks)!r}, "a") as f:
            f.write("ran\\n")
        pool = start_workers(2)
        print(pool.submit(str.upper, "ok").result())
        pool.shutdown()
    """))
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                      "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OK" and marks.read_text() == "ran\n"
