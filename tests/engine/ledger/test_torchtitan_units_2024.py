"""torchtitan's FSDP2 units before 0.2.0 (``runtime.torchtitan_version``).

``torchtitan/parallelisms/parallelize_llama.py`` ``apply_fsdp`` at 9dec370 (version
0.0.2, the Dec-2024 benchmark commit; the same in ``models/llama3/parallelize_llama.py``
at e7c0cae, 0.1.0) wraps each block with ``reshard_after_forward = int(layer_id) <
len(model.layers) - 1`` and then ``fully_shard(model, reshard_after_forward=not
pp_enabled)``; #1094 (83e6941, first released in 0.2.0) split the root into
``tok_embeddings`` and ``[norm, output]``. Llama-3.1-8B on FSDP2 × 8, s 8192,
micro-batch 2 (``test_torchtitan_profile.py``'s case), bf16 gathered units:

- the root unit: embedding 128,256 × 4096 × 2 = 1,050,673,152, final norm 4096 × 2 =
  8192 and output 1,050,673,152: 2,101,354,496 B. Resharded by the root's post-forward
  when ``model(input_ids)`` returns (``train.py`` computes the loss after it), gathered
  again by its pre-backward hook on the logits once their gradient exists (after the
  loss's backward) and resharded in the final callback: live in forward and through the
  layers' backward, not at ``backward.start``;
- the last block's unit (q 4096², k and v 1024 × 4096, o 4096², gate / up / down
  14,336 × 4096 each, two norms 4096: 218,112,000 elements × 2 = 436,224,000 B), never
  resharded after forward: live in forward and at the loss's backward (the layers'
  backward counts it as the current unit);
- no head regather (that is 0.2's ``[norm, output]`` unit's post-backward), and the
  forward's last all-gather is the last block's, so its buffer waits through the loss.
"""

from __future__ import annotations

from engine.ledger.peaks.titan_units import splits_root, whole_root
from engine.stacks.defaults import resolved
from tests.engine.ledger.test_torchtitan_profile import rows_of, titan

ROOT_UNIT = 128_256 * 4096 * 2 + 4096 * 2 + 128_256 * 4096 * 2
LAYER_UNIT = (4096 * 4096 * 2 + 2 * 1024 * 4096 + 3 * 14_336 * 4096 + 2 * 4096) * 2
OLD = {"runtime__torchtitan_version": "0.0.2", "runtime__loss_impl": "eager"}


def test_the_whole_model_root_unit_skips_the_loss() -> None:
    rows = rows_of(titan(**OLD))
    root = rows["hbm.gathered.root"]
    assert root.low == root.high == ROOT_UNIT == 2_101_354_496
    assert root.moments == {"forward", "backward.layers", "backward.middle", "backward.end"}
    assert "hbm.gathered.embedding" not in rows
    assert "hbm.gathered.head_regather" not in rows


def test_the_last_block_stays_gathered_through_the_loss() -> None:
    rows = rows_of(titan(**OLD))
    kept = rows["hbm.gathered.last_layer_kept"]
    assert kept.low == kept.high == LAYER_UNIT == 436_224_000
    assert kept.moments == {"forward", "backward.start"}
    assert "backward.start" in rows["hbm.gathered.all_gather_buffer"].moments


def test_the_version_decides_the_units() -> None:
    """0.2.0 is the first release with the split units; the default (0.3.0) has them."""
    for version, split in (("0.0.2", False), ("0.1.0", False), ("0.2.0", True), ("0.3", True)):
        plan = resolved(titan(runtime__torchtitan_version=version))
        assert splits_root(plan) is split and whole_root(plan) is not split
    assert resolved(titan()).runtime.torchtitan_version == "0.3.0"
    assert "hbm.gathered.last_layer_kept" not in rows_of(titan())
    # the plain PyTorch stack never reads the field
    plain = resolved(titan(stack__name="pytorch", runtime__torchtitan_version="0.0.2"))
    assert not splits_root(plain) and not whole_root(plain)
