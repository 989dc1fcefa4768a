"""A stage make-up's activation rows prepared without the micro-batch's size.

``estimate()`` prepares each make-up's activation parts once per plan without its
micro-batch's size (:func:`engine.ledger.shape_free.size_free`,
:func:`engine.ledger.activations.rows.make_up`) and works out only their bytes at each
plan's geometry; the rows are built from those same bytes when read. Prepared from the
size-free plan or from the plan itself, evaluated at the plan's geometry, the parts must
give the same bytes and the same rows, text included — on random plans and shapes,
with the inputs the prepared parts read (recompute policy, attention, precision,
context and expert parallelism, packing, the loss) drawn too. (That the bytes summed
for the estimate are the rows' own is no longer tested here: each row is built from its
part's span.) The saved terms' bytes are worked out
from coefficients made once (:func:`~engine.ledger.activations.geometry.terms_at`): equal
to :func:`~engine.ledger.activations.geometry.terms_bytes` on random terms and shapes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.ledger.activations.geometry import Term, geometry, terms_at, terms_bytes
from engine.ledger.activations.rows import MakeUp, make_up
from engine.ledger.activations.schedule import in_flights
from engine.ledger.activations.stage_layers import layer_walks
from engine.ledger.activations.varying import built, fixed_built
from engine.ledger.row import Row
from engine.ledger.shape_free import size_free
from engine.ledger.states.persistent import stage_placed
from engine.legality.checks import plan_problems
from engine.plan import Plan, default_plan, with_values
from engine.stacks.defaults import resolved
from tests.engine.ledger.test_estimate_folding import pipelined


def _rows(mu: MakeUp, g: Any, fly: Any) -> list[Row]:
    """The make-up's rows at ``g`` and ``fly``."""
    sl = mu.layers(g)
    fixed = mu.fixed(g, sl)
    varying = [*mu.saved(g, sl), *mu.labels(g), *(mu.logits(g) if mu.logits else [])]
    return fixed_built((*fixed.held, *fixed.tail)) + built(varying, fly)


EXTRA: dict[str, st.SearchStrategy[Any]] = {
    "runtime.attention": st.sampled_from(
        ["sdpa_flash", "sdpa_mem_efficient", "flash_attn", "flex", "eager"]
    ),
    "method.recompute.policy": st.sampled_from(["none", "full", "selective", "offload", "every_k"]),
    "method.precision.policy": st.sampled_from(["amp_master", "autocast", "pure_16bit", "fp32"]),
    "runtime.loss": st.sampled_from(["standard", "chunked", "fused"]),
    "runtime.loss_impl": st.sampled_from(["auto", "eager", "compiled", "chunked"]),
    "runtime.activation_profile": st.sampled_from(["auto", "torchtitan"]),
    "method.recompute.every_k": st.sampled_from([2, 3]),
    "workload.packing": st.sampled_from(["padded", "packed"]),
    "parallelism.cp": st.sampled_from([1, 2]),
    "parallelism.tp": st.sampled_from([1, 2]),
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelined(), st.integers(1, 64), st.integers(2, 96), st.data())
def test_size_free_make_up_equals_the_plan_own(
    plan: Plan, micro_batch: int, seq_len: int, data: st.DataObject
) -> None:
    changes: dict[str, Any] = {"batch.micro_batch": micro_batch, "batch.seq_len": seq_len}
    for path, values in EXTRA.items():
        if data.draw(st.booleans()):
            changes[path] = data.draw(values)
    if changes.get("workload.packing") == "packed":
        changes["workload.mean_sample_tokens"] = data.draw(st.integers(1, seq_len))
    try:
        r = resolved(with_values(plan, changes))
    except ValueError:
        assume(False)
        return
    assume(not plan_problems(r))
    g = geometry(r)
    pp = r.parallelism.pp
    flies = in_flights(r, range(pp))
    for stage, walk in enumerate(layer_walks(r)):
        placed, last = stage_placed(r, stage), stage == pp - 1
        try:
            own = _rows(make_up(r, walk, last, placed), g, flies[stage])
        except NotImplementedError:
            assume(False)
            return
        sized = _rows(make_up(size_free(r), walk, last, placed), g, flies[stage])
        assert sized == own, stage


TERMS = st.lists(
    st.builds(
        Term,
        name=st.just("t"),
        width=st.integers(1, 5000),
        bpe=st.sampled_from([1, 2, 4, 8]),
        axis=st.sampled_from(["full", "seq", "const"]),
        count=st.integers(1, 4),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(
    TERMS,
    st.integers(1, 5000),
    st.integers(1, 8),
    st.booleans(),
    st.sampled_from([1, 2, 512, 4096, 2**20]),
    st.lists(st.integers(1, 256), min_size=1, max_size=4),
)
def test_terms_bytes_from_coefficients_equal_the_terms_own(
    terms: list[Term], seq: int, tp: int, sp: bool, gran: int, sizes: list[int]
) -> None:
    """:func:`terms_at` (bytes per sequence for the terms rounding leaves alone, the
    others rounded one by one) equals :func:`terms_bytes` at every micro-batch size."""
    base = geometry(resolved(default_plan()))._replace(seq=seq, tp=tp, sp=sp, granularity=gran)
    at = terms_at(terms, base)
    for b in sizes:
        assert at.bytes(b) == terms_bytes(terms, base._replace(micro_batch=b))
