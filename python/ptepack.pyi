"""Type stubs for the native `ptepack` module (python/ptepack_module.cpp).

Each function returns what the matching `ptepack` command prints with --json;
the TypedDicts below name the keys every such result has (nested values that
vary with the file are left as dicts).
"""
import os
from typing import Any, Dict, List, Literal, Optional, Sequence, TypedDict, Union

__version__: str

StrPath = Union[str, "os.PathLike[str]"]

class Error(Exception):
    """A ptepack failure, located: the file, the byte offset, what was expected and found."""

    code: str
    file: Optional[str]
    offset: Optional[int]
    expected: str
    found: str

class Finding(TypedDict, total=False):
    severity: Literal["error", "warning"]
    code: str
    message: str
    file: str
    offset: int
    expected: str
    found: str

class VerifyResult(TypedDict, total=False):
    file: str
    format: str  # "bpte" for a BundledProgram
    valid: bool
    strict: bool
    not_checked: List[str]
    findings: List[Finding]

class WrittenFileInfo(TypedDict, total=False):
    path: str
    size: int
    kept: bool  # a .ptd input left as it was (it would have been written byte for byte the same)

class ByteDifference(TypedDict):
    file: str
    offset: int
    region: str
    input_size: int
    output_size: int

class Identity(TypedDict):
    identical: bool
    differences: List[ByteDifference]

class WriteSummary(TypedDict, total=False):
    files: List[WrittenFileInfo]
    flatbuffer_size: int
    segments: int
    dedup_bytes_saved: int
    verified: bool
    config: Dict[str, Any]
    dry_run: bool  # present (True) for a dry run, which has only "files"

class RepackSummary(WriteSummary, total=False):
    input_reproducible: bool
    identity: Optional[Identity]

class ExtractedFileInfo(TypedDict):
    name: str
    size: int

class ExtractSummary(TypedDict, total=False):
    directory: str
    files: List[ExtractedFileInfo]
    reproduces_input: bool
    config: Dict[str, Any]
    dry_run: bool
    replaces: bool

class RegionChecksum(TypedDict, total=False):
    name: str
    offset: int
    size: int
    xxh3: str

class FileChecksums(TypedDict):
    name: str
    kind: Literal["pte", "ptd"]
    size: int
    regions: List[RegionChecksum]

class ChecksumResult(TypedDict):
    format: str
    version: int
    algorithm: str
    files: List[FileChecksums]
    valid: bool
    findings: List[Finding]

class DiffChange(TypedDict, total=False):
    category: str
    subject: str
    kind: str
    a: Any
    b: Any
    layout: bool
    plan: bool

class DiffResult(TypedDict):
    verdict: Literal["identical", "layout only", "memory plan only", "different"]
    content_changes: int
    plan_changes: int
    summary: Dict[str, Dict[str, int]]  # per category, how many changes of each kind
    a: Dict[str, Any]
    b: Dict[str, Any]
    changes: List[DiffChange]

def describe(
    path: StrPath,
    *,
    ptd: Sequence[StrPath] = ...,
    allow_legacy_ptd: bool = False,
) -> Dict[str, Any]:
    """The typed description of a .pte or .ptd file (ptepack::Describe): methods with every value,
    tensors with dtype, shape, location and planned offset, delegates, the memory plan, segments,
    named data. A .bpte raises ptepack.Error."""

def inspect(
    path: StrPath,
    *,
    ptd: Sequence[StrPath] = ...,
    allow_legacy_ptd: bool = False,
    segment_alignment: Optional[int] = None,
    tensor_alignment: Optional[int] = None,
) -> Dict[str, Any]:
    """The layout of a .pte, .ptd or .bpte file: what `ptepack inspect --json` prints ('valid' is
    verify's verdict: a legacy .ptd is valid only with allow_legacy_ptd=True)."""

def verify(
    path: StrPath,
    *,
    ptd: Sequence[StrPath] = ...,
    strict: bool = False,
    allow_legacy_ptd: bool = False,
    segment_alignment: Optional[int] = None,
    tensor_alignment: Optional[int] = None,
) -> VerifyResult:
    """Check a file as ExecuTorch's runtime would: what `ptepack verify --json` prints."""

def size(
    path: StrPath,
    *,
    ptd: Sequence[StrPath] = ...,
    top: int = 10,
    sort: Literal["bytes", "name"] = "bytes",
    allow_legacy_ptd: bool = False,
) -> Dict[str, Any]:
    """Where every byte goes, and runtime memory: what `ptepack size --json` prints."""

def diff(a: StrPath, b: StrPath, *, ptd_a: Sequence[StrPath] = ..., ptd_b: Sequence[StrPath] = ...) -> DiffResult:
    """What changed between two programs: what `ptepack diff --json` prints."""

def checksum(
    files: Union[StrPath, Sequence[StrPath]],
    *,
    ptd: Sequence[StrPath] = ...,
    write_manifest: Optional[StrPath] = None,
    manifest: Optional[StrPath] = None,
) -> ChecksumResult:
    """XXH3-64 checksums of every region, and manifests: what `ptepack checksum --json` prints."""

def repack(
    path: StrPath,
    output: StrPath,
    *,
    ptd: Sequence[StrPath] = ...,
    config: Optional[Dict[str, Any]] = None,
    upgrade_ptd: bool = False,
    force: bool = False,
    dry_run: bool = False,
    in_place: bool = False,
) -> RepackSummary:
    """Rewrite a program (config: ExecutorchBackendConfig fields): what `ptepack repack --json` prints."""

def split(
    path: StrPath,
    output: StrPath,
    *,
    external_constants: str,
    mutable_weights: bool = False,
    ptd: Sequence[StrPath] = ...,
    config: Optional[Dict[str, Any]] = None,
    force: bool = False,
    dry_run: bool = False,
    in_place: bool = False,
) -> WriteSummary:
    """Move constants into EXTERNAL_CONSTANTS.ptd beside the output: what `ptepack split --json` prints."""

def extract(
    path: StrPath, output: StrPath, *, ptd: Sequence[StrPath] = ..., force: bool = False, dry_run: bool = False
) -> ExtractSummary:
    """A program's parts as files in `output`: what `ptepack extract --json` prints."""

def pack(
    config: Union[StrPath, Dict[str, Any]], spec: StrPath, output: StrPath, *, force: bool = False, dry_run: bool = False
) -> WriteSummary:
    """Build a program from a pack spec: what `ptepack pack --json` prints."""

def plan(
    path: StrPath,
    *,
    ptd: Sequence[StrPath] = ...,
    algorithm: Literal["executorch-greedy", "best-fit", "exact", "best"] = "best",
    alignment: Optional[int] = None,
    output: Optional[StrPath] = None,
) -> Dict[str, Any]:
    """The memory plan per method and buffer (size now, lower bound, each planner's size, the peak):
    what `ptepack plan --json` prints; with `output`, also writes the program with only its plan
    changed, as `ptepack plan -o OUTPUT` does."""
