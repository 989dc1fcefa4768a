"""The plan's sections, one module per group of inputs as the GUI shows them.

Every field carries its unit in its name or description, a documented default (with
the source of that default in the description) and bounds that reject absurd values.
"""
