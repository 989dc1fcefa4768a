"""The fuzz suite: hostile files, bad command lines, random plans through every view,
kills during save, crashed instances and random GUI edits (issue 21).

Each runner takes a seed and a count and returns a :class:`~tests.fuzz.tally.Tally`; the
tests run small counts in CI, ``tests/fuzz_long.py`` large ones.
"""
