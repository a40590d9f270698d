"""Searches: spaces in grid files, Optuna's samplers and pruners, pruned trials everywhere,
final seeds chosen on validation, equal budgets, and a kill-and-rerun that loses nothing."""

import csv
import json
import subprocess
import sys
import time

import pytest
import yaml

from recrunner.core.errors import ConfigError
from recrunner.sweep import space
from recrunner.report.budget import budget_lines, budgets, unequal
from tests.conftest import REPO, read_hparams, run_cli, run_cli_until_killed

optuna = pytest.importorskip("optuna")

TINY = {"embedding_size": 8, "user_inter_num_interval": "[10,60]", "epochs": 3}


def _grid(tmp_path, **settings) -> str:
    grid = {"name": "tune", "models": ["BPR"], "datasets": ["ml-100k"],
            "params": {"learning_rate": {"loguniform": [1e-5, 0.3]}, "embedding_size": [4, 8]},
            "fixed": {"user_inter_num_interval": "[10,60]", "epochs": 3}, **settings}
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(grid))
    return str(path)


def _study(sweep_dir):
    from recrunner.training.callbacks.pruning import storage_of

    return optuna.load_study(study_name="ml-100k/BPR", storage=storage_of(str(sweep_dir / "search" / "study.journal")))


def test_spaces_parse_and_refuse_what_cannot_be_sampled():
    assert space.parse("lr", {"loguniform": [1e-4, 1e-2]}).describe() == "loguniform [0.0001, 0.01]"
    assert space.parse("h", {"int": [16, 64], "step": 16}).describe() == "int [16, 64], step 16"
    assert space.parse("n", [1, 2]) == space.Distribution("choice", choices=(1, 2))
    assert not space.is_distribution({"split": {"LS": "valid_and_test"}, "order": "TO"})  # eval_args stays fixed
    fixed, searched = space.split({"epochs": 5, "eval_args": {"order": "TO"}, "dropout_prob": {"uniform": [0, 0.5]}})
    assert fixed == {"epochs": 5, "eval_args": {"order": "TO"}} and list(searched) == ["dropout_prob"]
    for value, message in [({"loguniform": [0, 1]}, "needs a positive low bound"),
                           ({"int": [1, 8], "log": True, "step": 2}, "step or log, not both"),
                           ({"uniform": [1, 1]}, "needs low < high"), ({"int": [1.5, 4]}, "whole-number bounds"),
                           ({"choice": []}, "non-empty list"), ({"uniform": [0, 1], "base": 2}, "unknown option(s) base"),
                           ({"loguniform": [1e-4, 1e-2], "uniform": [0, 1]}, "give one distribution")]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            space.parse("x", value)


@pytest.mark.parametrize("params, message", [
    ({"learning_rate": {"loguniform": [0, 0.1]}}, "learning_rate: loguniform needs a positive low bound"),
    ({"learning_rate": {"normal": [0, 1]}}, "learning_rate: unknown distribution 'normal'; distributions: loguniform"),
    ({"n_layers": {"int": [1, 3]}}, "unknown config key 'n_layers'"),  # BPR has no n_layers
])
def test_bad_spaces_are_one_line_usage_errors(tmp_path, capsys, base_args, params, message):
    grid = tmp_path / "bad.yaml"
    grid.write_text(yaml.safe_dump({"models": ["BPR"], "datasets": ["ml-100k"], "params": params,
                                    "search": "tpe", "trials": 2}))
    code, out, err = run_cli(capsys, ["--grid", str(grid), *base_args])
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_distribution_without_a_search_is_a_usage_error(tmp_path, capsys, base_args):
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"models": ["BPR"], "datasets": ["ml-100k"],
                                    "params": {"learning_rate": {"loguniform": [1e-4, 1e-2]}}}))
    code, _, err = run_cli(capsys, ["--grid", str(grid), *base_args])
    assert code == 2 and "add --search tpe" in err
    code, _, err = run_cli(capsys, ["--model", "BPR", "--trials", "3", *base_args])
    assert code == 2 and "belong to a search" in err


def test_dry_run_shows_the_space_and_the_budget(tmp_path, capsys, base_args):
    code, out, _ = run_cli(capsys, ["--grid", _grid(tmp_path), "--search", "random", "--trials", "7",
                                    "--prune", "asha", *base_args, "--dry-run"])
    assert code == 0
    assert "search: random, 7 trials per model and dataset, pruning asha after 5 epochs, final seeds off" in out
    assert "ml-100k/BPR: embedding_size choice [4, 8], learning_rate loguniform [1e-05, 0.3]" in out
    assert not (tmp_path / "runs" / "tune").exists()  # a dry run writes nothing


