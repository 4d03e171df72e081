"""The network's parts compiled alone (experiments.compile_parts), on the tiny run's shapes."""

import json

from experiments.compile_parts import main
from tests.helpers import TINY_ARGS

PARTS = ("market_vsn", "selector_grn", "grn", "dense_on_basis", "network")


def test_every_part_is_compiled_forward_and_with_its_gradient(tmp_path):
    out = tmp_path / "parts.json"
    assert main(["--out", str(out), "--", *TINY_ARGS, "--data", "synthetic:ar1:1200:1"]) == 0
    result = json.loads(out.read_text())
    assert result["members"] == 2 and result["batch"] == 8  # TINY_ARGS
    for part in PARTS:
        forward, gradient = result[f"{part}_forward"], result[f"{part}_gradient"]
        assert gradient["hlo_instructions"] > forward["hlo_instructions"] > 10
        assert gradient["compile_seconds"] >= 0
    # the whole network holds the market VSN, and more
    assert (result["network_gradient"]["hlo_instructions"]
            > result["market_vsn_gradient"]["hlo_instructions"])
