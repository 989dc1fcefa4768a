"""The seeds the import fuzzer mutates: one list per import kind.

Framework configs are MemPlan's own exports of the golden plans (every strategy and
layout the exporters write) plus hand-written files in the forms users write and the
exporters never do (``auto`` values, a TOML job file, ``--section.key`` overrides, a
launch script with shell variables and a ``--moe-layer-freq`` list expression). Model
configs are ``tests/data/configs``. A model folder is a tiny Llama's config.json with a
safetensors header listing its tensors (one file, or two shards and an index); its data
section is a sparse file, so a case costs no disk.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from functools import cache
from math import prod
from pathlib import Path

from engine.exports import FORMATS
from engine.models.hf_config import import_hf_config
from engine.models.inventory import build_inventory
from tests.fuzz.corpus import seed_plans

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "configs"

KINDS = ("deepspeed", "accelerate", "torchtitan", "megatron", "hf_config", "model_folder")
"""Every import kind the fuzzer mutates (a config.json alone and a whole folder apart)."""

SEED_PLANS = 12
"""Golden plans exported as seeds (the rest add layouts, not file forms)."""

TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 100,
    "torch_dtype": "auto",
}

_HAND: dict[str, tuple[tuple[str, str], ...]] = {
    "deepspeed": (
        (
            "ds_config.json",
            json.dumps(
                {
                    "train_batch_size": "auto",
                    "train_micro_batch_size_per_gpu": "auto",
                    "gradient_accumulation_steps": 4,
                    "bf16": {"enabled": "auto"},
                    "zero_optimization": {
                        "stage": 3,
                        "offload_optimizer": {"device": "cpu", "pin_memory": True},
                        "offload_param": {"device": "nvme", "buffer_count": 5},
                        "reduce_bucket_size": "auto",
                        "stage3_prefetch_bucket_size": "auto",
                        "stage3_param_persistence_threshold": "auto",
                    },
                    "aio": {"block_size": 1048576, "queue_depth": 8},
                    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                    "activation_checkpointing": {"partition_activations": True},
                },
                indent=2,
            ),
        ),
    ),
    "accelerate": (
        (
            "fsdp.yaml",
            "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
            "  fsdp_version: 2\n  fsdp_offload_params: true\n  fsdp_reshard_after_forward: true\n"
            "  fsdp_activation_checkpointing: true\nmixed_precision: bf16\nnum_processes: 8\n"
            "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n"
            "  parallelism_config_dp_shard_size: 4\n",
        ),
        (
            "ds_plugin.yaml",
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n"
            "  offload_optimizer_device: cpu\n  gradient_accumulation_steps: 8\n"
            "  zero3_init_flag: false\nmixed_precision: fp16\nnum_processes: 16\n",
        ),
    ),
    "torchtitan": (
        (
            "job.toml",
            '[job]\ndump_folder = "./out"\n[training]\nseq_len = 8192\nlocal_batch_size = 2\n'
            'global_batch_size = 64\nmixed_precision_param = "bfloat16"\n[parallelism]\n'
            "data_parallel_shard_degree = 4\ntensor_parallel_degree = 2\n"
            'pipeline_parallel_degree = 1\n[activation_checkpoint]\nmode = "full"\n'
            "[compile]\nenable = true\n",
        ),
        (
            "run.sh",
            "torchtitan/train.sh --training.seq_len 4096 --training.local_batch_size 4 "
            "--parallelism.tensor_parallel_degree 4 --parallelism.data_parallel_shard_degree 2\n",
        ),
    ),
    "megatron": (
        (
            "train.sh",
            "#!/bin/bash\nTP=4\nPP=2\nNLAYERS=61\nGPUS=8\n"
            "torchrun --nproc_per_node $GPUS --nnodes 2 pretrain_gpt.py \\\n"
            "  --tensor-model-parallel-size ${TP} --pipeline-model-parallel-size $PP \\\n"
            "  --num-layers $NLAYERS --hidden-size 2048 --num-attention-heads 16 \\\n"
            "  --seq-length 4096 --micro-batch-size 1 --global-batch-size 256 \\\n"
            "  --num-experts 64 --moe-router-topk 6 --moe-ffn-hidden-size 1408 \\\n"
            '  --moe-layer-freq "([0]*3+[1]*58)" --expert-model-parallel-size 4 \\\n'
            "  --bf16 --use-distributed-optimizer --sequence-parallel \\\n"
            "  --recompute-granularity selective --swiglu --disable-bias-linear\n",
        ),
    ),
}


Seed = tuple[str, str, tuple[tuple[str, str], ...]]
"""(file name, text, companion files written beside it unmutated)."""


@cache
def framework_seeds() -> dict[str, tuple[Seed, ...]]:
    """kind → seeds: exports of the golden plans (with their companions), then hand files."""
    out: dict[str, list[Seed]] = {k: [(n, t, ()) for n, t in v] for k, v in _HAND.items()}
    for plan in list(seed_plans().values())[:SEED_PLANS]:
        for kind in ("deepspeed", "accelerate", "torchtitan", "megatron"):
            exp = FORMATS[kind].export(plan)
            extras = tuple((e.filename, e.text) for e in exp.extras)
            out[kind].append((exp.filename, exp.text, extras))
    return {k: tuple(v) for k, v in out.items()}


@cache
def hf_seeds() -> tuple[tuple[str, str], ...]:
    """Every config.json of tests/data/configs."""
    return tuple((p.name, p.read_text(encoding="utf-8")) for p in sorted(CONFIGS.glob("*.json")))


@dataclass(frozen=True)
class Folder:
    """A model folder: small files by name, and safetensors files as (header JSON text,
    data-section length) so that the header can be mutated and the data left sparse."""

    files: dict[str, str]
    shards: dict[str, tuple[str, int]]


def _header(tensors: list[tuple[str, tuple[int, ...]]]) -> tuple[str, int]:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors:
        size = 2 * prod(shape)
        header[name] = {
            "dtype": "BF16",
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    return json.dumps(header), offset


@cache
def folder_seeds() -> tuple[Folder, ...]:
    """The tiny Llama as one safetensors file, and as two shards with an index."""
    spec = import_hf_config({**TINY_LLAMA, "torch_dtype": "bfloat16"}).spec
    tensors = [(t.name, tuple(t.shape)) for t in build_inventory(spec)]
    config = json.dumps(TINY_LLAMA, indent=2)
    single = Folder({"config.json": config}, {"model.safetensors": _header(tensors)})
    half = len(tensors) // 2
    names = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    parts = (tensors[:half], tensors[half:])
    weight_map = {n: names[i] for i, part in enumerate(parts) for n, _ in part}
    index = json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}, indent=2)
    sharded = Folder(
        {"config.json": config, "model.safetensors.index.json": index},
        {names[i]: _header(part) for i, part in enumerate(parts)},
    )
    return single, sharded


def write_shard(path: Path, header: bytes, data_len: int, length: int | None = None) -> None:
    """A safetensors file: the length prefix (``length``, else the header's), the
    header, and ``data_len`` bytes of sparse zeros."""
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header) if length is None else length) + header)
        f.truncate(8 + len(header) + data_len)
