"""Output files and folders written so that a reader, an interrupted run or a full disk never
leaves half of one, and the default names of output folders.

A file is written under a unique temporary name beside it and renamed over it
(:func:`atomic_path`). An output folder (a run's ``trace.json``, ``summary.json`` ...) is a list
of named :class:`Output` s written into a fresh temporary folder beside its destination, which one
rename then puts in place (:class:`StagedFolder`): a reader sees the whole previous folder or the
whole new one, never a mix. Every temporary is removed on every failure path this process sees;
one left by a killed process (its name holds the process id) is removed by the next writer of the
same destination. npusim knows its own folders by the marker it writes last into each
(:data:`MARKER`: the folder's identity and the files it wrote) and never replaces, moves or
deletes any other (:func:`folder_mark`). docs/reliability.md lists the guarantees and their tests.

A file whose writing splits in two (the trace: its events and flows, then its counters) can be
written on two cores (:class:`Output` ``start``, :class:`Forked`): a forked copy of this process
writes one part while this one writes the rest of the folder, each file byte for byte what one
process writes; a failure of the copy is raised here as the error it met, and the copy never
outlives the writing (killed and reaped on every failure path, Ctrl-C included). Work of
independent pieces is shared by the two as each comes to it (:class:`TwoEnds`).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import glob
import hashlib
import itertools
import json
import os
import pickle
import re
import secrets
import shutil
import signal
import struct
import tempfile
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast

from npusim.errors import OutputError, UsageError

_NOT_IN_A_FOLDER_NAME = re.compile(r"[^\w.-]")
PARTIAL = ".partial-"
"""Marks the temporary name of a folder or file being written: ``.<name>.partial-<pid>-<random>``."""


def default_folder_name(workload: Path, config_name: str, settings: Sequence[str] = ()) -> str:
    """``<workload>-<config>``, the default output folder of a run or a sweep (under ``traces/`` or
    ``sweeps/``), followed by ``-<8 hex digits>`` of the SHA-256 of ``settings`` when there are any
    (the options that change what is simulated, e.g. ``--set die.hbm.bandwidth=3.2 TB/s``, in the
    order they were given), so that runs with different settings do not replace each other; made
    one safe path component: every character but letters, digits, ``_``, ``.`` and ``-`` (a ``/``
    above all) becomes ``_``, and so does a leading ``.``; the folder stays inside its parent
    whatever the names hold."""
    name = _NOT_IN_A_FOLDER_NAME.sub("_", f"{workload.stem}-{config_name}")
    if settings:
        name += "-" + hashlib.sha256("\n".join(settings).encode("utf-8")).hexdigest()[:8]
    return "_" + name[1:] if name.startswith(".") else name


def output_path(out: Path) -> Path:
    """The output folder ``out`` as an absolute path, fixed before anything runs (a workload may
    change the working folder, and a relative ``--out`` must not follow it). A UsageError when it
    names a folder npusim could not replace whole: ``.``, ``..``, ``/``, the working folder or
    one above it."""
    cwd = Path.cwd()
    absolute = cwd / out
    resolved, here = absolute.resolve(), cwd.resolve()
    if out.name in ("", ".", "..") or resolved == here or resolved in here.parents:
        where = "the working folder" if resolved == here else f"{str(resolved)!r}, which holds the working folder"
        raise UsageError(f"--out {str(out)!r} is {where}: npusim replaces the whole --out folder with the run; give a folder of its own, "
                         "e.g. --out traces/run1")
    return absolute


def temporary_name(path: Path) -> Path:
    """A name beside ``path`` that no other writer uses: hidden, with this process's id."""
    return path.with_name(f".{path.name}{PARTIAL}{os.getpid()}-{secrets.token_hex(4)}")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A unique temporary path beside ``path`` to write; renamed over ``path`` when the block ends,
    removed when it raises (a full disk, an interrupt)."""
    temporary = temporary_name(path)
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary name next to ``path``, then rename it over ``path``."""
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)


