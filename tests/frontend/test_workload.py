"""Workload files: parameters with defaults and overrides, simulate() from Python."""

import json

import pytest

import npusim
from npusim.errors import UsageError
from tests.cli.test_run import npusim as run_cli

WORKLOAD = """
import npusim
tokens = npusim.param("tokens", 256, "tokens per step")
double_buffer = npusim.param("double_buffer", False)
scale = npusim.param("scale", 0.5)
"""


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "params.py"
    path.write_text(WORKLOAD)
    return path


def test_defaults_and_typed_overrides(workload):
    assert npusim.simulate("a2", workload, data=False).params == {"tokens": 256, "double_buffer": False, "scale": 0.5}
    result = npusim.simulate("a2", workload, params={"tokens": "1024", "double_buffer": "true", "scale": "2"})
    assert result.params == {"tokens": 1024, "double_buffer": True, "scale": 2.0}


def test_an_unknown_parameter_is_named_with_a_suggestion(workload):
    with pytest.raises(UsageError, match=r"no parameter 'token' \(did you mean 'tokens'\?\); its parameters: double_buffer, scale, tokens"):
        npusim.simulate("a2", workload, params=["token=3"])


def test_bad_values_and_forms_are_refused(workload):
    with pytest.raises(UsageError, match=r"parameter tokens='many': expected a int like its default 256"):
        npusim.simulate("a2", workload, params={"tokens": "many"})
    with pytest.raises(UsageError, match="write NAME=VALUE"):
        npusim.simulate("a2", workload, params=["tokens"])


