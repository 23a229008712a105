"""Plots render to PNG headless (Agg), select what they are asked for, and reject bad selections."""

import io
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import npusim  # noqa: E402
from npusim import plot  # noqa: E402
from npusim.errors import UsageError  # noqa: E402
from npusim.trace.summary import records

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def result():
    return npusim.simulate("a2", ROOT / "examples" / "vector_add.py", data=False)


def lane_labels(figure):
    return [label.get_text() for label in figure.axes[0].get_yticklabels()]


@pytest.mark.parametrize("make", [plot.timeline, plot.bandwidth, plot.utilisation, plot.bottlenecks])
def test_each_figure_renders_to_png(result, make, tmp_path):
    figure = make(result)
    figure.savefig(tmp_path / "figure.png")
    assert (tmp_path / "figure.png").read_bytes()[:8] == PNG


def test_timeline_rows_are_the_selected_core_pipes_and_the_legend_names_instructions(result):
    figure = plot.timeline(result, cores=[0, "aiv1"], pipes=["mte2", "VECTOR"], window=(2.0, 10.0))
    assert lane_labels(figure) == ["die0 aiv0 VECTOR", "die0 aiv0 MTE2", "die0 aiv1 VECTOR", "die0 aiv1 MTE2"]
    assert figure.axes[0].get_xlim() == (2.0, 10.0)
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == ["add", "load x", "load y", "flags, waits, barriers", "lighter: DMA fixed cost"]  # one op: coloured by instruction
    by_op = plot.timeline(result, cores=[0], color_by="op")
    assert [t.get_text() for t in by_op.legends[0].get_texts()] == ["vector_add", "flags, waits, barriers", "lighter: DMA fixed cost"]


def test_timeline_keeps_at_most_max_lanes_of_whole_cores_the_critical_path_first_and_says_so(result):
    figure = plot.timeline(result, max_lanes=11)
    labels = lane_labels(figure)
    # two cores of five lanes: three pipes and the wait lanes of the two whose copies stay in flight
    assert len(labels) == 10 and "230 more lanes not shown" in figure.axes[0].get_title(loc="left")
    path_core = {result.recorder.tracks[result.recorder.columns()["track"][e]].unit for e in result.critical_path().events}
    bold = {label.get_text().split()[1] for label in figure.axes[0].get_yticklabels() if label.get_fontweight() == "bold"}
    assert bold == path_core and {label.split()[1] for label in labels} >= path_core  # the critical path's cores are shown, in bold
    assert figure.axes[0].get_xlim() == (0, pytest.approx(result.simulated_us))  # the whole run


def test_timeline_keeps_the_lane_the_critical_path_spends_most_time_on_even_when_it_crosses_many_cores():
    # the MoE dispatch + combine's path crosses many cores, but most of its time is the AICPU's
    # control reads of the token counts: that lane is drawn, whatever the limit cuts
    moe = npusim.simulate("a2", ROOT / "examples" / "moe_dispatch_combine.py",
                          params={"ranks": 4, "batch": 4, "hidden": 64, "experts": 8, "topk": 2})
    tracks, c = moe.recorder.tracks, moe.recorder.columns()
    path_ps: dict[tuple[int, str], int] = {}
    for e in moe.critical_path().events:
        unit = (tracks[c["track"][e]].die, tracks[c["track"][e]].unit)
        path_ps[unit] = path_ps.get(unit, 0) + int(c["end_ps"][e] - c["start_ps"][e])
    die, unit = max(path_ps, key=path_ps.get)
    assert unit.startswith("aicpu") and len(path_ps) > 4  # the case this test is about
    labels = lane_labels(plot.timeline(moe, max_lanes=4))
    assert any(label.startswith(f"die{die} {unit}") for label in labels), labels


