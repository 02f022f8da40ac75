"""The Python module against the CLI's --json and real ExecuTorch files."""
import json
import os
import subprocess

import pytest

from conftest import CLI

ptepack = pytest.importorskip("ptepack")


def cli(*args):
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None


def without_paths(d):
    """A write summary with the file names only (the directories differ)."""
    d = dict(d)
    d["files"] = [{"path": os.path.basename(f["path"]), "size": f["size"]} for f in d["files"]]
    return d


@pytest.mark.parametrize("name,ptd", [("linear.pte", "linear.ptd"), ("xor.pte", "xor.ptd"),
                                      ("add.pte", None), ("keyword_spotting.pte", None),
                                      ("linear.ptd", None)])
def test_inspect_is_the_cli_json(fixture, name, ptd):
    ptds = [fixture(ptd)] if ptd else []
    got = ptepack.inspect(fixture(name), ptd=ptds)
    args = ["inspect", fixture(name), "--json"]
    for p in ptds:
        args += ["--ptd", p]
    _, want = cli(*args)
    assert got == want


def test_inspect_numbers_of_a_real_file(fixture):
    d = ptepack.inspect(fixture("linear.pte"), ptd=[fixture("linear.ptd")])
    # linear.pte keeps its weight and bias in linear.ptd (see the fixtures' SOURCES.md).
    keys = sorted(e["key"] for e in d["external_tensors"])
    assert len(keys) == 2
    assert all(e["ptd_entry"]["file"].endswith("linear.ptd") for e in d["external_tensors"])


def test_describe_types_a_real_file(fixture):
    # flatc --json of add.pte with ExecuTorch's schema: values 0..2 are FLOAT [1] tensors planned in
    # buffer 1 at memory_offset_low 0, 16, 32; non_const_buffer_sizes is [0, 48]; value 3 is an Int.
    d = ptepack.describe(fixture("add.pte"))
    assert d["format"] == "pte" and d["file_identifier"] == "ET12" and d["valid"] is True
    (m,) = d["methods"]
    assert m["name"] == "forward" and m["operators"] == ["aten::add.out"]
    tensors = [v["tensor"] for v in m["values"][:3]]
    assert [t["planned"]["offset"] for t in tensors] == [0, 16, 32]
    assert all(t["dtype"] == "FLOAT" and t["shape"] == [1] and t["location"] == "planned" for t in tensors)
    assert m["values"][3]["kind"] == "Int"
    assert m["memory_plan"] == [{"memory_id": 1, "size": 48, "tensors": [0, 1, 2]}]
    # linear.pte's weight lives in linear.ptd under "linear.weight" (extra_tensor_info EXTERNAL).
    w = ptepack.describe(fixture("linear.pte"))["methods"][0]["values"][0]["tensor"]
    assert (w["location"], w["key"], w["shape"]) == ("external", "linear.weight", [3, 3])
    with pytest.raises(ptepack.Error) as e:
        ptepack.describe(fixture("bundled_program.bpte"))
    assert e.value.code == "bpte-not-described"


@pytest.mark.parametrize("strict", [False, True])
def test_verify_is_the_cli_json(fixture, strict):
    args = ["verify", fixture("linear.pte"), "--json"] + (["--strict"] if strict else [])
    code, want = cli(*args)
    got = ptepack.verify(fixture("linear.pte"), strict=strict)
    assert got == want
    assert got["valid"] == (code == 0)
    # Without linear.ptd the external tensors are not checked: a warning,
    # which --strict turns into a failure.
    assert got["valid"] is (not strict)


