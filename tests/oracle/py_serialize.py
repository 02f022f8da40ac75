#!/usr/bin/env python3
"""ExecuTorch's own Python serializer as a byte oracle for ptepack's tests.

Usage (run by tests/pyoracle_test.cpp, once for a whole batch of cases):

    PYSER_SRC=<oracles>/executorch PYTHONPATH=<oracles>/py-stubs \
        python3 py_serialize.py CASES.json OUT_DIR

CASES.json is {"cases": [CASE, ...]}; each CASE describes a program the way
the test built it with ptepack's ProgramBuilder, in program.fbs field names:

    {"name": "...",
     "config": {"extract_delegate_segments": bool, "segment_alignment": int,
                "constant_tensor_alignment": int|null, "delegate_alignment": int|null,
                "emit_stacktrace": bool, "emit_mutable_buffer_names": bool,
                "external_constants": {fqn: tag, ...},      # constant_tag per tensor
                "external_mutable_weights_tag": str|null,   # tag of trainable weights
                "external_constants_all_tag": str|null,     # external_constants=True
                "dedup_delegate_data": bool},               # optional, default true: the
                        # emitter's backend_delegate_data_cache; false: one entry per delegate,
                        # as emitters before the cache wrote (and as the serializer keeps them)
     "methods": [{"name": str, "container_meta_type": {...}|null,
                  "values": [EValue JSON ({"val_type": "Int", "val": {"int_val": 1}}),
                             or a Tensor with "constant": {"data": hex, "fqn": str|null}
                             or "mutable": {"fqn": str, "data": hex|null}],
                  "inputs": [...], "outputs": [...],
                  "instructions": [{"instr_args_type": ..., "instr_args": {...},
                                    "stack": [Frame JSON, ...]}],
                  "operators": [Operator JSON],
                  "delegates": [{"id": str, "data": hex, "compile_specs": [{"key", "value": hex}]}],
                  "non_const_buffer_sizes": [...]}],
     "named_data": [{"key": str, "data": hex, "alignment": int}]}

What ExecuTorch's emitter decides (not its serializer) is done here the way
exir/emit/_emitter.py does it: constant buffer 0 is the empty placeholder and
constants are deduplicated by content across methods; mutable buffers with an
initial state go to the mutable buffer list (deduplicated only when they carry
no ExtraTensorInfo); tensors with a constant_tag become EXTERNAL with their
fully qualified name and index external_constant_buffer (deduplicated by
content, shared by all tags); identical delegate payloads share one
backend_delegate_data entry; stack traces and mutable buffer names are only
kept when the config asks for them. Methods are emitted sorted by name, as
emit_program does.

The EmitterOutput then goes through upstream's serialize_for_executorch with a
FlatTensorSerializer whose segment alignment is the config's (as
to_executorch does). Writes OUT_DIR/<name>.pte, OUT_DIR/<name>/<tag>.ptd and
OUT_DIR/manifest.json ({name: {"pte": file, "ptd": {tag: file}} or {"error": msg}}).
Every case is written a second time as <name>.flatc with the flatbuffer made
the way ExecuTorch made it before the object API (JSON + `flatc --binary`).
"""

import hashlib
import json
import os
import sys
import traceback