def test_timeline_draws_a_dmas_fixed_cost_apart_from_its_streaming_and_outlines_the_critical_path(result):
    figure = plot.timeline(result, cores=[0], pipes=["MTE2"])
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert "lighter: DMA fixed cost" in legend
    fixed = [c for c in figure.axes[0].collections if c.get_alpha() == pytest.approx(0.4)]
    transfers = result.recorder.transfers()
    on_lane = [i for i, e in enumerate(transfers["event"].tolist()) if result.recorder.tracks[result.recorder.columns()["track"][e]].label == "aiv0 MTE2"]
    widths = sorted(round(float(path.get_extents().width), 6) for c in fixed for path in c.get_paths())
    assert len(widths) == len(on_lane) and all(w > 0 for w in widths)  # one lighter bar per DMA of the lane
    every = plot.timeline(result)
    assert "outlined: critical path" in [text.get_text() for text in every.legends[0].get_texts()]


@pytest.mark.parametrize("kwargs, message", [
    ({"cores": [99]}, "no lane matches"),
    ({"window": (5.0, 1.0)}, "end after start"),
    ({"color_by": "colour"}, "color_by must be"),
    ({"cores": [1.5]}, "cores must be core indices"),
])
def test_timeline_rejects_bad_selections(result, kwargs, message):
    with pytest.raises(UsageError, match=message):
        plot.timeline(result, **kwargs)


def test_bandwidth_draws_the_chosen_resources_with_their_peak_one_panel_per_class(result):
    figure = plot.bandwidth(result, resources=["die0 HBM", "die0 L2"])
    assert [[t.get_text() for t in ax.get_legend().get_texts()] for ax in figure.axes] == [["die0 HBM"], ["die0 L2"]]
    peaks = [[line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] for ax in figure.axes]
    assert peaks == [[pytest.approx(1600.0)], [pytest.approx(7000.0)]]
    with pytest.raises(UsageError, match="no resource 'die9 HBM'"):
        plot.bandwidth(result, resources=["die9 HBM"])


def test_bandwidth_points_are_the_bytes_of_each_bin_over_its_length(result):
    figure = plot.bandwidth(result, resources=["die0 HBM"], bins=50)
    line = figure.axes[0].get_lines()[0]
    width_us = result.simulated_us / 50
    moved = sum(line.get_ydata()) * width_us * 1e3  # GB/s x us -> bytes
    hbm = next(r for r in records(result.summary["bandwidth"]) if r["resource"] == "die0 HBM")
    assert moved == pytest.approx(hbm["bytes"], rel=1e-9)


@pytest.fixture(scope="module")
def sixteen_dies():
    """A small all-gather over the 16 dies of an a3 node."""
    return npusim.simulate("a3", ROOT / "examples" / "shmem_allgather.py", data=False, params={"rows": 16, "cols": 512, "tile_rows": 8})


def drawn_lines(figure) -> int:
    return sum(len(ax.get_lines()) + len(ax.collections) for ax in figure.axes)


def legends_inside(figure) -> bool:
    """After the layout a saved PNG gets, every legend is within the figure."""
    figure.savefig(io.BytesIO(), format="png")
    box = figure.bbox
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend() is not None)]
    return all(box.x0 - 1 <= e.x0 and e.x1 <= box.x1 + 1 and box.y0 - 1 <= e.y0 and e.y1 <= box.y1 + 1
               for e in (legend.get_window_extent() for legend in legends))


@pytest.mark.parametrize("make, most_lines, legends", [(plot.bandwidth, 6 * 5, 6), (plot.utilisation, 4, 0), (plot.bottlenecks, 1, 0)])
def test_figures_of_a_16_die_run_draw_a_bounded_number_of_lines_with_their_legend_inside(sixteen_dies, make, most_lines, legends):
    figure = make(sixteen_dies)
    assert drawn_lines(figure) <= most_lines
    assert sum(ax.get_legend() is not None for ax in figure.axes) == legends and legends_inside(figure)
    width, height = figure.get_size_inches()
    assert width <= 14 and height <= 12


