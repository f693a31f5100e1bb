"""The reproduction report: claims judged on small fake run folders by the fixed verdict rules."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import shutil
import statistics

import pytest

from zonal.cli import main
from zonal.experiments.claims import CLAIMS
from zonal.experiments.reproduction_report import write_reproductions
from zonal.experiments.reproductions import (
    LAST,
    Ablation,
    Claim,
    Ordering,
    Statistic,
    compute,
    evaluate_claim,
    find_runs,
)

ROWS = [
    {"model": "deep", "size": 800, "repeat": r, "score": v, "converged": c}
    for r, (v, c) in enumerate([(2.0, True), (2.2, True), (2.4, False)])
] + [{"model": "shallow", "size": 800, "repeat": r, "score": v, "converged": True}
     for r, v in enumerate([1.0, 1.1, 1.5])]  # fmt: skip


def _fake_run(root, name, *, experiment="residual-dgp-sphere", preset="converged",
              overridden=(), config=None, rows=ROWS, finished=True, created="2026-01-01"):  # fmt: skip
    path = root / name
    path.mkdir(parents=True)
    stored = {
        "experiment": experiment,
        "preset": preset,
        "overridden": list(overridden),
        "config": config or {},
        "created_utc": created,
    }
    (path / "config.json").write_text(json.dumps(stored))
    if finished:
        with (path / "results.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (path / "metrics.json").write_text("{}")
    return path


def _claim(**changes):
    fields = {
        "number": "8",
        "title": "deep beats shallow",
        "source": "seed 004 fig. 3.4",
        "experiment": "residual-dgp-sphere",
        "command": "zonal experiment run residual-dgp-sphere --protocol converged",
        "statistics": (
            Statistic(
                "deep", {"model": "deep", "size": 800}, "score", "median", 2.0, tolerance=0.1
            ),
            Statistic("shallow", {"model": "shallow", "size": 800}, "score", "median", 1.0),
        ),
        "orderings": (Ordering("deep", "shallow"),),
    }
    fields.update(changes)
    return Claim(**fields)


def test_mean_has_its_standard_error_and_median_its_quartiles():
    rows = [{"k": "a", "x": str(v)} for v in (1.0, 2.0, 4.0, 7.0)]
    mean = compute(Statistic("m", {"k": "a"}, "x"), rows)
    assert mean.centre == pytest.approx(3.5)
    assert mean.high - mean.centre == pytest.approx(statistics.stdev([1, 2, 4, 7]) / 2)
    median = compute(Statistic("m", {"k": "a"}, "x", "median"), rows)
    assert (median.low, median.centre, median.high) == pytest.approx((1.75, 3.0, 4.75))
    assert compute(Statistic("m", {"k": "b"}, "x"), rows).count == 0


def test_numeric_filters_match_by_value():
    rows = [{"level": "180.0", "x": "1.0"}, {"level": "18", "x": "2.0"}, {"level": "a", "x": "3"}]
    assert compute(Statistic("m", {"level": 180}, "x"), rows).centre == 1.0
    assert compute(Statistic("m", {"level": "a"}, "x"), rows).centre == 3.0


def test_last_picks_the_largest_value_of_a_column():
    rows = [{"step": str(s), "regret": str(10.0 - s)} for s in (0, 1, 10, 2)]
    value = compute(Statistic("r", {"step": LAST}, "regret"), rows)
    assert value.count == 1 and value.centre == 0.0


def test_orderings_that_hold_with_seed_numbers_within_spread_reproduce(tmp_path):
    _fake_run(tmp_path, "run-a")
    result = evaluate_claim(_claim(), find_runs(tmp_path))
    assert result.verdict == "reproduced"
    assert result.values["deep"].centre == pytest.approx(2.2)
    assert result.converged == "5 of 6 fits converged"


def test_stand_in_data_reproduce_in_direction_only(tmp_path):
    _fake_run(tmp_path, "run-a")
    result = evaluate_claim(_claim(comparable=False), find_runs(tmp_path))
    assert result.verdict == "reproduced in direction only"


def test_numbers_outside_the_seed_spread_reproduce_in_direction_only(tmp_path):
    _fake_run(tmp_path, "run-a")
    far = (
        Statistic("deep", {"model": "deep", "size": 800}, "score", "median", 3.0, tolerance=0.1),
        Statistic("shallow", {"model": "shallow", "size": 800}, "score", "median"),
    )
    result = evaluate_claim(_claim(statistics=far), find_runs(tmp_path))
    assert result.verdict == "reproduced in direction only"


def test_a_failed_ordering_is_not_reproduced_and_named(tmp_path):
    _fake_run(tmp_path, "run-a")
    result = evaluate_claim(_claim(orderings=(Ordering("shallow", "deep"),)), find_runs(tmp_path))
    assert result.verdict == "not reproduced"
    assert result.failed == ["shallow (1.1) does not beat deep (2.2)"]


def test_without_orderings_a_number_worse_than_the_seed_is_not_reproduced(tmp_path):
    _fake_run(tmp_path, "run-a")
    lower = (Statistic("deep", {"model": "deep"}, "score", "median", 1.0, better="lower"),)
    result = evaluate_claim(_claim(statistics=lower, orderings=()), find_runs(tmp_path))
    assert result.verdict == "not reproduced"
    assert "against the seed's 1" in result.failed[0]


def test_only_finished_runs_of_the_protocol_without_overrides_count(tmp_path):
    _fake_run(tmp_path, "quick-run", preset="quick")
    _fake_run(tmp_path, "custom-run", overridden=["steps"], config={"steps": 5})
    _fake_run(tmp_path, "other-experiment", experiment="bo-sphere")
    unfinished = _fake_run(tmp_path, "unfinished", finished=False)
    result = evaluate_claim(_claim(), find_runs(tmp_path))
    assert result.verdict == "not run"
    assert result.in_flight == [unfinished]


def test_a_run_on_another_device_counts_for_its_protocol(tmp_path):
    """``--set device=cuda`` says where a run computes, not what: the run is judged."""
    _fake_run(tmp_path, "on-a-gpu", overridden=["device"], config={"device": "cuda"})
    result = evaluate_claim(_claim(), find_runs(tmp_path))
    assert result.run is not None and result.run.name == "on-a-gpu"


def test_the_newest_finished_run_is_judged(tmp_path):
    _fake_run(tmp_path, "old", created="2026-01-01")
    flipped = [dict(row, model="deep" if row["model"] == "shallow" else "shallow") for row in ROWS]
    _fake_run(tmp_path, "new", created="2026-02-01", rows=flipped)
    result = evaluate_claim(_claim(), find_runs(tmp_path))
    assert result.run.name == "new" and result.verdict == "not reproduced"


def test_ablations_match_exactly_their_settings(tmp_path):
    _fake_run(tmp_path, "main")
    _fake_run(tmp_path, "ablation", overridden=["hidden_variance"], config={"hidden_variance": 0.1})
    ablations = (
        Ablation("variance 0.1", {"hidden_variance": 0.1}, "cmd a"),
        Ablation("variance 1", {"hidden_variance": 1.0}, "cmd b"),
    )
    result = evaluate_claim(_claim(ablations=ablations), find_runs(tmp_path))
    (_, path, values), (_, missing, _) = result.ablations
    assert path.name == "ablation" and values["deep"].count == 3
    assert missing is None


def test_report_file_has_a_row_per_claim_and_the_cause_where_not_reproduced(tmp_path):
    _fake_run(tmp_path / "runs", "run-a")
    claims = [
        _claim(),
        _claim(number="9", orderings=(Ordering("shallow", "deep"),), cause="the seed's noise"),
        _claim(number="10a", experiment=None),
    ]
    output = tmp_path / "reproductions.md"
    results = write_reproductions(tmp_path / "runs", output, claims)
    assert [r.verdict for r in results] == ["reproduced", "not reproduced", "not run"]
    text = output.read_text()
    assert (
        "Summary: 1 reproduced, 0 reproduced in direction only, 1 not reproduced, 1 not run" in text
    )
    assert "| 9 | deep beats shallow |" in text
    assert "Cause: the seed's noise" in text
    assert "2.2 [2.1, 2.3]" in text  # median [quartiles] of 2.0, 2.2, 2.4
    # each number's seed value and the spread it is allowed (its tolerance), "-" without one
    assert "| seed | seed's spread | zonal | n |" in text
    assert "| deep | score | model=deep, size=800 | 2 | 0.1 | 2.2 [2.1, 2.3] | 3 |" in text
    assert "| shallow | score | model=shallow, size=800 | 1 | - |" in text


def test_claims_catalogue_is_well_formed():
    numbers = [claim.number for claim in CLAIMS]
    assert len(set(numbers)) == len(numbers) >= 11
    for claim in CLAIMS:
        assert claim.protocol in ("converged", "full")
        for statistic in claim.statistics:
            if statistic.seed_value is not None:
                assert math.isfinite(statistic.seed_value)


def test_cli_writes_the_report(tmp_path, capsys):
    _fake_run(tmp_path / "runs", "run-a")
    output = tmp_path / "out.md"
    assert main(["experiment", "report", "reproductions", "--runs-dir", str(tmp_path / "runs"),
                 "--output", str(output)]) == 0  # fmt: skip
    assert output.is_file()
    assert f"-> {output}" in capsys.readouterr().out


def test_an_unfinished_run_shows_its_checkpoint_rows_without_a_verdict(tmp_path):
    import torch

    path = _fake_run(tmp_path, "unfinished", finished=False)
    torch.save({"rows": [dict(row, curve=[(1, 0.5)]) for row in ROWS[:4]]}, path / "checkpoint.pt")
    result = evaluate_claim(_claim(), find_runs(tmp_path))
    assert result.verdict == "not run" and result.partial_fits == 4
    assert result.values["deep"].count == 3 and result.values["shallow"].count == 1
    report = write_reproductions(tmp_path, tmp_path / "r.md", [_claim()])
    assert report[0].partial_fits == 4
    assert "(in flight, 4 fits so far)" in (tmp_path / "r.md").read_text()


def test_an_unfinished_run_that_checkpoints_units_shows_their_rows(tmp_path):
    """dataset-shift checkpoints whole units, each with its rows: the report reads them as the
    same 4 rows, and says 2 units (not 4 fits, nor the number of derived rows) are done."""
    import torch

    path = _fake_run(tmp_path, "unfinished", finished=False)
    units = {"a/0": {"rows": ROWS[:2], "bins": []}, "a/1": {"rows": ROWS[2:4], "bins": []}}
    torch.save({"units": units}, path / "checkpoint.pt")
    result = evaluate_claim(_claim(), find_runs(tmp_path))
    assert result.verdict == "not run"
    assert (result.partial_fits, result.partial_noun) == (2, "units")
    assert result.values["deep"].count == 3 and result.values["shallow"].count == 1
    write_reproductions(tmp_path, tmp_path / "r.md", [_claim()])
    assert "(in flight, 2 units so far)" in (tmp_path / "r.md").read_text()


def test_the_reproduce_queue_resumes_runs_in_flight_first_and_skips_finished_ones(tmp_path):
    from zonal.experiments.reproduction_queue import reproduction_queue

    claims = [
        _claim(number="1", experiment="uci-dgp"),
        _claim(number="2", experiment="uci-dgp"),  # the same experiment: queued once
        _claim(number="3", experiment=None),
        _claim(number="8"),  # residual-dgp-sphere: a run in flight
        _claim(number="9", experiment="bo-sphere"),  # finished
        _claim(number="10", experiment="toy-regression"),  # no converged protocol: left out
    ]
    flight = _fake_run(tmp_path, "flight", finished=False)
    _fake_run(tmp_path, "bo", experiment="bo-sphere")
    queue = reproduction_queue(tmp_path, claims)
    assert [(item.experiment, item.protocol, item.folder) for item in queue] == [
        ("residual-dgp-sphere", "converged", flight),
        ("uci-dgp", "converged", None),
    ]
    assert all(not item.settings and not item.label for item in queue)


def test_the_reproduce_queue_runs_the_cheapest_new_run_first(tmp_path, monkeypatch):
    """New runs follow the experiments' cpu_hours, not the claims' order; unestimated ones last."""
    from zonal.experiments import registry
    from zonal.experiments.registry import get_experiment
    from zonal.experiments.reproduction_queue import reproduction_queue

    claims = [
        _claim(number="9", experiment="bo-sphere"),
        _claim(number="11", experiment="uci-report"),
        _claim(number="3", experiment="vish-flights"),
    ]
    hours = {name: get_experiment(name).cpu_hours for name in ("bo-sphere", "vish-flights")}
    assert hours["vish-flights"]["converged"] < hours["bo-sphere"]["converged"]
    unestimated = dataclasses.replace(get_experiment("uci-report"), cpu_hours={})
    monkeypatch.setitem(registry._EXPERIMENTS, "uci-report", unestimated)
    queue = reproduction_queue(tmp_path, claims)
    assert [item.experiment for item in queue] == ["vish-flights", "bo-sphere", "uci-report"]


def test_the_reproduce_queue_adds_the_unfinished_ablations_after_the_protocols(tmp_path):
    """--ablations: each declared ablation without a finished run, after the claims' own runs,
    the one in flight first (to resume), a finished one skipped, one two claims share once."""
    from zonal.experiments.reproduction_queue import reproduction_queue

    done = Ablation("done", {"steps": 10}, "cmd")
    flying = Ablation("flying", {"steps": 20}, "cmd")
    new = Ablation("new", {"hidden_variance": 0.1}, "cmd")
    claims = [
        _claim(number="8", ablations=(new, done)),
        _claim(number="8b", ablations=(flying, new)),
    ]
    _fake_run(tmp_path, "main")
    _fake_run(tmp_path, "done", overridden=("steps",), config={"steps": 10})
    flight = _fake_run(tmp_path, "flight", overridden=("steps",), config={"steps": 20},
                       finished=False)  # fmt: skip
    assert reproduction_queue(tmp_path, claims) == []
    queue = reproduction_queue(tmp_path, claims, ablations=True)
    assert [(item.folder, dict(item.settings), item.label) for item in queue] == [
        (flight, {"steps": 20}, "claim 8b ablation: flying"),
        (None, {"hidden_variance": 0.1}, "claim 8 ablation: new"),
    ]


def test_cli_reproduce_lists_its_ablations_as_commands(tmp_path, capsys):
    assert main(["experiment", "reproduce", "--runs-dir", str(tmp_path), "--list",
                 "--ablations", "--ledger", str(tmp_path / "none.json")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "--set 'models=[\"residual\"]' --set hidden_variance=0.1 (new run; cost not " in err
    assert "claim 10a ablation: residual, hidden-layer prior variance 10x (0.1)" in err


def test_cli_reproduce_lists_its_queue_with_its_cost(tmp_path, capsys):
    assert main(["experiment", "reproduce", "--runs-dir", str(tmp_path), "--list",
                 "--ledger", str(tmp_path / "none.json")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "queued uci-dgp --protocol converged (new run; about 2.5 CPU-hours)" in err
    assert "CPU-hours in all" in err


def test_numbers_outside_the_protocol_are_left_out_of_the_verdict_and_named(tmp_path):
    """A seed number whose rows the protocol never produces (a dataset only the full protocol
    runs) neither fails nor passes the claim; the report names it."""
    _fake_run(tmp_path, "r")
    claim = _claim(
        statistics=(
            *_claim().statistics,
            Statistic("huge", {"model": "deep", "size": 6400}, "score", "median", 9.0),
        )
    )
    result = evaluate_claim(claim, find_runs(tmp_path))
    assert result.verdict == "reproduced"
    write_reproductions(tmp_path, tmp_path / "report.md", [claim])
    text = (tmp_path / "report.md").read_text()
    assert "Not measured by this protocol (left out of the verdict): huge." in text


def test_an_unfinished_run_shows_the_columns_its_experiment_derives(tmp_path):
    """Claim 3's speed-up is derived from two fits of a split (``vish_flights.compare``): an
    unfinished run's checkpoint rows pass through the claim's ``derive`` before the numbers."""
    import torch

    from zonal.experiments.vish_flights import compare

    rows = [
        {"split": 0, "model": "sgpr", "rmse": 0.5, "seconds": 2.0},
        {"split": 0, "model": "rbf-svgp", "seconds": 30.0, "best_rmse": 0.45,
         "curve": [[10.0, 0.7, 100], [20.0, 0.5, 200], [30.0, 0.45, 300]]},
    ]  # fmt: skip
    claim = _claim(
        experiment="vish-flights",
        statistics=(Statistic("speed-up", {"model": "rbf-svgp"}, "speedup", seed_value=100.0),),
        orderings=(),
        derive=compare,
    )
    path = _fake_run(tmp_path, "flights", experiment="vish-flights", finished=False)
    torch.save({"rows": rows}, path / "checkpoint.pt")
    result = evaluate_claim(claim, find_runs(tmp_path))
    assert result.partial_fits == 2
    assert result.values["speed-up"].centre == 10.0  # 20 s to the SGPR's RMSE over its 2 s


def _ablated_claim():
    return _claim(ablations=(Ablation("variance 0.1", {"hidden_variance": 0.1}, "cmd a"),))


def _report_body(text):
    """The report less its 'recorded' markers."""
    return text.replace(", *recorded*)", ")").replace(" (*recorded*)", "")


def test_a_report_without_its_run_folders_keeps_their_numbers_from_the_ledger(tmp_path):
    runs = tmp_path / "runs"
    _fake_run(runs, "main")
    shifted = [dict(row, score=row["score"] + 0.5) for row in ROWS]
    _fake_run(runs, "ablation", overridden=["hidden_variance"], config={"hidden_variance": 0.1},
              rows=shifted)  # fmt: skip
    output = tmp_path / "reproductions.md"
    first = write_reproductions(runs, output, [_ablated_claim()])
    written = output.read_text()
    ledger = json.loads(output.with_suffix(".json").read_text())
    assert ledger["claims"]["8"]["run"] == "main"
    assert ledger["claims"]["8"]["values"]["deep"]["centre"] == pytest.approx(2.2)
    assert "*recorded*)" not in written

    second = write_reproductions(tmp_path / "elsewhere", output, [_ablated_claim()])
    assert second[0].verdict == first[0].verdict == "reproduced"
    assert second[0].recorded and second[0].run.name == "main"
    ((_, path, values),) = second[0].ablations
    assert path.name == "ablation" and values["deep"].centre == pytest.approx(2.7)
    again = output.read_text()
    assert "(run folder `main`, *recorded*)" in again
    assert "`cmd a`) (run folder `ablation`, *recorded*):" in again
    assert _report_body(again) == written
    assert json.loads(output.with_suffix(".json").read_text()) == ledger  # nothing lost


def test_a_finished_run_supersedes_its_ledger_entry(tmp_path):
    output = tmp_path / "reproductions.md"
    write_reproductions(_fake_run(tmp_path / "old", "old-run").parent, output, [_claim()])
    worse = [dict(row, score=-row["score"]) for row in ROWS]
    _fake_run(tmp_path / "new", "new-run", rows=worse)
    (result,) = write_reproductions(tmp_path / "new", output, [_claim()])
    assert (result.run.name, result.recorded, result.verdict) == (
        "new-run",
        False,
        "not reproduced",
    )
    ledger = json.loads(output.with_suffix(".json").read_text())
    assert ledger["claims"]["8"]["run"] == "new-run"


def test_a_ledger_entry_of_another_protocol_is_not_used(tmp_path):
    output = tmp_path / "reproductions.md"
    write_reproductions(_fake_run(tmp_path / "runs", "main").parent, output, [_claim()])
    (result,) = write_reproductions(tmp_path / "none", output, [_claim(protocol="full")])
    assert result.verdict == "not run" and result.run is None


def test_an_unreadable_ledger_is_a_named_error_that_writes_nothing(tmp_path, capsys):
    output = tmp_path / "out.md"
    output.with_suffix(".json").write_text('{"claims": []}')
    code = main(["experiment", "report", "reproductions", "--runs-dir", str(tmp_path),
                 "--output", str(output)])  # fmt: skip
    assert code != 0 and not output.exists()
    assert "no 'claims' mapping: not a reproduction ledger" in capsys.readouterr().err


def test_a_report_without_a_ledger_beside_it_says_so(tmp_path, capsys):
    output = tmp_path / "elsewhere.md"  # its ledger would be elsewhere.json
    code = main(["experiment", "report", "reproductions", "--runs-dir", str(tmp_path / "runs"),
                 "--output", str(output)])  # fmt: skip
    assert code == 0 and output.exists()
    assert f"no ledger {output.with_suffix('.json')} beside the report" in capsys.readouterr().err


def test_the_reproduce_queue_skips_what_the_ledger_records(tmp_path):
    """A claim or ablation recorded in the ledger (its folder on another machine) is not rerun;
    an entry of another protocol does not count."""
    from zonal.experiments.reproduction_queue import reproduction_queue
    from zonal.experiments.reproductions import ablation_key

    recorded_ablation = Ablation("recorded", {"steps": 10}, "cmd")
    new = Ablation("new", {"hidden_variance": 0.1}, "cmd")
    claims = [
        _claim(number="8", ablations=(recorded_ablation, new)),
        _claim(number="10b", ablations=(new,)),  # the same experiment as claim 8
        _claim(number="9", experiment="bo-sphere"),
    ]
    ledger = {
        "8": {"experiment": "residual-dgp-sphere", "protocol": "converged", "run": "gone",
              "values": {}, "ablations": {ablation_key({"steps": 10}): {"run": "", "values": {}}}},
        "9": {"experiment": "bo-sphere", "protocol": "full", "run": "gone", "values": {}},
    }  # fmt: skip
    queue = reproduction_queue(tmp_path, claims, ablations=True, recorded=ledger)
    assert [(item.experiment, dict(item.settings)) for item in queue] == [
        ("bo-sphere", {}),
        ("residual-dgp-sphere", {"hidden_variance": 0.1}),
    ]


def test_an_ablation_without_its_main_run_is_kept_by_the_ledger(tmp_path):
    """An ablation that finished where its claim's main run has not is recorded, and a later
    report without its folder shows it from the ledger."""
    runs = tmp_path / "runs"
    _fake_run(runs, "ablation", overridden=["hidden_variance"], config={"hidden_variance": 0.1})
    output = tmp_path / "reproductions.md"
    (first,) = write_reproductions(runs, output, [_ablated_claim()])
    assert first.verdict == "not run"
    entry = json.loads(output.with_suffix(".json").read_text())["claims"]["8"]
    assert (entry["experiment"], entry["protocol"], "run" in entry) == (
        "residual-dgp-sphere", "converged", False
    )  # fmt: skip
    (later,) = write_reproductions(tmp_path / "none", output, [_ablated_claim()])
    ((_, path, values),) = later.ablations
    assert path.name == "ablation" and values["deep"].centre == pytest.approx(2.2)
    assert "`cmd a`) (run folder `ablation`, *recorded*):" in output.read_text()


def _claim_in_parts():
    """Claim 8 with a size the main run leaves out, measured by a part of the protocol."""
    big_deep = Statistic("big deep", {"model": "deep", "size": 6400}, "score", "median")
    big_shallow = Statistic("big shallow", {"model": "shallow", "size": 6400}, "score", "median")
    part = Ablation("the large size", {"sizes": [6400]}, "cmd part", completes=True, cpu_hours=1.5)
    return _claim(
        statistics=(*_claim().statistics, big_deep, big_shallow),
        orderings=(*_claim().orderings, Ordering("big deep", "big shallow")),
        ablations=(part,),
    )


def _big_rows(deep_score):
    return [{"model": "deep", "size": 6400, "repeat": r, "score": deep_score, "converged": True}
            for r in range(3)] + [
        {"model": "shallow", "size": 6400, "repeat": r, "score": 1.5, "converged": r > 0}
        for r in range(3)]  # fmt: skip


def test_a_part_of_the_protocol_fills_what_the_main_run_leaves_out_and_counts(tmp_path):
    """A part (an ablation that ``completes`` the protocol) supplies the statistics the main run
    does not measure; they enter the verdict: the part's failed ordering fails the claim."""
    runs = tmp_path / "runs"
    _fake_run(runs, "main")
    claim = _claim_in_parts()
    output = tmp_path / "reproductions.md"
    (alone,) = write_reproductions(runs, output, [claim])
    assert alone.verdict == "not reproduced"  # the ordering on the large size is missing
    assert "big deep > big shallow: missing" in alone.failed

    _fake_run(runs, "part", overridden=["sizes"], config={"sizes": [6400]}, rows=_big_rows(1.0))
    (judged,) = write_reproductions(runs, output, [claim])
    assert judged.values["big deep"].count == 3 and judged.values["big deep"].centre == 1.0
    assert judged.verdict == "not reproduced"
    assert judged.failed == ["big deep (1) does not beat big shallow (1.5)"]
    text = output.read_text()
    assert "Part of the protocol (its numbers count above), the large size (`cmd part`)" in text
    assert "Convergence: 5 of 6 fits converged." in text
    assert "Not measured by this protocol" not in text

    shutil.rmtree(runs / "part")
    _fake_run(runs, "part-2", overridden=["sizes"], config={"sizes": [6400]}, rows=_big_rows(3.0),
              created="2026-02-01")  # fmt: skip
    (again,) = write_reproductions(runs, output, [claim])
    assert again.verdict == "reproduced" and again.values["big deep"].centre == 3.0


