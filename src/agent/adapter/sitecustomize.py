# hetpool's launch adapter (docs/adapters.md): lets a training script written for CUDA and NCCL,
# as public tutorials write them, run unchanged on the card its job was placed on. hetpool-agent
# puts this file first on a job's PYTHONPATH and names the steps in HETPOOL_ADAPT, a comma list:
#
#   torch_mlu          Cambricon's own GPU migration (torch_mlu.utils.gpu_migration: cuda calls
#                      and nccl mapped to mlu and cncl), switched on as Cambricon documents it
#   ipex               Intel's extension imported right after torch, as Intel documents it (and
#                      oneccl_bindings_for_pytorch, which registers the ccl backend, when present)
#   map:DEVICE:BACKEND cuda devices mapped to DEVICE and nccl to BACKEND ("auto": xccl where
#                      torch has it, else ccl) by this file, for what no vendor maps: Intel's xpu,
#                      CPU nodes and simulated cards (cpu, gloo)
#
# And in a torchrun worker (HETPOOL_MERGE_STDERR=1): its stderr goes where its stdout goes. hetpool
# runs torchrun with --redirects 1 --tee 1, which labels each line of a worker's stdout with its
# rank ("[default1]:") but passes stderr through unlabelled, where the last traceback of any rank
# wins; merged, a failure's lines are the failing rank's own. (--redirects 3 would do it too, but
# PyTorch 1.13 on Python 3.11 cannot parse it.)
#
# Nothing happens until the script imports torch (a Python process that never does pays nothing),
# and the sitecustomize this file shadows (the distribution's, a virtualenv's) still runs.
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as e:  # theirs failing must not stop the job, as it would not without us
                print(f"hetpool adapter: {spec.origin}: {e}", file=sys.stderr)
            return


def _steps():
    return [s for s in os.environ.get("HETPOOL_ADAPT", "").split(",") if s]


def _switch_on_torch_mlu():
    try:
        import torch_mlu  # noqa: F401
        import torch_mlu.utils.gpu_migration  # noqa: F401
    except ImportError as e:
        print(f"hetpool adapter: Cambricon's GPU migration is not available here ({e}); cuda calls stay cuda",
              file=sys.stderr)


def _switch_on_ipex():
    try:
        import intel_extension_for_pytorch  # noqa: F401
    except ImportError:
        pass  # PyTorch 2.5 and later have xpu built in
    try:
        import oneccl_bindings_for_pytorch  # noqa: F401
    except ImportError:
        pass