def test_bandwidth_of_a_16_die_run_shows_each_class_and_the_resource_the_critical_path_waited_on(sixteen_dies):
    figure = plot.bandwidth(sixteen_dies)
    assert [ax.get_title(loc="left").split(" (")[0] for ax in figure.axes] == ["HBM", "L2", "L2 atomic adds", "SIO links", "UB links",
                                                                               "write credits"]
    # the peers' shmem_signal ADDs into one die's signal words: the path waits on their
    # read-modify-writes one after another, not on a bandwidth resource
    rows = sixteen_dies.summary["bottlenecks"]["breakdown"]
    assert any(row["kind"] == "atomic" for row in rows) and not any(row.get("resource") for row in rows)
    larger = npusim.simulate("a3", ROOT / "examples" / "shmem_allgather.py", data=False, params={"rows": 64, "cols": 4096, "tile_rows": 16})
    waited = max((row for row in larger.summary["bottlenecks"]["breakdown"] if row.get("resource")), key=lambda row: row["share"])
    assert waited["resource"].endswith("UB rx write credits")  # 64 KiB tiles: the receivers' write credits bound the puts
    panel = next(ax for ax in plot.bandwidth(larger).axes if ax.get_title(loc="left").startswith("write credits"))
    labels = [text.get_text() for text in panel.get_legend().get_texts()]
    assert f"{waited['resource']} (critical path {waited['share']:.0%})" in labels


def test_bandwidth_names_the_memory_panel_after_the_dram_the_config_has():
    duo = npusim.simulate("atlas-300i-duo", ROOT / "examples" / "atlas_300i_duo.py", data=False)
    figure = plot.bandwidth(duo)
    assert [ax.get_title(loc="left").split(" (")[0] for ax in figure.axes] == ["LPDDR4X", "L2", "PCIe links"]


def test_the_timeline_of_a_16_die_run_shows_the_critical_path_dies_lanes_with_its_legend_inside(sixteen_dies):
    figure = plot.timeline(sixteen_dies)
    labels = lane_labels(figure)
    assert len(labels) <= 32 and legends_inside(figure) and figure.get_size_inches()[1] <= 12
    path_dies = {sixteen_dies.recorder.tracks[sixteen_dies.recorder.columns()["track"][e]].die for e in sixteen_dies.critical_path().events}
    assert {int(label.split()[0].removeprefix("die")) for label in labels} <= path_dies  # the lanes of the critical path's dies
    assert any("aicpu" in label for label in labels)  # with the AICPU schedulers


def test_utilisation_of_a_16_die_run_groups_by_pipe_and_class_ordered_by_value(sixteen_dies):
    figure = plot.utilisation(sixteen_dies)
    pipes, links = ([label.get_text() for label in ax.get_yticklabels()] for ax in figure.axes)
    assert all(label.endswith("(16)") for label in pipes) and "HBM (16)" in links and "UB links (32)" in links
    for ax in figure.axes:
        widths = [patch.get_width() for patch in ax.patches]
        assert widths == sorted(widths, reverse=True)


def test_timeline_of_one_lane_with_many_instruction_names_keeps_its_legend_beside_an_unsquashed_axis():
    """One core pipe, 24 instruction names: the figure grows for the legend, so after layout the
    axis is at least as tall as the legend next to it instead of being squashed under it."""
    import numpy as np

    from npusim import isa

    with npusim.session("a2", data=False) as session:
        kernel = isa.Kernel("names", die=0)
        program = kernel.aiv(0)
        tile = program.alloc(128, np.float16)
        for i in range(24):
            program.adds(tile, tile, 1.0, name=f"step {i:02d}")
        kernel.launch()
    figure = plot.timeline(session.result, cores=[0])
    assert lane_labels(figure) == ["die0 aiv0 VECTOR"]
    figure.canvas.draw()
    axis, legend = figure.axes[0], figure.legends[0]
    assert len(legend.get_texts()) == 26  # 24 names, the waits, the outline of the critical path
    assert axis.get_window_extent().height >= 0.9 * legend.get_window_extent().height
