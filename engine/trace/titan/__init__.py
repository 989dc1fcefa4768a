"""Tracing a torchtitan plan with torchtitan's own code (model, parallelize, AC, losses).

``support`` decides from the plan alone (no torch); ``runner`` drives the step.
"""
