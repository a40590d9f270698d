"""The data cache: entry size and load time against the source files, plain RecBole and the old cache.

For each case (a model, which decides the dataset class, on a dataset, with recrunner's
configuration), in one process:
- plain RecBole: `create_dataset` then `dataset.build()`, what every run repeats without a cache;
  then recrunner's build of the same (`datacache._split`: a sequential dataset augmented by
  seams.augmentation), checked equal to RecBole's, column by column;
- the previous cache (format 1): the built objects pickled whole, its size and load time (median of 3
  processes);
- the compact entry (recrunner.data.cache): its size, the time to write it, and the median of 5
  loads, each in a fresh process as a run does; every part it gives back is checked equal to what RecBole built.
Targets (issue 16): on ml-1m, the entry at most 5x its source files and loaded in at most 1 s.

    python bench/bench_cache.py [--data-path ../shared/datasets] [--cases ml-1m:SASRec ml-1m:BPR ...]
"""

import argparse
import logging
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_CASES = ["ml-1m:SASRec", "ml-1m:BPR", "ml-1m:DeepFM", "Amazon_Beauty:SASRec", "ml-100k:CKE"]


def measure(model: str, dataset: str, data_path: Path, workdir: Path) -> dict:
    import torch

    from recbole.utils import init_seed

    from recrunner import Experiment, Workspace, prepare
    from recrunner.data import cache as datacache

    workspace = Workspace(output_dir=workdir / "runs", data_path=data_path, config_dir=REPO / "configs")
    config = prepare(Experiment(model, dataset, {}), workspace).config
    init_seed(config["seed"], config["reproducibility"])
    started = time.perf_counter()
    plain = datacache._dataset(config)
    plain_built = plain.build()  # RecBole's own, the reference
    build_seconds = time.perf_counter() - started

    init_seed(config["seed"], config["reproducibility"])  # the same random split, if the order is random
    started = time.perf_counter()
    built_dataset = datacache._dataset(config)
    built, base = datacache._split(config, built_dataset)  # recrunner.s (data.augmentation)
    split_seconds = time.perf_counter() - started
    for original, part in zip((plain, *plain_built), (built_dataset, *built)):
        for key, value in original.inter_feat.interaction.items():
            assert torch.equal(value, part.inter_feat.interaction[key]), f"{dataset} {model}: {key} built differently"
    del plain, plain_built

    old_path = workdir / f"{dataset}-{model}.pkl"  # the previous cache: (dataset, built) pickled whole
    with open(old_path, "wb") as f:
        pickle.dump((built_dataset, built), f, protocol=pickle.HIGHEST_PROTOCOL)
    old_bytes = old_path.stat().st_size
    old_load = statistics.median(_load_in_a_fresh_process(old_path, "pickle") for _ in range(3))
    old_path.unlink()

    path = workdir / f"{dataset}-{model}.entry"
    started = time.perf_counter()
    size = datacache._write(path, datacache.description(config), built_dataset, built, base)
    write_seconds = time.perf_counter() - started
    loads = [_load_in_a_fresh_process(path) for _ in range(5)]
    back_dataset, back_built = datacache._read(path)
    for original, back in zip((built_dataset, *built), (back_dataset, *back_built)):
        for key, value in original.inter_feat.interaction.items():
            assert torch.equal(value, back.inter_feat.interaction[key]), f"{dataset} {model}: {key} differs"
    source = sum(size for _, size, _ in datacache.folder_fingerprint(Path(config["data_path"])))
    return {"case": f"{dataset} {model}", "class": type(built_dataset).__name__, "rows": built_dataset.inter_num,
            "source": source, "build": build_seconds, "split": split_seconds, "old_bytes": old_bytes,
            "old_load": old_load, "bytes": size, "write": write_seconds, "load": statistics.median(loads)}


def _load_in_a_fresh_process(path: Path, how: str = "entry") -> float:
    """Seconds reading `path` takes in a new process, after the imports a run has done before it
    reads data: a compact entry (`_read`), or the previous cache's pickle (`pickle.load`)."""
    read = ("datacache._read(Path(sys.argv[1]))" if how == "entry" else "pickle.load(open(sys.argv[1], 'rb'))")
    code = ("import pickle, sys, time; sys.path.insert(0, sys.argv[2]); from pathlib import Path; "
            "from recrunner.data import cache as datacache; import recbole.config, recbole.data, recbole.trainer; "
            f"started = time.perf_counter(); assert {read} is not None; print(time.perf_counter() - started)")
    out = subprocess.run([sys.executable, "-c", code, str(path), str(REPO)], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def render(rows: list[dict]) -> str:
    head = ("| case | dataset class | interactions | source | plain RecBole build | recrunner's | previous cache "
            "| its load | compact entry | x source | write | load (median of 5 processes) | load vs build "
            "| size vs previous |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['class']} | {r['rows']:,} | {r['source'] / 1e6:.1f} MB | {r['build']:.1f} s "
            f"| {r['split']:.1f} s "
            f"| {r['old_bytes'] / 1e6:.0f} MB | {r['old_load']:.2f} s | {r['bytes'] / 1e6:.1f} MB "
            f"| {r['bytes'] / r['source']:.2f}x | {r['write']:.1f} s | {r['load']:.2f} s "
            f"| {r['build'] / r['load']:.0f}x faster | {r['old_bytes'] / r['bytes']:.0f}x smaller |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-path", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--cases", nargs="+", default=DEFAULT_CASES, metavar="DATASET:MODEL")
    args = parser.parse_args()
    logging.getLogger("recrunner").setLevel(logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            dataset, model = case.split(":")
            rows.append(measure(model, dataset, args.data_path, Path(tmp)))
            print(render(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(render(rows))


if __name__ == "__main__":
    main()
