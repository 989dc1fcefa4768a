"""MemPlan measurement probe: record what a training step really used, per rank.

Written by ``memplan probe PLAN -o memplan_probe.py``, which bakes the plan's config
hash into ``PLAN_CONFIG_HASH`` below (and its workload hash, which survives calibrating
the plan's runtime ranges), so every record says which plan it measures.
The module depends on nothing but the standard library; ``torch`` is imported lazily
and only if it is installed.

Use it in a training script::

    from memplan_probe import MemPlanProbe

    probe = MemPlanProbe(warmup_steps=2, window_steps=3, out_dir="memplan_records")
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        probe.step()          # after every optimizer step; cheap, never synchronises twice

The first ``warmup_steps`` steps are skipped (the first step allocates optimizer state
and autotunes kernels, so it is not the steady state). At the start of the window the
probe calls ``torch.cuda.reset_peak_memory_stats``; when ``window_steps`` more steps have
run it writes one JSON record per rank, ``memplan-record-<hash>-rank<rank>.json``, with:

- ``max_allocated_bytes`` — ``torch.cuda.max_memory_allocated`` over the window (tensors);
- ``max_reserved_bytes`` — ``torch.cuda.max_memory_reserved`` (the caching allocator);
- ``device_total_bytes`` and ``device_used_bytes`` — from ``torch.cuda.mem_get_info``
  (total − free, the largest seen at the window's step boundaries), so memory outside
  PyTorch — CUDA context, NCCL buffers, cuBLAS workspaces — shows up;
- ``external_bytes`` — used − ``torch.cuda.memory_reserved`` sampled at the same moment:
  the memory outside PyTorch's allocator (other processes on the same GPU count too);
- the world layout (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` or ``torch.distributed``),
  framework versions (Python, torch, CUDA, NCCL, transformers / deepspeed / accelerate /
  peft when importable) and the plan's config hash.

Optional: ``record_memory_stats=True`` keeps a few ``torch.cuda.memory_stats`` counters
(allocation retries, OOMs, inactive split bytes); ``probe.step(breakdown={...})`` or
``MemPlanProbe(breakdown=...)`` stores your own per-category byte counts (categories:
weights, gradients, optimizer, activations, temporaries); ``pp_stage=`` says which
pipeline stage this rank runs (default: compare with the plan's heaviest stage).

Then compare with the plan: ``memplan validate-run PLAN.memplan memplan_records/``.

Self-test (checks the probe against real CUDA memory on this machine)::

    python memplan_probe.py --selftest [--out-dir DIR] [--warmup 2] [--window 3]

runs a tiny training loop (matmul, backward, SGD step) on CUDA when available and
writes its record, with the sizes of the loop's tensors to check it against.
"""

import json
import os
import platform
import time

PLAN_CONFIG_HASH = None  # memplan:config_hash
PLAN_WORKLOAD_HASH = None  # memplan:workload_hash
PLAN_NAME = None  # memplan:plan_name
RECORD_FORMAT = "memplan-measurement"
RECORD_VERSION = 1
VERSION_MODULES = ("transformers", "deepspeed", "accelerate", "peft")
MEMORY_STATS_KEYS = (
    "allocated_bytes.all.peak",
    "reserved_bytes.all.peak",
    "active_bytes.all.peak",
    "inactive_split_bytes.all.peak",
    "num_alloc_retries",
    "num_ooms",
)


