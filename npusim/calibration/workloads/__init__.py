"""Workloads of the measured kernels (``../shared/calibration/measured-kernels.md`` of the project),
each written with the public APIs on the shapes and tilings its source states; ``npusim run``
runs each as a user would, and each gives its figures as the source measured them
(docs/calibration.md, "Compute and memory")."""
