"""Events of a run: the recorder, the Chrome/Perfetto trace writer, the run summary, the critical
path and bottleneck breakdown, and the events as a DataFrame.

Its modules :mod:`npusim.trace.rows` (the recorder's event rows, which the AI cores' pipes append
to) and :mod:`npusim.trace.recorder` (the recorder: lanes, ops, flows) run compiled with the engine,
in the engine's shared library, or as Python with it: :mod:`npusim.engine` chooses for all (all or
none), and where it chose the compiled modules this package finds them in the build's ``trace/``
folder before the sources.
"""

from npusim.engine import compiled_first

compiled_first(__name__, __path__)
