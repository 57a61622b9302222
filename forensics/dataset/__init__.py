"""The dataset: Parquet tables between ingest and reconstruction (layout in ``schema``)."""
from forensics.dataset.schema import SCHEMA_VERSION, SCHEMAS, TABLES
from forensics.dataset.store import Dataset, DatasetWriter, load

__all__ = ["SCHEMA_VERSION", "SCHEMAS", "TABLES", "Dataset", "DatasetWriter", "load"]
