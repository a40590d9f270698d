"""Bring the output pasted in README.md and docs/*.md up to date by running it again.

    python docs/regenerate.py              # every block (about 6 minutes on 2 CPU cores)
    python docs/regenerate.py quick-run    # some blocks, by name
    python docs/regenerate.py --list       # the blocks and the pages holding them

A block is marked in a page as

    <!-- regenerate: NAME -->
    ```text
    ...
    ```
    <!-- /regenerate -->

and NAME is one of BLOCKS below: a function that runs real commands on the current code (in a
temporary folder: nothing is written to the checkout) and returns the text, with the temporary
folder left out of the paths so they read `runs/...`. tests/test_docs.py checks that every marker
names a block here and every block is used.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKED = re.compile(r"(<!-- regenerate: (?P<name>[\w-]+) -->\n)```text\n.*?```\n(<!-- /regenerate -->)", re.S)


class Session:
    """A temporary output folder and data folder; commands run from the repository's root."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.output, self.data = folder / "runs", folder / "datasets"
        self.data.mkdir(parents=True, exist_ok=True)
        self.quick_run: Path | None = None

    def run(self, shown: str, argv: list[str], *, place: bool = True) -> str:
        """`$ shown` and what the command printed (stderr and stdout, in order)."""
        extra = ["--output", str(self.output), "--data-path", str(self.data)] if place else []
        proc = subprocess.run([sys.executable, *argv, *extra], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=900)
        return f"$ {shown}\n" + self.tidy(proc.stdout)

    def tidy(self, text: str) -> str:
        """Paths as a reader's own: the temporary folder and the checkout left out."""
        text = text.replace(f"{self.folder}/", "").replace(str(self.folder), ".").replace(f"{ROOT}/", "")
        return text.rstrip() + "\n"


def quick_run(session: Session) -> str:
    text = session.run("python run_experiments.py --config-file configs/quick.yaml",
                       ["run_experiments.py", "--config-file", "configs/quick.yaml"])
    session.quick_run = next((session.output / "default").rglob("metrics.json")).parent
    lines = text.splitlines()
    last_epoch = max(i for i, line in enumerate(lines) if " training [time:" in line)
    first_best = next(i for i, line in enumerate(lines) if "Saving best" in line)
    return "\n".join(lines[: first_best + 3] + ["..."] + lines[last_epoch:]) + "\n"


def bad_input(session: Session) -> str:
    typo = session.folder / "typo.yaml"
    typo.write_text("models: [BPR]\ndatasets: [ml-100k]\nparams:\n  embedding_sise: [16, 32]\n")
    parts = [session.run(f"python run_experiments.py --set {setting}", ["run_experiments.py", "--set", setting])
             for setting in ("hiden_size=16", "epochs=-1", "learner=adamm")]
    parts.append(session.run("python run_experiments.py --set 'eval_args={mode: uni0}'",
                             ["run_experiments.py", "--set", "eval_args={mode: uni0}"]))
    parts.append(session.run("python run_experiments.py --grid typo.yaml", ["run_experiments.py", "--grid", str(typo)]))
    parts.append(session.run("python run_experiments.py --set valid_metric=NDCG@50",
                             ["run_experiments.py", "--set", "valid_metric=NDCG@50"]))
    parts.append(session.run("python run_experiments.py --model SASRecc", ["run_experiments.py", "--model", "SASRecc"]))
    return "".join(parts)


def smoke_sweep(session: Session) -> str:
    argv = ["run_experiments.py", "--grid", "configs/grids/smoke.yaml", "--workers", "2"]
    first = session.run("python run_experiments.py --grid configs/grids/smoke.yaml --workers 2", argv)
    again = session.run("python run_experiments.py --grid configs/grids/smoke.yaml --workers 2     "
                        "# again: nothing to do, no worker started", argv)
    return first + again


