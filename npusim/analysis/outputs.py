"""The files a run folder holds besides the trace, summary and manifest: the resolved config and
the profiler's tables. Each is made here as bytes, so the CLI writes them where and how it writes
the rest of the folder."""

from __future__ import annotations

from npusim.analysis.profiling import PIPE_UTILIZATION_COLUMNS, CoreEvents, csv_bytes, op_summary, op_summary_columns, pipe_utilization
from npusim.config import LoadedConfig
from npusim.config.annotated import annotated_yaml, confidence_summary, header
from npusim.trace.record import RunRecord
from npusim.trace.summary import Table

CONFIG_FILE = "config.yaml"
OP_SUMMARY_FILE = "op_summary.csv"
PIPE_UTILIZATION_FILE = "pipe_utilization.csv"
RUN_FOLDER_FILES = (CONFIG_FILE, OP_SUMMARY_FILE, PIPE_UTILIZATION_FILE)
"""The names :func:`run_folder_files` makes, in its order."""


def run_folder_files(record: RunRecord, loaded: LoadedConfig, op_spans: Table | None = None) -> dict[str, bytes]:
    """File name -> bytes: ``config.yaml`` (the config as simulated, overrides applied, each value
    with its source; ``--config`` takes it again), ``op_summary.csv`` (a row per op launch) and
    ``pipe_utilization.csv`` (a row per AI core) of :mod:`npusim.analysis.profiling`. ``op_spans``:
    the run summary's ``ops``, if made (else they are)."""
    events = CoreEvents(record)
    return {
        CONFIG_FILE: (header(loaded) + annotated_yaml(loaded) + confidence_summary(loaded)).encode("utf-8"),
        OP_SUMMARY_FILE: csv_bytes(op_summary_columns(record.spec), op_summary(record, events, op_spans)),
        PIPE_UTILIZATION_FILE: csv_bytes(PIPE_UTILIZATION_COLUMNS, pipe_utilization(record, events)),
    }
