"""k-means in torch (k-means++ seeding, then Lloyd's steps), for initialising inducing locations
(seed 004 eq. 3.5's baseline)."""

from __future__ import annotations

import torch


def within_cluster_sum_of_squares(x: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """sum_i min_k |x_i - c_k|^2 for points x [N, D] and centres [K, D]: a scalar."""
    return torch.cdist(x, centres).min(-1).values.pow(2).sum()


def kmeans(
    x: torch.Tensor,
    num_clusters: int,
    *,
    num_iterations: int = 100,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """:math:`K` centres [K, D] of the points :math:`x` [N, D]: Lloyd's algorithm from k-means++
    seeds.

    Seeds: the first centre is a uniform draw, each next one a point drawn with probability
    proportional to its squared distance to the nearest centre so far (Arthur and Vassilvitskii
    2007). Lloyd's steps then alternate nearest-centre assignment and centre = mean of its points
    (an empty cluster takes the point farthest from its centre) until the assignment repeats or
    ``num_iterations`` steps; neither step increases the within-cluster sum of squares.
    ``generator`` (a CPU generator; default seed 0) makes the draws reproducible.
    """
    count = x.shape[0]
    if x.dim() != 2 or not 1 <= num_clusters <= count:
        raise ValueError(
            f"k-means needs points [N, D] and 1 <= num_clusters <= N, got {tuple(x.shape)} and "
            f"{num_clusters}"
        )
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    chosen = [int(torch.randint(count, (1,), generator=generator))]
    nearest = (x - x[chosen[0]]).pow(2).sum(-1)  # [N]
    for _ in range(1, num_clusters):
        weights = nearest.detach().cpu()
        weights = torch.ones_like(weights) if float(weights.sum()) == 0 else weights
        chosen.append(int(torch.multinomial(weights, 1, generator=generator)))
        nearest = torch.minimum(nearest, (x - x[chosen[-1]]).pow(2).sum(-1))
    centres = x[chosen].clone()  # [K, D]
    assignment = None
    for _ in range(num_iterations):
        distances = torch.cdist(x, centres)  # [N, K]
        new_assignment = distances.argmin(-1)  # [N]
        if assignment is not None and torch.equal(new_assignment, assignment):
            break
        assignment = new_assignment
        counts = torch.bincount(assignment, minlength=num_clusters)  # [K]
        sums = torch.zeros_like(centres).index_add_(0, assignment, x)  # [K, D]
        centres = sums / counts.clamp(min=1).unsqueeze(-1).to(x.dtype)
        empty = torch.nonzero(counts == 0).squeeze(-1)
        if len(empty):
            own = distances.gather(-1, assignment.unsqueeze(-1)).squeeze(-1)  # [N]
            centres[empty] = x[own.topk(len(empty)).indices]
    return centres