def smoke_report(session: Session) -> str:
    """The smoke sweep's report: its ndcg@10 table, significance and budget sections."""
    session.run("recrunner report runs/smoke --baseline GRU4Rec",
                ["-m", "recrunner", "report", str(session.output / "smoke"), "--baseline", "GRU4Rec"], place=False)
    page = (session.output / "smoke" / "report" / "report.md").read_text()
    sections = {part.split("\n", 1)[0]: "## " + part.strip() + "\n" for part in page.split("\n## ")[1:]}
    return "\n".join(sections[name] for name in ("test ndcg@10", "significance and effect sizes against GRU4Rec",
                                                   "training budget and convergence"))


def search_sequential(session: Session) -> str:
    grid = "configs/grids/search-sequential.yaml"
    dry = session.run(f"python run_experiments.py --grid {grid} --dry-run", ["run_experiments.py", "--grid", grid, "--dry-run"])
    toy = ["--trials", "6", "--final-seeds", "2", "--prune-after", "1", "--workers", "2", "--set", "epochs=4",
           "MAX_ITEM_LIST_LENGTH=10", "train_batch_size=2048", "user_inter_num_interval=[10,60]"]
    shown = (f"python run_experiments.py --grid {grid} --trials 6 --final-seeds 2 --prune-after 1 --workers 2 \\\n"
             '    --set epochs=4 MAX_ITEM_LIST_LENGTH=10 train_batch_size=2048 "user_inter_num_interval=[10,60]"')
    return dry + session.run(shown, ["run_experiments.py", "--grid", grid, *toy])


def racing(session: Session) -> str:
    grid = "configs/grids/racing.yaml"
    toy = ["--workers", "2", "--set", "epochs=5"]
    text = session.run(f"python run_experiments.py --grid {grid} --workers 2 --set epochs=5",
                       ["run_experiments.py", "--grid", grid, *toy])
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("warning: the split")) + "\n"
    report = session.run("recrunner report runs/racing", ["-m", "recrunner", "report", str(session.output / "racing")],
                         place=False)
    page = (session.output / "racing" / "report" / "report.md").read_text()
    budget = page[page.index("## tuning budget"):page.index("## significance")]
    return text + report.splitlines()[0] + "\n\n(runs/racing/report/report.md: its tuning budget and racing sections)\n" + budget


def cache_list(session: Session) -> str:
    if session.quick_run is None:
        quick_run(session)
    listing = session.run("recrunner cache list", ["-m", "recrunner", "cache", "list", "--output", str(session.output)],
                          place=False)
    pruned = session.run("recrunner cache prune --unused-days 30", ["-m", "recrunner", "cache", "prune",
                         "--unused-days", "30", "--output", str(session.output)], place=False)
    return listing + pruned


def reproduce_quick(session: Session) -> str:
    if session.quick_run is None:
        quick_run(session)
    run_dir = session.tidy(str(session.quick_run)).strip()
    return session.run(f"recrunner reproduce {run_dir} --quiet",
                       ["-m", "recrunner", "reproduce", str(session.quick_run), "--quiet"], place=False)


def sampled_metrics(session: Session) -> str:
    setting = ["--model", "BPR", "--dataset", "ml-100k", "--name", "sampled", "--set", "eval_args={mode: uni100}", "epochs=1"]
    text = session.run("python run_experiments.py --model BPR --dataset ml-100k --name sampled "
                       "--set eval_args='{mode: uni100}' epochs=1", ["run_experiments.py", *setting])
    command, *output = text.splitlines()
    return "\n".join([command, "...", *[line for line in output if "sampled" in line and "WARNING" in line]]) + "\n"