def json_bytes(data: Any) -> bytes:
    """``data`` as indented JSON with sorted keys, the form of every JSON file npusim writes:
    ``json.dumps(data, indent=2, sort_keys=True)``, byte for byte, written faster (:func:`_indented`)."""
    parts: list[str] = []
    try:
        _indented(data, 0, set(), parts)
    except _Unusual:
        parts = [json.dumps(data, indent=2, sort_keys=True)]
    text = "".join(parts)
    del parts
    encoded = text.encode("utf-8")
    del text  # a summary's text is ~50 MB: not held while its bytes are copied once more
    return encoded + b"\n"


_PLAIN = (str, int, float, bool, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)
_ENCODE = json.JSONEncoder(sort_keys=True).encode  # one plain value (or a flat container on one line)


class _Unusual(Exception):
    """What :func:`_indented` leaves to the json module: a type other than dict, list, tuple and the
    plain ones (a subclass included), a mapping with keys other than strings holding containers, a cycle."""


@functools.cache
def _flat_encoder(level: int) -> Callable[[Any], str]:
    """The C encoder of a list or mapping of plain values whose entries sit at nesting ``level``:
    the line break and indent between entries are its item separator."""
    return json.JSONEncoder(sort_keys=True, separators=(",\n" + "  " * level, ": ")).encode


def _indented(value: Any, level: int, containing: set[int], parts: list[str]) -> None:
    """``value`` as ``json.dumps(value, indent=2, sort_keys=True)`` writes it at nesting ``level``,
    appended to ``parts``. The indented form is the json module's pure-Python encoder; here a list
    or mapping of plain values (a column of a summary's table) goes to its C encoder in one call
    instead, a list of such mappings (rows: a summary's warnings) in a few (:func:`_rows`), and
    only the others are written entry by entry."""
    kind = type(value)
    if kind in _PLAIN:
        parts.append(_ENCODE(value))
        return
    if kind not in (dict, list, tuple):
        raise _Unusual
    if not value:
        parts.append("{}" if kind is dict else "[]")
        return
    pad = "\n" + "  " * level
    if _PLAIN_TYPES.issuperset(map(type, value.values() if kind is dict else value)):  # a C loop: a summary's column holds 134,400 values
        text = _flat_encoder(level + 1)(value)
        parts.append(f"{text[0]}{pad}  {text[1:-1]}{pad}{text[-1]}")
        return
    if kind is not dict and _all_rows(value):
        _rows(value, level, parts)
        return
    if id(value) in containing or (kind is dict and not all(type(key) is str for key in value)):
        raise _Unusual
    containing.add(id(value))
    inner = pad + "  "
    parts.append(("{" if kind is dict else "[") + inner)
    items = sorted(value.items()) if kind is dict else enumerate(value)
    for index, (key, child) in enumerate(items):
        if index:
            parts.append("," + inner)
        if kind is dict:
            parts.append(f"{_ENCODE(key)}: ")
        _indented(child, level + 1, containing, parts)
    parts.append(pad + ("}" if kind is dict else "]"))
    containing.discard(id(value))