@pytest.mark.parametrize("method, pruner", [("random", "asha"), ("tpe", "median")])
def test_a_search_with_pruning_runs_to_completion(tmp_path, capsys, base_args, method, pruner):
    code, out, err = run_cli(capsys, ["--grid", _grid(tmp_path), "--search", method, "--trials", "6",
                                      "--prune", pruner, "--prune-after", "1", *base_args])
    assert code == 0, out + err
    sweep = tmp_path / "runs" / "tune"
    trials = _study(sweep).trials
    assert len(trials) == 6 and all(t.state.is_finished() for t in trials)
    states = [t.state.name for t in trials]
    assert "COMPLETE" in states and "PRUNED" in states, states

    rows = list(csv.DictReader(open(sweep / "results.csv")))
    assert len(rows) == 6 and {r["status"] for r in rows} == {"ok", "pruned"}
    pruned = [r for r in rows if r["status"] == "pruned"]
    assert len(pruned) == states.count("PRUNED")
    assert all(f"by the {pruner} pruner" in r["error"] for r in pruned)
    run_dir = sweep / pruned[0]["cell"]
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "pruned" and record["test"] == {} and record["search"]["role"] == "trial"
    assert "pruned at epoch" in record["error"]
    lines = [json.loads(line) for line in (sweep / "sweep.jsonl").read_text().splitlines()]
    assert {line["cell"] for line in lines if line["state"] == "pruned"} == {r["cell"] for r in pruned}
    hparams = read_hparams(run_dir)
    assert hparams["hparams"]["status"] == "pruned" and hparams["status"] == "STATUS_SUCCESS"
    assert out.count("pruned  BPR on ml-100k") == len(pruned)
    assert f"{len(pruned)} pruned" in out.splitlines()[-1]

    assert run_cli(capsys, ["report", str(sweep)])[0] == 0
    report = (sweep / "report" / "report.md").read_text()
    assert f"| BPR | ml-100k | 6 | {len(pruned)} | 0 | 3 |" in report  # trials, pruned, selection runs, epoch cap


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_configuration_drawn_again_is_not_trained_again_and_the_search_goes_on(tmp_path, capsys, base_args,
                                                                                 workers):
    grid = _grid(tmp_path, params={"embedding_size": [4, 8]})  # 2 configurations, 5 trials: 3 or more repeats
    code, out, err = run_cli(capsys, ["--grid", grid, "--search", "tpe", "--trials", "5", "--final-seeds", "1",
                                      "--workers", workers, *base_args])
    assert code == 0, out + err
    sweep = tmp_path / "runs" / "tune"
    trials = _study(sweep).trials
    assert len(trials) == 5 and {t.state.name for t in trials} == {"COMPLETE"}  # none left running, none lost
    records = [json.loads(p.read_text()) for p in sweep.glob("ml-100k/BPR/*/metrics.json")]
    score = {r["params"]["embedding_size"]: r["best_valid_score"] for r in records}
    assert len(records) == len(score)  # one run per configuration
    assert all(t.value == score[t.params["embedding_size"]] for t in trials)
    assert len(list(sweep.glob("final/**/metrics.json"))) == 1  # the search reached its final seeds
    assert f"{5 - len(records)} trials drew a configuration already run (told its score)" in out
    # the budget counts the 5 trials asked, not the runs they drew: a repeat is not less tuning
    assert f"| BPR | ml-100k | 5 ({len(records)} distinct) | 0 | 0 | 3 |" in (sweep / "results.md").read_text()


def test_a_configuration_drawn_twice_at_once_is_trained_once_and_tells_both_trials(tmp_path, capsys, base_args):
    # one configuration, two workers: the first ask gives two trials of the same cell at once
    grid = _grid(tmp_path, params={"embedding_size": [4]})
    code, out, err = run_cli(capsys, ["--grid", grid, "--search", "random", "--trials", "3", "--workers", "2",
                                      *base_args])
    assert code == 0, out + err
    assert "done: 1 ok, 0 failed, 0 skipped, 2 trials drew a configuration already run" in out
    assert "running elsewhere" not in out  # no worker sent to it twice
    sweep = tmp_path / "runs" / "tune"
    (run_dir,) = [p.parent for p in sweep.glob("ml-100k/BPR/*/metrics.json")]
    log = (run_dir / "run.log").read_text()
    assert log.count("trainable parameters, device") == 1  # trained once, not by two workers at a time
    trials = _study(sweep).trials
    score = json.loads((run_dir / "metrics.json").read_text())["best_valid_score"]
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3 and all(t.value == score for t in trials)


