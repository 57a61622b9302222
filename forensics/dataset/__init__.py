"""The dataset: Parquet tables between ingest and reconstruction (layout in ``schema``).

Modules: :mod:`~forensics.dataset.schema` (the layout), :mod:`~forensics.dataset.writer`
(writing, atomically), :mod:`~forensics.dataset.tables` (reading as Arrow),
:mod:`~forensics.dataset.store` (loading as pandas DataFrames). This package imports none of
them itself: an ingest imports the writer and the Arrow reader and never pandas.
"""