def _all_rows(value: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every entry of ``value`` is a non-empty dict of plain values (checked by C loops:
    a racy run's warnings may be thousands)."""
    return (set(map(type, value)) == {dict} and all(value)
            and _PLAIN_TYPES.issuperset(map(type, itertools.chain.from_iterable(map(dict.values, value)))))


ROWS_AT_ONCE = 4096
"""Rows :func:`_rows` gives the C encoder at a time: few calls, and no text of a whole long table
at once besides the result."""


def _rows(rows: list[dict[str, Any]] | tuple[dict[str, Any], ...], level: int, parts: list[str]) -> None:
    """A list of non-empty dicts of plain values (:func:`_all_rows`) at nesting ``level``, as
    :func:`_indented` writes it, appended to ``parts`` in chunks of :data:`ROWS_AT_ONCE` rows, each
    written by one call of the C encoder: that writes the rows' entries apart as the indented form
    does, the list's too but at the rows' entries' indent, and the rows' braces on their entries'
    lines. A row's entry never ends in ``}`` and its key always starts with ``"``, and a string's
    line breaks are escaped, so ``},`` + a line break can only end a row: there the line breaks and
    indents of the rows' braces and of the list's separator go in."""
    row_pad, entry_pad = "\n" + "  " * (level + 1), "\n" + "  " * (level + 2)
    between = row_pad + "}," + row_pad + "{" + entry_pad
    encode = _flat_encoder(level + 2)
    parts.append(f"[{row_pad}{{{entry_pad}")
    for first in range(0, len(rows), ROWS_AT_ONCE):
        if first:
            parts.append(between)
        text = encode(rows[first:first + ROWS_AT_ONCE])  # [{"a": 1,<entry_pad>"b": 2},<entry_pad>{"a": 3, ...}]
        parts.append(text[2:-2].replace("}," + entry_pad + "{", between))
    parts.append(f"{row_pad}}}{row_pad[:-2]}]")


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """``data`` as indented JSON with sorted keys, written atomically."""
    write_bytes_atomically(path, json_bytes(data))


class Pending(Protocol):
    """A file being written partly by another process (:attr:`Output.start`)."""

    def finish(self) -> object:
        """Write the rest and wait for the other process: the file is whole when this returns
        (raises what either process met; nothing is left of the file then)."""

    def abandon(self) -> None:
        """Stop the other process and remove what was written (nothing once finished)."""


@dataclass(frozen=True)
class Output:
    """One file of an output folder: its name and what writes it (called with the path to write);
    ``start``, for a file that can be written on two cores, begins writing it at the path with a
    forked copy of this process (:class:`Forked`) and returns what finishes it."""

    name: str
    write: Callable[[Path], object]
    start: Callable[[Path], Pending] | None = None

    @classmethod
    def made(cls, name: str, make: Callable[[], bytes]) -> Output:
        """A file of the bytes ``make`` returns, made when the file is written."""
        return cls(name, lambda path: path.write_bytes(make()))

    @classmethod
    def json(cls, name: str, document: Any) -> Output:
        """A JSON file of ``document`` (:func:`json_bytes`), encoded when the file is written."""
        return cls.made(name, lambda: json_bytes(document))


MARKER = ".npusim-folder.json"
"""The file npusim writes into each of its output folders, and the one sign it knows them by: the
folder's identity (``id``, a random 32-hex-digit name that the run's ``manifest.json`` or the
sweep's ``sweep.json`` records too), its ``kind`` (``run`` or ``sweep``), whether the work it holds
ended well (``ok``) and the ``files`` npusim writes there. A run folder gets it last (written whole
beside its destination); a sweep folder, written in place, as the sweep takes the folder (``ok``
false until the sweep ends). A folder is npusim's, which it may replace, move aside, delete or
write into, only when it holds a valid marker of the right kind and nothing but the files the
marker lists (and their temporaries: :func:`temporary_name`) (:func:`folder_mark`): a folder of the
user's, one that merely holds a ``manifest.json`` or a ``sweep.json``, an npusim folder the user
added a file to, or a sweep's folder given to ``run`` (and a run's to ``sweep``) is never touched."""


@dataclass(frozen=True)
class FolderMark:
    """What npusim wrote a folder as (its :data:`MARKER`)."""

    id: str
    kind: str
    ok: bool
    files: tuple[str, ...]


_ID = re.compile(r"[0-9a-f]{32}")
LegacyMark = Callable[[Path, Collection[str]], FolderMark | None]
"""How a kind of folder written before npusim wrote markers is known (the folder and its entries):
its mark, or None when it is not one."""


def folder_mark(folder: Path, legacy: LegacyMark | None = None, *, kind: str | None = None) -> FolderMark | None:
    """``folder``'s mark when it is an npusim output folder (of ``kind``, when given), else None: its
    :data:`MARKER` is a JSON object of the marker's fields, and every other entry of the folder is a
    file the marker lists or a temporary of one (:func:`temporary_name`: a file being written in
    place, or left by a writer that was killed) (else, without a marker, what ``legacy`` says of
    it). A symlink, a file, or a folder that cannot be read is not one."""
    if folder.is_symlink() or not folder.is_dir():
        return None
    try:
        entries = set(os.listdir(folder))
    except OSError:
        return None
    if MARKER not in entries:
        mark = legacy(folder, entries) if legacy is not None else None
    else:
        mark = _read_mark(folder)
        if mark is not None and _unlisted(entries, mark.files):
            mark = None
    return mark if mark is not None and kind in (None, mark.kind) else None


def _read_mark(folder: Path) -> FolderMark | None:
    """The :data:`MARKER` in ``folder``, or None when it is not one npusim wrote."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        mark = FolderMark(marker["id"], marker["kind"], marker["ok"], tuple(marker["files"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not (isinstance(mark.id, str) and _ID.fullmatch(mark.id) and isinstance(mark.kind, str) and isinstance(mark.ok, bool)
            and all(isinstance(name, str) for name in mark.files)):
        return None
    return mark


def _unlisted(entries: Iterable[str], files: Collection[str]) -> list[str]:
    """The ``entries`` of a folder that are neither the marker, one of ``files``, nor a temporary of one of them, sorted."""
    names = {*files, MARKER}
    return sorted(name for name in entries if name not in names
                  and not (name.startswith(".") and PARTIAL in name and name[1:name.rindex(PARTIAL)] in names))


def write_marker(folder: Path, mark: FolderMark) -> None:
    """Write ``mark`` as ``folder``'s :data:`MARKER` (atomically: a reader sees the old marker or the new one)."""
    write_json_atomically(folder / MARKER, {"id": mark.id, "kind": mark.kind, "ok": mark.ok, "files": list(mark.files)})


def not_npusims(target: Path, kind: str, legacy: LegacyMark | None = None) -> str | None:
    """Why npusim may not replace or write into ``target`` as a folder of ``kind``, or None: it is
    absent, an empty folder or an npusim folder of that kind (:func:`folder_mark`)."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        return f"{_named(target)!r} exists and is not a folder"
    if not target.is_dir():
        return None
    try:
        entries = sorted(os.listdir(target))
    except OSError as error:
        return f"{_named(target)!r} cannot be read ({error.strerror or error})"
    if not entries:
        return None
    mark = folder_mark(target, legacy)
    if mark is not None:
        return None if mark.kind == kind else f"{_named(target)!r} is an npusim {mark.kind} folder, not a {kind} folder"
    if MARKER not in entries:
        return (f"{_named(target)!r} is not an npusim output folder (it has no {MARKER}, the marker npusim writes into its own) and is not "
                "empty")
    marked = _read_mark(target)
    if marked is None:
        return f"{_named(target)!r} has a {MARKER} that npusim did not write"
    added = _unlisted(entries, marked.files)
    return f"{_named(target)!r} holds {', '.join(added[:3])}{' ...' if len(added) > 3 else ''}, which npusim did not write there"


def _named(path: Path) -> str:
    """``path`` as a message shows it: relative to the working folder when inside it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


class StagedFolder:
    """A folder written in full under a unique temporary name beside its destination, then put in
    place with one rename (:meth:`commit`). Use as a context manager: the temporary folder is
    removed when the block raises, and after it if it was not committed.

    Making one checks that the destination can be written, before the work whose outputs it will
    hold: its parent is created, the temporary folder too (so a read-only folder or a file in the
    way fails here), and a destination that exists must be empty or an npusim output folder
    (:func:`folder_mark`): nothing else is ever moved or deleted. :meth:`write` writes the
    :data:`MARKER` last, with the folder's identity :attr:`id`."""

    def __init__(self, destination: Path, *, also: Iterable[Path] = (), kind: str = "run", legacy: LegacyMark | None = None) -> None:
        """``also``: other destinations :meth:`commit` may write or move a folder to (``<out>.prev``),
        checked the same way; ``kind``: what the folder holds (its marker says); ``legacy``: how a
        folder of this kind written before markers is known (:func:`folder_mark`)."""
        self.destination = destination
        self.kind = kind
        self.legacy = legacy
        self.id = secrets.token_hex(16)
        for target in (destination, *also):
            why = not_npusims(target, kind, legacy)
            if why is not None:
                raise UsageError(f"{why}: npusim replaces only its own output folders; choose another --out folder")
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(destination)
            self.path = temporary_name(destination)
            self.path.mkdir()
        except OSError as error:
            in_the_way = next((p for p in destination.parents if p.exists() and not p.is_dir()), None)
            why = f"{_named(in_the_way)!r} is a file, not a folder" if in_the_way is not None else error.strerror or str(error)
            raise UsageError(f"cannot write the output folder {_named(destination)!r}: {why}; choose another --out folder") from None
        self.committed = False

    def __enter__(self) -> StagedFolder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self.committed:
            self.discard()

    def write(self, outputs: Iterable[Output], *, meanwhile: Callable[[], object] | None = None, ok: bool = True) -> list[str]:
        """Write each output into the temporary folder, then the :data:`MARKER` (``ok``: the work
        ended well); returns the outputs' names. Where this process can fork (:func:`can_fork`),
        the outputs that can be written on two cores are started first, the others written while
        their other parts are, then they are finished. ``meanwhile``: other work of this process,
        done once those have started and before the others are written (while another core
        writes; its errors stop the writing too)."""
        outputs = list(outputs)
        pending: list[Pending] = []
        here = []  # written by this process alone
        try:
            forking = can_fork()
            for output in outputs:
                part = _started(output, self.path / output.name) if forking else None
                if part is None:
                    here.append(output)
                else:
                    pending.append(part)
            if meanwhile is not None:
                meanwhile()
            for output in here:
                output.write(self.path / output.name)
            for part in pending:
                part.finish()
        except BaseException:
            for part in pending:
                part.abandon()
            raise
        names = [output.name for output in outputs]
        write_marker(self.path, FolderMark(self.id, self.kind, ok, tuple(names)))
        return names

    def commit(self, destination: Path, *, previous: Path | None = None) -> None:
        """Put the folder at ``destination`` with one rename. What the destination held is looked
        at once it is out of the way, so that what happens to it is decided on what is really
        there at that moment (another run may have committed since this one began): a good npusim
        folder (its marker says ``ok``) moves to ``previous`` (replacing the npusim folder there),
        a failed one, or any with ``previous`` None, is deleted; anything else (a folder of the
        user's that appeared meanwhile) is put back and the commit refused (OutputError). Where
        the system can swap two folders (Linux), the destination always holds a whole folder."""
        try:
            os.rename(self.path, destination)  # absent, or an empty folder: nothing is replaced
            self.committed = True
            return
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if exchange(self.path, destination):  # one atomic swap: the old folder now has this one's temporary name
            replaced = self.path
        else:  # the old folder moves aside first: the destination is absent until the next rename
            replaced = temporary_name(destination)
            os.rename(destination, replaced)
            try:
                os.rename(self.path, destination)
            except BaseException:
                os.rename(replaced, destination)
                raise
        self.committed = True
        mark = folder_mark(replaced, self.legacy, kind=self.kind)
        if mark is None:  # not npusim's: it came after the checks; give it back
            if replaced == self.path:
                exchange(self.path, destination)
            else:
                os.rename(destination, self.path)
                os.rename(replaced, destination)
            self.committed = False
            raise OutputError(f"{str(destination)!r} became a folder that is not npusim's while the run was simulated: npusim replaces only "
                              "its own output folders; it was left as it is and nothing was written")
        if not mark.ok or previous is None:
            shutil.rmtree(replaced)
            return
        try:
            replace_folder(replaced, previous, self.legacy, kind=self.kind)
        except OutputError:
            kept = previous.with_name(f"{previous.name}-{mark.id[:8] or 'earlier'}")
            os.rename(replaced, kept)
            raise OutputError(f"the run is in {str(destination)!r}, but {str(previous)!r} became a folder that is not npusim's while "
                              f"the run was simulated: the run it replaced was kept in {str(kept)!r}") from None

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _started(output: Output, path: Path) -> Pending | None:
    """``output`` begun on two cores, or None: it cannot be, or no process could be forked (no
    memory or process left for one: then this process writes it alone)."""
    if output.start is None:
        return None
    try:
        return output.start(path)
    except OSError:
        return None


def replace_folder(source: Path, target: Path, legacy: LegacyMark | None = None, *, kind: str | None = None) -> None:
    """Rename the folder ``source`` to ``target``, deleting what ``target`` held when that is an
    npusim folder (of ``kind``, when given) (:func:`folder_mark`; atomically where the system can
    swap two folders, else the old one is moved away first); anything else there is left as it is
    (OutputError)."""
    try:
        os.rename(source, target)  # target absent or an empty folder
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if exchange(source, target):
        if folder_mark(source, legacy, kind=kind) is None:  # what target held is not npusim's: give it back
            exchange(source, target)
            raise OutputError(f"{str(target)!r} is not an npusim output folder; it was left as it is")
        shutil.rmtree(source)
        return
    if folder_mark(target, legacy, kind=kind) is None:
        raise OutputError(f"{str(target)!r} is not an npusim output folder; it was left as it is")
    trash = temporary_name(target)
    os.rename(target, trash)
    os.rename(source, target)
    shutil.rmtree(trash)


def remove_stale_temporaries(destination: Path) -> None:
    """Remove the temporaries of ``destination`` left by writers that no longer run (killed)."""
    prefix = f".{destination.name}{PARTIAL}"
    for entry in destination.parent.glob(f"{glob.escape(prefix)}*"):
        pid = entry.name[len(prefix):].partition("-")[0]
        if pid.isdigit() and not process_running(int(pid)):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def process_running(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


_RENAME_EXCHANGE = 2  # renameat2's flag (linux/fs.h)
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> bool:
    """Swap the two existing paths ``a`` and ``b`` atomically (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the system cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # no such call, or the file system cannot
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


@functools.cache
def _renameat2() -> Any:
    """The C library's ``renameat2``, or None."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


FORK = "NPUSIM_FORK"
"""Environment variable: whether outputs go to two cores. ``auto`` (the default): where
:func:`can_fork` and a core is idle (:func:`busy_cores`: on a machine whose cores are all busy, a
copy only adds the cost of forking); ``always``: wherever
:func:`can_fork`; ``never``: this process writes every output alone (one process to follow in a
debugger). The same bytes in every case."""
FORK_MODES = ("auto", "always", "never")

_Result = TypeVar("_Result")


def can_fork() -> bool:
    """Whether work can go to a forked copy of this process, running on another core: a POSIX
    ``fork``, more than one CPU this process may run on, no other thread (a thread's lock held at
    the fork would stay held forever in the copy), the main thread (whose signal handlers the copy
    resets), memory for a whole second copy (:func:`memory_for_a_copy`), and :data:`FORK` not
    ``never`` (and, for ``auto``, an idle core: :func:`busy_cores`)."""
    mode = fork_mode()
    if not hasattr(os, "fork") or mode == "never":
        return False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cpus < 2 or threading.active_count() != 1 or threading.current_thread() is not threading.main_thread() or not memory_for_a_copy():
        return False
    return mode == "always" or busy_cores() < cpus - 0.5  # this process counts for one


LOADAVG = Path("/proc/loadavg")
"""Linux's load figures; the fourth field is ``runnable/total`` scheduling entities at this instant."""


def busy_cores(loadavg: Path = LOADAVG) -> float:
    """How many cores are busy now, this process included: the tasks runnable at this instant
    (``loadavg``'s fourth field, Linux), else the load average of the last minute, which lags (a
    sweep that ended seconds ago still counts)."""
    try:
        return float(loadavg.read_text().split()[3].partition("/")[0])
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0]


def fork_mode() -> str:
    """:data:`FORK`'s value (``auto`` when unset or empty); a UsageError for another."""
    mode = os.environ.get(FORK) or "auto"
    if mode not in FORK_MODES:
        raise UsageError(f"{FORK}={mode!r}: choose one of {', '.join(FORK_MODES)}")
    return mode


def memory_for_a_copy() -> bool:
    """Whether the machine has as much memory available as this process holds (Linux: MemAvailable
    of /proc/meminfo against this process's resident memory; True where neither can be read). A
    copy shares this process's pages until one of the two writes to them, and CPython writes to
    every object it touches (its reference count): a copy that reads a large run's objects comes
    to hold a good part of them (~40% of a 768-die MoE dispatch, measured)."""
    try:
        resident = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        available = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemAvailable:"))
    except (OSError, ValueError, IndexError, StopIteration):
        return True
    return available >= resident


class Forked(Generic[_Result]):
    """``work()`` run by a forked copy of this process (a child) from the moment this is made,
    while this process goes on: :meth:`join` waits for it and returns what ``work`` returned (a
    small picklable value), or raises the exception it raised (its traceback as a note of it);
    :meth:`stop` kills it. Either reaps the child: none is left running or a zombie.

    The copy shares this process's memory copy-on-write (what it only reads costs nothing; the
    caller's objects frozen out of the collector's sight, gc.freeze, are not touched by its
    collections) and ends with ``os._exit``: no clean-up of this process (atexit, ``finally``
    blocks, buffered output) ever runs twice. Ctrl-C or SIGTERM ends it at once (the default
    actions: this process, which the signal reaches too, cleans up); on Linux it is killed when
    this process dies (``PR_SET_PDEATHSIG``). Only where :func:`can_fork`."""

    def __init__(self, work: Callable[[], _Result], what: str) -> None:
        """``what``: what the child does, for the error of one that dies (``writing trace.json``)."""
        self.what = what
        parent = os.getpid()
        readable, writable = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no memory or process left for a copy
            os.close(readable)
            os.close(writable)
            raise
        if pid == 0:
            _child(work, readable, writable, parent)  # never returns
        os.close(writable)
        self.pid: int | None = pid
        self._outcome = readable
        self._returned: tuple[_Result] | None = None  # what work returned, once received (outcome)

    def join(self) -> _Result:
        """Wait for the child to end; what its ``work`` returned (or raised)."""
        value = self.outcome()
        if self.pid is not None:
            try:
                self._reap()
            except BaseException:
                self.stop()
                raise
        return value

    def outcome(self) -> _Result:
        """Wait until the child has sent what its ``work`` returned and return it (or raise what
        it raised, once the child has ended). The child may still be ending then, freeing its copy
        of this process's pages (tens of ms for a large run, measured), while this process goes
        on: :meth:`join` (or :meth:`stop`) reaps it after."""
        if self._returned is not None:
            return self._returned[0]
        pid = self.pid
        try:
            with open(self._outcome, "rb", closefd=False) as pipe:
                message = pipe.read()  # to the end: the child has closed it (sent its outcome, or ended)
        except BaseException:
            self.stop()
            raise
        self._close()
        try:
            done, value = pickle.loads(message) if message else (False, None)
        except Exception:  # cut short: the child died sending it (its status says how)
            done, value = False, None
        if done:
            self._returned = (cast(_Result, value),)
            return self._returned[0]
        try:
            status = self._reap()
        except BaseException:
            self.stop()
            raise
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and value is not None:
            raise value
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT:
            raise KeyboardInterrupt  # Ctrl-C reached the child first: this process is being interrupted too
        how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status) else f"exited with {os.WEXITSTATUS(status)}"
        raise OSError(f"the process {self.what} (pid {pid}) {how}")

    def stop(self) -> None:
        """Kill the child (if it still runs) and reap it."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                self._reap()
            except (ProcessLookupError, ChildProcessError):  # reaped already (an interrupt just after the wait)
                self.pid = None
        self._close()

    def _reap(self) -> int:
        assert self.pid is not None
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        self._close()
        return status

    def _close(self) -> None:
        if self._outcome >= 0:
            os.close(self._outcome)
            self._outcome = -1


class TwoEnds:
    """Pieces ``0 ... pieces - 1`` of one work, shared by this process and a copy of it forked
    after this is made (:class:`Forked`): one takes them one at a time from the front
    (:meth:`front`), the other from the back (:meth:`back`), so the two end together whichever is
    the faster and no piece is taken twice or left out. The next piece of each end is kept in an
    unlinked file, read and updated under a POSIX record lock (one per process, not inherited by
    the copy; the kernel releases it if its holder dies). Only where :func:`can_fork`."""

    _ENDS = struct.Struct("<2q")  # the next piece of the front, one past the next piece of the back

    def __init__(self, pieces: int, folder: Path) -> None:
        """``folder``: where the unlinked file is made (the file system of the work's output)."""
        self._file = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (open until close: the copy uses it too)
        os.pwrite(self._file.fileno(), self._ENDS.pack(0, pieces), 0)

    def front(self) -> int | None:
        """The lowest piece not taken yet (now taken), or None once none is left."""
        return self._take(1)

    def back(self) -> int | None:
        """The highest piece not taken yet (now taken), or None once none is left."""
        return self._take(-1)

    def _take(self, end: int) -> int | None:
        import fcntl  # POSIX only, like fork

        descriptor = self._file.fileno()
        fcntl.lockf(descriptor, fcntl.LOCK_EX)
        try:
            low, high = self._ENDS.unpack(os.pread(descriptor, self._ENDS.size, 0))
            if low >= high:
                return None
            os.pwrite(descriptor, self._ENDS.pack(low + 1, high) if end > 0 else self._ENDS.pack(low, high - 1), 0)
            return low if end > 0 else high - 1
        finally:
            fcntl.lockf(descriptor, fcntl.LOCK_UN)

    def close(self) -> None:
        self._file.close()


def _child(work: Callable[[], object], readable: int, writable: int, parent: int) -> None:
    """The forked copy: run ``work``, send its outcome down the pipe, end without any clean-up."""
    try:
        for stop in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(stop) is not signal.SIG_IGN:  # one the parent ignores (nohup, a background job) stays ignored
                signal.signal(stop, signal.SIG_DFL)
        os.close(readable)
        end_with(parent)
        try:
            outcome: tuple[bool, object] = (True, work())
        except BaseException as error:  # sent to the parent, which raises it
            import traceback  # in the copy, which failed: not in every run

            error.add_note(f"in the process {os.getpid()}, a forked copy of this one:\n" + "".join(traceback.format_exception(error)).rstrip())
            outcome = (False, error)
        try:
            message = pickle.dumps(outcome)
            pickle.loads(message)  # an exception that does not rebuild goes as its text
        except Exception:
            message = pickle.dumps((False, OSError(f"{outcome[1]!r}")))
        with open(writable, "wb") as pipe:
            pipe.write(message)
    finally:
        os._exit(0)


def end_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` dies (Linux); end now if it already has."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


_PR_SET_PDEATHSIG = 1  # prctl's option (linux/prctl.h)
