"""Per-node ledgers: host RAM (``host.*``), NVMe (``nvme.*``), checkpoint storage
(``checkpoint.*``) and offload transfers.
"""
