"""The models of the dataset-shift experiments (``zonal.experiments.dataset_shift``): their
seeds, the ADGP of the configured architecture, the training of every model (to a fixed epoch
count, or to convergence: early stopping on held-out images and ELBO stages to their plateau), and
the size of their heads."""

from __future__ import annotations

import time
import zlib
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from zonal.models.conv_head import ConvActivatedDGP, HybridNetwork


def unit_seed(config: dict[str, Any], dataset: str, repeat: int, part: str = "") -> int:
    """A seed of its own for each (dataset, repeat, part), stable across runs and resumes."""
    return zlib.crc32(f"{config['seed']}/{dataset}/{repeat}/{part}".encode()) % 2**31


def fresh_model(config: dict[str, Any], shape: tuple[int, ...], seed: int) -> ConvActivatedDGP:
    """A ``ConvActivatedDGP`` of the config's architecture, initialised from ``seed``."""
    from zonal.models.conv_head import ConvActivatedDGP, ConvFeatures

    extractor = ConvFeatures(
        shape, channels=tuple(config["channels"]), feature_dim=config["feature_dim"], seed=seed
    )
    return ConvActivatedDGP.build(
        shape,
        10,
        extractor=extractor,
        hidden_width=config["hidden_width"],
        num_inducing=config["num_inducing"],
        truncation_level=config["truncation_level"],
        num_posterior_samples=config["posterior_samples"],
        seed=seed,
    )


