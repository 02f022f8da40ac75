#!/usr/bin/env python3
"""ExecuTorch's Python serializer on a `ptepack pack` spec (bench/gen_programs.py).

    PYSER_SRC=<oracles>/executorch PYTHONPATH=<oracles>/py-stubs \
        python3 bench/py_serialize_bench.py SPEC.json OUT.pte

Builds the exir.schema.Program dataclasses from the spec's "program" (with
_json_to_dataclass) and its "constants" (bytes read from the data file), then
times serialize_pte_binary (the object-API path, default config: segment
alignment 128, constant alignment 16) plus writing its Cord to OUT.pte with
fsync. Prints one JSON line: {"build_s", "serialize_s", "bytes"}. Peak RSS is
measured by the caller (wait4 of this process).
"""

import json
import os
import sys
import time

from executorch.exir import schema as S
from executorch.exir._serialize._dataclass import _json_to_dataclass
from executorch.exir._serialize._program import PTEFile, serialize_pte_binary


def main() -> int:
    spec_path, out_path = sys.argv[1], sys.argv[2]
    base = os.path.dirname(os.path.abspath(spec_path))
    t0 = time.perf_counter()
    with open(spec_path) as f:
        spec = json.load(f)
    program = _json_to_dataclass(spec["program"], S.Program)
    constants = spec.get("constants")
    if constants:
        buffers = [S.Buffer(storage=b"")]
        files = {}
        for c in constants:
            path = os.path.join(base, c["file"])
            if path not in files:
                files[path] = open(path, "rb")
            fh = files[path]
            fh.seek(c.get("offset", 0))
            buffers.append(S.Buffer(storage=fh.read(c["size"])))
        program.constant_buffer = buffers
    t1 = time.perf_counter()
    cord = serialize_pte_binary(PTEFile(program=program), segment_alignment=128, constant_tensor_alignment=16)
    with open(out_path, "wb") as f:
        cord.write_to_file(f) if hasattr(cord, "write_to_file") else f.write(bytes(cord))
        f.flush()
        os.fsync(f.fileno())
    t2 = time.perf_counter()
    print(json.dumps({"build_s": t1 - t0, "serialize_s": t2 - t1, "bytes": os.path.getsize(out_path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
