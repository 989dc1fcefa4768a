"""Precision policy → the dtype of every persistent state.

Which copies exist, and in which format, is the single largest swing in model-state
memory (16 vs 18 vs 20 bytes per parameter), so it is resolved in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.sections.method import Dtype, PrecisionSection

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1}


@dataclass(frozen=True, slots=True)
class StateFormats:
    """Dtypes of the persistent states for trainable and frozen parameters."""

    param: Dtype  # the resident parameter the module holds (sharded under FSDP)
    master: Dtype | None  # a separate fp32 master copy of trainable params, if any
    grad: Dtype  # the resident (possibly sharded) gradient
    optimizer: Dtype  # optimizer moments
    policy_note: str
    reduce: Dtype = "fp32"  # the dtype gradients are communicated in (FSDP reduce_dtype)

    def grad_dtype_for(self, param_dtype: str) -> str:
        """Gradients follow the parameter's dtype, except that a master-weights policy
        sets them explicitly (16-bit in DeepSpeed, fp32 main grads in Megatron)."""
        return self.grad if self.master is not None else param_dtype

    def state_dtype_for(self, param_dtype: str) -> str:
        """torch optimizers create moments with zeros_like(param); a master-weights
        policy keeps them in the configured dtype (fp32 unless set otherwise)."""
        return self.optimizer if self.master is not None else param_dtype

    @property
    def param_bytes(self) -> int:
        return DTYPE_BYTES[self.param]

    @property
    def master_bytes(self) -> int:
        return DTYPE_BYTES[self.master] if self.master else 0

    @property
    def grad_bytes(self) -> int:
        return DTYPE_BYTES[self.grad]

    @property
    def reduce_bytes(self) -> int:
        return DTYPE_BYTES[self.reduce]

    @property
    def optimizer_bytes(self) -> int:
        return DTYPE_BYTES[self.optimizer]


def resolve_formats(p: PrecisionSection) -> StateFormats:
    """The state dtypes a policy implies (memory-model §1).

    - fp32: fp32 params, grads, moments (16 B/param with AdamW).
    - amp_master: 16-bit working params, fp32 master, grads in ``grad_dtype`` (16-bit in
      DeepSpeed, fp32 main grads in Megatron): 2 + 4 + 2|4 + 8.
    - autocast: fp32 params are the master and compute casts to ``compute_dtype``
      (FSDP2 MixedPrecisionPolicy or torch.autocast); grads match the fp32 param.
    - pure_16bit: params, grads and moments in ``compute_dtype`` / ``optimizer_state_dtype``.
    """
    if p.policy == "auto" or p.grad_dtype == "auto":
        raise ValueError(
            "precision left at auto reached the ledger: resolve the plan first "
            "(engine.stacks.defaults.resolved)"
        )
    if p.policy == "fp32":
        return StateFormats("fp32", None, "fp32", p.optimizer_state_dtype, "all fp32")
    if p.policy == "amp_master":
        return StateFormats(
            p.compute_dtype,
            "fp32",
            p.grad_dtype,
            p.optimizer_state_dtype,
            f"{p.compute_dtype} working weights + fp32 master",
            p.grad_dtype,
        )
    if p.policy == "autocast":
        return StateFormats(
            "fp32",
            None,
            "fp32",
            p.optimizer_state_dtype,
            f"fp32 parameters are the master; compute in {p.compute_dtype}",
            p.grad_dtype,
        )
    return StateFormats(
        p.compute_dtype,
        None,
        p.compute_dtype,
        p.optimizer_state_dtype,
        f"pure {p.compute_dtype}",
        p.compute_dtype,
    )