def test_final_seeds_repeat_the_configuration_best_on_validation(tmp_path, capsys, base_args):
    code, out, err = run_cli(capsys, ["--grid", _grid(tmp_path), "--search", "random", "--trials", "4",
                                      "--final-seeds", "2", *base_args])
    assert code == 0, out + err
    sweep = tmp_path / "runs" / "tune"
    records = [json.loads(p.read_text()) for p in sweep.rglob("metrics.json")]
    trials = [r for r in records if r["search"]["role"] == "trial" and r["status"] == "ok"]
    finals = [r for r in records if r["search"]["role"] == "final"]
    best = max(trials, key=lambda r: r["best_valid_score"])  # mrr@10: bigger is better
    assert len(finals) == 2 and {r["seed"] for r in finals} == {2020, 2021}
    for final in finals:
        assert {k: final["params"][k] for k in ("learning_rate", "embedding_size")} == \
            {k: best["params"][k] for k in ("learning_rate", "embedding_size")}
        assert final["search"]["trial"] == best["search"]["trial"]
    by_test = max(trials, key=lambda r: r["test"]["mrr@10"])
    if by_test is not best:  # where validation and test disagree, validation decides
        assert finals[0]["params"]["learning_rate"] != by_test["params"]["learning_rate"]
    assert "(n=2)" in (sweep / "results.md").read_text()  # the tables are the final seeds, not the trials


def test_a_model_with_less_tuning_is_named():
    rows = [{"model": "SASRec", "dataset": "d", "status": "ok", "role": "trial", "epochs_trained": 5, "max_epochs": 50,
             "seconds": 10.0}] * 3 + [{"model": "BPR", "dataset": "d", "status": "ok", "role": None,
                                       "epochs_trained": 20, "max_epochs": 20, "seconds": 1.0}]
    found = budgets(rows)
    assert found[("SASRec", "d")] == {"trials": 3, "pruned": 0, "selection": 0, "runs": 3, "first": 0, "max_epochs": 50,
                                      "epochs": 15, "seconds": 30.0, "one_pass": False, "untunable": False}
    assert unequal(found) == ["BPR on d got its defaults or a hand-made grid (no search) while SASRec got 3 trials: "
                              "the comparison favours the better-tuned model; give every model the same --trials"]


def test_a_search_is_counted_by_its_trials_asked_not_by_the_runs_they_drew():
    """Two configurations, four trials: two trials are told an earlier run's score and add no run. BPR got the
    same trials as NeuMF, whose space is continuous; the table says how many configurations they were."""
    def row(model, lr):
        return {"model": model, "dataset": "d", "status": "ok", "role": "trial", "epochs_trained": 3, "max_epochs": 3,
                "seconds": 1.0, "params": {"learning_rate": lr}}

    rows = [row("BPR", 0.01), row("BPR", 0.001)] + [row("NeuMF", lr) for lr in (0.01, 0.002, 0.003, 0.004)]
    asked = {("BPR", "d"): {"asked": 4, "configurations": 2}, ("NeuMF", "d"): {"asked": 4, "configurations": 4}}
    assert unequal(budgets(rows)) == [  # counted by runs: a false warning
        "BPR on d got 2 trials while NeuMF got 4 trials: the comparison favours the better-tuned model; give every "
        "model the same --trials"]
    found = budgets(rows, asked)
    assert (found[("BPR", "d")]["trials"], found[("BPR", "d")]["configurations"]) == (4, 2) and unequal(found) == []
    table = "\n".join(budget_lines(found))
    assert "| BPR | d | 4 (2 distinct) | 0 | 0 | 3 |" in table and "| NeuMF | d | 4 | 0 | 0 | 3 |" in table
    asked[("BPR", "d")]["asked"] = 3  # a study asked fewer trials than another: still named
    assert unequal(budgets(rows, asked))[0].startswith("BPR on d got 3 trials while NeuMF got 4 trials")


