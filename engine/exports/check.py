"""Check an export with the framework's own config classes, when it is installed.

Each check runs in a child Python (the same interpreter) so a framework's import-time
side effects — CUDA probing, logging setup, argparse on ``sys.argv`` — never touch the
caller (the CLI, or the window's worker thread). What runs:

- DeepSpeed: ``deepspeed.runtime.config.DeepSpeedConfig(cfg, mpu)`` with an ``mpu`` that
  reports the plan's DP replicas (so the batch-size equation is checked for this world;
  without a process group ``DeepSpeedConfig`` falls back to a world of 1, so ``get_rank``
  is answered).
- accelerate: ``load_config_from_file`` (``ClusterConfig`` refuses unknown keys), the
  ``accelerate launch`` merge (``_validate_launch_command``) and the environment it
  builds, then ``FullyShardedDataParallelPlugin()`` / ``ParallelismConfig()`` from it;
  the ds_config beside it also with DeepSpeed when installed.
- Megatron-LM: ``megatron.training.arguments.parse_args`` and ``validate_args`` on the
  flags as MemPlan computed them (:func:`engine.exports.megatron.megatron_args`), with
  ``WORLD_SIZE`` set to the plan's world and the script's environment from
  :func:`~engine.exports.megatron.launch_env`.
- torchtitan (0.3.0): ``ConfigManager().parse_args`` — the registry function named by
  ``--module/--config``, then tyro on the recipe's overrides
  (:func:`engine.exports.torchtitan.titan_argv`), which builds every section and runs
  ``Trainer.Config.__post_init__``; then ``ParallelDims`` over the plan's world (its
  degrees must multiply to it) and the batch-size rule ``Trainer.__init__`` asserts
  (global batch a multiple of local batch × DP replicas).

No check imports, sources or re-parses generated code (issue 33): the generated files
are the user's to run; a check hands the framework MemPlan's own *data* — JSON and YAML
files loaded by the framework's data loaders, flag lists and values passed as JSON.

When the framework is not importable the result says which package is needed (the
framework, or the dependency it failed to import); a framework error that comes from
asking for a GPU or a process group is "could not check here (needs a GPU)", not a
refusal; argparse's own message is shown, not ``SystemExit: 2``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.exports.common import Export
from engine.exports.megatron import argv, launch_env, megatron_args
from engine.exports.torchtitan import titan_argv
from engine.plan import Plan
from engine.stacks.defaults import resolved
from engine.workload import replicas

PACKAGES = {
    "deepspeed": "deepspeed",
    "accelerate": "accelerate",
    "megatron": "megatron-core (or Megatron-LM on PYTHONPATH)",
    "torchtitan": "torchtitan",
}

_REPORT = r"""
def report(label, e):
    text = f"{type(e).__name__}: {e}".replace("\n", " ")
    low = text.lower()
    if isinstance(e, ImportError) or "is not installed" in low:
        name = getattr(e, "name", None) or low.split(" is not installed")[0].split()[-1]
        print(f"MISSING {name}")
    elif any(w in low for w in _NEEDS_GPU):
        print(f"NEEDS {label}: {text}")
    else:
        print(f"ERROR {label}: {text}")
def missing(e):
    print(f"MISSING {getattr(e, 'name', None) or ''}"); sys.exit(0)
"""
"""Shared by the child scripts: a framework error that comes from asking for a GPU or a
process group is "could not check here", not a refusal of the file."""

NEEDS_GPU = (
    "cuda",
    "nccl",
    "gpu",
    "no accelerator",
    "process group",
    "init_process_group",
    "sync_module_states",
)
"""Words of a framework's error that mean it wanted hardware this machine lacks
(Megatron's ``validate_args`` asks the GPU; accelerate's FSDP1 plugin refuses
``sync_module_states`` on CPU; ``Accelerator()`` starts a process group)."""


def _prelude() -> str:
    return f"import sys\n_NEEDS_GPU = {NEEDS_GPU!r}\n{_REPORT}"


_DEEPSPEED = r"""
import json, sys
try:
    from deepspeed.runtime.config import DeepSpeedConfig
    import deepspeed.comm as dist
except ImportError as e:
    missing(e)
dist.get_rank = lambda *a, **k: 0  # no process group: the mpu below gives the DP size
cfg = json.load(open(sys.argv[1])); world = int(sys.argv[2])
class MPU:
    def get_data_parallel_world_size(self): return world
    def get_data_parallel_rank(self): return 0
    def __getattr__(self, name): return lambda *a, **k: 1 if "size" in name else 0
