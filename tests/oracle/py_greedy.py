"""ExecuTorch's own `greedy` memory planner, run on plain numbers.

Reads exir/memory_planning.py and exir/tensor.py from the oracle extract
(PYSER_SRC, the executorch/ directory), takes from them the functions and
classes that `greedy` uses (it needs no torch: SharedObject, pick_shared_obj,
_does_not_overlap, _find_max_overlapping_allocations_offset,
materialize_buffer, _compute_total_sizes, ...; calculate_aligned_num_bytes
and ALIGNMENT from tensor.py) and runs upstream's `greedy` on stand-ins for
TensorSpec that carry only what it reads: the byte count, the lifetime,
mem_id, inplace_base and TensorSpec's alignment rules.

stdin: JSON list of {"alignment": N, "blocks": [[size, first, last], ...]}.
Specs are passed as a list in block order, as apply_algo passes them.
stdout: JSON list of {"offsets": [...], "size": N} or {"error": "..."}.
"""
import ast
import bisect  # noqa: F401  (greedy imports it itself)
import collections
import dataclasses
import json
import logging
import os
import sys
import typing

SRC = os.environ["PYSER_SRC"]

WANT = {
    "AllocationSpec", "SharedObject", "SpecAllocResult", "MemoryAlgoResult", "materialize_buffer",
    "_does_not_overlap", "_find_max_overlapping_allocations_offset", "pick_shared_obj",
    "_resolve_inplace_specs", "_compute_total_sizes", "greedy",
}


def load(path, names):
    tree = ast.parse(open(path).read(), path)
    body = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            body.append(node)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets):
            body.append(node)
    missing = set(names) - {getattr(n, "name", None) or n.targets[0].id for n in body}
    if missing:
        raise SystemExit("not found in %s: %s" % (path, sorted(missing)))
    return ast.Module(body=body, type_ignores=[])


class InternalError(Exception):
    pass


ns = dict(vars(typing))
ns.update(dataclass=dataclasses.dataclass, field=dataclasses.field, defaultdict=collections.defaultdict,
          logging=logging, InternalError=InternalError, math=__import__("math"), __name__="upstream")


class Anything:
    """torch.fx.GraphModule and the like: only in annotations of the functions taken."""

    def __getattr__(self, name):
        return self

    def __getitem__(self, item):
        return self


ns["torch"] = ns["TensorSpec"] = ns["ExportGraphSignature"] = Anything()
exec(compile(load(os.path.join(SRC, "exir", "tensor.py"), {"calculate_aligned_num_bytes", "ALIGNMENT"}),
             "exir/tensor.py", "exec"), ns)
exec(compile(load(os.path.join(SRC, "exir", "memory_planning.py"), WANT), "exir/memory_planning.py", "exec"), ns)


class Spec:
    """The parts of exir/tensor.py's TensorSpec that greedy reads."""

    def __init__(self, nbytes, first, last):
        self.nbytes_ = nbytes
        self.alignment = ns["ALIGNMENT"]  # TensorSpec.__init__
        self.lifetime = [first, last]
        self.mem_id = None
        self.mem_offset = None
        self.mem_obj_id = None
        self.inplace_base = None

    @property
    def allocated_memory(self):  # TensorSpec.allocated_memory
        return ns["calculate_aligned_num_bytes"](self.nbytes_, self.alignment)

    def realign(self, new_alignment):  # TensorSpec.realign
        self.alignment = new_alignment
        return self.allocated_memory


class GraphModule:
    pass


out = []
for case in json.load(sys.stdin):
    specs = [Spec(*b) for b in case["blocks"]]
    try:
        result = ns["greedy"](case["alignment"], specs, GraphModule(), None, 0)
    except AssertionError as e:
        out.append({"error": "AssertionError: %s" % e})
        continue
    offsets = [result.spec_dict[s].mem_offset for s in specs]
    out.append({"offsets": offsets, "size": result.bufsizes[1] if len(result.bufsizes) > 1 else 0})
json.dump(out, sys.stdout)
