"""Events of a run: the recorder, the Chrome/Perfetto trace writer and the run summary."""