def test_a_model_not_raced_is_named_only_where_it_had_configurations_to_pick_from():
    """Racing (sweep/selection.py) races a model's best cells over seeds; one with one configuration goes
    straight to its final seeds: nothing was picked on one seed."""
    def row(model, role, seed=1):
        return {"model": model, "dataset": "d", "status": "ok", "role": role, "epochs_trained": 3, "max_epochs": 3,
                "seconds": 1.0, "seed": seed}

    rows = [row("BPR", None), row("BPR", None), row("BPR", "select", 2), row("BPR", "select", 2),
            row("NeuMF", None), row("NeuMF", None), row("ItemKNN", None), row("ItemKNN", "final", 2)]
    assert unequal(budgets(rows)) == [
        "NeuMF on d was picked on one seed while BPR's pick raced over seeds (2 selection runs): give every model "
        "the same --select-top and --select-seeds"]


def test_a_model_fitted_in_one_pass_is_named_only_for_what_it_could_have_been_tuned_on():
    """Pop has nothing to tune and ItemKNN no epochs: neither is less tuned for it; ItemKNN at its defaults is."""
    searched = [{"model": "SASRec", "dataset": "d", "status": "ok", "role": "trial", "epochs_trained": 5,
                 "max_epochs": 50, "seconds": 10.0}] * 3
    one_pass = [{"model": model, "dataset": "d", "status": "ok", "role": role, "epochs_trained": 1, "max_epochs": 1,
                 "seconds": 1.0} for model, role in (("Pop", "trial"), ("ItemKNN", "trial"))]
    found = budgets(searched + one_pass * 3)
    assert (found[("Pop", "d")]["one_pass"], found[("Pop", "d")]["untunable"]) == (True, True)
    assert (found[("ItemKNN", "d")]["one_pass"], found[("ItemKNN", "d")]["untunable"]) == (True, False)
    assert unequal(found) == []  # the same trials, and an epoch cap of 1 by design
    found = budgets(searched + [{**row, "role": None} for row in one_pass])
    assert unequal(found) == ["ItemKNN on d got its defaults or a hand-made grid (no search) while SASRec got 3 "
                              "trials: the comparison favours the better-tuned model; give every model the same --trials"]


def _without_ends(record, cell):
    """The sweep record as a command killed between the cell's run ending and its line left it."""
    lines = [line for line in record.read_text().splitlines()
             if not (json.loads(line)["cell"] == cell and json.loads(line)["state"] in ("ok", "pruned"))]
    record.write_text("\n".join(lines) + "\n")


def test_a_trial_killed_after_its_run_ended_is_told_and_recorded_once(tmp_path, base_args, capsys):
    """Killed after a trial's run wrote metrics.json but before the study and sweep.jsonl heard of it."""
    argv = ["--grid", _grid(tmp_path), "--search", "tpe", "--trials", "2", "--set", "epochs=1", *base_args]
    assert run_cli(capsys, argv)[0] == 0
    sweep_dir = tmp_path / "runs" / "tune"
    study = _study(sweep_dir)
    first = study.trials[0]
    study.enqueue_trial(first.params)
    assert study.ask(first.distributions).params == first.params  # running, its run already finished
    record = sweep_dir / "sweep.jsonl"
    cell = next(json.loads(line)["cell"] for line in record.read_text().splitlines()
                if f"learning_rate={first.params['learning_rate']!r}," in json.loads(line)["cell"])
    _without_ends(record, cell)

    assert run_cli(capsys, argv)[0] == 0
    assert not [t for t in _study(sweep_dir).trials if t.state.name == "RUNNING"]  # told
    ends = [json.loads(line) for line in record.read_text().splitlines()]
    ends = [line["cell"] for line in ends if line["state"] in ("ok", "pruned")]
    assert sorted(set(ends)) == sorted(ends) and cell in ends and len(ends) == 2  # recorded once, none run again


