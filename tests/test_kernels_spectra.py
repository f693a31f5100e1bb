"""The spectra experiment (seed 002 fig. 1, seed 000 fig. 8) writes its figures and checks the
seeds' statements: deeper NTKs decay more slowly, Matérn-5/2 has every level, the ReLU, Softplus
and arc-cosine spectra vanish at the odd levels >= 3."""

import json

from zonal.experiments.spectra import fit_beta, main, run_spectra


def test_run_spectra_writes_figures_and_reproduces_the_statements(tmp_path):
    metrics = run_spectra(tmp_path / "out")
    for name in metrics["figures"]:
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((tmp_path / "out" / metrics["data"]).read_text())
    assert set(data["ntk_relative_eigenvalues"]) == {"3", "10"}
    assert metrics["ntk_deeper_decays_slower"] is True
    assert metrics["ntk_d10_level10_relative_eigenvalue"] < 1e-3  # seed 002 sec. 4
    assert metrics["ntk_quadrature_max_relative_change"] < 1e-4
    assert metrics["matern52_zero_levels"] == "none"
    for name in ("relu", "softplus", "arccos"):
        assert metrics[f"{name}_zero_levels"] == "odd levels >= 3"


def test_fit_beta_recovers_a_power_law():
    import torch

    levels = torch.arange(21, dtype=torch.float64).clamp_min(1)
    assert abs(fit_beta(levels**-3.7) - 3.7) < 1e-12


def test_command_line(tmp_path, capsys):
    assert main([str(tmp_path)]) == 0
    assert '"ntk_deeper_decays_slower": true' in capsys.readouterr().out