def train_models(
    config: dict[str, Any],
    images: torch.Tensor,
    labels: torch.Tensor,
    test: torch.Tensor,
    seed: int,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[dict[str, Any], dict[str, float], list[dict[str, Any]]]:
    """Every model of ``config["models"]`` trained on (images, labels); also the seconds each
    took, the ADGP's copy error on ``test``, the convergence of every training (``info``) and the
    networks' validation curves (one row per network and epoch).

    With ``validation`` (images, labels) each network trains until its validation log likelihood
    has not improved for ``patience`` epochs (at most ``network_epochs``) and keeps its best
    epoch (``train_classifier_to_convergence``); without, for ``network_epochs`` epochs. The heads'
    ELBO stages run ``elbo_epochs`` epochs, or with ``elbo_until_plateau`` stop at the first epoch
    end where the plateau rule of ``zonal.experiments._convergence`` holds (``elbo_epochs`` is then
    the cap); every stage's curve is judged by that rule."""
    from zonal.experiments._convergence import StopAtPlateau, curve_summary
    from zonal.models.baselines import (
        DeepEnsembleClassifier,
        MCDropoutClassifier,
        inducing_point_head,
    )
    from zonal.models.classifier_training import train_classifier_to_convergence
    from zonal.models.conv_head import (
        epochs_to_steps,
        fine_tune_jointly,
        fit_dgp_head,
        train_classifier,
    )

    shape = tuple(images.shape[1:])
    wanted = set(config["models"])
    options = {"batch_size": config["batch_size"], "lr": config["network_lr"]}
    elbo = {"batch_size": config["batch_size"], "lr": config["elbo_lr"],
            "num_samples": config["elbo_samples"]}  # fmt: skip
    models: dict[str, Any] = {}
    info: dict[str, float] = {}
    curves: list[dict[str, Any]] = []

    def network_of(part: str, dropout: float = 0.0) -> HybridNetwork:
        member_seed = unit_seed(config, "net", seed, part)
        network = fresh_model(config, shape, member_seed).network_like(member_seed, dropout=dropout)
        started = time.perf_counter()
        if validation is None:
            train_classifier(network, images, labels, epochs=config["network_epochs"],
                             seed=member_seed, **options)  # fmt: skip
        else:
            history = train_classifier_to_convergence(
                network, images, labels, *validation, max_epochs=config["network_epochs"],
                patience=config["patience"], seed=member_seed, **options,
            )  # fmt: skip
            info[f"{part}_epochs"] = history.epochs
            info[f"{part}_best_epoch"] = history.best_epoch
            info[f"{part}_stopped_early"] = float(history.stopped_early)
            curves.extend({"part": part, "epoch": epoch, "validation_tll": value}
                          for epoch, value in enumerate(history.validation))  # fmt: skip
        info[f"{part}_train_seconds"] = time.perf_counter() - started
        return network

    def fit_head(name: str, head: Any) -> None:
        """The head's ELBO stage: ``elbo_epochs`` epochs, or with ``elbo_until_plateau`` up to
        the first epoch end where the plateau rule holds; judged by that rule either way."""
        per_epoch = epochs_to_steps(len(images), config["batch_size"], 1)
        stopper = StopAtPlateau(per_epoch) if config["elbo_until_plateau"] else None
        losses = fit_dgp_head(head, images, labels, epochs=config["elbo_epochs"], seed=seed,
                              callback=stopper, **elbo)  # fmt: skip
        verdict = curve_summary(losses)
        info[f"{name}_elbo_epochs"] = len(losses) / per_epoch
        info[f"{name}_elbo_plateau_drop"] = verdict["plateau_drop"]
        info[f"{name}_elbo_converged"] = float(verdict["converged"])

    network = network_of("network")
    models["network"] = network
    if "dropout" in wanted:
        dropout_network = network_of("dropout", config["dropout"])
        models["dropout"] = MCDropoutClassifier(
            dropout_network, num_passes=config["dropout_passes"], seed=seed
        )
    if "ensemble" in wanted:
        members = [network] + [network_of(f"member{e}") for e in range(1, config["ensemble_size"])]
        models["ensemble"] = DeepEnsembleClassifier(members)
    if "adgp" in wanted:
        model = fresh_model(config, shape, seed)
        model.from_network(network, kernel_variance=config["head_kernel_variance"],
                           variational_scale=config["head_initial_scale"])  # fmt: skip
        network.eval()
        with torch.no_grad():
            logits = torch.cat([network(test[s : s + 256]) for s in range(0, len(test), 256)])
        info["adgp_copy_error"] = float((model.logits_mean(test) - logits).abs().max())
        started = time.perf_counter()
        fit_head("adgp", model)
        if config["joint_epochs"] > 0:
            fine_tune_jointly(model, images, labels, epochs=config["joint_epochs"], seed=seed,
                              **{**elbo, "lr": config["network_lr"]})  # fmt: skip
        info["adgp_train_seconds"] = time.perf_counter() - started
        models["adgp"] = model
    if "dgp" in wanted:
        started = time.perf_counter()
        dgp = inducing_point_head(
            network,
            images,
            hidden_width=config["hidden_width"],
            num_inducing=config["num_inducing"],
            num_posterior_samples=config["posterior_samples"],
            seed=seed,
        )
        dgp.softmax_samples = config["softmax_samples"]
        fit_head("dgp", dgp)
        info["dgp_train_seconds"] = time.perf_counter() - started
        models["dgp"] = dgp
    if "adgp" in models:
        models["adgp"].softmax_samples = config["softmax_samples"]
    if "network" not in wanted:
        del models["network"]
    return models, info, curves


def head_bytes(name: str, model: Any) -> int:
    """Bytes of the parameters after the extractor (the head; all members of an ensemble)."""
    if name == "ensemble":
        return sum(head_bytes("network", member) for member in model.members)
    if name == "dropout":
        model = model.network
    return sum(p.numel() * p.element_size() for p in model.head.parameters())


def hold_out(
    images: torch.Tensor, labels: torch.Tensor, share: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """(training images, labels, (validation images, labels)): a random ``share`` of the training
    images held out for early stopping (at least one each way); share 0: no validation set."""
    if share == 0:
        return images, labels, None
    count = min(max(1, round(share * len(images))), len(images) - 1)
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))
    kept, held = order[count:], order[:count]
    return images[kept], labels[kept], (images[held], labels[held])
