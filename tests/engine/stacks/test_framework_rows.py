"""Rows true to the frameworks' code (issue 15, fixes A–L), each derived by hand from the
code path it follows. Reference: Llama-3.1-8B (P = 8,030,261,248), 8 × H100, s 4096."""

from __future__ import annotations

from typing import Any

from engine.estimate import Estimate, estimate
from engine.ledger.row import Row
from engine.plan import Plan, default_plan, with_values
from engine.reference.deepspeed_estimator import deepspeed_reference

P = 8_030_261_248
"""Llama-3.1-8B parameters (its safetensors metadata)."""
SHARD = P // 8  # 1,003,782,656: the flat partition of 8 ranks (P is a multiple of 16)


def _plan(**changes: Any) -> Plan:
    return with_values(default_plan(), {k.replace("__", "."): v for k, v in changes.items()})


def _rows(est: Estimate) -> dict[str, int]:
    return {r.id: r.high for r in est.rows}


def test_a_deepspeed_bf16_casts_the_module_and_keeps_the_fp32_master() -> None:
    """A. DeepSpeed 0.19.6 runtime/engine.py ``_configure_distributed_model``: with
    ``bf16.enabled`` every floating parameter is cast to bf16
    (``_cast_module_mixed_precision``); zero/stage_1_and_2.py ``__init__`` keeps
    ``single_partition_of_fp32_groups``, the fp32 master of this rank's partition.

    ZeRO-2, 8 ranks: weights 2·P = 16,060,522,496 B (bf16, whole on every rank); master
    4·P/8 = 4,015,130,624 B. The module is bf16, so no autocast copies of the weights
    are saved for backward (no ``weight_casts`` row)."""
    rows = _rows(estimate(_plan(parallelism__strategy="zero2")))
    assert rows["hbm.weights"] == 2 * P == 16_060_522_496
    assert rows["hbm.master_weights"] == 4 * SHARD == 4_015_130_624
    assert "hbm.activations.saved.weight_casts" not in rows


def test_a_deepspeed_casts_peft_adapters_too() -> None:
    """A with peft on top: ``_cast_module_mixed_precision`` casts the fp32 LoRA adapters
    to bf16 as well; their fp32 copy is the ZeRO master. LoRA r 16 on q, k, v, o of
    8B: 32 layers × 16·((4096+4096)·2 + (4096+1024)·2) = 13,631,488 adapter
    parameters, bf16 whole under ZeRO-2 = 27,262,976 B."""
    rows = _rows(estimate(_plan(parallelism__strategy="zero2", method__kind="lora")))
    assert rows["hbm.weights.adapters"] == 2 * 13_631_488 == 27_262_976


def test_b_deepspeed_gradients_follow_the_model_dtype() -> None:
    """B. DeepSpeed 0.19.6 runtime/engine.py ``get_data_types``: ``grad_accum_dtype``
    is the model dtype (bf16) unless ``data_types.grad_accum_dtype`` is set, and
    ``_do_optimizer_sanity_check`` then picks the ZeRO optimizer (not BF16_Optimizer).

    ZeRO-1 keeps every rank's full 16-bit gradients until the boundary's reduce:
    2·P = 16,060,522,496 B (was 4·P in fp32). ZeRO-2 keeps its bf16 partition
    (stage_1_and_2.py ``copy_grads_in_partition``): 2·P/8 = 2,007,565,312 B."""
    zero1 = _rows(estimate(_plan(parallelism__strategy="zero1")))
    assert zero1["hbm.grads"] == 2 * P == 16_060_522_496
    zero2 = _rows(estimate(_plan(parallelism__strategy="zero2")))
    assert zero2["hbm.grads"] == 2 * SHARD == 2_007_565_312
    fp32 = _rows(
        estimate(_plan(parallelism__strategy="zero1", method__precision__grad_dtype="fp32"))
    )
    assert fp32["hbm.grads"] == 4 * P  # data_types.grad_accum_dtype fp32, as set