def _torch():
    """The torch module, or None when it is not installed (imported only when needed)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _env_int(name, default):
    value = os.environ.get(name)
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def _cuda_ready(torch):
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:
        return False


def world_layout(torch=None):
    """rank, local_rank, world_size, local_world_size and the host, from the launcher's
    environment, corrected by ``torch.distributed`` when a process group is running."""
    layout = {
        "rank": _env_int("RANK", 0),
        "local_rank": _env_int("LOCAL_RANK", 0),
        "world_size": _env_int("WORLD_SIZE", 1),
        "local_world_size": _env_int("LOCAL_WORLD_SIZE", 1),
        "hostname": platform.node(),
    }
    dist = getattr(torch, "distributed", None) if torch is not None else None
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            layout["rank"] = int(dist.get_rank())
            layout["world_size"] = int(dist.get_world_size())
    except Exception:
        pass
    return layout


def _module_version(name):
    try:
        module = __import__(name)
    except Exception:
        return None
    version = getattr(module, "__version__", None)
    return str(version) if version is not None else None


def framework_versions(torch=None, modules=VERSION_MODULES):
    """Python, torch, CUDA and NCCL versions, and those of the named libraries."""
    versions = {"python": platform.python_version(), "torch": None, "cuda": None, "nccl": None}
    if torch is not None:
        versions["torch"] = str(getattr(torch, "__version__", None))
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        versions["cuda"] = str(cuda) if cuda is not None else None
        try:
            nccl = torch.cuda.nccl.version()
            if isinstance(nccl, (tuple, list)):
                versions["nccl"] = ".".join(str(part) for part in nccl)
            elif nccl is not None:
                versions["nccl"] = str(nccl)
        except Exception:
            pass
    for name in modules:
        versions[name] = _module_version(name)
    return versions


def _check_breakdown(breakdown):
    if breakdown is None:
        return None
    clean = {}
    for key, value in dict(breakdown).items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"breakdown[{key!r}] must be a non-negative integer of bytes")
        clean[str(key)] = value
    return clean


class MemPlanProbe:
    """Measure a steady-state window of training steps and write this rank's record.

    Call :meth:`step` once after every optimizer step. Nothing is written before the
    window completes; after it the probe is inert, so it can stay in the loop.
    """

    def __init__(
        self,
        warmup_steps=2,
        window_steps=3,
        out_dir=".",
        config_hash=None,
        label="",
        pp_stage=None,
        breakdown=None,
        record_memory_stats=False,
        device=None,
    ):
        if int(warmup_steps) < 0 or int(window_steps) < 1:
            raise ValueError("warmup_steps must be ≥ 0 and window_steps ≥ 1")
        self.warmup_steps = int(warmup_steps)
        self.window_steps = int(window_steps)
        self.out_dir = str(out_dir)
        self.config_hash = config_hash if config_hash is not None else PLAN_CONFIG_HASH
        self.workload_hash = PLAN_WORKLOAD_HASH if config_hash is None else None
        self.label = str(label)
        self.pp_stage = pp_stage
        self.breakdown = _check_breakdown(breakdown)
        self.record_memory_stats = bool(record_memory_stats)
        self.device = device
        self.steps_seen = 0
        self.written_path = None
        self._used_max = None
        self._external_max = None
        self._window_started = None
        self._torch = _torch()
        self._cuda = _cuda_ready(self._torch)
        if self.warmup_steps == 0:
            self._start_window()

    @property
    def done(self):
        return self.written_path is not None

    def _start_window(self):
        if self._cuda:
            self._torch.cuda.synchronize(self.device)
            self._torch.cuda.reset_peak_memory_stats(self.device)
        self._window_started = time.monotonic()

    def _sample_device(self):
        """Device used (total − free) and the memory outside PyTorch's allocator, now."""
        if not self._cuda:
            return
        cuda = self._torch.cuda
        free, total = cuda.mem_get_info(self.device)
        used = int(total) - int(free)
        external = used - int(cuda.memory_reserved(self.device))
        self._used_max = used if self._used_max is None else max(self._used_max, used)
        if self._external_max is None or external > self._external_max:
            self._external_max = external

    def step(self, breakdown=None):
        """Count one finished optimizer step; returns the record's path once written."""
        if self.done:
            return self.written_path
        self.steps_seen += 1
        if breakdown is not None:
            self.breakdown = _check_breakdown(breakdown)
        if self.steps_seen == self.warmup_steps:
            self._start_window()
            return None
        if self.steps_seen < self.warmup_steps:
            return None
        if self._cuda:
            self._torch.cuda.synchronize(self.device)
        self._sample_device()
        if self.steps_seen == self.warmup_steps + self.window_steps:
            return self.write()
        return None

    def record(self):
        """This rank's record as a JSON-ready dict (also usable before the window ends)."""
        torch = self._torch
        notes = []
        device_info = None
        allocated = reserved = total = stats = None
        if self._cuda:
            cuda = torch.cuda
            index = cuda.current_device() if self.device is None else self.device
            allocated = int(cuda.max_memory_allocated(self.device))
            reserved = int(cuda.max_memory_reserved(self.device))
            total = int(cuda.mem_get_info(self.device)[1])
            name = _device_name(cuda, index)
            device_info = {"index": _as_index(index), "name": name, "total_bytes": total}
            if self.record_memory_stats:
                raw = cuda.memory_stats(self.device)
                stats = {k: int(raw[k]) for k in MEMORY_STATS_KEYS if k in raw}
        else:
            notes.append("CUDA was not available: no device memory was measured")
        if self.steps_seen < self.warmup_steps + self.window_steps:
            notes.append(
                f"the window was incomplete: {self.steps_seen} of "
                f"{self.warmup_steps + self.window_steps} steps had run"
            )
        seconds = None
        if self._window_started is not None:
            seconds = round(time.monotonic() - self._window_started, 3)
        layout = world_layout(torch)
        return {
            "format": RECORD_FORMAT,
            "record_version": RECORD_VERSION,
            "source": "probe",
            "label": self.label,
            "config_hash": self.config_hash,
            "workload_hash": self.workload_hash,
            "plan_name": PLAN_NAME,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "rank": layout["rank"],
            "local_rank": layout["local_rank"],
            "world_size": layout["world_size"],
            "local_world_size": layout["local_world_size"],
            "hostname": layout["hostname"],
            "pp_stage": self.pp_stage,
            "device": device_info,
            "window": {
                "warmup_steps": self.warmup_steps,
                "window_steps": self.window_steps,
                "steps_seen": self.steps_seen,
                "seconds": seconds,
            },
            "max_allocated_bytes": allocated,
            "max_reserved_bytes": reserved,
            "device_total_bytes": total,
            "device_used_bytes": self._used_max,
            "external_bytes": self._external_max,
            "versions": framework_versions(torch),
            "memory_stats": stats,
            "breakdown": self.breakdown,
            "extra": {},
            "notes": notes,
        }

    def path(self, rank):
        tag = (self.config_hash or "nohash")[:12]
        return os.path.join(self.out_dir, f"memplan-record-{tag}-rank{int(rank):05d}.json")

    def write(self, record=None):
        """Write the record atomically (temp file, rename) and return its path."""
        record = self.record() if record is None else record
        os.makedirs(self.out_dir, exist_ok=True)
        target = self.path(record["rank"])
        tmp = f"{target}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, target)
        self.written_path = target
        return target


