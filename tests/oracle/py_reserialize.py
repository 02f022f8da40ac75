#!/usr/bin/env python3
"""ExecuTorch's Python serializer re-serializing existing .pte files, for
ptepack's producer tests (tests/producer_rules_test.cpp).

Usage (one batch per test run):

    PYSER_SRC=<oracles>/executorch PYTHONPATH=<oracles>/py-stubs \
        python3 py_reserialize.py JOBS.json

JOBS.json is {"jobs": [JOB, ...]}, each JOB

    {"in": "x.pte", "out": "y.pte",
     "extract_delegate_segments": bool, "segment_alignment": int,
     "constant_tensor_alignment": int|null, "delegate_alignment": int|null,
     "vtables": "by-offsets" | "by-offsets-and-size"}

Each input goes through upstream's deserialize_pte_binary (the program with
its segments restored, exir/_serialize/_program.py), then two things
ExecuTorch decides before serialization are put back the way its emitter
does them, because the deserializer does not:

  - identical delegate payloads share one backend_delegate_data entry
    (exir/emit/_emitter.py keys the entries by the sha256 of the payload);
    the deserializer makes one entry per delegate;
  - a program without named data keeps the field absent (the deserializer
    sets it to an empty list).

Then upstream's serialize_pte_binary writes it. "vtables" picks the vtable
sharing rule of the Python flatbuffers package the object API packs with:
"by-offsets" is the installed package's own (python3-flatbuffers 2.0.8, as
every release before 25.12.19: a vtable is reused when the field offsets
match, whatever the object size); "by-offsets-and-size" is the rule of
flatbuffers 25.12.19 and later (google/flatbuffers#8683: the object size is
part of the key), obtained by keying the installed builder's vtable table by
(field offsets, object size). Nothing else about the builder changes.

Writes each "out", or "out".error with the exception text.
"""

import hashlib
import json
import sys
import traceback

import flatbuffers.builder as _fb_builder
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
from executorch.exir._serialize._program import (
    _get_extended_header,
    deserialize_pte_binary,
    serialize_pte_binary,
)
from executorch.exir.schema import BackendDelegateDataReference, DataLocation

_KEY_BY_SIZE = False


class _VtablesBySize(dict):
    """The builder's vtable table, keyed by (field offsets..., object size).

    Builder.WriteVtable looks a key up with get() while the builder's offset
    is the new object's (so its size is Offset() - objectEnd), and stores the
    written vtable under the same key with __setitem__ right after."""

    def __init__(self, builder):
        super().__init__()
        self._builder = builder
        self._last = None

    def get(self, key, default=None):
        size = self._builder.Offset() - self._builder.objectEnd
        self._last = (key, key + (size,))
        return super().get(self._last[1], default)

    def __setitem__(self, key, value):
        assert self._last is not None and self._last[0] == key
        super().__setitem__(self._last[1], value)


_original_init = _fb_builder.Builder.__init__


def _init(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    if _KEY_BY_SIZE:
        self.vtables = _VtablesBySize(self)


_fb_builder.Builder.__init__ = _init


def _share_identical_delegate_data(program) -> None:
    by_hash = {}
    entries = []
    for plan in program.execution_plan:
        for d in plan.delegates:
            if d.processed.location != DataLocation.INLINE:
                continue
            entry = program.backend_delegate_data[d.processed.index]
            h = hashlib.sha256(bytes(entry.data)).hexdigest()
            if h not in by_hash:
                by_hash[h] = len(entries)
                entries.append(entry)
            d.processed = BackendDelegateDataReference(location=DataLocation.INLINE, index=by_hash[h])
    program.backend_delegate_data = entries


def run(job) -> None:
    global _KEY_BY_SIZE
    data = open(job["in"], "rb").read()
    eh = _get_extended_header(data)
    program_size = eh.program_size if eh and eh.is_valid() else len(data)
    had_named_data = _flatbuffer_to_program(data[:program_size]).named_data is not None
    pte = deserialize_pte_binary(data)
    _share_identical_delegate_data(pte.program)
    if not had_named_data and not pte.program.named_data:
        pte.program.named_data = None
    _KEY_BY_SIZE = job.get("vtables", "by-offsets") == "by-offsets-and-size"
    try:
        out = serialize_pte_binary(
            pte,
            extract_delegate_segments=job["extract_delegate_segments"],
            segment_alignment=job.get("segment_alignment", 128),
            constant_tensor_alignment=job.get("constant_tensor_alignment"),
            delegate_alignment=job.get("delegate_alignment"),
        )
    finally:
        _KEY_BY_SIZE = False
    with open(job["out"], "wb") as f:
        f.write(bytes(out))


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        jobs = json.load(f)["jobs"]
    for job in jobs:
        try:
            run(job)
        except Exception:  # reported per job; the test says which failed and why
            with open(job["out"] + ".error", "w") as f:
                f.write(traceback.format_exc())
    return 0


if __name__ == "__main__":
    sys.exit(main())