def test_a_killed_search_loses_and_repeats_nothing(tmp_path, base_args):
    argv = ["--grid", _grid(tmp_path), "--search", "tpe", "--trials", "5", "--set", "epochs=4", *base_args, "--quiet"]
    command = [sys.executable, str(REPO / "run_experiments.py"), *argv]
    record = tmp_path / "runs" / "tune" / "sweep.jsonl"
    run_cli_until_killed(argv, inside="tune/ml-100k/BPR", nth=2)  # a trial has finished, the next one trains
    killed_running = [t.number for t in _study(tmp_path / "runs" / "tune").trials if t.state.name == "RUNNING"]
    assert killed_running, "the kill should leave a trial running"

    assert subprocess.run(command, capture_output=True, text=True).returncode == 0
    trials = _study(tmp_path / "runs" / "tune").trials
    assert len(trials) == 5 and all(t.state.is_finished() for t in trials)  # none lost, no extra trial
    runs = list((tmp_path / "runs" / "tune" / "ml-100k" / "BPR").iterdir())
    assert len(runs) == 5  # one run directory per trial
    for run in runs:
        epochs = [json.loads(line)["epoch"] for line in (run / "history.jsonl").read_text().splitlines()]
        assert len(epochs) == len(set(epochs)), f"{run.name} trained an epoch twice"
    states = [json.loads(line) for line in record.read_text().splitlines()]
    finished = [s["cell"] for s in states if s["state"] in ("ok", "pruned")]
    assert len(finished) == len(set(finished)) == 5  # each trial finished once