from executorch.exir import schema as S
from executorch.exir._serialize._dataclass import _json_to_dataclass
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir._serialize._serialize import serialize_for_executorch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.capture._config import ExecutorchBackendConfig
from executorch.exir.emit import EmitterOutput
from executorch.exir.scalar_type import ScalarType
from executorch.extension.flat_tensor.serialize.serialize import (
    FlatTensorConfig,
    FlatTensorSerializer,
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _ProgramState:
    """The parts of exir/emit/_emitter.py's _ProgramState the serializer sees."""

    def __init__(self) -> None:
        self.constant_buffer = [S.Buffer(storage=b"")]
        self.cached_spec_hash_values = {}
        self.mutable_buffer = [S.Buffer(storage=b"")]
        self.cached_spec_mutable_hash_values = {}
        self.external_constant_buffer = []
        self.external_constant_hash = {}
        self.external_constant_map = {}
        self.backend_delegate_data = []
        self.backend_delegate_data_cache = {}

    def save_external(self, fqn: str, idx: int, tag: str) -> None:
        self.external_constant_map.setdefault(tag, {})[fqn] = idx

    def const_tensor_index(self, data, eti, allocation_info, tag) -> int:
        # _TopLevelEmitter._tensor_spec_to_evalue + _save_new_const_tensor.
        hashed = _sha(data)
        external = eti is not None and eti.location == S.TensorDataLocation.EXTERNAL
        if allocation_info is not None and eti is None:
            idx = self.cached_spec_mutable_hash_values.get(hashed, -1)
        elif external:
            idx = self.external_constant_hash.get(hashed, -1)
            if idx != -1:
                self.save_external(eti.fully_qualified_name, idx, tag)
        else:
            idx = self.cached_spec_hash_values.get(hashed, -1)
        if idx != -1:
            return idx
        if external:
            idx = len(self.external_constant_buffer)
            self.external_constant_hash[hashed] = idx
            self.external_constant_buffer.append(data)
            self.save_external(eti.fully_qualified_name, idx, tag)
        elif allocation_info is not None:
            idx = len(self.mutable_buffer)
            self.cached_spec_mutable_hash_values[hashed] = idx
            self.mutable_buffer.append(S.Buffer(storage=data))
        else:
            idx = len(self.constant_buffer)
            self.cached_spec_hash_values[hashed] = idx
            self.constant_buffer.append(S.Buffer(storage=data))
        return idx


def _tensor(v, cfg, state: _ProgramState) -> S.Tensor:
    val = v["val"]
    alloc = val.get("allocation_info")
    allocation_info = S.AllocationDetails(**alloc) if alloc is not None else None
    t = S.Tensor(
        scalar_type=ScalarType(val["scalar_type"]),
        storage_offset=0,
        sizes=list(val["sizes"]),
        dim_order=list(val["dim_order"]),
        requires_grad=bool(val["requires_grad"]),
        layout=0,
        data_buffer_idx=0,
        allocation_info=allocation_info,
        shape_dynamism=S.TensorShapeDynamism(val["shape_dynamism"]),
        extra_tensor_info=None,
    )
    if "constant" in v:
        c = v["constant"]
        data = bytes.fromhex(c["data"])
        fqn = c.get("fqn")
        tag = None
        if fqn:  # external_constants_pass tags named constants only
            tag = cfg["external_constants"].get(fqn) or cfg.get("external_constants_all_tag")
        if tag is not None:
            t.extra_tensor_info = S.ExtraTensorInfo(
                fully_qualified_name=fqn, location=S.TensorDataLocation.EXTERNAL
            )
        t.data_buffer_idx = state.const_tensor_index(data, t.extra_tensor_info, None, tag)
    elif "mutable" in v:
        m = v["mutable"]
        fqn = m["fqn"]
        has_data = m.get("data") is not None
        tag = cfg.get("external_mutable_weights_tag") if has_data else None
        if tag is not None:
            t.extra_tensor_info = S.ExtraTensorInfo(
                fully_qualified_name=fqn, location=S.TensorDataLocation.EXTERNAL
            )
        if cfg["emit_mutable_buffer_names"]:
            if t.extra_tensor_info is None:
                t.extra_tensor_info = S.ExtraTensorInfo(
                    fully_qualified_name=fqn, location=S.TensorDataLocation.SEGMENT
                )
            else:
                t.extra_tensor_info.fully_qualified_name = fqn
        if has_data:
            t.data_buffer_idx = state.const_tensor_index(
                bytes.fromhex(m["data"]), t.extra_tensor_info, allocation_info, tag
            )
    return t


def _plan(m, cfg, state: _ProgramState) -> S.ExecutionPlan:
    values = []
    for v in m["values"]:
        if v["val_type"] == "Tensor":
            values.append(S.EValue(_tensor(v, cfg, state)))
        else:
            values.append(_json_to_dataclass(v, S.EValue))
    instructions = [_json_to_dataclass(i, S.Instruction) for i in m["instructions"]]
    stacktrace = None
    if cfg["emit_stacktrace"] and any(i.get("stack") for i in m["instructions"]):
        stacktrace = [
            S.FrameList(items=[_json_to_dataclass(f, S.Frame) for f in i.get("stack", [])])
            for i in m["instructions"]
        ]
    delegates = []
    for d in m["delegates"]:
        data = bytes.fromhex(d["data"])
        hashed = _sha(data)
        index = state.backend_delegate_data_cache.get(hashed) if cfg.get("dedup_delegate_data", True) else None
        if index is None:
            index = len(state.backend_delegate_data)
            state.backend_delegate_data_cache[hashed] = index
            state.backend_delegate_data.append(S.BackendDelegateInlineData(data=data))
        delegates.append(
            S.BackendDelegate(
                id=d["id"],
                processed=S.BackendDelegateDataReference(
                    location=S.DataLocation.INLINE, index=index
                ),
                compile_specs=[
                    CompileSpec(key=cs["key"], value=bytes.fromhex(cs["value"]))
                    for cs in d["compile_specs"]
                ],
            )
        )
    meta = m.get("container_meta_type")
    return S.ExecutionPlan(
        name=m["name"],
        container_meta_type=_json_to_dataclass(meta, S.ContainerMetadata) if meta else None,
        values=values,
        inputs=list(m["inputs"]),
        outputs=list(m["outputs"]),
        chains=[
            S.Chain(
                inputs=list(m["inputs"]),
                outputs=list(m["outputs"]),
                instructions=instructions,
                stacktrace=stacktrace,
            )
        ],
        operators=[_json_to_dataclass(o, S.Operator) for o in m["operators"]],
        delegates=delegates,
        non_const_buffer_sizes=list(m["non_const_buffer_sizes"]),
    )


def _program_to_flatbuffer_via_flatc(program, *, constant_tensor_alignment=None, delegate_alignment=None):
    """The flatbuffer step as ExecuTorch did it before the object API (2023-2025):
    the Program as JSON, compiled by `flatc --binary` against the schema with
    the alignments patched in. Built from upstream's own helpers."""
    import tempfile

    from executorch.exir._serialize import _flatbuffer
    from executorch.exir._serialize._program import _program_to_json

    with tempfile.TemporaryDirectory() as d:
        info = _flatbuffer._prepare_schema(d, constant_tensor_alignment, delegate_alignment)
        json_path = os.path.join(d, "data.json")
        with open(json_path, "wb") as f:
            f.write(_program_to_json(program).encode("ascii"))
        _flatbuffer._flatc_compile(d, info.root_path, json_path)
        with open(os.path.join(d, "data.pte"), "rb") as f:
            return _flatbuffer._FlatbufferResult(data=f.read(), max_alignment=info.max_alignment)


def serialize_case(case, out_dir: str, suffix: str = ""):
    cfg = case["config"]
    state = _ProgramState()
    plans = [_plan(m, cfg, state) for m in sorted(case["methods"], key=lambda m: m["name"])]
    program = S.Program(
        version=0,
        execution_plan=plans,
        constant_buffer=state.constant_buffer,
        backend_delegate_data=state.backend_delegate_data,
        segments=[],
        constant_segment=S.SubsegmentOffsets(segment_index=0, offsets=[]),
        mutable_data_segments=None,
    )
    emitter_output = EmitterOutput(
        program=program,
        mutable_data=state.mutable_buffer if len(state.mutable_buffer) > 1 else None,
        external_constant_buffer=state.external_constant_buffer,
        external_constant_map=state.external_constant_map,
    )
    store = NamedDataStore()
    for nd in case.get("named_data", []):
        store.add_named_data(nd["key"], bytes.fromhex(nd["data"]), alignment=nd["alignment"])
    config = ExecutorchBackendConfig(
        extract_delegate_segments=cfg["extract_delegate_segments"],
        segment_alignment=cfg["segment_alignment"],
        constant_tensor_alignment=cfg["constant_tensor_alignment"],
        delegate_alignment=cfg["delegate_alignment"],
    )
    serializer = FlatTensorSerializer(FlatTensorConfig(segment_alignment=cfg["segment_alignment"]))
    pte, ptds = serialize_for_executorch(
        emitter_output, config, serializer, store.get_named_data_store_output()
    )
    name = case["name"] + suffix
    result = {"pte": name + ".pte", "ptd": {}}
    with open(os.path.join(out_dir, result["pte"]), "wb") as f:
        f.write(bytes(pte))
    if ptds:
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    for tag, data in ptds.items():
        rel = os.path.join(name, tag + ".ptd")
        with open(os.path.join(out_dir, rel), "wb") as f:
            f.write(bytes(data))
        result["ptd"][tag] = rel
    return result


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: py_serialize.py CASES.json OUT_DIR", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    manifest = {}
    from executorch.exir._serialize import _program

    object_api = _program._program_to_flatbuffer
    for suffix, to_flatbuffer in (("", object_api), (".flatc", _program_to_flatbuffer_via_flatc)):
        _program._program_to_flatbuffer = to_flatbuffer
        for case in cases:
            try:
                manifest[case["name"] + suffix] = serialize_case(case, out_dir, suffix)
            except Exception as e:  # recorded per case; the test decides
                manifest[case["name"] + suffix] = {
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc(),
                }
    _program._program_to_flatbuffer = object_api
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