try:
    c = DeepSpeedConfig(cfg, mpu=MPU())
    stage, tbs = c.zero_optimization_stage, c.train_batch_size
    print(f"OK DeepSpeedConfig: stage {stage}, train_batch_size {tbs}")
except Exception as e:
    report("DeepSpeedConfig", e)
"""

_ACCELERATE = r"""
import os, sys
try:
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser, _validate_launch_command
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_deepspeed_cmd_env
except ImportError as e:
    missing(e)
path = sys.argv[1]
try:
    cfg = load_config_from_file(path)
    args = launch_command_parser().parse_args(["--config_file", path, "train.py"])
    args, _, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        if not hasattr(args, "deepspeed_fields_from_accelerate_config"):
            args.deepspeed_fields_from_accelerate_config = []
        _, env = prepare_deepspeed_cmd_env(args)
    else:
        env = prepare_multi_gpu_env(args)
    os.environ.update(env)
    done = [f"ClusterConfig {cfg.distributed_type}"]
    if args.use_fsdp:
        from accelerate.utils import FullyShardedDataParallelPlugin
        p = FullyShardedDataParallelPlugin()
        done.append(f"FSDP{p.fsdp_version} plugin")
    if os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true":
        from accelerate.parallelism_config import ParallelismConfig
        pc = ParallelismConfig()
        sizes = (pc.dp_replicate_size, pc.dp_shard_size, pc.tp_size, pc.cp_size)
        done.append("ParallelismConfig " + "x".join(map(str, sizes)))
    from accelerate import Accelerator  # its full validation: plugin and mesh sizes
    try:
        Accelerator()
        done.append("Accelerator()")
    except Exception as e:  # a rendezvous wants the other ranks: not this file's fault
        low = str(e).lower()
        if not any(w in low for w in ("rendezvous", "torch.distributed", "not set")):
            raise
        done.append("Accelerator() not run here (it needs the launched processes)")
    print("OK " + ", ".join(done))
except Exception as e:
    report("accelerate", e)
"""

_MEGATRON = r"""
import json, os, sys
argv = json.loads(sys.argv[1])
os.environ.update(json.loads(sys.argv[3]))
os.environ.setdefault("WORLD_SIZE", sys.argv[2]); os.environ.setdefault("RANK", "0")
try:
    from megatron.training.arguments import parse_args, validate_args
except ImportError as e:
    missing(e)
import contextlib, io
sys.argv = ["pretrain_gpt.py", *argv]
said = io.StringIO()
stage = "Megatron-LM"
try:
    with contextlib.redirect_stderr(said):
        args = parse_args()
    stage = "Megatron-LM validate_args (parse_args accepted the flags)"
    validate_args(args)
    print(f"OK Megatron-LM validate_args: DP {args.data_parallel_size}")
except SystemExit as e:  # argparse's own message, not "SystemExit: 2"
    lines = [ln for ln in said.getvalue().splitlines() if ln.strip()]
    print("ERROR Megatron-LM argparse: " + (lines[-1] if lines else f"exit {e.code}"))
except BaseException as e:
    report(stage, e)
"""

_TORCHTITAN = r"""
import contextlib, io, json, sys
job = json.loads(sys.argv[1])
try:
    from torchtitan.config import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims
except ImportError as e:
    missing(e)
said = io.StringIO()
try:
    with contextlib.redirect_stderr(said):
        head = ["--module", job["module"], "--config", job["function"]]
        cfg = ConfigManager().parse_args([*head, *job["argv"]])
    dims = ParallelDims.from_config(cfg.parallelism, job["world"])
    t = cfg.training
    dp = dims.dp_replicate * dims.dp_shard  # the "batch" mesh of Trainer.__init__
    gb = t.global_batch_size if t.global_batch_size > 0 else t.local_batch_size * dp
    if gb % (t.local_batch_size * dp):
        raise ValueError(
            "global batch size must be multiple of local batch size times data-parallel "
            f"degree ({gb} % ({t.local_batch_size} * {dp}) != 0)"
        )
    print(
        f"OK torchtitan ConfigManager.parse_args + ParallelDims (world {job['world']}): "
        f"local batch {t.local_batch_size}, global {gb}, seq {t.seq_len}, "
        f"dp_shard {dims.dp_shard}"
    )