def step_schedules(session: Session) -> str:
    keys = ["train_batch_size=256", "epochs=2", "eval_every_steps=20", "checkpoint_every_steps=10", "log_every_steps=10"]
    text = session.run("python run_experiments.py --model BPR --dataset ml-100k --name steps \\\n    --set " + " ".join(keys),
                       ["run_experiments.py", "--model", "BPR", "--dataset", "ml-100k", "--name", "steps", "--set", *keys])
    command, output = text.splitlines()[:2], text.splitlines()[2:]  # the command is two lines
    shown = [line for line in output if "evaluating" in line or "Saving best" in line or " training [" in line]
    history = next((session.output / "steps").rglob("history.jsonl"))
    rows = history.read_text().splitlines()
    first_epoch = next(i for i, row in enumerate(rows) if '"loss"' in row)
    where = session.tidy(str(history)).strip()
    return "\n".join([*command, *shown[:5], "...", f"$ sed -n '1,3p;{first_epoch + 1}p' {where}", *rows[:3],
                      rows[first_epoch]]) + "\n"


def data_parallel(session: Session) -> str:
    keys = ["epochs=3", "train_batch_size=512"]
    text = session.run("python run_experiments.py --model BPR --dataset ml-100k --name ddp --nproc 2 --set " + " ".join(keys),
                       ["run_experiments.py", "--model", "BPR", "--dataset", "ml-100k", "--name", "ddp", "--nproc", "2",
                        "--set", *keys])
    lines = text.splitlines()
    shown = [i for i, line in enumerate(lines) if " training [" in line or "evaluating [" in line
             or "test result" in line or line.startswith("[1/1]") or line.startswith("sweep ddp")]
    kept = [lines[0]] + [lines[j] for i in shown for j in ([i, i + 1] if "test result" in lines[i] else [i])]
    record = json.loads(next((session.output / "ddp").rglob("metrics.json")).read_text())
    refused = session.run("python run_experiments.py --model Pop --nproc 2", ["run_experiments.py", "--model", "Pop",
                                                                            "--nproc", "2"])
    return "\n".join(kept) + f"\n$ # metrics.json: \"provenance\": {{... \"processes\": {record['provenance']['processes']}}}\n" \
        + refused


def _ml100k_as_csv(folder: Path) -> None:
    """ml-100k's own files as a researcher would have them: CSV, other column names, ISO dates."""
    import pandas as pd

    from recrunner.data.files import builtin_dataset_dir

    shipped = builtin_dataset_dir() / "ml-100k"
    inter = pd.read_csv(shipped / "ml-100k.inter", sep="\t", dtype=str)
    inter.columns = ["uid", "movie", "stars", "when"]
    inter["when"] = pd.to_datetime(inter["when"].astype(int), unit="s", utc=True).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    inter.to_csv(folder / "ratings.csv", index=False)
    users = pd.read_csv(shipped / "ml-100k.user", sep="\t", dtype=str)
    users.columns = ["uid", "age", "sex", "job", "zip"]
    users.to_csv(folder / "users.csv", index=False)


def data_import(session: Session) -> str:
    _ml100k_as_csv(session.folder)
    head = "$ head -3 ratings.csv\n" + "".join((session.folder / "ratings.csv").open().readlines()[:3])
    flags = ["--user", "uid", "--item", "movie", "--rating", "stars", "--time", "when", "--users"]
    shown = "recrunner data import ratings.csv --name my-ratings " + " ".join(flags) + " users.csv"
    imported = session.run(shown, ["-m", "recrunner", "data", "import", str(session.folder / "ratings.csv"), "--name",
                                   "my-ratings", *flags, str(session.folder / "users.csv"), "--data-path", str(session.data)],
                           place=False)
    settings = session.data / "my-ratings" / "dataset.yaml"
    return head + imported + "$ cat datasets/my-ratings/dataset.yaml\n" + settings.read_text()


def data_describe(session: Session) -> str:
    if not (session.data / "my-ratings").is_dir():
        data_import(session)
    shown = "recrunner data describe my-ratings --model SASRec --set 'user_inter_num_interval=\"[30,inf)\"' 'item_inter_num_interval=\"[10,inf)\"'"
    return session.run(shown, ["-m", "recrunner", "data", "describe", "my-ratings", "--model", "SASRec", "--set",
                               "user_inter_num_interval='[30,inf)'", "item_inter_num_interval='[10,inf)'",
                               "--data-path", str(session.data)], place=False)