class _DeviceMap:
    """cuda -> `device` wherever a script names a device; nccl -> `backend`."""

    def __init__(self, torch, device, backend):
        self.torch = torch
        self.device = device
        self.backend = backend

    def backend_for(self, backend):
        if self.backend != "auto":
            return self.backend
        dist = self.torch.distributed
        available = getattr(dist, "is_xccl_available", None)
        if available is not None and available():
            return "xccl"
        return "ccl"

    # A device as scripts write it: "cuda", "cuda:1", torch.device("cuda", 1), or a bare index
    # (Tensor.to(local_rank) means cuda:local_rank).
    def device_of(self, value):
        torch = self.torch
        index = None
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            index = value
        elif isinstance(value, str) and (value == "cuda" or value.startswith("cuda:")):
            index = int(value[5:]) if value.startswith("cuda:") else None
        elif isinstance(value, torch.device) and value.type == "cuda":
            index = value.index
        else:
            return value
        if self.device == "cpu" or index is None:
            return torch.device(self.device)
        return torch.device(self.device, index)

    def args_with_device(self, args, kwargs):
        if "device" in kwargs:
            kwargs["device"] = self.device_of(kwargs["device"])
        if args and not isinstance(args[0], self.torch.dtype):
            args = (self.device_of(args[0]),) + tuple(args[1:])
        return args, kwargs

    def install(self):
        torch = self.torch
        import functools

        def wrap_to(original):
            @functools.wraps(original)
            def to(self_, *args, **kwargs):
                args, kwargs = self.args_with_device(args, kwargs)
                return original(self_, *args, **kwargs)
            return to

        def wrap_cuda(to_method):
            def cuda(self_, device=None, non_blocking=False, **kwargs):
                target = self.device_of(device if device is not None else "cuda")
                if isinstance(self_, torch.nn.Module):
                    return to_method(self_, target)
                return to_method(self_, target, non_blocking=non_blocking)
            return cuda

        torch.Tensor.to = wrap_to(torch.Tensor.to)
        torch.nn.Module.to = wrap_to(torch.nn.Module.to)
        torch.Tensor.cuda = wrap_cuda(torch.Tensor.to)
        torch.nn.Module.cuda = wrap_cuda(torch.nn.Module.to)
        if self.device == "cpu":
            torch.Tensor.pin_memory = lambda self_, *a, **k: self_  # pinning needs CUDA

        def wrap_device_kwarg(original):
            @functools.wraps(original)
            def factory(*args, **kwargs):
                if "device" in kwargs:
                    kwargs["device"] = self.device_of(kwargs["device"])
                return original(*args, **kwargs)
            return factory

        for name in ("tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
                     "randperm", "arange", "linspace", "eye", "zeros_like", "ones_like", "empty_like",
                     "full_like", "rand_like", "randn_like", "randint_like"):
            if hasattr(torch, name):
                setattr(torch, name, wrap_device_kwarg(getattr(torch, name)))

        original_load = torch.load

        @functools.wraps(original_load)
        def load(*args, **kwargs):
            if "map_location" in kwargs:
                kwargs["map_location"] = self.device_of(kwargs["map_location"])
            return original_load(*args, **kwargs)
        torch.load = load

        self.install_cuda_module()
        self.install_distributed()

    def install_cuda_module(self):
        torch = self.torch
        cuda = torch.cuda
        if self.device == "cpu":
            count = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
            cuda.is_available = lambda: True
            cuda.device_count = lambda: count
            cuda.set_device = lambda device: None
            cuda.current_device = lambda: int(os.environ.get("LOCAL_RANK", "0"))
            cuda.synchronize = lambda device=None: None
            cuda.empty_cache = lambda: None
            cuda.get_device_name = lambda device=None: "hetpool simulated card (on CPU)"
            # torch.manual_seed seeds the CPU and calls these for CUDA: nothing more to seed.
            cuda.manual_seed = lambda seed: None
            cuda.manual_seed_all = lambda seed: None
            for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
                setattr(cuda, name, lambda device=None: 0)
            cuda.reset_peak_memory_stats = lambda device=None: None
            import contextlib
            cuda.device = lambda device: contextlib.nullcontext()
        else:
            accelerator = getattr(torch, self.device)
            for name in ("is_available", "device_count", "set_device", "current_device", "synchronize",
                         "empty_cache", "get_device_name", "manual_seed", "manual_seed_all", "memory_allocated",
                         "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                         "reset_peak_memory_stats", "device", "Event", "Stream", "stream"):
                if hasattr(accelerator, name):
                    setattr(cuda, name, getattr(accelerator, name))
            original_set_device = accelerator.set_device
            cuda.set_device = lambda device: original_set_device(self.device_of(device))

        device = self.device
        original_autocast = torch.autocast

        # torch.autocast("cuda", dtype=torch.float16): on the mapped device, half precision where
        # it has it; on CPU autocast is left off (1.13's CPU autocast knows bfloat16 alone).
        def autocast(device_type="cuda", *args, **kwargs):
            if device_type == "cuda":
                device_type = device
                if device == "cpu":
                    kwargs["enabled"] = False
            return original_autocast(device_type, *args, **kwargs)
        torch.autocast = autocast
        if hasattr(cuda, "amp"):
            cuda.amp.autocast = lambda *args, **kwargs: autocast("cuda", *args, **kwargs)
            original_scaler = cuda.amp.GradScaler

            class GradScaler(original_scaler):
                def __init__(self, *args, **kwargs):
                    if device == "cpu":
                        kwargs["enabled"] = False  # no fp16 gradients to scale on CPU
                    super().__init__(*args, **kwargs)
            cuda.amp.GradScaler = GradScaler

    def install_distributed(self):
        torch = self.torch
        import torch.distributed as dist
        import torch.nn.parallel
        import functools

        def mapped(backend):
            if isinstance(backend, str) and "nccl" in backend:
                return backend.replace("nccl", self.backend_for(backend))
            return backend

        def wrap_backend(original):
            @functools.wraps(original)
            def with_backend(*args, **kwargs):
                if "backend" in kwargs:
                    kwargs["backend"] = mapped(kwargs["backend"])
                elif args and original.__name__ == "init_process_group":
                    args = (mapped(args[0]),) + tuple(args[1:])
                return original(*args, **kwargs)
            return with_backend

        dist.init_process_group = wrap_backend(dist.init_process_group)
        dist.new_group = wrap_backend(dist.new_group)
        import torch.distributed.distributed_c10d as c10d
        c10d.init_process_group = dist.init_process_group
        c10d.new_group = dist.new_group

        ddp = torch.nn.parallel.DistributedDataParallel
        original_init = ddp.__init__
        device = self.device

        @functools.wraps(original_init)
        def init(self_, module, *args, **kwargs):
            if device == "cpu":
                # A CPU module takes no device_ids (DDP refuses them): the script's [local_rank] goes.
                kwargs.pop("device_ids", None)
                kwargs.pop("output_device", None)
                args = (None, None) + tuple(args[2:]) if len(args) > 2 else ()
            elif "device_ids" in kwargs and kwargs["device_ids"] is not None:
                kwargs["device_ids"] = [self.device_of(d) for d in kwargs["device_ids"]]
            original_init(self_, module, *args, **kwargs)
        ddp.__init__ = init


def _adapt(torch):
    for step in _steps():
        if step == "torch_mlu":
            _switch_on_torch_mlu()
        elif step == "ipex":
            _switch_on_ipex()
        elif step.startswith("map:"):
            _, device, backend = (step.split(":") + ["", ""])[:3]
            _DeviceMap(torch, device or "cpu", backend or "gloo").install()


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Adapts torch the moment the script's `import torch` has run torch's own __init__."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            try:
                _adapt(module)
            except Exception as e:  # a torch this adapter does not know: the script runs as written
                print(f"hetpool adapter: not adapted: {type(e).__name__}: {e}", file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


def _merge_stderr_into_stdout():
    if os.environ.get("HETPOOL_MERGE_STDERR") != "1":
        return
    if "TORCHELASTIC_RUN_ID" not in os.environ or "LOCAL_RANK" not in os.environ:
        return  # not a torchrun worker (torchrun itself, or a program the script runs)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(1, 2)
    except OSError:
        pass


_merge_stderr_into_stdout()
_run_shadowed_sitecustomize()
if _steps() and "torch" not in sys.modules:
    sys.meta_path.insert(0, _AfterTorchImport())
