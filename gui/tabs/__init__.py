"""The input tabs: Model, Method, Parallelism, Hardware, Offload (one module each)."""
