"""Why MFCL(BN) does not collapse here (issue 44): the BN path's two choices the MFCL paper leaves open, one seed.

The paper's MFCL(BN) scores 10% at Sc1 and 17% at Sc2 (Table 2), rising with the classes a
client holds to 88% at Sc10; ours trains to about 60% in every column. Two choices decide what
a BN sensor's representations carry and what the linear layer sees (docs/mfcl.md, "The BN path,
walked"):

- ``encode_bn``: the clients encode their uploads with the FedAvg-averaged running statistics
  (``running``, eval mode) or with their own batch's (``batch``: one client's images, so in
  Sc1 one class's statistics);
- ``linear_train``: the dense layer of the linear evaluation is trained on the training images
  re-encoded by the final encoder (``pool``) or on the representations the server received
  (``uploads``: the server's B^s, on which Sec. 3's first alternative trains it).

Each variant runs the preset (``mfcl-bn``, and ``mfcl`` for PN) in the given scenarios, one run
at a time, and records the final linear accuracy, the per-class accuracies and the predicted
classes' spread. Writes ``benchmarks/results/mfcl_bn_collapse/results.json`` (each pass's command, the
machine, every run's summary); the run folders go to ``--runs``.

    python benchmarks/mfcl_bn_collapse.py --set run.threads=1 --set run.workers=1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from shared import command_line, machine

VARIANTS = {
    "bn running pool (the preset)": ("mfcl-bn", ()),
    "bn batch pool": ("mfcl-bn", ("algorithm.encode_bn=batch",)),
    "bn running uploads": ("mfcl-bn", ("algorithm.linear_train=uploads",)),
    "bn batch uploads": ("mfcl-bn", ("algorithm.encode_bn=batch", "algorithm.linear_train=uploads")),
    "pn pool (the preset)": ("mfcl", ()),
    "pn uploads": ("mfcl", ("algorithm.linear_train=uploads",)),
    # the test images encoded as the uploads are (two SimCLR views, features averaged): no view shift between train and test
    "bn running uploads views": ("mfcl-bn", ("algorithm.linear_train=uploads", "algorithm.eval_input=views")),
    "bn batch uploads views": ("mfcl-bn", ("algorithm.encode_bn=batch", "algorithm.linear_train=uploads", "algorithm.eval_input=views")),
    "pn uploads views": ("mfcl", ("algorithm.linear_train=uploads", "algorithm.eval_input=views")),
}
OUT = Path(__file__).parent / "results" / "mfcl_bn_collapse" / "results.json"


def run(preset: str, overrides: list[str], run_dir: Path) -> dict:
    """One run of ``preset`` in this process, without the report's Figures 6-7 (reused if ``run_dir`` holds a finished one)."""
    from fedprior.experiments.config import load_config
    from fedprior.experiments.runner import resume, start

    if (run_dir / "result.json").is_file():
        summary = resume(run_dir, report_extras=False)
    else:
        name, config = load_config(preset, overrides)
        summary = start(name, config, run_dir, report_extras=False)
    last = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"accuracy"' in line][-1]
    per_class = last.get("class_accuracy", [])
    return {
        "final_accuracy": summary["final_accuracy"],
        "initial_accuracy": summary["initial_accuracy"],
        "class_accuracy": per_class,
        "classes_above_chance": sum(a > 0.1 for a in per_class),
        "wall_seconds": summary["wall_seconds"],
        "machine_kind": summary.get("machine_kind"),
        "state_sha256": summary.get("state_sha256"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="Sc1,Sc2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    parser.add_argument("--runs", type=Path, default=Path("runs/mfcl-bn-collapse"))
    parser.add_argument("--set", action="append", default=[], dest="overrides", help="a config override for every run")
    args = parser.parse_args()
    chosen = [v for v in VARIANTS if not args.only or v in args.only.split(",")]
    record = json.loads(OUT.read_text()) if OUT.is_file() else {"runs": {}}
    record.update({"commands": [*record.get("commands", []), command_line()], "machine": machine()})  # each pass's command
    for scenario in args.scenarios.split(","):
        for name in chosen:
            preset, extra = VARIANTS[name]
            overrides = [f"partition.scenario={scenario}", f"run.seed={args.seed}", *extra, *args.overrides]
            folder = args.runs / f"{name.replace(' ', '-').replace('(', '').replace(')', '')}--{scenario}--seed{args.seed}"
            started = time.perf_counter()
            result = run(preset, overrides, folder)
            record["runs"][f"{name} | {scenario} | seed {args.seed}"] = {"preset": preset, "overrides": overrides, **result}
            print(f"{name:32s} {scenario:5s} {result['final_accuracy']:.4f} ({time.perf_counter() - started:.0f} s)", flush=True)
            OUT.parent.mkdir(parents=True, exist_ok=True)
            OUT.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
