"""Variational strategies over inter-domain inducing features, and :math:`q(u)` at the ELBO's
optimum for any likelihood (``nonconjugate``)."""

from zonal.variational.nonconjugate import NaturalGradientResult, optimal_variational_q
from zonal.variational.strategy import InterDomainVariationalStrategy

__all__ = ["InterDomainVariationalStrategy", "NaturalGradientResult", "optimal_variational_q"]
