"""``memplan trace`` of a ``deepspeed`` plan: DeepSpeed's own ZeRO engine on real CPU tensors."""
