#!/usr/bin/env python3
"""Writes the benchmark programs of issue 16 as `ptepack pack` specs.

    python3 bench/gen_programs.py OUT_DIR [--quick]

Each program is OUT_DIR/<name>/spec.json: {"program": <program.fbs JSON with
every field spelled out>, "constants": [...], "external": {...}}, so the same
file feeds `ptepack pack` and, through exir's _json_to_dataclass, ExecuTorch's
Python serializer (bench/py_serialize_bench.py). Constant bytes live in one
random data file per program, referred to by offset.

  meta     1 method, 20,002 values (3 of 4 planned tensors, 1 of 4 Int),
           5,000 KernelCall instructions over 64 operators; no constant bytes
  const    the same metadata plus 2,000 constants x 256 KiB (500 MiB;
           --quick: 2,000 x 16 KiB) used by 2,000 more tensor values
  methods  10,000 methods of 4 values and 1 instruction each (for repack)
  ptd      300,000 named constants w.<i> of 16 bytes (--quick: 100,000),
           which `ptepack split` moves to a .ptd of 300,000 keys
  tensors  10,000 named constants x 4 KiB (for extract and split)
  copy     256 constants x 4 MiB (1 GiB; --quick: 512 KiB, 128 MiB), few
           values: the write and verify throughput against raw copies
  scale    (full set only) the meta shape at 1,000,000 values and 100,000
           instructions (2,950,070 tables: FlatBuffers' verifier, as the
           runtime runs it for Verification::InternalConsistency, and so our
           reader refuse more than 1,000,000); scalemax: the same shape at
           330,000 values and 33,000 instructions (973,570 tables), about the
           largest of this shape the verifier accepts; sparse4 / sparse40: 64
           constants over a sparse data file of 4 / 40 GiB (holes, no disk
           blocks): RSS against size

The shapes are fixed functions of the counts (bench/micro_bench.cpp builds the
same `meta` program with ProgramBuilder).
"""

import argparse
import json
import os

NUM_OPS = 64
# Values of the `scalemax` program: with one instruction per ten values, the
# meta shape makes 2.95 tables a value (an EValue each, a Tensor and its
# AllocationInfo for three of four, an Int for the fourth; an Instruction and
# its KernelCall per instruction) and 70 more; FlatBuffers' Verifier with its
# default of 1,000,000 tables (ExecuTorch's runtime runs it for
# Verification::InternalConsistency; ptepack's reader always) accepts up to
# 338,959 values. 330,000 gives 973,570 tables.
SCALEMAX_VALUES = 330000


def tensor(offset, data_buffer_idx=0, fqn=None, external=False, sizes=(1, 64)):
    val = {
        "scalar_type": "FLOAT",
        "storage_offset": 0,
        "sizes": list(sizes),
        "dim_order": list(range(len(sizes))),
        "requires_grad": False,
        "layout": 0,
        "data_buffer_idx": data_buffer_idx,
        "shape_dynamism": "STATIC",
    }
    if offset is not None:
        val["allocation_info"] = {
            "memory_id": 1,
            "memory_offset_low": offset & 0xFFFFFFFF,
            "memory_offset_high": offset >> 32,
        }
    if fqn is not None:
        val["extra_tensor_info"] = {
            "mutable_data_segments_idx": 0,
            "fully_qualified_name": fqn,
            "location": "EXTERNAL" if external else "SEGMENT",
        }
    return {"val_type": "Tensor", "val": val}


def plan(name, values, instructions, ops, inputs, outputs, arena):
    return {
        "name": name,
        "container_meta_type": {"encoded_inp_str": "T1#1($)", "encoded_out_str": "$"},
        "values": values,
        "inputs": inputs,
        "outputs": outputs,
        "chains": [{"inputs": inputs, "outputs": outputs, "instructions": instructions}],
        "operators": [{"name": "aten::op%d" % i, "overload": "out"} for i in range(ops)],
        "delegates": [],
        "non_const_buffer_sizes": [0, arena],
    }


def program(plans, constants=0):
    return {
        "version": 0,
        "execution_plan": plans,
        "constant_buffer": [],
        "backend_delegate_data": [],
        "segments": [],
        "constant_segment": {"segment_index": 0, "offsets": []},
    }


