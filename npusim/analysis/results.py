"""The results file of a sweep: one CSV row per simulated point, append-only, resumable.

Each row is appended with a single ``write`` of one whole line (a row never holds a line break: the
line breaks of an error message become `` | ``), so an interrupted sweep leaves complete rows and at
most one torn last line, which :meth:`ResultsFile.open` drops when the sweep is resumed. A point
simulated again (it had failed) gets a new row; the last row of a key is the one that counts.
Numbers are written as Python writes floats (they read back exactly); a missing number is empty.
"""

from __future__ import annotations

import csv
import errno
import io
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from npusim.analysis.points import OUTCOME_COLUMNS
from npusim.errors import OutputError, UsageError
from npusim.files import write_bytes_atomically

TEXT_OUTCOMES = ("status", "bottleneck", "engine", "error_type", "error")
NUMERIC_COLUMNS = frozenset(column for column in OUTCOME_COLUMNS if column not in TEXT_OUTCOMES)


def columns_for(value_columns: Sequence[str]) -> list[str]:
    """The columns of a results file: the point key, the swept values, then the outcome."""
    return ["key", *value_columns, *OUTCOME_COLUMNS]


class ResultsFile:
    """An append-only CSV of rows with fixed ``columns``; a new file is created (with its header)
    by its first row, so a sweep stopped before any point finished leaves no file."""

    def __init__(self, path: Path, columns: list[str], *, exists: bool) -> None:
        self.path = path
        self.columns = columns
        self._exists = exists

    @classmethod
    def open(cls, path: Path, columns: list[str], *, resume: bool) -> tuple[ResultsFile, dict[str, dict[str, str]]]:
        """The file at ``path`` and the rows it already holds, the last row of each key (as text).
        An existing file is continued only with ``resume``."""
        results = cls(path, columns, exists=path.exists())
        if not results._exists:
            return results, {}
        if not resume:
            raise UsageError(f"{path} holds the results of an earlier sweep; add --resume to continue it (its finished points are kept), "
                             "or choose another --out folder, or delete the file")
        return results, results._read_existing()

    def _read_existing(self) -> dict[str, dict[str, str]]:
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):  # the interrupted write of the last row
            with open(self.path, "r+b") as handle:
                handle.truncate(len(complete))
        lines = complete.decode("utf-8").splitlines()
        rows = list(csv.reader(lines))
        if not rows or rows[0] != self.columns:
            found = ", ".join(rows[0]) if rows else "nothing"
            raise UsageError(f"{self.path} was written by a different sweep (its columns: {found}; this sweep's: {', '.join(self.columns)}); "
                             "resume with the same grid, or choose another --out folder")
        recorded = {}
        for number, row in enumerate(rows[1:], start=2):
            if len(row) != len(self.columns):
                raise UsageError(f"{self.path}:{number}: {len(row)} fields where the header has {len(self.columns)}; "
                                 "the file was edited or damaged: fix or delete that line")
            recorded[row[0]] = dict(zip(self.columns, row))
        return recorded

    def append(self, row: dict[str, Any]) -> dict[str, str]:
        """Append ``row`` (one value per column) as one line; returns it as written (text). A line
        that cannot be written whole (a full disk) is taken back: an OutputError, the file holding
        whole rows only."""
        texts = [cell_text(row[column]) for column in self.columns]
        try:
            lines = [texts]
            if not self._exists:  # the header and the first row in one write: a file that exists holds a row
                self.path.parent.mkdir(parents=True, exist_ok=True)
                lines.insert(0, self.columns)
            self._append_lines(lines)
            self._exists = True
        except OSError as error:
            raise OutputError(f"cannot append a row to {str(self.path)!r}: {error.strerror or error}; the rows before it are whole: free "
                              "some space, then run the same command with --resume to simulate only the points not in it") from None
        return dict(zip(self.columns, texts))

    def _append_lines(self, rows: Sequence[Sequence[str]]) -> None:
        """``rows`` appended by one write (a signal cannot fall between them), or none of them."""
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        line = buffer.getvalue().encode("utf-8")
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            before = os.fstat(descriptor).st_size
            try:
                written = os.write(descriptor, line)
            except OSError:
                os.ftruncate(descriptor, before)  # anything of the line that got there
                raise
            if written < len(line):  # the disk filled up within the line
                os.ftruncate(descriptor, before)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        finally:
            os.close(descriptor)


def cell_text(value: Any) -> str:
    """A value as a results-file cell: floats exactly (``nan`` empty), text on one line."""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return " | ".join(str(value).splitlines())


def typed_rows(rows: Iterable[dict[str, str]], value_columns: Sequence[str]) -> list[dict[str, Any]]:
    """Rows read as text with numbers as floats (missing: nan) and each swept column as ints or
    floats when all its values are numbers, else as text."""
    rows = [dict(row) for row in rows]
    for row in rows:
        for column in NUMERIC_COLUMNS:
            row[column] = float(row[column]) if row[column] != "" else math.nan
    for column in value_columns:
        converted = typed_values([row[column] for row in rows])
        for row, value in zip(rows, converted):
            row[column] = value
    return rows


def typed_values(texts: list[str]) -> list[Any]:
    """``texts`` as ints if all are whole numbers, as floats if all are numbers, else unchanged."""
    for kind in (int, float):
        try:
            return [kind(text) for text in texts]
        except ValueError:
            continue
    return texts


def write_parquet(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> bool:
    """Write ``rows`` to ``path`` as Parquet when pyarrow is installed; returns whether it was."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        return False
    table = pyarrow.table({column: [row[column] for row in rows] for column in columns})
    sink = pyarrow.BufferOutputStream()
    pyarrow.parquet.write_table(table, sink)
    write_bytes_atomically(path, sink.getvalue().to_pybytes())
    return True
