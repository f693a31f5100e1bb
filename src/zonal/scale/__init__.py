"""Beyond one process: the SGPR's statistics pass as a Dask map-reduce
(``zonal.scale.dask_statistics``, the extra ``zonal[scale]``) and data-parallel minibatch
training of the variational models under ``torch.distributed`` (``zonal.scale.data_parallel``).

The package imports nothing itself: each module is imported where it is used.
"""