def data_errors(session: Session) -> str:
    if not (session.folder / "ratings.csv").is_file():
        _ml100k_as_csv(session.folder)
    bad = session.folder / "bad.csv"
    lines = (session.folder / "ratings.csv").read_text().splitlines()[:6]
    lines[4] = lines[4].rsplit(",", 1)[0] + ",04/12/1997"
    bad.write_text("\n".join(lines) + "\n")
    base = ["-m", "recrunner", "data", "import"]
    where = ["--data-path", str(session.data)]
    cases = [("ratings.csv --name my-ratings --user user --item movie", [str(session.folder / "ratings.csv"), "--name", "x",
              "--user", "user", "--item", "movie"]),
             ("bad.csv --name bad --user uid --item movie --time when", [str(bad), "--name", "bad", "--user", "uid",
              "--item", "movie", "--time", "when"]),
             ("ratings.csv --name my-ratings --user uid --item movie", [str(session.folder / "ratings.csv"), "--name",
              "my-ratings", "--user", "uid", "--item", "movie"])]
    text = "".join(session.run(f"recrunner data import {shown}", base + argv + where, place=False) for shown, argv in cases)
    return text.replace("--name x ", "--name my-ratings ")


def gpu_check_cpu(session: Session) -> str:
    """bench/gpu_check.py in the mode CI runs: a CPU, tiny sizes (its `tests` step is the suite's)."""
    out = session.folder / "gpu-check"
    return session.run("python bench/gpu_check.py --steps resume,main,profile,fast,models,cells",
                       ["bench/gpu_check.py", "--out", str(out), "--steps", "resume,main,profile,fast,models,cells"], place=False)


BLOCKS = {  # in the order they run: later ones may use what earlier ones made
    "quick-run": quick_run,
    "bad-input": bad_input,
    "cache-list": cache_list,
    "reproduce-quick": reproduce_quick,
    "sampled-metrics": sampled_metrics,
    "smoke-sweep": smoke_sweep,
    "smoke-report": smoke_report,
    "search-sequential": search_sequential,
    "racing": racing,
    "step-schedules": step_schedules,
    "data-parallel": data_parallel,
    "data-import": data_import,
    "data-describe": data_describe,
    "data-errors": data_errors,
    "gpu-check-cpu": gpu_check_cpu,
}


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]


def markers() -> dict[str, list[Path]]:
    """Each block name with the pages that show it."""
    found: dict[str, list[Path]] = {}
    for page in pages():
        for match in MARKED.finditer(page.read_text()):
            found.setdefault(match["name"], []).append(page)
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["--list"]:
        for name, where in markers().items():
            print(f"{name}: {', '.join(str(p.relative_to(ROOT)) for p in where)}")
        return 0
    unknown = [name for name in argv if name not in BLOCKS]
    if unknown:
        print(f"regenerate: unknown block {', '.join(unknown)}; blocks: {', '.join(BLOCKS)}", file=sys.stderr)
        return 2
    wanted = [name for name in BLOCKS if not argv or name in argv]
    with tempfile.TemporaryDirectory(prefix="recrunner-docs-") as folder:
        session = Session(Path(folder))
        texts = {}
        for name in wanted:
            print(f"regenerating {name} ...", file=sys.stderr)
            texts[name] = BLOCKS[name](session)
    for page in pages():
        text = page.read_text()
        new = MARKED.sub(lambda m: m.group(0) if m["name"] not in texts else
                         f"{m.group(1)}```text\n{texts[m['name']]}```\n{m.group(3)}", text)
        if new != text:
            page.write_text(new)
            print(f"updated {page.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