def test_a_part_of_the_protocol_is_kept_by_the_ledger_with_its_convergence(tmp_path):
    """Without any folder the report gives the same numbers, verdict and convergence line from
    the ledger; a part that finishes later replaces the numbers the recorded main run holds."""
    runs = tmp_path / "runs"
    _fake_run(runs, "main")
    _fake_run(runs, "part", overridden=["sizes"], config={"sizes": [6400]}, rows=_big_rows(3.0))
    claim, output = _claim_in_parts(), tmp_path / "reproductions.md"
    (first,) = write_reproductions(runs, output, [claim])
    written = output.read_text()
    (recorded,) = write_reproductions(tmp_path / "none", output, [claim])
    assert recorded.recorded and recorded.verdict == first.verdict == "reproduced"
    assert recorded.values == first.values
    assert _report_body(output.read_text()) == written

    newer = tmp_path / "newer"
    _fake_run(newer, "part-2", overridden=["sizes"], config={"sizes": [6400]}, rows=_big_rows(1.0))
    (later,) = write_reproductions(newer, output, [claim])
    assert later.recorded and later.values["big deep"].centre == 1.0
    assert later.verdict == "not reproduced"


def test_the_reproduce_queue_runs_the_parts_of_a_protocol_with_the_protocols(tmp_path):
    """A part of a protocol is queued without --ablations, beside its claim's own run; a finished
    part is not."""
    from zonal.experiments.reproduction_queue import reproduction_queue

    claim = _claim_in_parts()
    _fake_run(tmp_path, "main")
    (item,) = reproduction_queue(tmp_path, [claim])
    assert (item.experiment, dict(item.settings), item.folder) == (
        "residual-dgp-sphere", {"sizes": [6400]}, None
    )  # fmt: skip
    assert item.label == "claim 8 part of the protocol: the large size"
    assert item.cpu_hours == 1.5  # its own measured cost, not the experiment's protocol's
    _fake_run(tmp_path, "part", overridden=["sizes"], config={"sizes": [6400]}, rows=_big_rows(3.0))
    assert reproduction_queue(tmp_path, [claim], ablations=True) == []


def test_an_ablation_in_flight_is_named_with_its_resume_command(tmp_path):
    runs = tmp_path / "runs"
    _fake_run(runs, "main")
    _fake_run(runs, "flying", overridden=["hidden_variance"], config={"hidden_variance": 0.1},
              finished=False)  # fmt: skip
    (result,) = write_reproductions(runs, tmp_path / "out.md", [_ablated_claim()])
    ((_, path, _),) = result.ablations
    assert path is None
    text = (tmp_path / "out.md").read_text()
    assert (
        f"in flight: `flying` (resume with `zonal experiment run residual-dgp-sphere --resume "
        f"{runs / 'flying'}`); no numbers until it finishes." in text
    )
