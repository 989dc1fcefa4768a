"""Real configs, as their repositories ship them (issue 39): every file of
``tests/data/configs-wild`` imports into the plan its framework would run — every field
in ``expected.json`` equal, every warning listed there (none unlisted: no silent guess)
— and estimates, or is refused in one sentence naming what MemPlan cannot express.

``SOURCES.tsv`` names each file's repository, path and commit. The expected fields were
checked by hand against each framework's parser; the derivations of the less obvious:

- torchtitan ``llama3_8b.toml``: ``data_parallel_shard_degree = -1`` is world ÷
  (replicate·cp·tp·pp) (``torchtitan/distributed/parallel_dims.py``) = 8 ÷ 1 = 8 on the
  base plan's 8 GPUs → FSDP2 over 8; ``local_batch_size 1`` × ``seq_len 8192``;
  ``[activation_checkpoint] mode = "selective"``. ``llama3_70b.toml``: TP 8 leaves
  8 ÷ 8 = 1 shard → one unsharded replica; ``[model] flavor = "70B"`` → Llama-3.1-70B.
- torchtitan ``deepseek_v3/config_registry.py::deepseek_v3_16b``:
  ``num_tokens_per_microbatch_per_dp_rank = 4 * 4096`` over ``max_context_length 4096``
  → micro-batch 4; ``expert_parallel_degree 8``; ``model_registry("16B")`` → the flavor
  table's dims (2048 hidden, 27 layers, 64 experts) = DeepSeek-V2-Lite's.
- Megatron ``train_llama3_8b_h100_fp8.sh``: ``GLOBAL_BATCH_SIZE=128`` ÷ (micro 1 × DP
  8 ÷ TP 1) = 16 accumulation steps; ``--grad-reduce-in-bf16``; vocab 128,256 is already
  a multiple of 128 × TP 1 (``_vocab_size_with_padding``).
- Megatron ``gptoss/02_train.sh``: ``PP_SIZE=${WORLD_SIZE}`` = ``$((8*1))`` = 8 stages: DP 1
  and 128 accumulation steps of micro-batch 1; ``--recompute-activations`` = selective.
- Megatron ``train_gpt3_175b_distributed.sh``: 8 GPUs per node × 1 node cannot hold
  TP 8 × PP 16 = 128 (Megatron's ``initialize_model_parallel`` refuses it): refused.
- slime ``deepseek-v3.sh``: ``NLAYERS="${MODEL_ARGS_NUM_LAYERS:-61}"`` → 61 layers; its
  ``MOE_LAYER_FREQ`` is built by a bash loop, which is warned, not run.
- Hugging Face ``config.json`` (meta-llama/Llama-3.1-8B, Qwen/Qwen3-8B,
  Qwen/Qwen3-30B-A3B at the revisions SOURCES.tsv names; the JSON text as quoted in
  citsjtu2020/LLM-Prof ``sglang/Model_Config.md`` @ 8434c8d), each against its
  transformers config class: ``LlamaConfig`` — ``head_dim`` absent, so hidden ÷ heads
  (stored as None: derived), ``attention_bias``/``mlp_bias`` false → no biases,
  ``tie_word_embeddings`` false, ``rope_scaling`` llama3 changes no memory;
  ``Qwen3Config`` — ``head_dim`` 128 given, q/k RMSNorm in every ``Qwen3Attention``
  (qk_norm); ``Qwen3MoeConfig`` — ``num_experts`` 128, top-8, ``moe_intermediate_size``
  768, ``decoder_sparse_step`` 1 with ``mlp_only_layers`` [] → every one of the 48
  layers sparse (no dense first layers), no shared expert and a bias-free router
  (``Qwen3MoeSparseMoeBlock``); ``torch_dtype`` bfloat16 → bf16 storage. The model is
  named after the file. Nothing is guessed, so nothing is warned: "right".
- A GPTQ model's config.json is refused: its ``quantization_config`` makes the weights
  GPTQ-packed integers, which MemPlan cannot express.
- DeepSpeed stage 0 (LLaMA-Factory ``ds_z0_config.json``) is plain data parallelism:
  DDP; axolotl's ``zero3_bf16_cpuoffload_params.json`` offloads parameters only, which
  DeepSpeed's ``_configure_offloading`` allows (``runtime/zero/stage3.py``).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from engine.estimate import estimate
from engine.exports.import_guard import IMPORT_MESSAGE_CHARS, ImportRefused
from engine.exports.importers import import_file
from engine.legality.checks import plan_problems
from engine.plan import Plan
from engine.presets import default_plan

WILD = Path(__file__).parents[2] / "data" / "configs-wild"
EXPECTED: dict[str, dict[str, Any]] = json.loads(
    (WILD / "expected.json").read_text(encoding="utf-8")
)
SOURCES = {
    row["file"]: row
    for row in csv.DictReader(
        (WILD / "SOURCES.tsv").read_text(encoding="utf-8").splitlines(), delimiter="\t"
    )
}
CONFIGS = sorted(p.name for p in WILD.iterdir() if p.name not in ("expected.json", "SOURCES.tsv"))


def _field(plan: Plan, path: str) -> Any:
    value: Any = plan
    for part in path.split("."):
        value = getattr(value, part)
    return value


def test_the_corpus_is_forty_files_from_eight_repositories_each_sourced_and_expected() -> None:
    assert len(CONFIGS) >= 40
    assert len({SOURCES[name]["repository"] for name in CONFIGS}) >= 8
    assert set(CONFIGS) == set(SOURCES) == set(EXPECTED)
    for name in CONFIGS:
        assert len(SOURCES[name]["commit"]) == 40, name


@pytest.mark.parametrize("name", CONFIGS)
def test_a_real_config_imports_as_its_framework_runs_it_or_is_refused(name: str) -> None:
    want = EXPECTED[name]
    target = f"{WILD / name}::{want['function']}" if "function" in want else WILD / name
    if want["outcome"] == "refused":
        with pytest.raises(ImportRefused) as info:
            import_file(target, default_plan())
        message = str(info.value)
        assert want["refusal"] in message
        assert "\n" not in message and len(message) <= IMPORT_MESSAGE_CHARS
        return
    got = import_file(target, default_plan())
    fields = {path: _field(got.plan, path) for path in want["fields"]}
    assert fields == want["fields"]
    # every guess is warned, and every warning is one the corpus expects
    assert list(got.warnings) == want.get("warnings", [])
    assert (want["outcome"] == "right") == (not got.warnings)
    assert plan_problems(got.plan) == []
    assert estimate(got.plan).fit_peak.high > 0


def test_the_corpus_table_counts_every_repository() -> None:
    """The table of the issue's report: repository → right / warned / refused."""
    table: Counter[tuple[str, str]] = Counter(
        (SOURCES[n]["repository"], EXPECTED[n]["outcome"]) for n in CONFIGS
    )
    assert sum(table.values()) == len(CONFIGS)
    assert table[("pytorch/torchtitan", "refused")] == 0  # qwen3 32B: built from its flavor
    hf = [n for n in CONFIGS if n.startswith("hf_")]
    assert sum(EXPECTED[n]["outcome"] == "right" for n in hf) >= 3  # field-producing models


HF_MODELS = [n for n in CONFIGS if n.startswith("hf_") and EXPECTED[n]["outcome"] == "right"]


@pytest.mark.parametrize("name", HF_MODELS)
def test_a_real_config_json_imports_the_same_as_a_model_folder(name: str, tmp_path: Path) -> None:
    """Saved as ``<model>/config.json`` — how a download or a checkpoint holds it — the file
    is read as a model folder: the same architecture, the folder's name, nothing warned."""
    folder = tmp_path / "Some-Model"
    folder.mkdir()
    (folder / "config.json").write_bytes((WILD / name).read_bytes())
    loose = import_file(WILD / name, default_plan())
    got = import_file(folder, default_plan())
    assert got.plan.model.architecture == loose.plan.model.architecture
    assert got.plan.model.name == "Some-Model"
    assert got.warnings == ()
