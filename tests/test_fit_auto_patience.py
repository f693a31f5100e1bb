"""``auto``'s SVGP classifiers run each training stage to its end and keep the best validated
state (``zonal.tabular.candidates.stops_early``); the other candidates, a named model and every
regression candidate still end a stage on a validation plateau."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from zonal.models.training import StopTraining, TrainingControl
from zonal.tabular import candidates as candidates_module
from zonal.tabular.candidates import stops_early, train_candidates
from zonal.tabular.split import Split
from zonal.tabular.targets import REGRESSION, Target

BINARY = Target("bernoulli", ("0", "1"))


class _Scored(torch.nn.Module):
    """A module whose validation score is its one parameter's value."""

    def __init__(self) -> None:
        super().__init__()
        self.value = torch.nn.Parameter(torch.tensor(0.0))


def _steps_taken(control: TrainingControl, scores: list[float]) -> tuple[int, float]:
    """Run one stage of len(scores) steps whose module scores scores[k] after step k; return
    (the steps taken before the stage ended, the value of the state kept)."""
    module = _Scored()
    taken = 0
    with control.watch(module, len(scores), stage="stage") as watch:
        try:
            for step, score in enumerate(scores):
                with torch.no_grad():
                    module.value.fill_(score)
                taken = step + 1
                watch(step, 0.0)
        except StopTraining:
            pass
    return taken, float(module.value.detach())


def test_a_control_without_early_stopping_runs_to_the_end_and_keeps_the_best_state():
    scores = [1.0, 5.0] + [2.0] * 40  # the best state at step 1, then a long plateau below it
    score = lambda module: float(module.value.detach())  # noqa: E731
    stopped = _steps_taken(TrainingControl(score=score, patience=3, interval=1), scores)
    assert stopped[0] < len(scores)  # the plateau ends the stage ...
    assert stopped[1] == 5.0
    kept = _steps_taken(
        TrainingControl(score=score, patience=3, interval=1, early_stopping=False), scores
    )
    assert kept == (len(scores), 5.0)  # ... unless early stopping is off: the best state kept


def test_only_the_svgp_classifiers_of_auto_run_their_stages_to_the_end():
    softmax = Target("softmax", ("a", "b", "c"))
    for name in ("svgp", "svgp-activated", "svgp-points"):
        assert not stops_early(name, BINARY)
        assert not stops_early(name, softmax)
        assert stops_early(name, REGRESSION)
    for name in ("adgp", "sgpr", "exact"):
        assert stops_early(name, BINARY if name == "adgp" else REGRESSION)


@pytest.mark.parametrize(("automatic", "expected"), [(True, False), (False, True)])
def test_train_candidates_gives_the_svgp_classifier_its_early_stopping(
    monkeypatch: pytest.MonkeyPatch, automatic: bool, expected: bool
):
    controls: list[TrainingControl] = []
    real_train = candidates_module.train

    def recording_train(spec: dict[str, Any], x, y, control: TrainingControl):
        controls.append(control)
        return real_train(spec, x, y, control)

    monkeypatch.setattr(candidates_module, "train", recording_train)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(60, 2, generator=generator, dtype=torch.float64)  # [N, D]
    y = (x[:, 0] > 0).long()  # [N]
    split = Split(x[:40], y[:40], x[40:], y[40:])
    train_candidates(["svgp-points"], split, BINARY, None, False, automatic=automatic, seed=0,
                     options={"num_inducing": 8, "steps": 4})  # fmt: skip
    assert len(controls) == 1
    assert controls[0].early_stopping is expected
    assert controls[0].score is not None  # the best validated state is kept either way
