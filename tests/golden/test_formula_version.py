"""The formula version moves with the numbers: a re-recorded golden ledger whose bytes
changed while ``engine.FORMULA_VERSION`` stayed the same fails here.

The fingerprint is the SHA-256 of every golden case's rows (id, low and high bytes of
every stage) — the figures a rule decides, not the labels or the formula wording. A
change that is meant to move numbers re-records the golden outputs, bumps
``FORMULA_VERSION`` and adds the new fingerprint below (the test prints it).
"""

from __future__ import annotations

import hashlib
import json

from engine import FORMULA_VERSION
from tests.golden.capture import OUT, wanted

FINGERPRINTS: dict[int, str] = {
    1: "a392ffd7711a09776624a1d315e70731b10c89bbba349ec0a5f15ebc060c2a63",
    # 2: DeepSeek-V3's MTP module off by default (as transformers builds it)
    2: "ce241d19a99178040605517207687ed3836f1b6921e2493c485153223240a0fd",
    # 3: rows true to the training stacks' code (issue 15, fixes A-L)
    3: "f7fdff2ecee30acea084f702dfcb3f686b4199cbdaeaf859492506499b66a066",
    # 4: MoE parallel folding (expert DP = TP·CP·DP ÷ (EP·ETP)), the expert DP NCCL
    #    communicator, CP K/V and EP all-to-all buffer rows, weighted PP splits, the TP
    #    style per stack (replicated embedding + gathered logits outside Megatron/torchtitan)
    4: "3a89e2a10aee1fe276d8731cda0ef7b27e2e91ae0b13b9c389531ca2b307098f",
    # 5: implementation-true activation rows per family; FSDP2's end of backward in order
    5: "d380db09644184138d9fd0bc7d7e63337b710d221817293a4844ed4de1b4a242",
    # 6: Gemma's fp32 norm-backward gradient in the recomputed layer's working set, the
    #    transformers Adafactor step temporaries (no golden plan recomputes a Gemma layer
    #    past its own saved set or uses Adafactor: the golden bytes are those of 5)
    6: "d380db09644184138d9fd0bc7d7e63337b710d221817293a4844ed4de1b4a242",
    # 7: routed experts stored as the stack's code holds them (transformers 5 fused,
    #    torchtitan stacked, Megatron per expert): FSDP2 pads the expert dim, fewer step
    #    counters; gathered / reduce-scatter units count every folded expert, each tensor
    #    padded to its own shard group
    7: "a6b11a94feeaf5cbe11ae82fc3b38c1bce8c092dfbf9c3903f8a94ec4e3554ab",
    # 8: a transformers 5 MoE layer's backward working set (the combine's backward; after
    #    its experts, the norm's backward with FSDP2's unsharded expert grads); each
    #    backward moment uses the layer live then (first layer's own kind at the end);
    #    FSDP2's last-layer prefetch buffer holds the unit before the last layer
    8: "2e5498b78f487f64dccdca66796f14209e69e1a2f63d3b9c82a8e037323a69ab",
    # 9: a peak's low end is the largest low of any phase (and the fit's, of any stage),
    #    not the low of the phase peaking by the high figure; stacked experts pad by the
    #    experts EP leaves a rank (the search's padding share and slack). No row's bytes
    #    moved (the golden rows are those of 8); peaks' lows did where another phase or
    #    stage holds more at best
    9: "2e5498b78f487f64dccdca66796f14209e69e1a2f63d3b9c82a8e037323a69ab",
    # 10: rows true to real runs (issue 35): Megatron's resident grad buffer, dropout masks and
    #     loss, QLoRA storage sharded, ZeRO-1 partitioned gradients, torchtitan's own profile;
    #     the allocator reserve from the caching allocator's rules (issue 36): fragmentation
    #     of the transient part + the side-stream pools, reserved never past the capacity;
    #     DeepSpeed's traced moments (issue 37): ZeRO-1/2's IPG bucket and ZeRO-3's gathered
    #     layer not live at the loss (only the allocator reserve's bytes moved); FSDP2's
    #     reserve from its streams' pools (only hbm.runtime.allocator_reserve moved); the
    #     forward's and backward's cuBLAS workspaces are allocated bytes (CublasHandlePool.cpp)
    10: "45d5d1219800e970a31c1ba92a8424f53c791ce6b9067b8ece2b5a5ff2bab4b5",
}
"""FORMULA_VERSION → fingerprint of the golden rows recorded under it."""


def golden_fingerprint() -> str:
    """SHA-256 over (case, stage, row id, low, high) of every golden estimate."""
    digest = hashlib.sha256()
    for name, command in wanted():
        if command != "estimate.json":
            continue
        text = (OUT / f"{name}.{command}").read_text(encoding="utf-8")
        body = text.split("\n", 1)[1]
        if not text.startswith("exit 0"):
            digest.update(f"{name}:{text.splitlines()[0]}\n".encode())
            continue
        doc, _ = json.JSONDecoder().raw_decode(body)  # stderr notes may follow the object
        for stage in doc.get("stages", []):
            for row in stage["rows"]:
                line = f"{name}:{stage['stage']}:{row['id']}:{row['low_bytes']}:{row['high_bytes']}"
                digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def test_golden_numbers_carry_the_formula_version_they_were_recorded_under() -> None:
    got = golden_fingerprint()
    assert FORMULA_VERSION in FINGERPRINTS, (
        f"FORMULA_VERSION {FORMULA_VERSION} has no fingerprint: add {got!r}"
    )
    assert got == FINGERPRINTS[FORMULA_VERSION], (
        "the golden rows' bytes changed but FORMULA_VERSION did not: bump "
        f"engine.FORMULA_VERSION and add {{{FORMULA_VERSION + 1}: {got!r}}} to FINGERPRINTS"
    )


def test_recorded_json_says_the_formula_version() -> None:
    """Every recorded estimate JSON names the formula version it was recorded under."""
    text = (OUT / "default.estimate.json").read_text(encoding="utf-8")
    assert json.loads(text.split("\n", 1)[1])["formula_version"] == FORMULA_VERSION
