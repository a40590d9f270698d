"""The configuration layers travel with the package: the same command resolves the same run from any
folder; a user's ./configs or --config-dir adds to them; packaged files go by their names. And the
first hour's slips: names that are paths, tiny datasets, --version, messages naming what a user has."""

import json
import re
from pathlib import Path

import pytest

from recrunner import ConfigError, Experiment, prepare
from recrunner.cli.arguments import build_parser, workspace_of
from recrunner.config.layers import config_file, default_config_dir, layer_folders, packaged_config_dir

from .conftest import REPO, run_cli

PLACES = {"data_path", "checkpoint_dir", "config_files"}


def _resolved(model, dataset, folder, monkeypatch, data_path):
    monkeypatch.chdir(folder)
    args = build_parser().parse_args(["--model", model, "--dataset", dataset, "--output", "/tmp/unused-runs",
                                      "--data-path", str(data_path)])
    prepared = prepare(Experiment(model, dataset), workspace_of(args))
    config = {k: str(v) for k, v in prepared.config.final_config_dict.items() if k not in PLACES}
    return config, prepared.run_id, prepared.fingerprint


@pytest.mark.parametrize("dataset", ["ml-100k", "ml-1m"])
def test_the_main_job_resolves_the_same_from_the_checkout_and_from_any_folder(dataset, tmp_path, monkeypatch):
    data_path = REPO.parent / "shared" / "datasets"
    if dataset == "ml-1m" and not (data_path / "ml-1m" / "ml-1m.inter").is_file():
        pytest.skip("ml-1m is not in ../shared/datasets")
    elsewhere = tmp_path / "newcomer"
    elsewhere.mkdir()
    in_checkout = _resolved("SASRec", dataset, REPO, monkeypatch, data_path)
    outside = _resolved("SASRec", dataset, elsewhere, monkeypatch, data_path)
    assert outside == in_checkout
    config = in_checkout[0]
    assert "'distribution': 'none'" in config["train_neg_sample_args"] and config["loss_type"] == "CE"  # base.yaml read
    if dataset == "ml-1m":
        assert config["item_inter_num_interval"] == "[5,inf)"  # datasets/ml-1m.yaml was read


def test_the_packaged_layers_are_the_checkout_s_configs():
    assert packaged_config_dir().resolve() == (REPO / "configs").resolve()
    assert (packaged_config_dir() / "base.yaml").is_file() and packaged_config_dir().parent.name == "recrunner"
    assert layer_folders(REPO / "configs") == [packaged_config_dir()]  # ./configs in a checkout: one folder


def test_a_user_folder_adds_to_and_overrides_the_packaged_layers(tmp_path, monkeypatch, workspace):
    (tmp_path / "configs" / "models").mkdir(parents=True)
    (tmp_path / "configs" / "models" / "SASRec.yaml").write_text("hidden_size: 24\n")
    monkeypatch.chdir(tmp_path)
    assert default_config_dir() == (tmp_path / "configs").resolve()
    from recrunner import Workspace

    prepared = prepare(Experiment("SASRec", "ml-100k"),
                       Workspace(workspace.output_dir, workspace.data_path, default_config_dir()))
    assert prepared.config["hidden_size"] == 24  # the user's model layer
    assert prepared.config["train_neg_sample_args"]["distribution"] == "none"  # and still the packaged base.yaml


def test_packaged_config_files_and_grids_go_by_their_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    packaged = packaged_config_dir()
    assert config_file("quick.yaml") == packaged / "quick.yaml"
    assert config_file("protocols/global-temporal") == packaged / "protocols" / "global-temporal.yaml"
    assert config_file("configs/grids/smoke.yaml") == packaged / "grids" / "smoke.yaml"
    (tmp_path / "quick.yaml").write_text("epochs: 1\n")
    assert config_file("quick.yaml") == Path("quick.yaml")  # a file here is the user's
    assert config_file("smoke", under="grids") == config_file("smoke.yaml", under="grids") == packaged / "grids" / "smoke.yaml"
    with pytest.raises(ConfigError, match=r"^config file not found: nothing.yaml; packaged: "
                                          r"protocols/global-temporal.yaml, protocols/implicit-feedback.yaml, quick.yaml$"):
        config_file("nothing.yaml")
    with pytest.raises(ConfigError, match=r"^grid file not found: nothing; packaged: grids/general-classic.yaml, .*grids/smoke.yaml$"):
        config_file("nothing", under="grids")


