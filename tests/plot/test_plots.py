"""Plots render to PNG headless (Agg), select what they are asked for, and reject bad selections."""

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import npusim  # noqa: E402
from npusim import plot  # noqa: E402
from npusim.errors import UsageError  # noqa: E402

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
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legend == ["add", "load x", "load y", "flags, waits, barriers"]  # one op: coloured by instruction
    by_op = plot.timeline(result, cores=[0], color_by="op")
    assert [t.get_text() for t in by_op.axes[0].get_legend().get_texts()] == ["vector_add", "flags, waits, barriers"]


def test_timeline_keeps_at_most_max_lanes_and_says_so(result):
    figure = plot.timeline(result, max_lanes=5)
    assert len(lane_labels(figure)) == 5 and "139 more lanes not shown" in figure.axes[0].get_title(loc="left")


@pytest.mark.parametrize("kwargs, message", [
    ({"cores": [99]}, "no lane matches"),
    ({"window": (5.0, 1.0)}, "end after start"),
    ({"color_by": "colour"}, "color_by must be"),
    ({"cores": [1.5]}, "cores must be core indices"),
])
def test_timeline_rejects_bad_selections(result, kwargs, message):
    with pytest.raises(UsageError, match=message):
        plot.timeline(result, **kwargs)


def test_bandwidth_draws_the_chosen_resources_with_their_peak(result):
    figure = plot.bandwidth(result, resources=["die0 HBM", "die0 L2"])
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["die0 HBM", "die0 L2"]
    peaks = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--")
    assert peaks == pytest.approx([1600.0, 4884.0])
    with pytest.raises(UsageError, match="no resource 'die9 HBM'"):
        plot.bandwidth(result, resources=["die9 HBM"])


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
    axis, legend = figure.axes[0], figure.axes[0].get_legend()
    assert len(legend.get_texts()) == 25
    assert axis.get_window_extent().height >= 0.9 * legend.get_window_extent().height
