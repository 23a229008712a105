"""Events of a run: the recorder, the Chrome/Perfetto trace writer, the run summary, the critical
path and bottleneck breakdown, and the events as a DataFrame."""
