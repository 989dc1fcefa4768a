"""torchtitan's own RMSNorm at the final norm, before 0.1.0 (``runtime.torchtitan_version``).

At 9dec370 (0.0.2, the Dec-2024 benchmark commit) ``torchtitan/models/norms.py``
``RMSNorm.forward`` is ``self._norm(x.float()).type_as(x) * self.weight`` with ``_norm(x)
= x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``; #985 (3b39d7a, 2025-03-19)
replaced it with ``nn.RMSNorm`` (0.1.0 is the first release after it). The final norm runs
outside the compiled blocks, so autograd keeps what each op saves: ``pow`` and the
``x * rsqrt`` product keep the fp32 upcast, the product keeps the rsqrt, and ``* weight``
keeps the 16-bit ``type_as`` output. Per token of this rank's sequence shard:
4·h + 4 + 2·h, where ``nn.RMSNorm``'s fused kernel keeps the 16-bit input and the fp32
rstd, 2·h + 4. The output projection's input (2·h a token of the whole sequence) and
the loss's two 512-B scalars are the same either way.

Llama-3.1-8B, FSDP2 × 8, s 8192, micro-batch 2 (T = 16,384, h 4096; no TP):
0.3.0: 16,384·4096·2 + 16,384·4 + 16,384·4096·2 + 1,024 = 268,502,016 B;
0.0.2: 16,384·4096·4 + 16,384·4 + 16,384·4096·2 + 16,384·4096·2 + 1,024 = 536,937,472 B.
Llama-3.1-70B, FSDP2 × 32 + TP 8 with sequence parallelism, s 8192, micro-batch 16
(the published 2D row): the norm's shard is 131,072 / 8 = 16,384 tokens of h 8192 and the
output projection's all-gathered input all 131,072: 16,384·8192·4 + 16,384·4 +
16,384·8192·2 + 131,072·8192·2 + 1,024 = 2,952,856,576 B.
"""

from __future__ import annotations

from engine.ledger.activations.torchtitan import composite_final_norm
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from tests.engine.ledger.test_torchtitan_profile import CASE, rows_of, titan

T, H = 16_384, 4096
NEW = T * H * 2 + T * 4 + T * H * 2 + 1024
OLD = T * H * 4 + T * 4 + T * H * 2 + T * H * 2 + 1024


def test_the_2024_final_norm_keeps_its_fp32_upcast_and_its_16_bit_output() -> None:
    old = rows_of(titan(runtime__torchtitan_version="0.0.2", runtime__loss_impl="eager"))
    new = rows_of(titan(runtime__loss_impl="eager"))
    assert new["hbm.activations.saved.head"].high == NEW == 268_502_016
    assert old["hbm.activations.saved.head"].high == OLD == 536_937_472
    assert old["hbm.activations.saved.head"].moments == new["hbm.activations.saved.head"].moments


def test_under_sequence_parallelism_the_norm_keeps_its_shard() -> None:
    sets = {
        **CASE,
        "runtime.torchtitan_version": "0.0.2",
        "runtime.loss_impl": "eager",
        "parallelism.dp": 32,
        "parallelism.tp": 8,
        "parallelism.sequence_parallel": True,
        "batch.micro_batch": 16,
        "method.recompute.policy": "full",
    }
    plan = with_values(plan_for_model_preset("llama-3.1-70b"), sets)
    head = rows_of(plan)["hbm.activations.saved.head"]
    shard, whole = 131_072 // 8, 131_072
    expect = shard * 8192 * 4 + shard * 4 + shard * 8192 * 2 + whole * 8192 * 2 + 1024
    assert head.low == head.high == expect == 2_952_856_576


def test_the_version_decides() -> None:
    assert composite_final_norm("0.0.2") and composite_final_norm("0.0")
    assert not composite_final_norm("0.1.0") and not composite_final_norm("0.3.0")
