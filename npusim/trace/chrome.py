"""Chrome Trace Event format (opens in Perfetto and chrome://tracing), written as a stream.

Dies are processes; each core pipe (``aiv3 MTE2``), link or AICPU lane is a thread of its die;
every executed instruction is a complete ("X") event with its bytes, op and tile; the rate through
each HBM, L2 and link is a counter track in GB/s; warnings are instant events. Timestamps are in
microseconds, written exactly from integer picoseconds, so the same run gives the same bytes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO


def _us(ps: int) -> str:
    """Integer picoseconds as an exact decimal number of microseconds."""
    whole, frac = divmod(int(ps), 1_000_000)
    return f"{whole}.{frac:06d}" if frac else str(whole)


def write_chrome_trace(system, path: str | os.PathLike, *, metadata: dict | None = None) -> Path:
    """Write the run's trace to ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        _write(system, out, metadata or {})
    os.replace(temporary, path)
    return path


def _write(system, out: IO[str], metadata: dict) -> None:
    recorder = system.recorder
    write = out.write
    write('{"traceEvents":[\n')
    first = True

    def emit(line: str) -> None:
        nonlocal first
        write(line if first else ",\n" + line)
        first = False

    topology = system.topology
    dies = sorted({track.die for track in recorder.tracks} | {r.die for r in system.network.resources if r.rate_log})
    for die in dies:
        label = f"die {die}" + (f" (npu {topology.package_of(die)})" if die >= 0 else "")
        emit(f'{{"ph":"M","name":"process_name","pid":{die},"tid":0,"args":{{"name":{json.dumps(label)}}}}}')
        emit(f'{{"ph":"M","name":"process_sort_index","pid":{die},"tid":0,"args":{{"sort_index":{die}}}}}')
    ranked = sorted(range(len(recorder.tracks)), key=lambda t: (recorder.tracks[t].die, recorder.tracks[t].order, recorder.tracks[t].label))
    for rank, track_id in enumerate(ranked):
        track = recorder.tracks[track_id]
        tid = track_id + 1
        emit(f'{{"ph":"M","name":"thread_name","pid":{track.die},"tid":{tid},"args":{{"name":{json.dumps(track.label)}}}}}')
        emit(f'{{"ph":"M","name":"thread_sort_index","pid":{track.die},"tid":{tid},"args":{{"sort_index":{rank}}}}}')

    names = [json.dumps(name) for name in recorder.names]
    ops = [json.dumps(f"{op.name}#{i}") for i, op in enumerate(recorder.ops)]
    pids = [track.die for track in recorder.tracks]
    cats = [json.dumps(track.lane) for track in recorder.tracks]
    c = recorder.columns()
    rows = zip(c["track"].tolist(), c["name"].tolist(), c["start_ps"].tolist(), c["end_ps"].tolist(), c["bytes"].tolist(), c["op"].tolist(), c["tile"].tolist())
    for track, name, start, end, nbytes, op, tile in rows:
        args = f'"bytes":{nbytes}' if nbytes else ""
        if op >= 0:
            args += ("," if args else "") + f'"op":{ops[op]}'
        if tile >= 0:
            args += ("," if args else "") + f'"tile":{tile}'
        emit(f'{{"name":{names[name]},"cat":{cats[track]},"ph":"X","ts":{_us(start)},"dur":{_us(end - start)},'
             f'"pid":{pids[track]},"tid":{track + 1},"args":{{{args}}}}}')

    for resource in system.network.resources:
        if not resource.rate_log:
            continue
        counter = json.dumps(f"{resource.name} GB/s")
        for time_ps, rate in resource.rate_log:
            emit(f'{{"name":{counter},"ph":"C","ts":{_us(time_ps)},"pid":{resource.die},"args":{{"GB/s":{rate * 1e3:.3f}}}}}')

    for instant in recorder.instants:
        emit(f'{{"name":{json.dumps(instant.name)},"cat":{json.dumps(instant.category)},"ph":"i","s":"p","ts":{_us(instant.time_ps)},'
             f'"pid":{instant.die},"tid":0,"args":{{"message":{json.dumps(instant.message)}}}}}')

    write('\n],"displayTimeUnit":"ns","otherData":')
    write(json.dumps(metadata, sort_keys=True))
    write("}\n")