@pytest.mark.parametrize("allow", [False, True])
def test_one_verdict_for_a_legacy_ptd(fixture, allow):
    # linear.ptd is in the FlatTensor layout of before June 2025, which current runtimes
    # reject: inspect and verify, here and in the CLI, say the same of it.
    flag = ["--allow-legacy-ptd"] if allow else []
    code, want = cli("verify", fixture("linear.ptd"), "--json", *flag)
    icode, iwant = cli("inspect", fixture("linear.ptd"), "--json", *flag)
    assert want["valid"] is allow and iwant["valid"] is allow
    assert code == icode == (0 if allow else 1)
    assert ptepack.verify(fixture("linear.ptd"), allow_legacy_ptd=allow)["valid"] is allow
    assert ptepack.inspect(fixture("linear.ptd"), allow_legacy_ptd=allow)["valid"] is allow


@pytest.mark.parametrize("value,text", [(100, "100"), (-1, "-1"), (0, "0"), (2**70, str(2**70)),
                                        (True, "True"), (64.0, "64.0"), ("64", "'64'")])
def test_numbers_go_through_the_cli_parser(fixture, value, text):
    # The CLI's message for the same text, with the keyword's name for the flag's.
    code, want = cli("verify", fixture("add.pte"), "--segment-alignment", text, "--json")
    assert code == 2 and want["error"]["code"] == "bad-number"
    for fn in (ptepack.verify, ptepack.inspect):
        with pytest.raises(ptepack.Error) as e:
            fn(fixture("add.pte"), segment_alignment=value)
        assert e.value.code == "bad-number"
        message = want["error"]["message"].replace("--segment-alignment", "segment_alignment")
        assert str(e.value) == f'error: {message} (found "{text}") [bad-number]'
    assert ptepack.verify(fixture("add.pte"), segment_alignment=64)["valid"] is True


