"""torchtitan 0.3.0 — the release the export targets — read back both ways (issue 39):
the command line of overrides the recipe's docstring gives is the same job as the recipe,
and 0.3.0's own ``config_registry.py`` functions import (``TrainingConfig(local_batch_size
…, seq_len …)``), as torchtitan main's token-based recipes still do (test_configs_wild)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from export_grid import GRID, grid_plan
from roundtrip import differences, scrambled

from engine.exports import FORMATS
from engine.exports.importers import import_file
from engine.exports.titan_cli import parse_command
from engine.exports.titan_import import import_torchtitan
from engine.exports.torchtitan import titan_argv
from engine.presets import default_plan

TITAN = [g for g in GRID if g[1] == "torchtitan"]


@pytest.mark.parametrize(("label", "fmt", "model", "changes"), TITAN, ids=[g[0] for g in TITAN])
def test_the_docstring_command_line_is_the_recipe(
    label: str, fmt: str, model: str, changes: dict[str, Any]
) -> None:
    """``./run_train.sh --module M --config F <overrides> activation-checkpoint:X`` from
    the export's docstring imports over a scrambled base to the plan exported."""
    plan = grid_plan(model, changes)
    text = FORMATS[fmt].export(plan).text
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("./run_train.sh")]
    module, function, args = titan_argv(plan)
    assert line == " ".join(["./run_train.sh", "--module", module, "--config", function, *args])
    got = import_torchtitan(line, scrambled(plan, FORMATS[fmt].expressed(plan)))
    assert differences(got.plan, plan) == [], label
    # the function's own settings are torchtitan's to merge: said, never silent
    assert any(f"--config {function}" in w for w in got.warnings)


def test_tyro_booleans_lists_and_the_ac_subcommand() -> None:
    """tyro spells ``False`` as ``--section.no-key``, a ``list[list[str]]`` as
    comma-joined words, and the AC policy as a subcommand."""
    cmd = parse_command(
        "torchrun --nnodes 2 --nproc_per_node 8 -m torchtitan.train --module llama3 "
        "--config llama3_70b --parallelism.no-enable-sequence-parallel --compile.enable "
        "--parallelism.module-fqns-per-model-part tok_embeddings,layers.0 layers.1,norm "
        "activation-checkpoint:none"
    )
    assert cmd.world == 16 and cmd.function == "llama3_70b"
    assert cmd.tree["parallelism"]["enable_sequence_parallel"] is False
    assert cmd.tree["compile"]["enable"] is True
    assert cmd.tree["parallelism"]["module_fqns_per_model_part"] == [
        ["tok_embeddings", "layers.0"],
        ["layers.1", "norm"],
    ]
    assert cmd.tree["activation_checkpoint"]["mode"] == "none"


@pytest.mark.skipif(
    importlib.util.find_spec("torchtitan") is None, reason="torchtitan 0.3.0 not installed"
)
def test_torchtitan_0_3_0_registry_function_imports() -> None:
    """0.3.0's ``models/llama3/config_registry.py::llama3_70b`` (read, never run):
    ``model_registry("70B")``; ``TrainingConfig(local_batch_size=8, seq_len=8192)``;
    ``ParallelismConfig(tensor_parallel_degree=8)`` with the default shard degree -1 =
    8 GPUs (the base plan's) ÷ TP 8 = 1: one unsharded replica; ``FullAC.Config()``."""
    spec = importlib.util.find_spec("torchtitan")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "models" / "llama3" / "config_registry.py"
    base = default_plan()
    assert base.parallelism.world_size == 8
    got = import_file(f"{path}::llama3_70b", base)
    p = got.plan
    assert p.model.name == "Llama-3.1-70B"
    assert (p.batch.seq_len, p.batch.micro_batch, p.batch.grad_accum) == (8192, 8, 1)
    assert (p.parallelism.strategy, p.parallelism.dp, p.parallelism.tp) == ("fsdp2", 1, 8)
    assert p.method.recompute.policy == "full"
    assert got.warnings == ()
