"""The bottleneck of a run (busiest pipe or shared resource) and the per-class figures of a sweep row."""

from types import SimpleNamespace

import pytest

import npusim
from npusim.analysis import Bottleneck, bottleneck_of
from npusim.analysis.bottleneck import class_utilisations, utilisation_columns
from tests.analysis.workloads import HBM_BOUND_COPY, write


def summary(pipes=(), bandwidth=()):
    return {"pipes": list(pipes), "bandwidth": list(bandwidth)}


def pipe(die, name, utilisation):
    return {"die": die, "pipe": name, "cores": 4, "busy_us": 1.0, "utilisation": utilisation}


def resource(name, kind, utilisation, achieved):
    return {"resource": name, "kind": kind, "die": 0, "bytes": 1, "transfers": 1, "achieved_GBps": achieved, "peak_GBps": 1.0, "utilisation": utilisation}


def test_the_busiest_pipe_or_resource_is_the_bottleneck():
    busy_link = summary([pipe(0, "MTE2", 0.6), pipe(1, "VECTOR", 0.3)], [resource("die1->die0 HCCS", "link", 0.9, 23.4), resource("die1 HBM", "hbm", 0.1, 160.0)])
    assert bottleneck_of(SimpleNamespace(summary=busy_link)) == Bottleneck("die1->die0 HCCS", "link", 0.9)
    busy_pipe = summary([pipe(0, "MTE2", 0.6), pipe(1, "VECTOR", 0.95)], [resource("die0 HBM", "hbm", 0.9, 1440.0)])
    assert bottleneck_of(SimpleNamespace(summary=busy_pipe)) == Bottleneck("die1 VECTOR", "pipe", 0.95)
    tie = summary([pipe(0, "MTE2", 0.5)], [resource("die0 HBM", "hbm", 0.5, 800.0)])
    assert bottleneck_of(SimpleNamespace(summary=tie)).name == "die0 HBM"
    assert bottleneck_of(SimpleNamespace(summary=summary())) is None


def test_class_figures_take_the_busiest_of_each_class():
    figures = class_utilisations(summary([pipe(0, "MTE2", 0.6), pipe(1, "MTE2", 0.8), pipe(0, "AICPU SCHEDULE", 0.9)],
                                         [resource("die0 HBM", "hbm", 0.5, 800.0), resource("die1 HBM", "hbm", 0.7, 1120.0)]))
    assert list(figures) == utilisation_columns()
    assert (figures["util_MTE2"], figures["util_hbm"], figures["GBps_hbm"]) == (0.8, 0.7, 1120.0)
    assert figures["util_VECTOR"] == figures["util_link"] == figures["GBps_link"] == 0.0


def test_an_hbm_bound_copy_is_bound_by_hbm(tmp_path):
    result = npusim.simulate("a2", write(tmp_path, "copy.py", HBM_BOUND_COPY), data=False)
    bottleneck = bottleneck_of(result)
    assert bottleneck.name == "die0 HBM" and bottleneck.kind == "hbm"
    assert bottleneck.utilisation == pytest.approx(max(row["utilisation"] for row in result.summary["bandwidth"] + result.summary["pipes"]))