def test_verify_of_a_corrupt_file_lists_located_findings(fixture, tmp_path):
    data = open(fixture("add.pte"), "rb").read()
    bad = tmp_path / "half.pte"
    bad.write_bytes(data[: len(data) // 2])
    r = ptepack.verify(str(bad))
    assert r["valid"] is False
    assert r["findings"] and r["findings"][0]["severity"] == "error"
    assert r["findings"][0]["file"] == str(bad)


def test_missing_file_raises_ptepack_error(tmp_path):
    with pytest.raises(ptepack.Error) as e:
        ptepack.verify(str(tmp_path / "nope.pte"))
    assert str(tmp_path / "nope.pte") in str(e.value)
    assert e.value.code


def test_repack_without_config_gives_back_the_same_bytes(fixture, tmp_path):
    out = tmp_path / "add.pte"
    r = ptepack.repack(fixture("add.pte"), str(out))
    assert out.read_bytes() == open(fixture("add.pte"), "rb").read()
    assert r["input_reproducible"] is True
    assert r["identity"] == {"identical": True, "differences": []}
    assert r["files"][0]["size"] == os.path.getsize(fixture("add.pte"))
    (tmp_path / "cli").mkdir()
    code, want = cli("repack", fixture("add.pte"), "-o", str(tmp_path / "cli" / "add.pte"), "--json", "-q")
    assert code == 0
    assert without_paths(r) == without_paths(want)


def test_repack_summary_is_the_cli_json(fixture, tmp_path):
    (tmp_path / "py").mkdir()
    (tmp_path / "cli").mkdir()
    got = ptepack.repack(fixture("conv2d_quantized.pte"), str(tmp_path / "py" / "c.pte"),
                         config={"segment_alignment": 4096, "emit_stacktrace": False})
    code, want = cli("repack", fixture("conv2d_quantized.pte"), "-o", str(tmp_path / "cli" / "c.pte"),
                     "--segment-alignment", "4096", "--emit-stacktrace", "false", "--json", "-q")
    assert code == 0
    assert without_paths(got) == without_paths(want)
    assert got["config"]["segment_alignment"] == 4096
    assert (tmp_path / "py" / "c.pte").read_bytes() == (tmp_path / "cli" / "c.pte").read_bytes()


def test_repack_of_a_program_without_its_ptd_raises_missing_ptd(fixture, tmp_path):
    with pytest.raises(ptepack.Error) as e:
        ptepack.repack(fixture("linear.pte"), str(tmp_path / "out.pte"))
    assert e.value.code == "missing-ptd"
    assert "--ptd" in str(e.value)
    assert not (tmp_path / "out.pte").exists()


def test_bad_config_field_is_named(fixture, tmp_path):
    with pytest.raises(ptepack.Error) as e:
        ptepack.repack(fixture("add.pte"), str(tmp_path / "o.pte"), config={"segment_alignment": 100})
    assert e.value.code == "bad-config"
    assert "segment_alignment" in str(e.value)


def test_split_is_the_cli_and_its_output_verifies(fixture, tmp_path):
    (tmp_path / "py").mkdir()
    (tmp_path / "cli").mkdir()
    got = ptepack.split(fixture("conv2d_quantized.pte"), str(tmp_path / "py" / "c.pte"),
                        external_constants="weights")
    code, want = cli("split", fixture("conv2d_quantized.pte"), "--external-constants", "weights",
                     "-o", str(tmp_path / "cli" / "c.pte"), "--json", "-q")
    assert code == 0
    assert without_paths(got) == without_paths(want)
    assert [os.path.basename(f["path"]) for f in got["files"]] == ["c.pte", "weights.ptd"]
    v = ptepack.verify(str(tmp_path / "py" / "c.pte"), ptd=[str(tmp_path / "py" / "weights.ptd")], strict=True)
    assert v["valid"] is True, v["findings"]
    assert (tmp_path / "py" / "weights.ptd").read_bytes() == (tmp_path / "cli" / "weights.ptd").read_bytes()


def test_dry_run_writes_nothing(fixture, tmp_path):
    r = ptepack.split(fixture("conv2d_quantized.pte"), str(tmp_path / "c.pte"), external_constants="w",
                      dry_run=True)
    assert r["dry_run"] is True
    assert [os.path.basename(f["path"]) for f in r["files"]] == ["c.pte", "w.ptd"]
    assert list(tmp_path.iterdir()) == []


def test_version():
    assert ptepack.__version__.count(".") == 2


def test_readme_python_examples_run_as_written(fixture, tmp_path, monkeypatch):
    """The README's Python examples: the `python3 -c` line in the fixtures' directory, and the
    python block where model.pte is conv2d_quantized.pte (a program with its constants inside,
    which split moves to weights.ptd)."""
    import re
    import shutil
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "README.md")).read()
    section = readme[readme.index("\n## Python\n"):]
    section = section[:section.index("\n## ", 1)]
    one_liner = re.search(r'python3 -c \\\n\s*"(.*)"', section).group(1)
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert one_liner and len(blocks) == 1
    monkeypatch.chdir(os.path.dirname(fixture("linear.pte")))
    exec(one_liner, {})
    shutil.copy(fixture("conv2d_quantized.pte"), tmp_path / "model.pte")
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(blocks[0], scope)
    assert scope["r"]["valid"] is True
    assert scope["s"]["valid"] is True
    # The keys were checked against weights.ptd; without it they are not.
    assert scope["s"]["not_checked"] == []
    assert ptepack.verify("small.pte")["not_checked"] != []
    assert (tmp_path / "aligned.pte").exists() and (tmp_path / "small.pte").exists()
    assert (tmp_path / "weights.ptd").exists()
    # The results are what they say: the parts add up to the file, the manifest was written
    # and the re-planned program says "memory plan only" (or is identical) against its input.
    size = os.path.getsize(tmp_path / "model.pte")
    assert sum(part["bytes"] for part in scope["z"]["parts"]) == size
    assert scope["d"]["valid"] is True and scope["c"]["valid"] is True
    assert (tmp_path / "model.json").exists()
    assert (tmp_path / "again.pte").read_bytes() == (tmp_path / "model.pte").read_bytes()
    assert ptepack.diff("model.pte", "smaller.pte")["verdict"] in ("identical", "memory plan only")
    # The section names, and its block calls, every function of the module.
    functions = sorted(n for n in dir(ptepack) if not n.startswith("_") and callable(getattr(ptepack, n))
                       and n != "Error")
    assert functions == sorted(["inspect", "describe", "verify", "size", "diff", "checksum", "repack", "split",
                                "extract", "pack", "plan"])
    for name in functions:
        assert f"ptepack.{name}(" in blocks[0], name
        assert f"`{name}`" in section, name


