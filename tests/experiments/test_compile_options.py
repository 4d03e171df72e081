"""experiments.compile_options: per-program compile options, measured and compared."""

import json

import jax
import numpy as np
import pytest

from experiments import compile_options


def test_smoke_population_compiled_per_set_and_compared(tmp_path):
    """The init program only (`--programs init`): the epoch program is compiled the same way
    and would add ~30 s to the suite on a 2-core CPU without testing anything else."""
    out, saved = tmp_path / "c.json", tmp_path / "outputs"
    cache = jax.config.jax_enable_compilation_cache
    assert compile_options.main(["--preset", "smoke", "--steps-per-epoch", "2", "--programs",
                                 "init", "--sets", "default,threefry_kernel", "--out", str(out),
                                 "--save-outputs", str(saved)]) == 0
    assert jax.config.jax_enable_compilation_cache == cache  # restored for later tests
    result = json.loads(out.read_text())
    assert set(result["programs"]) == {"init"}
    for name in ("default", "threefry_kernel"):
        rec = result["programs"]["init"][name]
        assert rec["compile_s"] > 0 and len(rec["run_s"]) == 2
        # the first set is the reference; the threefry flag only acts on GPUs
        assert rec["bitwise_equal"] and rec["max_abs_diff"] == 0.0
    a, b = np.load(saved / "init-default.npz"), np.load(saved / "init-threefry_kernel.npz")
    assert a.files and all(np.array_equal(a[k], b[k]) for k in a.files)


@pytest.mark.parametrize("argv, message", [
    (["--sets", "default,nope"], "--sets: unknown nope"),
    (["--steps-per-epoch", "0"], "--steps-per-epoch must be >= 1"),
    (["--programs", "init,eval"], "--programs: unknown eval"),
])
def test_bad_options_one_line_error(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        compile_options.main([*argv, "--out", str(tmp_path / "c.json")])
    assert e.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()
