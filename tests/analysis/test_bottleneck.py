"""The bottleneck of a run (the critical path's largest entry) and the per-class figures of a sweep row."""

from types import SimpleNamespace

import npusim
from npusim.analysis import Bottleneck, bottleneck_of
from npusim.analysis.bottleneck import class_utilisations, utilisation_columns
from npusim.trace.summary import table_of
from tests.analysis.workloads import HBM_BOUND_COPY, write


def summary(pipes=(), bandwidth=(), breakdown=()):
    return {"pipes": table_of(list(pipes)), "bandwidth": table_of(list(bandwidth)), "bottlenecks": {"breakdown": list(breakdown)}}


def pipe(die, name, utilisation):
    return {"die": die, "pipe": name, "cores": 4, "busy_us": 1.0, "utilisation": utilisation}


def resource(name, kind, utilisation, achieved):
    return {"resource": name, "kind": kind, "die": 0, "bytes": 1, "transfers": 1, "achieved_GBps": achieved, "peak_GBps": 1.0, "utilisation": utilisation}


def entry(label, kind, share):
    return {"label": label, "kind": kind, "time_us": share * 10, "share": share}


def test_the_largest_entry_of_the_critical_path_is_the_bottleneck():
    path = summary(breakdown=[entry("MTE2 waiting on link die1->die0 HCCS", "link", 0.7), entry("VECTOR on die0 aiv0", "pipe", 0.3)])
    assert bottleneck_of(SimpleNamespace(summary=path)) == Bottleneck("MTE2 waiting on link die1->die0 HCCS", "link", 0.7)
    other_first = summary(breakdown=[entry("other (9 entries)", "other", 0.5), entry("VECTOR on die0 aiv0", "pipe", 0.4)])
    assert bottleneck_of(SimpleNamespace(summary=other_first)).name == "VECTOR on die0 aiv0"  # a sum of small entries is no bottleneck
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
    assert bottleneck.name == "MTE2 waiting on die0 HBM" and bottleneck.kind == "hbm"
    assert bottleneck.share == max(row["share"] for row in result.summary["bottlenecks"]["breakdown"])
