"""Workloads of the measured kernels (``npusim/calibration/measured_kernels.csv``), each written
with the public APIs on the shapes its source states: a ``run(**params)`` giving the source's
figures by name in the current session (what ``npusim validate`` compares, through
``npusim.analysis.kernel_rows``), and a ``main()`` so that ``npusim run`` runs one as a user would."""