@pytest.mark.parametrize("name,ptd", [("xor.pte", "xor.ptd"), ("keyword_spotting.pte", None), ("add.pte", None)])
def test_plan_is_the_cli_json(fixture, name, ptd):
    ptds = [fixture(ptd)] if ptd else []
    got = ptepack.plan(fixture(name), ptd=ptds)
    args = ["plan", fixture(name), "--json"]
    for p in ptds:
        args += ["--ptd", p]
    code, want = cli(*args)
    assert code == 0
    assert got == want
    for algorithm in ("executorch-greedy", "best-fit"):
        code, want = cli(*args, "--algorithm", algorithm, "--alignment", "32")
        assert ptepack.plan(fixture(name), ptd=ptds, algorithm=algorithm, alignment=32) == want


def test_plan_writes_what_the_cli_writes(fixture, tmp_path):
    # xor.pte: ExecuTorch's planner gave 624 bytes (its non_const_buffer_sizes); best plans less.
    (tmp_path / "py").mkdir()
    (tmp_path / "cli").mkdir()
    got = ptepack.plan(fixture("xor.pte"), ptd=[fixture("xor.ptd")], output=str(tmp_path / "py" / "xor.pte"))
    code, want = cli("plan", fixture("xor.pte"), "--ptd", fixture("xor.ptd"), "-o", str(tmp_path / "cli" / "xor.pte"),
                     "--json")
    assert code == 0
    assert got["methods"] == want["methods"]
    assert got["methods"][0]["size_now"] == 624
    assert got["planned"] < 624
    assert got["written"]["verified"] is True and want["written"]["verified"] is True
    assert open(got["written"]["files"][0]["path"], "rb").read() == open(tmp_path / "cli" / "xor.pte", "rb").read()
    d = subprocess.run([CLI, "diff", fixture("xor.pte"), got["written"]["files"][0]["path"], "--ptd-a",
                        fixture("xor.ptd"), "--ptd-b", got["written"]["files"][1]["path"], "--json"],
                       capture_output=True, text=True)
    assert json.loads(d.stdout)["verdict"] == "memory plan only"


def test_plan_errors_are_the_clis(fixture):
    # --algorithm: a named choice; the keyword's name for the flag's.
    code, want = cli("plan", fixture("xor.pte"), "--algorithm", "fastest", "--json")
    assert code == 2 and want["error"]["code"] == "bad-choice"
    with pytest.raises(ptepack.Error) as e:
        ptepack.plan(fixture("xor.pte"), algorithm="fastest")
    assert e.value.code == "bad-choice"
    assert str(e.value) == "error: " + want["error"]["message"].replace("--algorithm", "algorithm") + \
        ' (found "fastest") [bad-choice]'


@pytest.mark.parametrize("value,text", [(24, "24"), (0, "0"), (-1, "-1"), (2**70, str(2**70)), (True, "True"),
                                        (32.0, "32.0"), ("32", "'32'")])
def test_plan_alignment_goes_through_the_cli_parser(fixture, value, text):
    # The number parser of every other option (item 6): the CLI's message for the same text.
    code, want = cli("plan", fixture("xor.pte"), "--alignment", text, "--json")
    assert code == 2 and want["error"]["code"] == "bad-number"
    with pytest.raises(ptepack.Error) as e:
        ptepack.plan(fixture("xor.pte"), alignment=value)
    assert e.value.code == "bad-number"
    message = want["error"]["message"].replace("--alignment", "alignment")
    assert str(e.value) == f'error: {message} (found "{text}") [bad-number]'
