"""Persistent model states (``hbm.weights*``, ``hbm.grads``, ``hbm.master*``,
``hbm.optimizer.*``) and their offload split.
"""