def test_c_zero12_buckets_follow_setup_buckets() -> None:
    """C. DeepSpeed 0.19.6 stage_1_and_2.py ``setup_buckets``: one
    ``reduce_bucket_size`` buffer (5e8 elements, runtime/zero/config.py) in the model
    dtype, a second only with ``overlap_comm`` (False for stages 1–2); the all-gather
    writes into the flat buffer; ``_release_ipg_buffers`` frees them at the end of
    backward. ZeRO-2: 5e8 × 2 B = 1,000,000,000 B in backward only; with overlap_comm
    2,000,000,000 B. (Before: (reduce + all-gather) × dtype, up to ×4.5.)"""
    est = estimate(_plan(parallelism__strategy="zero2"))
    bucket = next(r for r in est.rows if r.id == "hbm.buckets.zero")
    assert (bucket.low, bucket.high) == (1_000_000_000, 1_000_000_000)
    assert bucket.phases == frozenset({"backward"})
    overlap = estimate(
        _plan(parallelism__strategy="zero1", parallelism__knobs__ds_overlap_comm=True)
    )
    assert _rows(overlap)["hbm.buckets.zero"] == 2_000_000_000


def test_c_zero12_step_builds_the_fp32_gradient_partition() -> None:
    """C (the step's side). stage_1_and_2.py ``step``: ``flatten(averaged_gradients)``
    (bf16, P/8 elements) and its ``.to(fp32)`` copy exist together before the bf16
    gradients are freed: 2·P/8 + 4·P/8 = 6,022,695,936 B in the optimizer phase."""
    est = estimate(_plan(parallelism__strategy="zero2"))
    row = next(r for r in est.rows if r.id == "hbm.optimizer_step.fp32_grad_partition")
    assert row.high == row.low == 6 * SHARD == 6_022_695_936
    assert row.phases == frozenset({"optimizer"})


SMOL = {
    "family": "llama",
    "hidden": 576,
    "layers": 30,
    "heads": 9,
    "kv_heads": 3,
    "intermediate": 1536,
    "vocab": 49152,
    "tied_embeddings": True,
}
"""SmolLM-135M (134,515,008 parameters, tied embeddings)."""


def test_d_zero3_buffers_live_from_init() -> None:
    """D. DeepSpeed 0.19.6 stage3.py ``_setup_for_real_optimizer``: the IPG bucket
    (one ``reduce_bucket_size`` buffer, 5e8 × 2 B = 1,000,000,000 B; ``overlap_comm``
    adds a stream, not a buffer) and ``grad_partitions_flat_buffer`` (Σ ceil(n/8) over
    every parameter = P/8 elements × 2 B = 2,007,565,312 B) are allocated at init and
    never freed: both are live at every moment, the loss's backward included."""
    est = estimate(_plan(parallelism__strategy="zero3"))
    rows = {r.id: r for r in est.rows}
    grads, bucket = rows["hbm.grads"], rows["hbm.buckets.zero"]
    assert grads.high == 2 * SHARD == 2_007_565_312
    assert bucket.high == bucket.low == 1_000_000_000
    for r in (grads, bucket):
        assert {"steady", "forward", "backward.start", "optimizer"} <= r.moments


def test_d_zero3_keeps_the_lm_head_gathered_through_the_loss() -> None:
    """D. partitioned_param_coordinator.py ``__params_to_release``: after lm_head's
    forward the next module in the trace is lm_head's own backward (0 elements
    traversed < 1e9), so it is not released; the final norm (4,096 < 1e5) is
    persistent; layer 31's down_proj is next used after norm + lm_head fwd + lm_head bwd
    = 1,050,681,344 ≥ 1e9 elements, so it is released. Kept: 128,256 · 4,096 · 2 B =
    1,050,673,152 B at the loss's backward, freed before the layers'."""
    rows = {r.id: r for r in estimate(_plan(parallelism__strategy="zero3")).rows}
    root = rows["hbm.gathered.reused.root"]
    assert root.low == root.high == 1_050_673_152
    assert "backward.start" in root.moments and "backward.layers" not in root.moments
    assert "hbm.gathered.reused.layers" not in rows


