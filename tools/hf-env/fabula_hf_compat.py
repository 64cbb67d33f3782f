"""Makes transformers' generate() run on Debian 12's torch 1.13 under Python 3.11.

tools/install-deps.sh copies this module into the virtual environment it
makes for transformers (/opt/fabula-hf) and adds fabula_hf_compat.pth
beside it, so that every interpreter of that environment imports it at
start-up. Cost: one entry on sys.meta_path; transformers is not imported
until a program imports it.

Why: transformers 4.46's generate() asks is_fsdp_managed_module(model),
which imports torch.distributed.fsdp; on torch 1.13 under Python 3.11 that
import raises ValueError (torch.distributed._shard declares a dataclass
field whose default is a mutable dataclass instance, which Python 3.11
refuses), so generate() crashes before its first token. Where FSDP cannot
be imported no model can be FSDP-managed, so the answer is False there;
anywhere else the original function answers.
"""
import importlib.abc
import importlib.machinery
import sys

_TARGET = "transformers.integrations.fsdp"


class _PatchFsdpCheck(importlib.abc.MetaPathFinder):
    """Wraps is_fsdp_managed_module as its module is executed, before
    transformers.generation.utils imports the name."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            original = module.is_fsdp_managed_module

            def is_fsdp_managed_module(model):
                try:
                    import torch.distributed.fsdp  # noqa: F401
                except ValueError:
                    return False
                return original(model)

            module.is_fsdp_managed_module = is_fsdp_managed_module

        spec.loader.exec_module = exec_module
        return spec


if not any(isinstance(f, _PatchFsdpCheck) for f in sys.meta_path):
    sys.meta_path.insert(0, _PatchFsdpCheck())
