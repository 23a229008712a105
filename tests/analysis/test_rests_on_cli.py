"""``npusim run`` and ``npusim report`` say what a verdict rests on, end to end: a run whose critical
path rests on a low-confidence value marks its rows and names it (the seed's single-op torch_npu
example is host bound on host.op_launch [L]; the MoE dispatch and combine waits on the AICPU's
control reads [L]); a value given with --set is the user's and is not marked; the manifest records
every value's confidence."""

import json
import re
import textwrap

import pytest

from tests.analysis.test_report_cli import ROOT, npusim

pytest.importorskip("torch")

SINGLE_OP = textwrap.dedent('''
    """The single-op example of torch_npu.npu_quant_scatter_'s page (the seed, /work/shared/seeds/003)."""
    import numpy as np
    import torch
    import npusim.torch_npu as torch_npu

    data_var = np.random.uniform(0, 1, [24, 4096, 128]).astype(np.int8)
    data_indices = np.random.uniform(0, 1, [24]).astype(np.int32)
    data_updates = np.random.uniform(1, 2, [24, 1, 128]).astype(np.float16)
    data_scales = np.random.uniform(0, 1, [1, 1, 128]).astype(np.float16)
    data_zero_points = np.random.uniform(0, 1, [1, 1, 128]).astype(np.float16)
    var = torch.from_numpy(data_var).to(torch.int8).npu()
    indices = torch.from_numpy(data_indices).to(torch.int32).npu()
    updates = torch.from_numpy(data_updates).to(torch.bfloat16).npu()
    scales = torch.from_numpy(data_scales).to(torch.bfloat16).npu()
    zero_points = torch.from_numpy(data_zero_points).to(torch.bfloat16).npu()
    torch_npu.npu_quant_scatter_(var, indices, updates, scales, zero_points, axis=-2, quant_axis=-1, reduce="update")
    print(var.cpu()[0, 0, :4])
''')


@pytest.fixture(scope="module")
def host_bound(tmp_path_factory):
    folder = tmp_path_factory.mktemp("host_bound")
    (folder / "single_op.py").write_text(SINGLE_OP)
    run = npusim("run", "-c", "a2", "single_op.py", "--out", folder / "out", cwd=folder)
    assert run.returncode == 0, run.stderr
    return folder, run


def test_a_host_bound_run_says_it_rests_on_the_assumed_launch_cost(host_bound):
    folder, run = host_bound
    lines = run.stdout.splitlines()
    launch = next(i for i, line in enumerate(lines) if "│" in line and "launch on die0 host" in line)
    assert "rests on host.op_launch [L, knob]" in lines[launch + 1]  # the row's mark, on its second line
    note = " ".join(run.stdout.partition("note: ")[2].split())
    share = re.match(r"(\d+)% of the time rests on low-confidence values: host.op_launch = 20 us \[L, knob\] \((\d+)%; assumed: one eager", note)
    assert share and int(share[1]) > 80 and int(share[2]) > 60  # the shares move with the copies' timing; the launch cost dominates
    assert re.search(r"host.tiling = 5 us \[L, knob\] \(\d+%", note) and "npusim whatif" in note
    summary = json.loads((folder / "out" / "summary.json").read_text())
    top = summary["bottlenecks"]["breakdown"][0]
    assert (top["label"], top["mostly_on"], top["low_confidence"]) == ("launch on die0 host", "host.op_launch", True)
    assert [(e["key"], e["level"]) for e in top["rests_on"]] == [("host.op_launch", "L"), ("host.tiling", "L")]
    manifest = json.loads((folder / "out" / "manifest.json").read_text())
    assert manifest["config_confidence"]["host.op_launch"] == "L, knob" and manifest["config_confidence"]["die.clock"] == "H"
    report = npusim("report", folder / "out", cwd=folder)
    assert report.returncode == 0 and "rests on host.op_launch [L, knob]" in report.stdout and f"note: {share[1]}% of the time" in report.stdout


def test_a_value_given_with_set_is_the_users_and_not_marked(host_bound):
    folder, _ = host_bound
    run = npusim("run", "-c", "a2", "single_op.py", "--set", "host.op_launch=20us", "--set", "host.tiling=5us", "--out", folder / "given",
                 cwd=folder)
    assert run.returncode == 0, run.stderr
    assert "rests on host.op_launch" not in run.stdout and "note:" not in run.stdout  # the user vouches for both values
    assert "host.op_launch" in run.stdout and "[your value]" in run.stdout  # listed among what the time rests on, as the user's
    manifest = json.loads((folder / "given" / "manifest.json").read_text())
    assert manifest["config_confidence"]["host.op_launch"] == "user"
    summary = json.loads((folder / "given" / "summary.json").read_text())
    top = summary["bottlenecks"]["breakdown"][0]
    assert (top["mostly_on"], top["low_confidence"]) == ("host.op_launch", False)
    assert summary["bottlenecks"]["low_confidence_share"] < 0.05  # what is left: the kernel's own assumed costs (scalar reads ...)


def test_the_moe_dispatch_and_combine_rests_on_the_aicpus_control_reads(tmp_path):
    params = ["--param", "ranks=4", "--param", "batch=4", "--param", "hidden=256", "--param", "experts=8", "--param", "topk=2"]
    run = npusim("run", "-c", "a2", ROOT / "examples" / "moe_dispatch_combine.py", *params, "--out", tmp_path / "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    control = next(i for i, line in enumerate(lines) if "│" in line and "CONTROL on die" in line)
    assert "rests on die.aicpu.control_read [L, knob]" in lines[control + 1]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    schedule = next(row for row in summary["bottlenecks"]["breakdown"] if row["label"].startswith("SCHEDULE on"))
    assert "mostly_on" not in schedule and schedule["low_confidence"] and schedule["low_confidence_share"] > 0.5  # several L values, none half
    assert {entry["key"] for entry in schedule["rests_on"]} >= {"die.aicpu.dependency", "die.aicpu.completion"}
    scheduling = next(i for i, line in enumerate(lines) if "│" in line and "SCHEDULE on" in line)
    assert re.search(r"rests on die\.aicpu\.\w+ \[L, knob\] and \d more", lines[scheduling + 1])
    first = summary["bottlenecks"]["rests_on"][0]
    assert (first["key"], first["value"], first["confidence"], first["basis"]) == ("die.aicpu.control_read", "0.5 us", "L, knob", "assumed")
