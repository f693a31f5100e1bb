"""Variational strategies over inter-domain inducing features."""

from zonal.variational.strategy import InterDomainVariationalStrategy

__all__ = ["InterDomainVariationalStrategy"]