def test_the_first_log_lines_say_which_folders_were_read(base_args, capsys, tmp_path):
    code, _, _ = run_cli(capsys, [*base_args, "--model", "Pop", "--set", "epochs=1", "--quiet"])
    assert code == 0
    log = next((tmp_path / "runs").rglob("run.log")).read_text().splitlines()
    assert log[1].endswith(f"configuration layers read from: {packaged_config_dir().resolve()}")
    assert sum("Loading model parameters" in line for line in log) == 1  # the test's; validation's reuses them
    record = json.loads(next((tmp_path / "runs").rglob("metrics.json")).read_text())
    assert record["provenance"]["config_layers"] == [str(packaged_config_dir().resolve())]


@pytest.mark.parametrize("flag, value", [("--name", "../../escape"), ("--dataset", "../../etc"), ("--model", "../SASRec"),
                                         ("--name", "/tmp/abs"), ("--dataset", "..")])
def test_a_name_that_is_a_path_is_one_line_and_writes_nothing(flag, value, base_args, capsys, tmp_path):
    code, out, err = run_cli(capsys, [*base_args, flag, value])
    assert code == 2 and "Traceback" not in err
    assert f"{flag} {value!r}: use letters, digits" in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "escape").exists()


def test_the_library_refuses_a_sweep_name_that_is_a_path(workspace):
    for sweep in ("../out", "a/../../out", "a/b"):
        with pytest.raises(ConfigError, match=f"sweep '{re.escape(sweep)}': use letters"):
            prepare(Experiment("Pop", "ml-100k", sweep=sweep), workspace)
    for sweep in ("a/final", "a/select"):  # a search's final seeds and a race's seed runs live there
        assert prepare(Experiment("Pop", "ml-100k", sweep=sweep), workspace).paths.run_dir.parts[-4] in ("final", "select")


def test_a_dataset_too_small_to_split_is_one_line_and_exit_2_in_a_run(base_args, capsys, tmp_path):
    folder = tmp_path / "data" / "three"
    folder.mkdir(parents=True)
    rows = "".join(f"{u}\t{i}\t{t}\n" for t, (u, i) in enumerate([(1, 1), (1, 2), (2, 1), (2, 3), (3, 2), (3, 3)]))
    (folder / "three.inter").write_text("user_id:token\titem_id:token\ttimestamp:float\n" + rows)
    for extra in ([], ["--set", "data_cache=false"]):
        code, out, err = run_cli(capsys, [*base_args, "--model", "BPR", "--dataset", "three", "--restart", *extra])
        assert code == 2, out + err
        assert "three: the split" in out and "leaves the valid part empty" in out and "Traceback" not in out + err
    assert "Traceback" not in next((tmp_path / "runs").rglob("run.log")).read_text()


def test_version_names_recrunner_recbole_torch_and_python(capsys):
    import platform

    import recbole
    import torch

    code, out, _ = run_cli(capsys, ["--version"])
    assert code == 0
    assert out.strip() == (f"recrunner 0.1.0 (RecBole {recbole.__version__}, torch {torch.__version__}, "
                           f"Python {platform.python_version()})")


def test_a_dry_run_of_one_cell_says_one_cell(base_args, capsys):
    code, out, _ = run_cli(capsys, [*base_args, "--model", "Pop", "--dry-run"])
    assert code == 0 and ": 1 cell ->" in out


def test_the_compiler_s_reason_is_kept():
    from recrunner.training.fast.compiler import compiler_reason

    class BackendCompilerFailed(Exception):
        pass

    inner = RuntimeError("aten::scaled_dot_product_attention() Expected a value of type 'Optional[float]'")
    wrapped = BackendCompilerFailed("backend='inductor' raised:\nRuntimeError: aten::scaled_dot_product_attention()")
    wrapped.inner_exception = inner
    assert compiler_reason(wrapped) == ("BackendCompilerFailed: backend='inductor' raised: RuntimeError: "
                                        "aten::scaled_dot_product_attention() Expected a value of type 'Optional[float]'")
    assert compiler_reason(RuntimeError("raised:\nthe reason")) == "RuntimeError: raised: the reason"


def test_messages_name_documentation_pages_by_the_titles_readers_see():
    import yaml

    from recrunner.core.docs import PAGES

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    titles = {}
    for section in nav:
        for title, target in section.items():
            for entry in target if isinstance(target, list) else [{title: target}]:
                titles.update({Path(file).stem: name for name, file in entry.items()})
    assert {name: titles.get(name) for name in PAGES} == PAGES