def test_d_small_models_stay_gathered_whole() -> None:
    """D on a small model: SmolLM-135M has 134.5M < 1e9 parameters, so every module
    recurs within the reuse distance and nothing non-persistent is released between
    forward and backward. Persistent (< 1e5): the 61 norms of 576. Kept: the tied
    embedding (through the head) 49,152 · 576 = 28,311,552 el. and the layers'
    134,515,008 − 28,311,552 − 61 · 576 = 106,168,320 el., × 2 B (bf16)."""
    plan = _plan(parallelism__strategy="zero3", model__architecture=SMOL)
    rows = {r.id: r for r in estimate(plan).rows}
    assert rows["hbm.gathered.reused.root"].high == 28_311_552 * 2
    layers = rows["hbm.gathered.reused.layers"]
    assert layers.low == layers.high == 106_168_320 * 2
    assert "backward.layers" in layers.moments


def test_d_zero3_step_casts_one_sub_group_to_fp32() -> None:
    """D (the step). stage3.py ``_prepare_fp32_grad_for_sub_group``: a sub-group's bf16
    gradients are flattened and cast to fp32 (2 + 4 B per element, together). Groups
    grow until they reach sub_group_size 1e9 elements (``_create_fp16_sub_groups``), so
    the first holds 1e9 to 1e9 + one partition — here the whole P/8 = 1,003,782,656
    shard: 6e9 to 6,022,695,936 B."""
    rows = {r.id: r for r in estimate(_plan(parallelism__strategy="zero3")).rows}
    step = rows["hbm.optimizer_step.fp32_grad_partition"]
    assert (step.low, step.high) == (6_000_000_000, 6 * SHARD)


def test_e_fsdp1_no_shard_reduces_gradients_in_place() -> None:
    """E. PyTorch 2.13 torch/distributed/fsdp/_runtime_utils.py ``_post_backward_hook``:
    under NO_SHARD the communication hook all-reduces ``flat_param.grad`` itself; there
    is no DDP reducer and no bucket copy. 8B fp32 gradients, whole: 4·P =
    32,121,044,992 B, and no bucket row (was + the same again as DDP buckets)."""
    rows = _rows(estimate(_plan(parallelism__strategy="fsdp1_no_shard")))
    assert rows["hbm.grads"] == 4 * P == 32_121_044_992
    assert not [r for r in rows if r.startswith("hbm.buckets.")]


def _qlora_plan(**changes: Any) -> Plan:
    return _plan(method__kind="qlora", parallelism__strategy="ddp", parallelism__dp=1, **changes)


def test_f_qlora_checkpoints_and_saves_no_copy_of_the_4bit_weights() -> None:
    """F. peft src/peft/utils/other.py ``prepare_model_for_kbit_training``:
    ``use_gradient_checkpointing=True`` by default, so every decoder layer is
    checkpointed (recompute full); bitsandbytes ``MatMul4Bit.forward`` saves only the
    packed 4-bit weight (``ctx.tensors = (None, B)``), so no 16-bit copy of a quantized
    weight is kept for backward. What autocast still keeps is the bf16 cast of the
    fp32-upcast lm_head, outside every checkpoint: 128,256 · 4,096 · 2 B =
    1,050,673,152 B. Saved layer activations drop to each layer's fp32 input,
    32 · 4,096 · 4,096 · 4 B = 2,147,483,648 B (the 0.98–1.05 activation band on top).
    The whole 8B QLoRA step on one GPU then peaks under 20 GiB (was 48.9–50.3 GiB)."""
    est = estimate(_qlora_plan())
    rows = {r.id: r for r in est.rows}
    assert rows["hbm.activations.saved.weight_casts"].high == 1_050_673_152
    saved = rows["hbm.activations.saved.layers"]
    assert saved.low <= 2_147_483_648 <= saved.high
    assert est.peak.high < 20 * 2**30
    explicit = estimate(_qlora_plan(method__recompute__policy="none"))
    assert explicit.peak.high > 30 * 2**30  # the user's own choice still holds