def meta_plan(num_values=20002, num_instructions=5000, num_constants=0):
    """Value i is an Int when i % 4 == 3, else a planned [1, 64] float tensor;
    then num_constants constant tensors using buffers 1..num_constants.
    Instruction k calls operator k % 64 on the tensors t(k), t(k+1), t(k+2)
    and the Int 4k % V | 3, where t(j) = the (j mod #tensors)-th tensor."""
    values = []
    tensors = []
    for i in range(num_values):
        if i % 4 == 3:
            values.append({"val_type": "Int", "val": {"int_val": i}})
        else:
            tensors.append(i)
            values.append(tensor(256 * i))
    for c in range(num_constants):
        values.append(tensor(None, data_buffer_idx=1 + c))
    instructions = []
    for k in range(num_instructions):
        t = [tensors[(k + d) % len(tensors)] for d in range(3)]
        instructions.append(
            {
                "instr_args_type": "KernelCall",
                "instr_args": {"op_index": k % NUM_OPS, "args": t + [(4 * k % num_values) | 3]},
            }
        )
    return plan("forward", values, instructions, NUM_OPS, [0], [tensors[-1]], 256 * num_values)


def random_file(path, size):
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 24)
            f.write(os.urandom(n))
            left -= n


def write_spec(out, name, spec):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(spec, f, separators=(",", ":"))
    return d


def gen_constants(out, name, count, size, plan_fn):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    random_file(os.path.join(d, "data.bin"), count * size)
    spec = {
        "program": program([plan_fn()]),
        "constants": [{"file": "data.bin", "offset": i * size, "size": size} for i in range(count)],
    }
    write_spec(out, name, spec)


def gen_methods(out, count):
    plans = []
    for m in range(count):
        values = [tensor(0), tensor(256), {"val_type": "Int", "val": {"int_val": m}}, tensor(512)]
        instr = [{"instr_args_type": "KernelCall", "instr_args": {"op_index": 0, "args": [0, 1, 2, 3]}}]
        plans.append(plan("method_%05d" % m, values, instr, 1, [0, 1], [3], 768))
    write_spec(out, "methods", {"program": program(plans)})


def gen_ptd(out, keys):
    """300,000 named 16-byte constants; `ptepack split` moves them to a .ptd."""

    def p():
        values = [tensor(None, data_buffer_idx=1 + i, fqn="w.%d" % i, sizes=(4,)) for i in range(keys)]
        values.append(tensor(0))
        instr = [{"instr_args_type": "KernelCall", "instr_args": {"op_index": 0, "args": [0, keys]}}]
        return plan("forward", values, instr, 1, [keys], [keys], 256)

    gen_constants(out, "ptd", keys, 16, p)


def gen_sparse(out, name, total):
    """64 constants of total / 64 bytes each over a sparse file (holes only)."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    size = total // 64
    with open(os.path.join(d, "data.bin"), "wb") as f:
        f.truncate(total)
    values = [tensor(None, data_buffer_idx=1 + i, sizes=(1, size // 4)) for i in range(64)]
    instr = [{"instr_args_type": "KernelCall", "instr_args": {"op_index": 0, "args": [0, 63]}}]
    spec = {
        "program": program([plan("forward", values, instr, 1, [0], [63], 0)]),
        "constants": [{"file": "data.bin", "offset": i * size, "size": size} for i in range(64)],
    }
    write_spec(out, name, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    write_spec(a.out, "meta", {"program": program([meta_plan()])})
    const_size = (16 if a.quick else 256) << 10
    gen_constants(a.out, "const", 2000, const_size, lambda: meta_plan(num_constants=2000))

    def named_plan():
        values = [tensor(None, data_buffer_idx=1 + i, fqn="layer%d.weight" % i) for i in range(10000)]
        values.append(tensor(0))
        instr = [{"instr_args_type": "KernelCall", "instr_args": {"op_index": 0, "args": [0, 10000]}}]
        return plan("forward", values, instr, 1, [10000], [10000], 256)

    gen_constants(a.out, "tensors", 10000, 4096, named_plan)

    copy_size = (512 if a.quick else 4096) << 10

    def copy_plan():
        # Tensors as large as their buffers, so that `split` moves every byte.
        values = [tensor(None, data_buffer_idx=1 + i, sizes=(1, copy_size // 4)) for i in range(256)]
        instr = [{"instr_args_type": "KernelCall", "instr_args": {"op_index": 0, "args": [0, 255]}}]
        return plan("forward", values, instr, 1, [0], [255], 0)

    gen_constants(a.out, "copy", 256, copy_size, copy_plan)
    gen_methods(a.out, 10000)
    gen_ptd(a.out, 100000 if a.quick else 300000)
    if not a.quick:
        write_spec(a.out, "scale", {"program": program([meta_plan(1000000, 100000)])})
        write_spec(a.out, "scalemax", {"program": program([meta_plan(SCALEMAX_VALUES, SCALEMAX_VALUES // 10)])})
        gen_sparse(a.out, "sparse4", 4 << 30)
        gen_sparse(a.out, "sparse40", 40 << 30)


if __name__ == "__main__":
    main()
