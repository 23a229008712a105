"""Workloads of the measured kernels (``npusim/calibration/measured_kernels.csv``; their set-ups in
``../shared/calibration/measured-kernels.md`` of the project), each written with the public APIs on
the shapes and tilings its source states: a ``run(**params)`` giving the source's figures by name in
the current session (what ``npusim validate`` compares, through ``npusim.analysis.kernel_rows``),
and a ``main()`` so that ``npusim run`` runs one as a user would (docs/calibration.md, "Compute and
memory")."""