def test_g_qlora_dequantizes_one_weight_for_its_backward() -> None:
    """G. bitsandbytes autograd/_functions.py ``MatMul4Bit.backward``:
    ``grad_output @ dequantize_4bit(B, state).to(grad_output.dtype)`` materialises one
    whole weight, in the dtype it was quantized from (functional.py
    ``quantize_4bit``: ``dtype=A.dtype``). The largest 4-bit weight of 8B is a
    14,336 × 4,096 MLP projection = 58,720,256 el.: 2 B each when loaded in bf16
    (117,440,512 B) up to 4 B (loaded in fp32) + the 2 B cast = 352,321,536 B, live
    while the layers' backward runs."""
    rows = {r.id: r for r in estimate(_qlora_plan()).rows}
    deq = rows["hbm.dequantized.nf4"]
    assert (deq.low, deq.high) == (117_440_512, 352_321_536)
    assert "backward.layers" in deq.moments and "forward" not in deq.moments


LARGEST = 128_256 * 4_096  # 525,336,576: embed_tokens (or lm_head), the largest module


def _reference(**changes: Any) -> tuple[int, int]:
    ref = deepspeed_reference(_plan(**changes))
    assert ref is not None
    return ref.cpu_bytes_per_node, ref.gpu_bytes_per_gpu


def test_h_reference_zero2_is_the_estimators_own_arithmetic() -> None:
    """H. DeepSpeed 0.19.6 runtime/zero/stage_1_and_2.py
    ``estimate_zero2_model_states_mem_needs(P, 8, 1, cpu_offload)``:
    - no offload: GPU 2·P + int(18·P/8) = 16,060,522,496 + 18,068,087,808 =
      34,128,610,304 B (was 4·P + 16·P/N, +14.05 GB); CPU P·4·8·1.5 = 385,452,539,904;
    - offload: GPU 2·P = 16,060,522,496; CPU P·max(4·8, 16)·1.5 = 385,452,539,904."""
    assert _reference(parallelism__strategy="zero2") == (385_452_539_904, 34_128_610_304)
    assert 2 * P + int(18 * P / 8) == 34_128_610_304
    offload = _reference(parallelism__strategy="zero2", offload__optimizer="cpu")
    assert offload == (385_452_539_904, 16_060_522_496)


def test_h_reference_zero3_is_the_estimators_own_arithmetic() -> None:
    """DeepSpeed 0.19.6 runtime/zero/stage3.py ``estimate_zero3_model_states_mem_needs``
    with largest_layer_params = 525,336,576 (``model_to_params``: the most parameters
    one module holds directly), 1 node × 8, zero_init (DeepSpeed and the HF Trainer
    build a ZeRO-3 model under zero.Init):
    - no offload: GPU 4·largest + int(18·P/8) = 2,101,346,304 + 18,068,087,808 =
      20,169,434,112; CPU largest·4·8·1.5 = 25,216,155,648;
    - offload optimizer: GPU 4·largest + int(2·P/8) = 4,108,911,616; CPU P·16·1·1.5 =
      192,726,269,952;
    - offload optimizer and params: GPU 4·largest = 2,101,346,304; CPU P·18·1·1.5 =
      216,817,053,696."""
    assert _reference(parallelism__strategy="zero3") == (25_216_155_648, 20_169_434_112)
    opt = _reference(parallelism__strategy="zero3", offload__optimizer="cpu")
    assert opt == (192_726_269_952, 4_108_911_616)
    both = _reference(
        parallelism__strategy="zero3", offload__optimizer="cpu", offload__params="cpu"
    )
    assert both == (216_817_053_696, 2_101_346_304)
    assert 4 * LARGEST == 2_101_346_304


def test_i_megatron_and_the_other_stacks_step_fused() -> None:
    """I. Megatron-Core megatron/core/optimizer/__init__.py: ``Adam`` is TE's (else
    Apex's) FusedAdam, a multi-tensor kernel that updates the fp32 main parameters in
    place from the main grads: no per-parameter temporaries (torch.optim's foreach
    AdamW makes one state-dtype copy, 4,015,130,624 B for the 8B/8 fp32 shard). So do
    DeepSpeed (FusedAdam, runtime/engine.py ``_configure_basic_optimizer``), the HF
    Trainer (optim adamw_torch_fused) and torchtitan (implementation 'fused'); a plain
    script keeps torch.optim's foreach."""
    for changes in (
        {"parallelism__strategy": "megatron_distopt"},
        {"parallelism__strategy": "zero2"},
        {"stack__name": "hf_trainer"},
        {"stack__name": "torchtitan"},
    ):
        assert "hbm.optimizer_step.temporaries" not in _rows(estimate(_plan(**changes)))
    plain = _rows(estimate(_plan()))
    assert plain["hbm.optimizer_step.temporaries"] == 4 * SHARD == 4_015_130_624


