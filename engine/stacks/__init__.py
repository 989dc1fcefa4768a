"""Training stacks and strategy families: what each framework does, asked by every module."""
