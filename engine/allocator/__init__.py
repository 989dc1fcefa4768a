"""PyTorch's CUDA caching allocator, modelled: its size rules (:mod:`.rules`), a
simulator of segments and per-stream pools (:mod:`.simulator`) and the ledger's reserve
model (:mod:`.reserve`). Pure Python; never imports torch or Qt."""
