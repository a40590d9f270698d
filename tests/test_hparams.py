"""The HParams table of a mixed-model sweep, read back through TensorBoard's own plugin code."""

import yaml

from recrunner.cli.main import main


def _tensorboard_view(logdir):
    """What the HParams dashboard asks the server for: the experiment (columns) and session groups (rows)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    tb_context = base_plugin.TBContext(logdir=str(logdir), multiplexer=multiplexer,
                                       data_provider=data_provider.MultiplexerDataProvider(multiplexer, str(logdir)))
    backend = backend_context.Context(tb_context)
    request_context = context.RequestContext()
    experiment = backend.experiment_from_metadata(
        request_context, "", True, backend.hparams_metadata(request_context, ""),
        backend.hparams_from_data_provider(request_context, "", None))
    request = api_pb2.ListSessionGroupsRequest(
        start_index=0, slice_size=100, aggregation_type=api_pb2.AGGREGATION_AVG,
        allowed_statuses=[api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS, api_pb2.STATUS_FAILURE,
                          api_pb2.STATUS_RUNNING])
    groups = list_session_groups.Handler(request_context, backend, "", request).run().session_groups
    return experiment, groups


def test_a_mixed_model_sweep_has_one_row_per_run_with_every_column_and_its_status(workspace, tmp_path, capsys):
    grid = tmp_path / "mixed.yaml"
    grid.write_text(yaml.safe_dump({
        "name": "mixed", "models": ["BPR", "SASRec"], "datasets": ["ml-100k"], "seeds": [2020, 2021],
        "model_params": {"BPR": {"embedding_size": 8, "learning_rate": [0.001, 1e30]},  # 1e30 diverges: failed
                         "SASRec": {"hidden_size": 16, "inner_size": 32, "n_layers": 1, "n_heads": 1}},
        "fixed": {"epochs": 1, "MAX_ITEM_LIST_LENGTH": 10, "train_batch_size": 2048,
                  "user_inter_num_interval": "[10,60]"},
    }))
    main(["--grid", str(grid), "--output", str(workspace.output_dir), "--data-path", str(workspace.data_path),
          "--config-dir", str(workspace.config_dir), "--quiet"])
    capsys.readouterr()

    experiment, groups = _tensorboard_view(workspace.output_dir)

    order = [info.name for info in experiment.hparam_infos]
    columns = set(order)
    varied = [info.name for info in experiment.hparam_infos if info.differs]
    assert {"model", "learning_rate", "seed", "status"} <= set(varied) and "dataset" not in varied
    assert {"learning_rate"} <= columns  # varied; constants nobody varied are not columns
    assert not {"train_batch_size", "shuffle", "worker", "epochs"} & columns
    assert {"embedding_size"} <= columns and {"hidden_size", "n_layers", "n_heads", "inner_size"} <= columns
    metrics = {info.name.tag for info in experiment.metric_infos}
    assert {"Best_Valid/ndcg@10", "Best_Valid/score", "Test/ndcg@10", "Test/recall@10"} <= metrics
    assert not any(tag.startswith(("Train/", "Valid/")) for tag in metrics)

    # one group per configuration, the seeds inside it; one session (row) per run
    sessions = {s.name: (g, s) for g in groups for s in g.sessions}
    assert len(groups) == 3 and all(len(g.sessions) == 2 for g in groups)
    names = sorted(g.name for g in groups)  # readable trial names: dataset/model/what the sweep varies
    assert [n.split("/")[:2] for n in names] == [["ml-100k", "BPR"], ["ml-100k", "BPR"], ["ml-100k", "SASRec"]]
    assert all(n.split("/")[2].startswith("learning_rate=") for n in names[:2])
    assert all(name.startswith("mixed/ml-100k/") for name in sessions) and len(sessions) == 6
    by_status = {}
    for group in groups:
        model = group.hparams["model"].string_value
        lr = group.hparams["learning_rate"].number_value
        statuses = {s.status for s in group.sessions}
        by_status[(model, lr)] = (group.hparams["status"].string_value, statuses)
    from tensorboard.plugins.hparams import api_pb2

    assert by_status[("BPR", 1e30)] == ("failed", {api_pb2.STATUS_FAILURE})
    assert by_status[("BPR", 0.001)] == ("ok", {api_pb2.STATUS_SUCCESS})
    assert by_status[("SASRec", 0.001)] == ("ok", {api_pb2.STATUS_SUCCESS})
    ok_group = next(g for g in groups if g.hparams["model"].string_value == "SASRec")
    assert any(m.name.tag == "Test/ndcg@10" and m.value > 0 for m in ok_group.metric_values)
