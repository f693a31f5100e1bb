"""ARD (per-input scales of the sphere embedding) in ``zonal fit``: saved and reloaded with the
model, on by default under ``--model auto``, refused by name for the inducing-point DGP."""

from __future__ import annotations

import numpy as np
import pytest

from zonal.cli import main
from zonal.tabular import fitting
from zonal.tabular.fitting import fit_data
from zonal.tabular.predict import predict_data
from zonal.tabular.saved import load_model, save_model


def relevant_two_of_four(num_rows: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(num_rows, 4))
    return x, np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] + 0.05 * rng.normal(size=num_rows)


@pytest.mark.parametrize("model", ["sgpr", "svgp-activated"])
def test_ard_scales_are_learnt_saved_and_reloaded(model, tmp_path):
    x, y = relevant_two_of_four()
    options = {"num_inducing": 40, "steps": 30} if model == "sgpr" else {"num_inducing": 16,
                                                                          "steps": 150}  # fmt: skip
    fitted = fit_data(x, y, feature_columns=list("abcd"), model=model, ard=True, **options)
    scales = fitted.trained.model.input_map.input_scales.detach().numpy()  # [4]
    if model == "sgpr":  # L-BFGS on the bound: the two unused columns are switched off
        assert scales[2:].max() < 0.1 * scales[:2].min()
    else:  # Adam moved them from their start of 1, the used columns above the unused
        assert np.abs(scales - 1.0).max() > 0.1
        assert scales[:2].min() > scales[2:].max()
    save_model(fitted, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    np.testing.assert_array_equal(loaded.trained.model.input_map.input_scales.detach().numpy(),
                                  scales)  # fmt: skip
    before, after = predict_data(fitted, x[:7]), predict_data(loaded, x[:7])
    for key in before:
        np.testing.assert_allclose(after[key], before[key], rtol=1e-12, atol=1e-12)


def test_ard_is_on_under_auto_and_refused_for_the_inducing_point_dgp(tmp_path, capsys, monkeypatch):
    x, y = relevant_two_of_four(120)
    data = tmp_path / "table.csv"
    data.write_text("a,b,c,d,y\n" + "\n".join(",".join(map(str, [*row, t]))
                                              for row, t in zip(x, y, strict=True)) + "\n")  # fmt: skip
    checkpoint = tmp_path / "m.pt"
    args = ["fit", str(data), "--target", "y", "--num-inducing", "20", "--steps", "20", "--quiet"]
    assert main([*args, "--model", "dgp", "--ard", "-o", str(checkpoint)]) == 1
    assert "dgp builds its own layer embeddings" in capsys.readouterr().err
    monkeypatch.setattr(
        fitting, "auto_candidates", lambda *shape, **rule: ["sgpr", "svgp-activated"]
    )
    fitted = fit_data(x, y, feature_columns=list("abcd"), num_inducing=20, steps=20)
    specs = fitted.spec.get("components", [fitted.spec])  # a stack, or the one model kept
    members = getattr(fitted.trained.model, "components", [fitted.trained.model])
    for spec, member in zip(specs, members, strict=True):
        assert spec["ard"] and member.input_map.input_scales is not None
    off = fit_data(x, y, feature_columns=list("abcd"), model="sgpr", num_inducing=20, steps=20)
    assert not off.spec["ard"] and off.trained.model.input_map.input_scales is None
