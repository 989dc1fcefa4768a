"""``memplan trace`` of a Megatron-Core plan with Megatron-Core 0.16.1's own code
(GPTModel, DistributedDataParallel, the distributed optimizer) on fake tensors."""
