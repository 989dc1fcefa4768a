"""Key sets the frameworks document, encoded as fixtures for the export tests.

Sources (read, not copied):
- DeepSpeed config JSON docs, https://www.deepspeed.ai/docs/config-json/ (batch keys,
  bf16/fp16, aio); ``deepspeed/runtime/zero/config.py`` (DeepSpeedZeroConfig fields and
  their ``stage3_*`` aliases) and ``deepspeed/runtime/zero/offload_config.py``
  (offload_param / offload_optimizer fields), microsoft/DeepSpeed.
- accelerate ``src/accelerate/commands/config/config_args.py`` (BaseConfig and
  ClusterConfig fields; unknown keys are refused) and the DeepSpeed / FSDP plugin
  options ``accelerate config`` writes (docs: usage_guides/deepspeed, usage_guides/fsdp).
- torchtitan ``JobConfig`` ([training], [parallelism], [activation_checkpoint]).
"""

from __future__ import annotations

DS_TOP = {
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "optimizer",
    "scheduler",
    "fp16",
    "bf16",
    "amp",
    "gradient_clipping",
    "prescale_gradients",
    "gradient_predivide_factor",
    "sparse_gradients",
    "zero_optimization",
    "zero_allow_untested_optimizer",
    "aio",
    "activation_checkpointing",
    "steps_per_print",
    "wall_clock_breakdown",
    "dump_state",
    "flops_profiler",
    "communication_data_type",
    "data_types",
    "checkpoint",
}
DS_ZERO = {
    "stage",
    "contiguous_gradients",
    "reduce_scatter",
    "reduce_bucket_size",
    "use_multi_rank_bucket_allreduce",
    "allgather_partitions",
    "allgather_bucket_size",
    "overlap_comm",
    "load_from_fp32_weights",
    "elastic_checkpoint",
    "offload_param",
    "offload_optimizer",
    "sub_group_size",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_model_persistence_threshold",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "stage3_gather_16bit_weights_on_model_save",
    "stage3_module_granularity_threshold",
    "stage3_use_all_reduce_for_fetch_params",
    "ignore_unused_parameters",
    "legacy_stage1",
    "round_robin_gradients",
    "zero_hpz_partition_size",
    "zero_quantized_weights",
    "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients",
    "zeropp_loco_param",
    "mics_shard_size",
    "mics_hierarchical_params_gather",
    "memory_efficient_linear",
    "pipeline_loading_checkpoint",
    "override_module_apply",
}
DS_OFFLOAD_PARAM = {
    "device",
    "nvme_path",
    "buffer_count",
    "buffer_size",
    "max_in_cpu",
    "pin_memory",
}
DS_OFFLOAD_OPTIMIZER = {
    "device",
    "nvme_path",
    "buffer_count",
    "pin_memory",
    "pipeline_read",
    "pipeline_write",
    "fast_init",
    "ratio",
}
DS_AIO = {"block_size", "queue_depth", "thread_count", "single_submit", "overlap_events"}
DS_OFFLOAD_DEVICES = {"none", "cpu", "nvme"}

ACCELERATE_TOP = {
    "compute_environment",
    "distributed_type",
    "mixed_precision",
    "use_cpu",
    "debug",
    "num_processes",
    "machine_rank",
    "num_machines",
    "gpu_ids",
    "main_process_ip",
    "main_process_port",
    "rdzv_backend",
    "same_network",
    "main_training_function",
    "enable_cpu_affinity",
    "fp8_config",
    "deepspeed_config",
    "fsdp_config",
    "tp_config",
    "megatron_lm_config",
    "ipex_config",
    "mpirun_config",
    "downcast_bf16",
    "tpu_name",
    "tpu_zone",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "command_file",
    "commands",
    "tpu_vm",
    "tpu_env",
    "dynamo_config",
}
ACCELERATE_DEEPSPEED = {
    "gradient_accumulation_steps",
    "gradient_clipping",
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "offload_optimizer_nvme_path",
    "offload_param_nvme_path",
    "zero3_init_flag",
    "zero3_save_16bit_model",
    "deepspeed_config_file",
    "deepspeed_multinode_launcher",
    "deepspeed_hostfile",
    "deepspeed_exclusion_filter",
    "deepspeed_inclusion_filter",
}
ACCELERATE_FSDP = {
    "fsdp_version",
    "fsdp_sharding_strategy",
    "fsdp_reshard_after_forward",
    "fsdp_offload_params",
    "fsdp_auto_wrap_policy",
    "fsdp_transformer_layer_cls_to_wrap",
    "fsdp_min_num_params",
    "fsdp_backward_prefetch",
    "fsdp_forward_prefetch",
    "fsdp_state_dict_type",
    "fsdp_use_orig_params",
    "fsdp_cpu_ram_efficient_loading",
    "fsdp_sync_module_states",
    "fsdp_activation_checkpointing",
}
ACCELERATE_DISTRIBUTED = {"NO", "MULTI_GPU", "DEEPSPEED", "FSDP", "MEGATRON_LM"}

TITAN = {
    "training": {
        "local_batch_size",
        "global_batch_size",
        "seq_len",
        "max_norm",
        "steps",
        "mixed_precision_param",
        "mixed_precision_reduce",
    },
    "parallelism": {
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "fsdp_reshard_after_forward",
        "tensor_parallel_degree",
        "pipeline_parallel_degree",
        "pipeline_parallel_schedule",
        "context_parallel_degree",
        "expert_parallel_degree",
        "expert_tensor_parallel_degree",
    },
    "activation_checkpoint": {"mode", "selective_ac_option"},
}