except SystemExit as e:  # tyro's own message, not "SystemExit: 2"
    lines = said.getvalue().splitlines()
    box = [ln.strip(" │╭╮╰╯─") for ln in lines if ln[:1] in "│╭"] or lines  # tyro's panel
    words = [ln for ln in box if ln and not ln.startswith("For full helptext")]
    print("ERROR torchtitan ConfigManager: " + (" ".join(words[:4]) or f"exit {e.code}"))
except BaseException as e:
    report("torchtitan", e)
"""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What the framework said: whether it was there, whether it accepted the file."""

    format: str
    available: bool
    ok: bool
    message: str


def _run(
    fmt: str, script: str, args: list[str], timeout: float, cwd: Path | None = None
) -> CheckResult:
    if getattr(sys, "frozen", False):  # the desktop bundle has no interpreter to run
        return CheckResult(
            fmt, False, False, f"run `memplan export --check` where {fmt} is installed"
        )
    try:
        done = subprocess.run(
            [_python(), "-c", _prelude() + script, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=cwd,  # accelerate reads deepspeed_config_file relative to the cwd
        )
    except subprocess.TimeoutExpired:
        return CheckResult(fmt, True, False, f"the {fmt} check ran past {timeout:.0f} s")
    heads = ("OK", "ERROR", "MISSING", "NEEDS")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(heads)]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return CheckResult(fmt, True, False, f"the {fmt} check failed: {tail}")
    head, _, said = lines[-1].partition(" ")
    if head == "MISSING":
        return CheckResult(fmt, False, False, _missing(fmt, said.strip()))
    if head == "NEEDS":
        return CheckResult(fmt, False, False, f"could not check here (needs a GPU): {said}")
    return CheckResult(fmt, True, head == "OK", said)


def _python() -> str:
    """The interpreter the checks run in: this one, or ``MEMPLAN_CHECK_PYTHON`` — a
    scratch environment holding the frameworks (tests/engine/exports/framework_parsers)."""
    return os.environ.get("MEMPLAN_CHECK_PYTHON") or sys.executable


def _missing(fmt: str, module: str) -> str:
    """What to install: the framework itself, or the dependency it could not import."""
    top = module.split(".")[0]
    if not top or top == fmt or top in PACKAGES.get(fmt, ""):
        return f"install {PACKAGES[fmt]} to check this file"
    return f"could not check here (needs package {top}, which {fmt} imports)"


def check_titan(
    module: str, function: str, overrides: list[str], world: int, timeout: float = 180.0
) -> CheckResult:
    """torchtitan 0.3.0's ``ConfigManager.parse_args`` on ``--module module --config
    function`` and the tyro ``overrides`` (data: the words, never a file), then
    ``ParallelDims`` over ``world`` GPUs and the trainer's batch rule."""
    job = {"module": module, "function": function, "argv": overrides, "world": world}
    return _run("torchtitan", _TORCHTITAN, [json.dumps(job)], timeout)


def check_export(exp: Export, plan: Plan, timeout: float = 180.0) -> list[CheckResult]:
    """Load ``exp`` (and its ds_config companion) with the framework's own classes."""
    p = resolved(plan)
    world = str(p.parallelism.world_size)
    with tempfile.TemporaryDirectory(prefix="memplan-check-") as tmp:
        root = Path(tmp)
        main = root / exp.filename
        main.write_text(exp.text, encoding="utf-8")
        for extra in exp.extras:
            (root / extra.filename).write_text(extra.text, encoding="utf-8")
        out: list[CheckResult] = []
        if exp.format == "deepspeed":
            out.append(_run("deepspeed", _DEEPSPEED, [str(main), str(replicas(p))], timeout))
        elif exp.format == "accelerate":
            out.append(_run("accelerate", _ACCELERATE, [str(main)], timeout, root))
            ds = root / "ds_config.json"
            if ds.exists():
                out.append(_run("deepspeed", _DEEPSPEED, [str(ds), str(replicas(p))], timeout))
        elif exp.format == "megatron":
            flags = json.dumps(argv(megatron_args(plan)[0]))
            env = json.dumps(launch_env(plan))
            out.append(_run("megatron", _MEGATRON, [flags, world, env], timeout))
        elif exp.format == "torchtitan":
            out.append(check_titan(*titan_argv(plan), p.parallelism.world_size, timeout))
        return out
