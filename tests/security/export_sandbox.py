"""A sandbox to run generated files in: stub framework commands and modules (issue 33).

The injection suite does not stop at a syntax check (``bash -n`` and ``ast.parse`` accept
a file whose comment a newline broke): every generated file is *run* here, in its own
temp folder, with

- stub commands first on ``PATH`` (``torchrun``, ``python``, ``python3``, ``deepspeed``,
  ``accelerate``) that append their argv, NUL-separated, to ``$STUB_ARGV`` (and print it);
- stub Python packages first on ``PYTHONPATH`` (``peft``, ``transformers``, ``torch``,
  ``torchtitan`` with its registry and AC classes, ``megatron.training.arguments``,
  ``deepspeed``) so a recipe or snippet runs to its end without the frameworks, and the
  ``--check`` children find "their" framework and record what they were handed
  (``$STUB_RECORD``).

A hostile payload in a plan's text creates a file named :data:`MARKER`; the tests assert
it never appears.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

MARKER = "PWNED"
"""The file every payload tries to create (relative to the folder it runs in)."""

STUB_COMMANDS = ("torchrun", "python", "python3", "deepspeed", "accelerate")

_STUB_SH = """#!/bin/sh
for a in "$0" "$@"; do printf '%s\\0' "$a"; done >> "${STUB_ARGV:-/dev/null}"
echo "stub $0 $*"
"""

_NS = """
class _Section:
    pass


class _Config:
    \"\"\"A Trainer.Config stand-in: any section appears on first use.\"\"\"

    def __getattr__(self, name):
        section = _Section()
        object.__setattr__(self, name, section)
        return section


def __getattr__(name):
    return lambda: _Config()
"""

STUB_MODULES: dict[str, str] = {
    "peft/__init__.py": "def LoraConfig(**kw):\n    return kw\n",
    "transformers/__init__.py": "def BitsAndBytesConfig(**kw):\n    return kw\n",
    "torch/__init__.py": 'bfloat16, float16, float32 = "bf16", "fp16", "fp32"\n',
    "torchtitan/__init__.py": "",
    "torchtitan/distributed/__init__.py": "",
    "torchtitan/distributed/activation_checkpoint.py": (
        "class FullAC:\n    class Config:\n        pass\n\n\n"
        "class SelectiveAC:\n    class Config:\n        pass\n"
    ),
    "torchtitan/trainer.py": "class Trainer:\n    class Config:\n        pass\n",
    "torchtitan/config/__init__.py": (
        "import types\n\n\n"
        "class ConfigManager:\n"
        "    def parse_args(self, args):\n"
        "        t = types.SimpleNamespace(local_batch_size=1, global_batch_size=-1, seq_len=1)\n"
        "        return types.SimpleNamespace(training=t, parallelism=None)\n"
    ),
    "torchtitan/distributed/parallel_dims.py": (
        "class ParallelDims:\n"
        "    dp_replicate = dp_shard = 1\n\n"
        "    @classmethod\n"
        "    def from_config(cls, parallelism, world_size):\n"
        "        return cls()\n"
    ),
    "torchtitan/models/__init__.py": "",
    **{
        f"torchtitan/models/{m}/{f}": _NS if f == "config_registry.py" else ""
        for m in ("llama3", "qwen3", "deepseek_v3")
        for f in ("__init__.py", "config_registry.py")
    },
    "megatron/__init__.py": "",
    "megatron/training/__init__.py": "",
    "megatron/training/arguments.py": (
        "import json, os, sys, types\n\n\n"
        "def parse_args():\n"
        "    with open(os.environ['STUB_RECORD'], 'w') as f:\n"
        "        json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, f)\n"
        "    return types.SimpleNamespace(data_parallel_size=1)\n\n\n"
        "def validate_args(args):\n    pass\n"
    ),
    "deepspeed/__init__.py": "",
    "deepspeed/comm/__init__.py": "",
    "deepspeed/runtime/__init__.py": "",
    "deepspeed/runtime/config.py": (
        "class DeepSpeedConfig:\n"
        "    def __init__(self, cfg, mpu=None):\n"
        "        self.zero_optimization_stage = cfg.get('zero_optimization', {}).get('stage', 0)\n"
        "        self.train_batch_size = cfg.get('train_batch_size')\n"
    ),
}


def make_stubs(root: Path) -> tuple[Path, Path]:
    """Write the stub commands and modules under ``root``; (bin folder, module folder)."""
    bin_dir, mod_dir = root / "stub-bin", root / "stub-modules"
    bin_dir.mkdir(parents=True)
    for name in STUB_COMMANDS:
        path = bin_dir / name
        path.write_text(_STUB_SH, encoding="utf-8")
        path.chmod(0o755)
    for rel, text in STUB_MODULES.items():
        path = mod_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return bin_dir, mod_dir


def stub_env(bin_dir: Path, mod_dir: Path, *python_path: Path) -> dict[str, str]:
    """The environment generated files run under: stubs first on PATH and PYTHONPATH."""
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (mod_dir, *python_path))
    env.pop("BASH_ENV", None)
    env.pop("ENV", None)
    return env


def run_scripts(folders: Iterable[Path], script: str, env: dict[str, str]) -> str:
    """In each folder: ``bash -n`` then ``bash`` the script (stubs on PATH), argv recorded
    to ``argv`` there. One bash for all folders (the suite stays fast); returns the
    combined output, each failure marked ``FAIL <folder>``."""
    body = "\n".join(
        f"cd {shlex.quote(str(d))} && bash -n {script} && "
        f"STUB_ARGV={shlex.quote(str(d / 'argv'))} bash {script} >/dev/null "
        f"|| echo FAIL {shlex.quote(str(d))}"
        for d in folders
    )
    done = subprocess.run(
        ["bash", "-c", body], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return done.stdout + done.stderr


def recorded_argv(folder: Path) -> list[list[str]]:
    """The argv of each stub command run in ``folder`` (program first)."""
    path = folder / "argv"
    if not path.exists():
        return []
    items = path.read_text(encoding="utf-8").split("\0")[:-1]
    runs, current = [], []
    for tok in items:
        if tok.startswith("/") and Path(tok).name in STUB_COMMANDS and current:
            runs.append(current)
            current = []
        current.append(tok)
    return [*runs, current] if current else runs


_PY_DRIVER = """
import json, os, runpy, sys, traceback
failures = []
for folder in json.loads(sys.argv[1]):
    os.chdir(folder)
    sys.path.insert(0, folder)
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        try:
            ns = runpy.run_path(name, run_name="__main__")
            if "memplan_job" in ns:
                ns["memplan_job"]()
        except BaseException:
            failures.append(folder + "/" + name + ": " + traceback.format_exc(limit=2))
    sys.path.remove(folder)
    for mod in [m for m in sys.modules if m.startswith("memplan_recipe")]:
        del sys.modules[mod]
print(json.dumps(failures))
"""


def run_python_files(folders: list[Path], env: dict[str, str]) -> list[str]:
    """Run every ``.py`` file of each folder as ``__main__`` (and a recipe's
    ``memplan_job()``) in one child Python with the stub modules; the failures."""
    done = subprocess.run(
        [sys.executable, "-c", _PY_DRIVER, json.dumps([str(f) for f in folders])],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        return [done.stderr[-2000:]]
    failures: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return failures


def markers(root: Path) -> list[Path]:
    """Every file a payload created under ``root``."""
    return [p for p in root.rglob(f"*{MARKER}*") if p.is_file()]