def test_two_commands_on_one_study_at_once_run_no_trial_and_no_final_seed_twice(tmp_path, base_args):
    command = [sys.executable, str(REPO / "run_experiments.py"), "--grid", _grid(tmp_path), "--search", "random",
               "--trials", "6", "--final-seeds", "2", "--set", "epochs=2", *base_args, "--quiet"]
    processes = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [p.communicate(timeout=600)[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], errors
    sweep = tmp_path / "runs" / "tune"
    states = [json.loads(line) for line in (sweep / "sweep.jsonl").read_text().splitlines()]
    assert len({s["owner"] for s in states if s["state"] == "running"}) == 2  # both trained: they overlapped
    trials = _study(sweep).trials
    assert len(trials) == 6 and all(t.state.is_finished() for t in trials)  # the budget held across both
    finished = [s["cell"] for s in states if s["state"] in ("ok", "pruned")]
    assert len(finished) == len(set(finished)) == 6 + 2  # each trial and each final seed ran once
    for run in [*(sweep / "ml-100k" / "BPR").iterdir(), *(sweep / "final" / "ml-100k" / "BPR").iterdir()]:
        epochs = [json.loads(line)["epoch"] for line in (run / "history.jsonl").read_text().splitlines()]
        assert len(epochs) == len(set(epochs)), f"{run.name} trained an epoch twice"


def _two_searches_on_one_journal(tmp_path):
    """Two Search drivers (as two sweep commands have) on one study, with a planner that plans nothing."""
    from types import SimpleNamespace

    from recrunner.search.driver import Search, SearchOptions
    from recrunner.sweep.space import SearchSpec, parse

    spec = SearchSpec("BPR", "ml-100k", {}, {"learning_rate": parse("learning_rate", {"loguniform": [1e-5, 0.3]})},
                      (2020,))

    def plan(spec, params, seed, search, trial=None):
        return SimpleNamespace(error=None, config={"epochs": 3, "valid_metric": "MRR@10"}, run_dir=None, trial=trial,
                               cell_id=f"{spec.study_name}/{sorted(params.items())}")

    searches = [Search([spec], plan, tmp_path, SearchOptions(method="random", trials=4)) for _ in range(2)]
    for search in searches:
        search.open()
    return spec, searches


def test_two_sweep_processes_on_one_study_draw_different_values_and_tell_each_others_trials(tmp_path):
    from recrunner.run.record import Status
    from recrunner.run.result import RunResult

    spec, (first, second) = _two_searches_on_one_journal(tmp_path)
    a, b = first.studies.ask(spec), second.studies.ask(spec)
    assert (a.number, b.number) == (0, 1) and a.params != b.params  # seeded by trial number, not per process
    duplicate = second.studies[spec.study_name].enqueue_trial(a.params)  # the sampler drawing a's values again
    c = second.studies.ask(spec)
    assert c.params == a.params and c.number == 2
    first._plan_trial(spec, a)
    second._plan_trial(spec, c)  # left to the first process: the same cell runs there
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text(json.dumps({"status": "ok", "best_valid_score": 0.25}))
    first.tell(f"{spec.study_name}/{sorted(a.params.items())}", RunResult(Status.OK, run_dir=tmp_path / "run"))
    states = {t.number: (t.state.name, t.value) for t in _study_of(tmp_path, spec)}
    assert states[0] == states[2] == ("COMPLETE", 0.25) and states[1][0] == "RUNNING"
    assert duplicate is None


def test_a_command_opening_while_another_asks_plans_the_trial_with_its_values(tmp_path):
    import threading

    spec, (first, second) = _two_searches_on_one_journal(tmp_path)
    study = first.studies[spec.study_name]
    asking = threading.Event()

    def ask_slowly():  # as study.ask does: the trial is stored before its values are
        with first.studies.lock():
            trial = study.ask()
            asking.set()
            time.sleep(0.5)
            trial.suggest_float("learning_rate", 1e-5, 0.3, log=True)

    thread = threading.Thread(target=ask_slowly)
    thread.start()
    asking.wait()
    planned = second.open()  # CI once saw the trial planned without values: a run of the defaults
    thread.join()
    values = study.trials[0].params
    assert [item.cell_id for item in planned] == [f"{spec.study_name}/{sorted(values.items())}"] and values
    study.ask()  # a command that died while asking: a trial that never gets values
    assert [item.cell_id for item in second.open()] == [f"{spec.study_name}/{sorted(values.items())}"]
    assert [t.state.name for t in _study_of(tmp_path, spec)] == ["RUNNING", "FAIL"]


def _study_of(tmp_path, spec):
    from recrunner.training.callbacks.pruning import storage_of

    return optuna.load_study(study_name=spec.study_name, storage=storage_of(str(tmp_path / "search" / "study.journal"))).trials


def test_a_baseline_outside_the_search_is_named_on_the_console_and_in_the_report(tmp_path, capsys, base_args):
    """ItemKNN at its defaults is named; Pop, with nothing to tune, is not (config/one_pass.py)."""
    assert run_cli(capsys, ["--model", "ItemKNN", "Pop", "--name", "tune", *base_args, "--set",
                            "user_inter_num_interval=[10,60]", "--quiet"])[0] == 0
    code, out, _ = run_cli(capsys, ["--grid", _grid(tmp_path), "--search", "random", "--trials", "2", *base_args,
                                    "--quiet"])
    assert code == 0
    warning = ("warning: ItemKNN on ml-100k got its defaults or a hand-made grid (no search) while BPR got 2 trials: "
               "the comparison favours the better-tuned model; give every model the same --trials")
    assert out.splitlines()[-1] == warning and "Pop on ml-100k" not in out
    code, _, err = run_cli(capsys, ["report", str(tmp_path / "runs" / "tune"), "--baseline", "Pop"])
    assert code == 0 and warning in err
    report = (tmp_path / "runs" / "tune" / "report" / "report.md").read_text()
    assert "| ItemKNN | ml-100k | 0 | 0 | 0 | 1 | 1 |" in report and warning.replace("warning:", "**warning:**") in report


def test_a_search_on_ray_reports_every_validation_to_the_one_study(tmp_path, capsys, base_args):
    pytest.importorskip("ray")
    code, out, err = run_cli(capsys, ["--grid", _grid(tmp_path), "--search", "tpe", "--trials", "3", "--prune",
                                      "median", "--backend", "ray", "--workers", "2", *base_args, "--quiet"])
    assert code == 0, out + err
    trials = _study(tmp_path / "runs" / "tune").trials
    assert len(trials) == 3 and all(t.state.is_finished() for t in trials)
    # the Ray workers, not the driver, reported each validation (step = epoch) to the study on disk
    assert all(sorted(t.intermediate_values) == [1, 2, 3] for t in trials if t.state.name == "COMPLETE")


def test_a_search_can_keep_its_studies_in_a_database(tmp_path, capsys, base_args):
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    code, out, err = run_cli(capsys, ["--grid", _grid(tmp_path), "--search", "random", "--trials", "4", "--prune",
                                      "hyperband", "--storage", url, *base_args, "--quiet"])
    assert code == 0, out + err
    study = optuna.load_study(study_name="ml-100k/BPR", storage=url)
    assert len(study.trials) == 4 and all(t.state.is_finished() for t in study.trials)
    search = tmp_path / "runs" / "tune" / "search"
    assert not (search / "study.journal").exists()  # the studies are in the database only
    assert json.loads((search / "trials.json").read_text())["ml-100k/BPR"]["asked"] == 4  # the budget table's count
