"""Issue 24 item 20: every CLI command has its Python function, each giving what
the CLI prints with --json; .bpte files, pathlib.Path arguments, docstrings
and type stubs (ptepack.pyi) that match the module."""
import ast
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import CLI, ROOT

ptepack = pytest.importorskip("ptepack")


def cli(*args):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None


def without_paths(d):
    """A write summary with the file names only (the directories differ)."""
    d = dict(d)
    d["files"] = [dict(f, path=os.path.basename(f["path"])) for f in d["files"]]
    return d


# --- .bpte ---------------------------------------------------------------

def test_bpte_inspect_and_verify_are_the_cli(fixture):
    bpte = fixture("bundled_program.bpte")
    code, want = cli("verify", bpte, "--json")
    assert code == 0
    got = ptepack.verify(bpte)
    assert got == want
    assert got["valid"] is True and got["format"] == "bpte"
    _, want = cli("inspect", bpte, "--json")
    assert ptepack.inspect(bpte) == want


def test_bpte_verdicts_agree_with_strict(fixture):
    bpte = fixture("bundled_program.bpte")
    code, want = cli("verify", bpte, "--json", "--strict")
    assert ptepack.verify(bpte, strict=True) == want
    assert want["valid"] == (code == 0)


# --- pathlib.Path ----------------------------------------------------------

def test_path_objects_are_accepted_everywhere(fixture, tmp_path):
    pte, ptd = pathlib.Path(fixture("linear.pte")), pathlib.Path(fixture("linear.ptd"))
    assert ptepack.verify(pte, ptd=[ptd], allow_legacy_ptd=True)["valid"] is True
    assert ptepack.inspect(pte, ptd=[ptd]) == ptepack.inspect(str(pte), ptd=[str(ptd)])
    assert ptepack.size(pte, ptd=[ptd], allow_legacy_ptd=True) == ptepack.size(str(pte), ptd=[str(ptd)],
                                                                            allow_legacy_ptd=True)
    r = ptepack.repack(pte, tmp_path / "out.pte", ptd=[ptd])
    assert r["identity"]["identical"] is True
    assert (tmp_path / "out.pte").read_bytes() == pte.read_bytes()
    assert ptepack.checksum(tmp_path / "out.pte")["valid"] is True
    assert ptepack.diff(pte, tmp_path / "out.pte", ptd_a=[ptd], ptd_b=[tmp_path / "linear.ptd"])["verdict"] == \
        "identical"
    x = ptepack.extract(pte, tmp_path / "x", ptd=[ptd])
    (tmp_path / "p").mkdir()
    p = ptepack.pack(tmp_path / "x" / "config.json", tmp_path / "x" / "spec.json", tmp_path / "p" / "linear.pte")
    assert x["reproduces_input"] is True and p["verified"] is True
    assert (tmp_path / "p" / "linear.pte").read_bytes() == pte.read_bytes()
    assert (tmp_path / "p" / "linear.ptd").read_bytes() == ptd.read_bytes()


def test_extract_says_what_json_cannot_keep_as_the_cli_does(tmp_path):
    # A double that is a NaN with a payload (a fuzzer's find): JSON has one NaN.
    src = os.path.join(ROOT, "testdata", "regressions", "pte-nan-double-with-payload.pte")
    code, want = cli("extract", src, "-o", tmp_path / "cli", "--json")
    assert code == 0
    got = ptepack.extract(src, tmp_path / "py")
    assert want["reproduces_input"] is False
    assert "values[22].val.double_val is a NaN with bits 0xfffffe8e00000004" in want["note"]
    assert dict(got, directory=None) == dict(want, directory=None)
    index = json.loads((tmp_path / "py" / "index.json").read_text())
    assert index["note"] == want["note"] and index["reproduces_input"] is False


def test_a_bad_path_type_is_a_type_error():
    with pytest.raises(TypeError):
        ptepack.verify(42)


# --- size ------------------------------------------------------------------

# linear.ptd is in the FlatTensor layout of before June 2025: size takes it, as verify
# does, only when told to (allow_legacy_ptd / --allow-legacy-ptd).
@pytest.mark.parametrize("name,ptd,top,sort", [("add.pte", None, 10, "bytes"),
                                               ("stories260k_qnn.pte", None, 3, "name"),
                                               ("linear.pte", "linear.ptd", 10, "bytes"),
                                               ("linear.ptd", None, 5, "bytes")])
