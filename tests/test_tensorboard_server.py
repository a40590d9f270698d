"""A real `tensorboard --logdir <sweep>` on a loopback port: its HParams data over HTTP, and in Chromium."""

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from recrunner.cli.main import main


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served_sweep(workspace, tmp_path, capsys):
    grid = tmp_path / "served.yaml"
    grid.write_text(yaml.safe_dump({
        "name": "served", "models": ["BPR", "SASRec"], "datasets": ["ml-100k"], "seeds": [2020, 2021],
        "model_params": {"BPR": {"embedding_size": 8},
                         "SASRec": {"hidden_size": 16, "inner_size": 32, "n_layers": 1, "n_heads": 1}},
        "fixed": {"epochs": 1, "MAX_ITEM_LIST_LENGTH": 10, "train_batch_size": 2048,
                  "user_inter_num_interval": "[10,60]"},
    }))
    assert main(["--grid", str(grid), "--output", str(workspace.output_dir), "--data-path", str(workspace.data_path),
                 "--config-dir", str(workspace.config_dir), "--quiet"]) == 0
    capsys.readouterr()
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(workspace.output_dir),
                               "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/data/plugins_listing", timeout=2).read()
            break
        except OSError:
            if server.poll() is not None:
                pytest.fail(f"tensorboard exited: {server.stderr.read()[-2000:]}")
            time.sleep(0.5)
    yield url
    server.terminate()
    server.wait(timeout=30)


def _post(url, payload):
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={
        "Content-Type": "application/json", "X-TensorBoard-Feature-Flags": "{}", "X-XSRF-Protected": "1"})
    return json.loads(urllib.request.urlopen(request, timeout=60).read())


def test_the_server_gives_the_dashboard_every_run_and_column(served_sweep):
    experiment = _post(served_sweep + "/data/plugin/hparams/experiment", {"experimentName": ""})
    columns = {info["name"] for info in experiment["hparamInfos"]}
    assert {"model", "status", "seed", "embedding_size", "hidden_size", "n_layers"} <= columns
    assert {"Best_Valid/ndcg@10", "Test/ndcg@10"} <= {m["name"]["tag"] for m in experiment["metricInfos"]}
    groups = _post(served_sweep + "/data/plugin/hparams/session_groups", {
        "experimentName": "", "startIndex": 0, "sliceSize": 100, "aggregationType": "AGGREGATION_AVG",
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        "colParams": []})
    names = sorted(s["name"] for g in groups["sessionGroups"] for s in g["sessions"])
    assert len(names) == 4 and all(n.startswith("served/ml-100k/") for n in names)


def _browser():
    """(playwright module, Chromium executable or None for Playwright's own) or None, and why not."""
    try:
        from playwright import sync_api
    except ImportError:
        return None, "playwright is not installed (pip install playwright)"
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return (sync_api, shutil.which(name)), ""
    from pathlib import Path

    if list((Path.home() / ".cache" / "ms-playwright").glob("chromium*")):
        return (sync_api, None), ""
    return None, "no Chromium (apt install chromium, or playwright install chromium; both need the network)"


BROWSER, NO_BROWSER = _browser()


@pytest.mark.skipif(BROWSER is None, reason=NO_BROWSER)
def test_the_hparams_dashboard_shows_the_sweep_in_headless_chromium(served_sweep, tmp_path):
    sync_api, executable = BROWSER
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(served_sweep + "/#hparams", wait_until="networkidle")
        page.get_by_text("embedding_size").first.wait_for(timeout=30_000)
        # the dashboard lives in shadow DOM; Playwright's text locators pierce it
        missing = [text for text in ("model", "dataset", "status", "seed", "embedding_size", "hidden_size",
                                     "n_layers", "Test/ndcg@10", "Best_Valid/ndcg@10", "BPR", "SASRec", "ok")
                   if page.get_by_text(text, exact=True).count() == 0]
        page.screenshot(path=str(tmp_path / "hparams.png"))
        browser.close()
    assert not missing, f"not on the HParams dashboard: {missing}"