def test_megatron_core_bf16_keeps_fp32_main_grads_and_a_sharded_master() -> None:
    """Megatron-LM megatron/training/arguments.py ``validate_args``: ``--bf16`` sets
    params_dtype bf16 and forces ``accumulate_allreduce_grads_in_fp32`` (fp32 main
    grads, whole on each DP rank); the distributed optimizer shards the fp32 master and
    the two moments over DP: 2 + 4 + 12/d bytes per local parameter (its
    dist_optimizer.md table: 18 → 6 + 12/d). With N local parameters and d = 2:
    weights 2N, grads 4N, master and each moment 4N/2 = 2N. Megatron-Core's own GPT
    model is the activation profile."""
    plan = _plan(
        parallelism__strategy="megatron_distopt",
        parallelism__tp=4,
        parallelism__dp=2,
    )
    est = estimate(plan)
    rows = _rows(est)
    n2 = rows["hbm.weights"]
    assert rows["hbm.grads"] == 2 * n2
    assert rows["hbm.master_weights"] == rows["hbm.optimizer.exp_avg"] == n2
    assert "megatron" in next(r for r in est.rows if r.id == "hbm.activations.saved.layers").label


def test_hf_trainer_peft_lora_keeps_the_bf16_base_and_fp32_adapters() -> None:
    """HF Trainer + peft (auto for LoRA): transformers 5 from_pretrained loads
    ``dtype="auto"`` (bf16 for Llama) and nothing upcasts a frozen base; peft keeps the
    adapters fp32 (autocast_adapter_dtype); AdamW is adamw_torch_fused. One GPU: the
    whole frozen base 2·P = 16,060,522,496 B; adapters 13,631,488 × 4 B = 54,525,952 B,
    their fp32 grads the same, each fp32 moment the same; no step temporaries."""
    rows = _rows(
        estimate(_plan(method__kind="lora", parallelism__strategy="ddp", parallelism__dp=1))
    )
    assert rows["hbm.weights.frozen"] == 2 * P
    adapters = 4 * 13_631_488
    assert rows["hbm.weights.adapters"] == rows["hbm.grads"] == adapters == 54_525_952
    assert rows["hbm.optimizer.exp_avg"] == rows["hbm.optimizer.exp_avg_sq"] == adapters
    assert "hbm.optimizer_step.temporaries" not in rows


def test_hf_trainer_fsdp_reduces_in_bf16() -> None:
    """accelerate utils/dataclasses.py ``set_mixed_precision``: MixedPrecisionPolicy
    (param_dtype=bf16, reduce_dtype=bf16), while the upcast parameters and their sharded
    gradients stay fp32 (fsdp_utils.py ``fsdp2_prepare_model``). FSDP2's
    ``foreach_reduce`` copies one decoder layer's unsharded gradients (218,112,000 el.)
    into a flat reduce-scatter input in the reduce dtype and keeps one such input at a
    time: × 2 B = 436,224,000 B, where the plain script's fp32 reduce makes it
    × 4 B = 872,448,000 B."""

    def rows(**kw: str) -> dict[str, Row]:
        return {r.id: r for r in estimate(_plan(**kw)).rows}

    hf, plain = rows(stack__name="hf_trainer"), rows()
    assert hf["hbm.buckets.reduce_scatter"].low == 218_112_000 * 2 == 436_224_000
    assert plain["hbm.buckets.reduce_scatter"].low == 218_112_000 * 4 == 872_448_000