def test_size_is_the_cli_json(fixture, name, ptd, top, sort):
    args = ["size", fixture(name), "--json", "--top", str(top), "--sort", sort]
    ptds = []
    if ptd:
        ptds = [fixture(ptd)]
        args += ["--ptd", ptds[0]]
    legacy = "linear" in name
    if legacy:
        args.append("--allow-legacy-ptd")
    code, want = cli(*args)
    assert code == 0
    got = ptepack.size(fixture(name), ptd=ptds, top=top, sort=sort, allow_legacy_ptd=legacy)
    assert got == want
    assert sum(p["bytes"] for p in got["parts"]) == os.path.getsize(fixture(name))


def test_size_of_a_file_with_errors_raises(fixture, tmp_path):
    data = open(fixture("add.pte"), "rb").read()
    bad = tmp_path / "bad.pte"
    bad.write_bytes(data[: len(data) - 8])
    code, _ = cli("size", bad, "--json")
    assert code != 0
    with pytest.raises(ptepack.Error) as e:
        ptepack.size(bad)
    assert e.value.file == str(bad)


def test_size_of_a_legacy_ptd_is_verifys_verdict(fixture):
    code, want = cli("size", fixture("linear.ptd"), "--json")
    assert code == 2 and want["error"]["code"] == "legacy-format"
    with pytest.raises(ptepack.Error) as e:
        ptepack.size(fixture("linear.ptd"))
    assert e.value.code == "legacy-format" and e.value.file == fixture("linear.ptd")
    assert e.value.offset == want["error"].get("offset")
    with pytest.raises(ptepack.Error) as e:
        ptepack.size(fixture("linear.pte"), ptd=[fixture("linear.ptd")])
    assert e.value.code == "legacy-format"


def test_size_sort_is_checked(fixture):
    code, want = cli("size", fixture("add.pte"), "--sort", "largest", "--json")
    assert code == 2 and want["error"]["code"] == "bad-choice"
    with pytest.raises(ptepack.Error) as e:
        ptepack.size(fixture("add.pte"), sort="largest")
    assert e.value.code == "bad-choice"
    assert str(e.value) == "error: " + want["error"]["message"].replace("--sort", "sort") + ' (found "largest") [bad-choice]'


@pytest.mark.parametrize("value,text", [(-1, "-1"), (1000001, "1000001"), (2**70, str(2**70)), (True, "True"),
                                        (3.0, "3.0")])
def test_size_top_goes_through_the_cli_parser(fixture, value, text):
    code, want = cli("size", fixture("add.pte"), "--top", text, "--json")
    assert code == 2 and want["error"]["code"] == "bad-number"
    with pytest.raises(ptepack.Error) as e:
        ptepack.size(fixture("add.pte"), top=value)
    assert e.value.code == "bad-number"
    assert str(e.value) == "error: " + want["error"]["message"].replace("--top", "top") + f' (found "{text}") [bad-number]'


# --- diff ------------------------------------------------------------------

def test_diff_is_the_cli_json(fixture, tmp_path):
    conv = fixture("conv2d_quantized.pte")
    aligned = tmp_path / "aligned.pte"
    ptepack.repack(conv, aligned, config={"segment_alignment": 4096})
    for a, b, verdict, exit_code in [(conv, conv, "identical", 0),
                                     (conv, str(aligned), "layout only", 0),
                                     (conv, fixture("add.pte"), "different", 1)]:
        code, want = cli("diff", a, b, "--json")
        assert code == exit_code
        got = ptepack.diff(a, b)
        assert got == want
        assert got["verdict"] == verdict


def test_diff_with_ptd_files_is_the_cli_json(fixture):
    pte, ptd = fixture("linear.pte"), fixture("linear.ptd")
    code, want = cli("diff", pte, pte, "--ptd-a", ptd, "--json")
    assert ptepack.diff(pte, pte, ptd_a=[ptd]) == want


# --- checksum --------------------------------------------------------------

def test_checksum_is_the_cli_json(fixture, tmp_path):
    files = [fixture("add.pte"), fixture("linear.pte"), fixture("linear.ptd")]
    code, want = cli("checksum", *files, "--json")
    assert code == 0
    assert ptepack.checksum(files) == want
    assert ptepack.checksum(files[:2], ptd=[files[2]]) == want
    code, want = cli("checksum", files[0], "--json")
    assert ptepack.checksum(files[0]) == want


def test_checksum_manifest_round_trip_and_renamed_copy(fixture, tmp_path):
    m = tmp_path / "m.json"
    r = ptepack.checksum(fixture("add.pte"), write_manifest=m)
    assert r["valid"] is True and m.exists()
    copy = tmp_path / "renamed.pte"
    shutil.copyfile(fixture("add.pte"), copy)
    code, want = cli("checksum", copy, "--manifest", m, "--json")
    got = ptepack.checksum(copy, manifest=m)
    assert got == want
    assert got["valid"] is True and code == 0


