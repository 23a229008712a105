"""The timeline: a Gantt chart of a run, one row per core pipe (``die0 aiv3 MTE2``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from matplotlib.patches import Patch

from npusim.errors import UsageError
from npusim.plot.style import WAIT_COLOUR, colours, figure
from npusim.trace.critical_path import critical_path

FIXED_ALPHA = 0.4  # a DMA's fixed cost (set-up, bursts, latency) is drawn in its colour at this opacity


def _wanted_units(cores: Iterable[int | str] | None) -> set[str] | None:
    """``cores`` as unit names: an int ``i`` means ``aiv{i}`` and ``aic{i}``."""
    if cores is None:
        return None
    units: set[str] = set()
    for core in cores:
        if isinstance(core, (int, np.integer)):
            units |= {f"aiv{core}", f"aic{core}"}
        elif isinstance(core, str):
            units.add(core.lower())
        else:
            raise UsageError(f"timeline: cores must be core indices (3) or names ('aiv3', 'aic0'); got {core!r}")
    return units


def _lanes_that_matter(recorder, lanes: list[int], on_path: np.ndarray) -> list[int]:
    """``lanes`` (in trace order) with those of the units the critical path crosses first, the one
    it spends most time on first, then the AICPU schedulers of those dies, then the other units of
    those dies, then the rest."""
    tracks = recorder.tracks
    c = recorder.columns()
    path_ps: dict[tuple[int, str], int] = {}
    for track, duration in zip(c["track"][on_path].tolist(), (c["end_ps"][on_path] - c["start_ps"][on_path]).tolist()):
        unit = (tracks[track].die, tracks[track].unit)
        path_ps[unit] = path_ps.get(unit, 0) + duration
    path_dies = {die for die, _ in path_ps}

    def rank(track: int) -> tuple[int, int]:
        here = tracks[track]
        on = path_ps.get((here.die, here.unit))
        if on is not None:
            return 0, -on
        if here.die in path_dies:
            return (1 if here.unit.startswith("aicpu") else 2), 0
        return 3, 0

    return sorted(lanes, key=lambda t: (*rank(t), tracks[t].die, tracks[t].order, tracks[t].label))


def _first_lanes(recorder, lanes: list[int], limit: int) -> list[int]:
    """The first ``limit`` of ``lanes``, without the lanes of a core cut short (unless that core
    is all there would be)."""
    if len(lanes) <= limit:
        return lanes
    unit_of = [(recorder.tracks[t].die, recorder.tracks[t].unit) for t in lanes]
    end = limit
    while end > 0 and unit_of[end - 1] == unit_of[limit]:
        end -= 1
    return lanes[: end or limit]


def timeline(result, *, dies: Iterable[int] | None = None, cores: Iterable[int | str] | None = None, pipes: Sequence[str] | None = None,
             window: tuple[float, float] | None = None, color_by: str = "auto", max_lanes: int = 32, width: float = 14.0):
    """A Gantt chart of ``result``: one row per lane (core pipe, link, AICPU...) that has events,
    grouped by die and core as in the trace; each instruction a bar coloured by its op
    (``color_by="op"``) or by its instruction name (``"name"``; ``"auto"``: by op when the run has
    several op names, else by instruction); a DMA's fixed cost (set-up, bursts, route latency) is
    the lighter start of its bar, its streaming the rest. Synchronisation (``set_flag``,
    ``wait_flag`` and its stall, barriers) is a thin grey bar; a line separates cores. The events
    of the critical path are outlined, and the cores it crosses are labelled in bold.

    ``dies``, ``cores`` (indices or names like ``"aiv3"``) and ``pipes`` (``"MTE2"``...) select lanes;
    without them, the lanes that matter are kept first: the cores and AICPU lanes the critical path
    crosses (the one it spends most time on first), the AICPU schedulers of their dies, the other cores of those dies, then the other dies (drawn in
    the trace's order). ``window=(t0, t1)`` in us selects a time range (default: the whole run).
    At most ``max_lanes`` rows are drawn, a core's lanes kept together (the title says how many
    were left out)."""
    recorder = result.recorder
    if color_by not in ("auto", "op", "name"):
        raise UsageError(f"timeline: color_by must be 'auto', 'op' or 'name', not {color_by!r}")
    if window is not None:
        t0, t1 = window
        if not t1 > t0:
            raise UsageError(f"timeline: window={window!r} must be (start_us, end_us) with end after start")
    units = _wanted_units(cores)
    wanted_dies = None if dies is None else set(dies)
    wanted_pipes = None if pipes is None else {p.upper() for p in pipes}

    c = recorder.columns()
    used = np.zeros(len(recorder.tracks), dtype=bool)
    used[c["track"]] = True
    lanes = [t for t in np.flatnonzero(used).tolist()
             if (wanted_dies is None or recorder.tracks[t].die in wanted_dies)
             and (units is None or recorder.tracks[t].unit in units)
             and (wanted_pipes is None or recorder.tracks[t].lane in wanted_pipes)]
    lanes.sort(key=lambda t: (recorder.tracks[t].die, recorder.tracks[t].order, recorder.tracks[t].label))
    if not lanes:
        raise UsageError("timeline: no lane matches dies/cores/pipes (or the run recorded no events); "
                         f"lanes with events: {', '.join(sorted({recorder.tracks[t].label for t in np.flatnonzero(used).tolist()})) or 'none'}")
    on_path = np.zeros(len(recorder), dtype=bool)
    on_path[critical_path(result.record).events] = True
    if dies is None and cores is None and pipes is None:
        lanes = _lanes_that_matter(recorder, lanes, on_path)
    matching = len(lanes)
    lanes = _first_lanes(recorder, lanes, max_lanes)
    hidden = matching - len(lanes)
    lanes.sort(key=lambda t: (recorder.tracks[t].die, recorder.tracks[t].order, recorder.tracks[t].label))  # drawn in trace order

    mask = np.isin(c["track"], lanes)
    if window is not None:
        mask &= (c["end_ps"] >= int(t0 * 1e6)) & (c["start_ps"] <= int(t1 * 1e6))
    track, name, op = c["track"][mask], c["name"][mask], c["op"][mask]
    start_us, end_us = c["start_ps"][mask] / 1e6, c["end_ps"][mask] / 1e6
    critical = on_path[mask]
    transfers = recorder.transfers()
    fixed_ps = np.zeros(len(recorder), dtype=np.int64)
    fixed_ps[transfers["event"]] = transfers["fixed_ps"]
    streams_us = np.minimum(start_us + fixed_ps[mask] / 1e6, end_us)  # where a DMA's bytes start flowing (its start for others)

    op_names = [op.name for op in recorder.ops]
    by_op = color_by == "op" or (color_by == "auto" and len(set(op_names)) > 1)
    sync_names = sorted(recorder.wait_names | {i for i, n in enumerate(recorder.names) if n.startswith("set_flag")})
    waits = np.isin(name, sync_names)  # flags and barriers: synchronisation, drawn thin and grey
    if by_op:
        category = [op_names[o] if o >= 0 else "(no op)" for o in op.tolist()]
    else:
        category = [recorder.names[n] for n in name.tolist()]
    keys = sorted({k for k, w in zip(category, waits.tolist()) if not w})
    palette = colours(keys)

    # tall enough for the lanes and for the legend beside them (an entry takes about 0.75 of a lane; keys and up to 3 more)
    fig = figure(width, 1.4 + 0.26 * max(len(lanes), 0.75 * (len(keys) + 3)))
    ax = fig.add_subplot()
    row_of = {t: row for row, t in enumerate(lanes)}
    rows = np.array([row_of[t] for t in track.tolist()], dtype=np.int64)
    category_array = np.array(category, dtype=object)
    for row in range(len(lanes)):
        in_row = rows == row
        stalls = in_row & waits
        if stalls.any():
            ax.broken_barh(list(zip(start_us[stalls], end_us[stalls] - start_us[stalls])), (row - 0.15, 0.3), facecolors=WAIT_COLOUR, linewidth=0)
        for key in keys:
            bars = in_row & ~waits & (category_array == key)
            if bars.any():
                ax.broken_barh(list(zip(streams_us[bars], end_us[bars] - streams_us[bars])), (row - 0.4, 0.8), facecolors=palette[key],
                               edgecolor="white", linewidth=0.3)
                fixed = bars & (streams_us > start_us)
                if fixed.any():
                    ax.broken_barh(list(zip(start_us[fixed], streams_us[fixed] - start_us[fixed])), (row - 0.4, 0.8), facecolors=palette[key],
                                   alpha=FIXED_ALPHA, linewidth=0)
        outlined = in_row & critical
        if outlined.any():
            ax.broken_barh(list(zip(start_us[outlined], end_us[outlined] - start_us[outlined])), (row - 0.45, 0.9), facecolors="none",
                           edgecolor="black", linewidth=0.9)
    for row in range(1, len(lanes)):
        here, above = recorder.tracks[lanes[row]], recorder.tracks[lanes[row - 1]]
        if (here.die, here.unit) != (above.die, above.unit):
            ax.axhline(row - 0.5, color="#888888", linewidth=0.6)
    ax.set_yticks(range(len(lanes)), [f"die{recorder.tracks[t].die} {recorder.tracks[t].label}" for t in lanes], fontsize=8)
    path_units = {(recorder.tracks[t].die, recorder.tracks[t].unit) for t in np.unique(c["track"][on_path]).tolist()}
    for label, t in zip(ax.get_yticklabels(), lanes):
        if (recorder.tracks[t].die, recorder.tracks[t].unit) in path_units:
            label.set_fontweight("bold")
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlabel("simulated time (us)")
    if window is not None:
        ax.set_xlim(t0, t1)
    else:
        ax.set_xlim(0, max(result.simulated_us, float(end_us.max()) if len(end_us) else 0.0, 1e-6))
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=palette[k], label=k) for k in keys] + [Patch(color=WAIT_COLOUR, label="flags, waits, barriers")]
    if (streams_us > start_us).any():
        handles.append(Patch(facecolor=palette[keys[0]] if keys else WAIT_COLOUR, alpha=FIXED_ALPHA, label="lighter: DMA fixed cost"))
    if critical.any():
        handles.append(Patch(facecolor="none", edgecolor="black", label="outlined: critical path"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="op" if by_op else "instruction", frameon=False)
    title = f"timeline: {result.config.name}, {result.simulated_us:.3f} us simulated"
    if hidden > 0:
        title += f" ({hidden} more lanes not shown: select with dies=, cores=, pipes=)"
    ax.set_title(title, fontsize=10, loc="left")
    return fig