def _device_name(cuda, index):
    try:
        return str(cuda.get_device_name(index))
    except Exception:
        return None


def _as_index(device):
    index = getattr(device, "index", device)
    try:
        return int(index)
    except (TypeError, ValueError):
        return None


def selftest(out_dir=".", warmup_steps=2, window_steps=3, width=2048, batch=512):
    """A tiny training loop (one weight matrix: matmul, backward, SGD) under the probe.

    The sizes of the loop's tensors go into the record's ``extra``: the fp32 weight and
    its gradient (``width²`` × 4 bytes each), the input and each ``batch × width``
    intermediate (× 4 bytes). The allocated peak must hold at least the weight, the
    input and the gradient, plus a few intermediates — a check of the probe against
    real CUDA memory.
    """
    torch = _torch()
    if torch is None:
        print("memplan_probe: torch is not installed; the self-test needs it")
        return 2
    device = "cuda" if _cuda_ready(torch) else "cpu"
    probe = MemPlanProbe(warmup_steps, window_steps, out_dir, label="selftest")
    weight = torch.randn(width, width, device=device, requires_grad=True)
    x = torch.randn(batch, width, device=device)
    optimizer = torch.optim.SGD([weight], lr=1e-3)
    for _ in range(warmup_steps + window_steps):
        loss = (x @ weight).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        probe.step()
    sizes = {
        "device": device,
        "weight_bytes": width * width * 4,
        "grad_bytes": width * width * 4,
        "input_bytes": batch * width * 4,
        "intermediate_bytes_each": batch * width * 4,
    }
    record = probe.record()
    record["extra"] = {"selftest": sizes}
    path = probe.write(record)
    print(f"memplan_probe: wrote {path}")
    for key in ("max_allocated_bytes", "max_reserved_bytes", "device_used_bytes", "external_bytes"):
        print(f"  {key}: {record[key]}")
    print(f"  loop tensors: {sizes}")
    return 0


def _main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description="MemPlan measurement probe")
    parser.add_argument("--selftest", action="store_true", help="run a tiny loop and record it")
    parser.add_argument("--out-dir", default=".")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--window", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.selftest:
        parser.print_help()
        return 0
    return selftest(args.out_dir, args.warmup, args.window)


if __name__ == "__main__":
    raise SystemExit(_main())