# --- extract and pack ------------------------------------------------------

def test_extract_is_the_cli_json(fixture, tmp_path):
    code, want = cli("extract", fixture("linear.pte"), "--ptd", fixture("linear.ptd"), "-o", tmp_path / "cli",
                     "--json")
    assert code == 0
    got = ptepack.extract(fixture("linear.pte"), str(tmp_path / "py"), ptd=[fixture("linear.ptd")])
    assert got["directory"] == str(tmp_path / "py") and want["directory"] == str(tmp_path / "cli")
    got["directory"] = want["directory"] = ""
    assert got == want
    assert sorted(os.listdir(tmp_path / "py")) == sorted(f["name"] for f in got["files"])
    for f in got["files"]:
        assert (tmp_path / "py" / f["name"]).read_bytes() == (tmp_path / "cli" / f["name"]).read_bytes()


def test_extract_dry_run_writes_nothing(fixture, tmp_path):
    r = ptepack.extract(fixture("add.pte"), tmp_path / "x", dry_run=True)
    assert r["dry_run"] is True and r["replaces"] is False
    assert not (tmp_path / "x").exists()


def test_pack_is_the_cli_json(fixture, tmp_path):
    ptepack.extract(fixture("conv2d_quantized.pte"), tmp_path / "x")
    cfg, spec = tmp_path / "x" / "config.json", tmp_path / "x" / "spec.json"
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    code, want = cli("pack", cfg, spec, "-o", tmp_path / "cli" / "c.pte", "--json", "-q")
    assert code == 0
    got = ptepack.pack(cfg, spec, tmp_path / "py" / "c.pte")
    assert without_paths(got) == without_paths(want)
    assert (tmp_path / "py" / "c.pte").read_bytes() == open(fixture("conv2d_quantized.pte"), "rb").read()
    # The config as a dict: the same bytes.
    got = ptepack.pack(json.loads(cfg.read_text()), spec, tmp_path / "py" / "d.pte")
    assert (tmp_path / "py" / "d.pte").read_bytes() == (tmp_path / "py" / "c.pte").read_bytes()


def test_pack_bad_config_names_the_field(fixture, tmp_path):
    ptepack.extract(fixture("add.pte"), tmp_path / "x")
    with pytest.raises(ptepack.Error) as e:
        ptepack.pack({"segment_alignment": "big"}, tmp_path / "x" / "spec.json", tmp_path / "o.pte")
    assert e.value.code == "bad-config"
    assert "segment_alignment" in str(e.value)
    assert not (tmp_path / "o.pte").exists()


# --- docstrings and stubs --------------------------------------------------

PUBLIC = ["inspect", "verify", "size", "diff", "checksum", "repack", "split", "extract", "pack"]


def test_every_function_and_error_has_a_docstring():
    assert ptepack.__doc__
    for name in PUBLIC:
        doc = getattr(ptepack, name).__doc__
        assert doc and "--json" in doc, name
    assert "code" in ptepack.Error.__doc__ and "offset" in ptepack.Error.__doc__


def stub_path():
    return os.path.join(os.path.dirname(ptepack.__file__), "ptepack.pyi")


def test_stubs_sit_beside_the_module_and_match_it():
    path = stub_path()
    assert os.path.exists(path), "ptepack.pyi is not installed beside the module"
    tree = ast.parse(open(path).read())
    stubs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "Error" in classes
    module_functions = sorted(n for n in dir(ptepack) if not n.startswith("_") and callable(getattr(ptepack, n))
                              and n != "Error")
    assert sorted(stubs) == module_functions
    for name, fn in stubs.items():
        want = [a.arg for a in fn.args.args] + ["*"] + [a.arg for a in fn.args.kwonlyargs]
        # pybind11's first docstring line: "name(a: T, b: T, *, c: T = ...) -> object".
        first = getattr(ptepack, name).__doc__.splitlines()[0]
        params = re.match(r"\w+\((.*)\) ->", first).group(1)
        got, depth, current = [], 0, ""
        for ch in params + ",":
            depth += ch == "["
            depth -= ch == "]"
            if ch == "," and depth == 0:
                p = current.strip()
                got.append("*" if p == "*" else p.split(":")[0])
                current = ""
            else:
                current += ch
        if "*" not in got:
            got.append("*")
        assert got == want, name