def test_the_manifest_records_the_parameters(workload, tmp_path):
    run = run_cli("run", "-c", "a2", workload, "--param", "tokens=8", "--out", tmp_path / "o", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["params"] == {"tokens": 8, "double_buffer": False, "scale": 0.5}
    bad = run_cli("run", "-c", "a2", workload, "--param", "tokns=8", "--out", tmp_path / "o2", cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean 'tokens'" in bad.stderr  # found before simulating: nothing written
    assert not (tmp_path / "o2").exists() and "simulated" not in bad.stdout


def test_the_declarations_of_a_file_are_read_without_running_it(tmp_path):
    from npusim.frontend.workload import NOT_LITERAL, scan_declared_params

    path = tmp_path / "declares.py"
    path.write_text(
        "import npusim\nimport npusim as ns\nfrom npusim import param as p\n"
        "raise SystemExit('never run')\n"
        "a = npusim.param('tokens', 256, 'tokens per step')\n"
        "b = ns.param(name='shape', default=(8, 16))\n"
        "c = p('cores', npusim.current_session().config.spec.die.cores['aiv'].count)\n"
        "d = other.param('not_ours', 1)\n"
    )
    declared = scan_declared_params(path)
    assert declared.defaults == {"tokens": 256, "shape": (8, 16), "cores": NOT_LITERAL} and declared.complete
    path.write_text("import npusim\nfor name in ('a', 'b'):\n    npusim.param(name, 1)\n")
    assert scan_declared_params(path) == type(declared)({}, complete=False)
    path.write_text("import npusim\nnpusim.param('a', 1\n")
    with pytest.raises(UsageError, match=r"declares.py:2: syntax error"):
        scan_declared_params(path)


def test_without_overrides_the_file_is_parsed_once_and_not_scanned(tmp_path, monkeypatch):
    from npusim.frontend import workload as workload_module

    path = tmp_path / "declares.py"
    path.write_text("import npusim\nnpusim.param('a', 1)\n")
    source = workload_module.read_workload(path)
    monkeypatch.setattr(workload_module, "scan_declared_params", lambda source: pytest.fail("scanned without overrides"))
    workload_module.check_param_overrides(source, {})
    assert source.tree is source.tree and workload_module.has_main_block(source.tree) is False
    path.write_text("import npusim\nnpusim.param('a', 1\n")
    with pytest.raises(UsageError, match=r"declares.py:2: syntax error"):
        workload_module.check_param_overrides(workload_module.read_workload(path), {})


def test_an_unknown_parameter_is_its_own_kind_of_usage_error(workload):
    from npusim.errors import UnknownParameterError

    with pytest.raises(UnknownParameterError):
        npusim.simulate("a2", workload, params={"tokns": "1"})


def test_the_modules_of_its_folder_a_workload_imports_are_scanned_too(tmp_path):
    from npusim.frontend.workload import scan_declared_params

    (tmp_path / "scanned_helpers").mkdir()
    (tmp_path / "scanned_helpers" / "__init__.py").write_text("import npusim\nSEED = npusim.param('seed', 7)\n")
    (tmp_path / "scanned_helpers" / "tools.py").write_text("from npusim import param\ndef tiles():\n    return param('tiles', 4)\n")
    (tmp_path / "scanned_common.py").write_text("import npusim as ns\nimport scanned_main\ndef chunk():\n    return ns.param('chunk', 64)\n")
    main = tmp_path / "scanned_main.py"
    main.write_text("import npusim\nimport scanned_common, os\nfrom scanned_helpers import tools\nn = npusim.param('n', 2)\n")
    declared = scan_declared_params(main)  # the cycle back to scanned_main is read once; os is not the folder's
    assert declared.defaults == {"n": 2, "chunk": 64, "seed": 7, "tiles": 4} and declared.complete


@pytest.mark.parametrize(("module", "complete", "n"), [
    ("import npusim\ndef n():\n    return npusim.param('n', 3)\n", True, "not literal"),  # two defaults: the run tells which
    ("import npusim\ndef n(:\n", False, 2),  # a local module that does not parse: the run reports it
    ("from . import other\n", False, 2),  # a relative import: not resolved by the scan
    ("import npusim\nfor name in 'ab':\n    npusim.param(name, 1)\n", False, 2),  # a name that is an expression
])
def test_a_scan_through_local_modules_says_when_it_cannot_see_everything(tmp_path, module, complete, n):
    from npusim.frontend.workload import NOT_LITERAL, scan_declared_params

    (tmp_path / "partly_seen.py").write_text(module)
    main = tmp_path / "partly_main.py"
    main.write_text("import npusim\nfrom partly_seen import *\nn = npusim.param('n', 2)\n")
    declared = scan_declared_params(main)
    assert declared.complete is complete and declared.defaults["n"] == (NOT_LITERAL if n == "not literal" else n)


def test_a_parameter_declared_in_an_imported_module_is_checked_before_anything_runs(tmp_path):
    from npusim.errors import UnknownParameterError

    (tmp_path / "checked_sizes.py").write_text(
        "import pathlib\nimport npusim\npathlib.Path(__file__).with_name('ran').touch()\n"
        "def size():\n    return npusim.param('size', 8, 'elements per tile')\n")
    main = tmp_path / "checked_job.py"
    main.write_text("import checked_sizes\ndef main():\n    checked_sizes.size()\n")
    with pytest.raises(UnknownParameterError, match=r"no parameter 'sise' \(did you mean 'size'\?\)"):
        npusim.simulate("a2", main, data=False, params={"sise": "16"})
    with pytest.raises(UsageError, match=r"parameter size='big': expected a int like its default 8"):
        npusim.simulate("a2", main, data=False, params={"size": "big"})
    assert not (tmp_path / "ran").exists()  # both refused before the workload ran
    assert npusim.simulate("a2", main, data=False, params={"size": "16"}).params == {"size": 16}
    assert (tmp_path / "ran").exists()
    bad = run_cli("run", "-c", "a2", main, "--no-data", "--param", "sise=16", "--out", tmp_path / "o", cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean 'size'" in bad.stderr and "simulated" not in bad.stdout
    assert not (tmp_path / "o").exists()
