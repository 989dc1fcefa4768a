"""The ledger: named rows of bytes, each with its formula and source."""
