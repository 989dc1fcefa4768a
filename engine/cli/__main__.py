"""``python -m engine.cli``: the engine's subcommands without the GUI."""

from engine.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