def test_j_zero2_offload_pins_what_stage_1_and_2_pins() -> None:
    """J. DeepSpeed 0.19.6 stage_1_and_2.py with offload_optimizer cpu, pin_memory:
    pinned per rank — the fp32 master partition 4·P/8, its fp32 gradient 4·P/8
    (initialize_optimizer_states), the bf16 partition copy 2·P/8
    (param_buffer_of_bit16_for_cpu_offload_groups) and temp_grad_buffer_for_cpu_offload
    2·largest (the 525,336,576-element embedding): per node of 8,
    10·P + 16·525,336,576 = 88,707,997,696 B (82.62 GiB; was ≈30 GiB). The moments are
    pageable. temp_grad_buffer_for_gpu_offload stays in HBM: 2·525,336,576 =
    1,050,673,152 B. With grad_accum 4, accumulated_grads_in_cpu (pinned) holds the
    whole gradient of each parameter in the partition: 2·P/8 = 2,007,565,312 B up to
    + two boundary parameters 2·2·525,336,576 → 4,108,911,616 B per rank."""
    est = estimate(_plan(parallelism__strategy="zero2", offload__optimizer="cpu"))
    assert est.nodes.pinned == 10 * P + 16 * LARGEST == 88_707_997_696
    assert _rows(est)["hbm.offload.grad_staging"] == 2 * LARGEST == 1_050_673_152
    assert "hbm.grads" not in _rows(est)
    moments = [r for r in est.nodes.host if r.id.startswith("host.offload.optimizer.exp")]
    assert moments and not any(r.pinned for r in moments)
    ga = estimate(
        _plan(parallelism__strategy="zero2", offload__optimizer="cpu", batch__grad_accum=4)
    )
    acc = next(r for r in ga.nodes.host if r.id == "host.offload.accumulated_grads")
    assert (acc.low, acc.high) == (8 * 2 * SHARD, 8 * 4_108_911_616)


def test_k_zero12_loads_a_full_copy_on_every_rank() -> None:
    """K. Below ZeRO-3 there is no zero.Init: from_pretrained materialises the whole
    model on each rank's host before deepspeed.initialize (as DeepSpeed's own host
    estimator assumes). 8 ranks × 8B × 2 B (the bf16 checkpoint) = 128,484,179,968 B
    per node at load; ZeRO-3 builds under zero.Init: 8/8 of 2·P = 16,060,522,496 B."""
    zero2 = estimate(_plan(parallelism__strategy="zero2"))
    load = next(r for r in zero2.nodes.host if r.id == "host.checkpoint_event")
    assert load.low == 8 * 2 * P == 128_484_179_968
    zero3 = estimate(_plan(parallelism__strategy="zero3"))
    load3 = next(r for r in zero3.nodes.host if r.id == "host.checkpoint_event")
    assert "zero.Init" in load3.formula


def test_l_nccl_by_accelerator_generation_and_the_cited_reserve() -> None:
    """L. NCCL's memory grows with the channels a communicator opens (NVIDIA/nccl #986)
    and Hopper's NVLS buffers: one DP communicator on H100 is 0.5–2.0 GB (#864 reports
    ≈1.6 GB), on A100 0.5–0.7 GB (#964 measured 544–688 MB). The allocator reserve
    model 'fraction' (the pessimistic option) spans the cited 11 % (pytorch #40989) to
    36 % (torchtitan #165): for the default plan, the allocated peak × 0.11 to × 0.36."""
    est = estimate(_plan())
    rows = {r.id: r for r in est.rows}
    assert (rows["hbm.runtime.nccl"].low, rows["hbm.runtime.nccl"].high) == (
        500_000_000,
        2_000_000_000,
    )
    a100 = {r.id: r for r in estimate(_plan(hardware__accelerator="a100-sxm-80gb")).rows}
    assert (a100["hbm.runtime.nccl"].low, a100["hbm.runtime.nccl"].high) == (
        500_000_000,
        700_000_000,
    )
    fraction = estimate(_plan(runtime__reserve_model="fraction"))
    reserve = {r.id: r for r in fraction.rows}["hbm.runtime.allocator_reserve"]
    assert reserve.low == int(fraction.peak.low * 0.11)
    assert reserve.high == int(fraction.peak.high * 0.36)
